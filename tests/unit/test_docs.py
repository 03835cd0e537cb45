"""The documentation's generated parts (``ferry.docgen``) are what the code gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ferry import docgen


@pytest.mark.parametrize("name", sorted(docgen.BLOCKS))
def test_the_generated_part_of_the_docs_is_current(name: str) -> None:
    page, _ = docgen.BLOCKS[name]
    assert docgen.committed(name) == docgen.generated(name), (
        f"docs/{page} is stale: run python -m ferry.docgen"
    )


def test_a_part_edited_by_hand_is_stale_until_written_again(tmp_path: Path) -> None:
    pages = {page for page, _ in docgen.BLOCKS.values()}
    for page in pages:
        shutil.copy(docgen.DOCS / page, tmp_path / page)
    name = sorted(docgen.BLOCKS)[0]
    page = tmp_path / docgen.BLOCKS[name][0]
    page.write_text(page.read_text().replace(f"<!-- {name}:end -->", f"| edited |\n<!-- {name}:end -->"))
    assert docgen.committed(name, tmp_path) != docgen.generated(name)
    assert docgen.write(tmp_path) == [docgen.BLOCKS[name][0]]
    assert all(docgen.committed(n, tmp_path) == docgen.generated(n) for n in docgen.BLOCKS)


def test_a_page_without_its_markers_is_named(tmp_path: Path) -> None:
    name = sorted(docgen.BLOCKS)[0]
    (tmp_path / docgen.BLOCKS[name][0]).write_text("# no generated part\n")
    with pytest.raises(LookupError, match=name):
        docgen.committed(name, tmp_path)
