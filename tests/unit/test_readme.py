"""The README's generated parts are current."""

from __future__ import annotations

import re
from pathlib import Path

from ferry.sinks.base.matrix import markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def generated_block() -> str:
    text = README.read_text()
    match = re.search(r"<!-- sink-matrix:start -->\n(.*?)<!-- sink-matrix:end -->", text, re.S)
    assert match, "README lacks the sink-matrix markers"
    return match.group(1)


def test_the_sink_matrix_in_the_readme_is_current() -> None:
    assert generated_block() == markdown(), "run: python -m ferry.sinks.base.matrix --write-readme"
