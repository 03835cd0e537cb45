"""The documentation's generated parts (``ferry.docgen``) are what the code gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ferry import docgen
from ferry.config import reference


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
    assert docgen.committed(name, tmp_path) != docgen.generated(name, tmp_path)
    assert docgen.write(tmp_path) == [docgen.BLOCKS[name][0]]
    assert all(docgen.committed(n, tmp_path) == docgen.generated(n, tmp_path) for n in docgen.BLOCKS)


def test_a_page_without_its_markers_is_named(tmp_path: Path) -> None:
    name = sorted(docgen.BLOCKS)[0]
    (tmp_path / docgen.BLOCKS[name][0]).write_text("# no generated part\n")
    with pytest.raises(LookupError, match=name):
        docgen.committed(name, tmp_path)


@pytest.mark.parametrize(
    "name", sorted(n.removeprefix("job-") for n in docgen.BLOCKS if n.startswith("job-"))
)
def test_every_key_of_the_job_file_is_described(name: str) -> None:
    described = reference.meanings(docgen.committed(f"job-{name}"))
    for row, _ in reference.TABLES[name]():
        assert described.get(row.key), f"docs: the {name} table does not say what {row.key} means"


def test_a_key_the_model_gains_or_loses_changes_the_table() -> None:
    committed = docgen.committed("job-route")
    assert reference.markdown("route", committed) == committed
    without = "\n".join(line for line in committed.splitlines() if "`replace-symbol`" not in line) + "\n"
    assert reference.markdown("route", without) != without  # the model's key comes back, undescribed
    assert "| `replace-symbol` | | |" in reference.markdown("route", without)
    extra = committed + "| `sink-table-suffix` | | not a key of the model |\n"
    assert reference.markdown("route", extra) == committed


def test_defaults_come_from_the_model() -> None:
    rows = {row.key: row for row, _ in reference.TABLES["pipeline"]()}
    assert rows["checkpoint.interval"].default == "`5s`"
    assert rows["schema.operator.rpc-timeout"].spellings == ("schema-operator.rpc-timeout",)
    assert rows["dead-letter.topic"].default == "`<name>.dlq`"  # derived by a validator
