"""Flink CDC's ``CASE value WHEN value1_1 [, value1_2]* THEN result1 ... (ELSE result_z) END``
(transform.md, conditional functions): result X for the first WHEN whose list holds the value;
the ELSE result, or NULL, when none does."""

from __future__ import annotations

from typing import Any

import pytest

from ferry.config.job import TransformConfig
from ferry.model.events import DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import INT, STRING
from ferry.transform.blocks import TableTransforms

TABLE = TableId.parse("db.orders")
SOURCE = Schema((Column("id", INT().not_null()), Column("int_", INT())), ("id",))
VALUES = [-4, -1, 0, 1, 2, 3, 4, 5, None]


def project(projection: str) -> list[Any]:
    t = TableTransforms(
        [TransformConfig.model_validate({"source-table": "db.orders", "projection": projection})]
    )
    changes = [DataChange(TABLE, Op.INSERT, None, {"id": i, "int_": v}, i, 0) for i, v in enumerate(VALUES)]
    errors: list[str] = []
    out = t.rows(TABLE, SOURCE, changes, lambda change, why: errors.append(why))
    assert errors == []
    return [c.after["sign"] for c in out if c.after is not None]


def sign(value: int | None, otherwise: str | None) -> str | None:
    """The oracle: the first list holding the value gives the result."""
    for values, result in (((-4, -1), "neg"), ((0,), "zero"), ((1, 2, 4), "pos")):
        if value in values:
            return result
    return otherwise


@pytest.mark.parametrize("otherwise", ["'other'", None])
def test_a_when_of_several_values_matches_any_of_them(otherwise: str | None) -> None:
    projection = (
        "id, CASE int_ WHEN -4, -1 THEN 'neg' WHEN 0 THEN 'zero' WHEN 1, 2, 4 THEN 'pos'"
        + (f" ELSE {otherwise}" if otherwise else "")
        + " END AS sign"
    )
    expected = [sign(v, otherwise.strip("'") if otherwise else None) for v in VALUES]
    assert project(projection) == expected


def test_the_result_type_is_that_of_the_results() -> None:
    t = TableTransforms(
        [
            TransformConfig.model_validate(
                {"source-table": "db.orders", "projection": "id, CASE int_ WHEN 1, 2 THEN 'a' END AS sign"}
            )
        ]
    )
    assert t.schema(TABLE, SOURCE).column("sign").type.nullable
    assert t.schema(TABLE, SOURCE).column("sign").type.same_ignoring_nullability(STRING())
