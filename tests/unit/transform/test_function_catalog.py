"""Flink CDC's documented functions: each one ferry claims compiles and evaluates its example,
the list matches the documentation's tables, and docs/transforms.md shows the current status."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.expressions import compiled

from ferry.transform.function_catalog import FLINK_CDC_FUNCTIONS, FLINK_SQL_EXTRAS, Function, markdown

PAGE = Path(__file__).resolve().parents[3] / "docs" / "transforms.md"
CLAIMED = [f for f in (*FLINK_CDC_FUNCTIONS, *FLINK_SQL_EXTRAS) if f.example is not None]


@pytest.mark.parametrize("function", CLAIMED, ids=lambda f: f.syntax)
def test_every_function_ferry_claims_compiles_its_example(function: Function) -> None:
    assert function.example is not None
    result = compiled(function.example)
    assert callable(result.fn)


def test_the_count_of_functions() -> None:
    documented = [f for f in FLINK_CDC_FUNCTIONS if f.example is not None]
    assert (len(documented), len(FLINK_CDC_FUNCTIONS)) == (121, 121)
    assert all(f.why for f in FLINK_CDC_FUNCTIONS if f.example is None)


def test_the_list_follows_flink_cdcs_documentation() -> None:
    families = [f.family for f in FLINK_CDC_FUNCTIONS]
    assert families.count("temporal") == 25 and families.count("string") == 33
    assert families.count("struct") == 12 and families.count("comparison") == 22
    names = {re.match(r"[A-Z_]+", f.syntax).group(0) for f in FLINK_CDC_FUNCTIONS if f.syntax[0].isupper()}  # type: ignore[union-attr]
    for name in ("DATE_FORMAT", "TIMESTAMPADD", "REGEXP_EXTRACT", "CONCAT_WS", "LOCATE", "CARDINALITY"):
        assert name in names


def test_the_docs_list_the_functions_with_their_status() -> None:
    match = re.search(
        r"<!-- transform-functions:start -->\n(.*?)<!-- transform-functions:end -->", PAGE.read_text(), re.S
    )
    assert match, "docs/transforms.md lacks the transform-functions markers"
    assert match.group(1) == markdown(), "run: python -m ferry.docgen"
