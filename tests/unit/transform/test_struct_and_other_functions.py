"""Struct functions, the comparisons and conditionals Flink CDC added, and numbers rounded."""

from __future__ import annotations

import decimal
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.expressions import compiled, value

from ferry.config.job import PipelineConfig
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import ARRAY, BOOLEAN, DECIMAL, INT, MAP, ROW, STRING, Field
from ferry.transform.compiled import CompileError, Session
from ferry.transform.expressions import DIALECT, Compiler
from ferry.transform.sqlvalues import ROW_ERRORS

ROW_VALUES = {"arr": [3, 1, 2], "m": {"k": 5, "j": None}, "r": {"a": 1, "c": "z"}, "n": 7, "s": "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ARRAY[n, 2, NULL]", [7, 2, None]),
        ("MAP['a', n, 'b', 2]", {"a": 7, "b": 2}),
        ("ROW(n, s)", {"f0": 7, "f1": "x"}),
        ("CARDINALITY(arr)", 3),
        ("CARDINALITY(m)", 2),
        ("ARRAY_CONTAINS(arr, 2)", True),
        ("ARRAY_CONTAINS(arr, 9)", False),
        ("ARRAY_POSITION(arr, 2)", 3),
        ("ARRAY_POSITION(arr, 9)", 0),
        ("ELEMENT(ARRAY[n])", 7),
        ("arr[1]", 3),
        ("arr[4]", None),
        ("arr[0]", None),
        ("m['k']", 5),
        ("m['nope']", None),
        ("r[1]", 1),
        ("r[2]", "z"),
        ("ARRAY[n, 2][2]", 2),
    ],
)
def test_struct_functions(text: str, expected: Any) -> None:
    assert value(text, ROW_VALUES) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ARRAY[n, 2]", ARRAY(INT()).not_null()),
        ("MAP['a', n]", MAP(STRING(), INT()).not_null()),
        ("ROW(n, s)", ROW(Field("f0", INT()), Field("f1", STRING())).not_null()),
        ("r[2]", STRING()),
        ("m['k']", INT()),
        ("CARDINALITY(arr)", INT()),
    ],
)
def test_struct_types(text: str, expected: Any) -> None:
    assert compiled(text).type == expected


def test_struct_functions_of_null_are_null() -> None:
    for text in ("CARDINALITY(arr)", "ARRAY_CONTAINS(arr, 1)", "arr[1]", "m['k']", "r[1]", "ELEMENT(arr)"):
        assert value(text, {}) is None, text
    assert value("ELEMENT(arr)", {"arr": []}) is None


def test_element_of_a_longer_array_fails_the_row() -> None:
    with pytest.raises(ValueError, match="ELEMENT of an array of 3 elements"):
        compiled("ELEMENT(arr)").fn(ROW_VALUES)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("r[3]", "the row has fields 1 to 2"),
        ("r[n]", "must be a constant"),
        ("CARDINALITY(s)", "takes ARRAY or MAP"),
        ("MAP['a']", "in pairs"),
    ],
)
def test_struct_misuse_is_a_compile_error(text: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compiled(text)


@pytest.mark.parametrize(
    ("text", "row", "expected"),
    [
        ("s IS DISTINCT FROM u", {"s": "a", "u": "a"}, False),
        ("s IS DISTINCT FROM u", {"s": "a"}, True),
        ("s IS DISTINCT FROM u", {}, False),
        ("s IS NOT DISTINCT FROM u", {}, True),
        ("n IS NOT DISTINCT FROM 7", {"n": 7}, True),
        ("NULLIF(n, 7)", {"n": 7}, None),
        ("NULLIF(n, 7)", {"n": 8}, 8),
        ("NULLIF(n, 7)", {}, None),
        ("NULLIF(s, u)", {"s": "a"}, "a"),
        ("IFNULL(s, 'none')", {}, "none"),
        ("b IS NOT TRUE", {}, True),
        ("b IS UNKNOWN", {}, True),
    ],
)
def test_comparisons_and_conditionals(text: str, row: dict[str, Any], expected: Any) -> None:
    assert value(text, row) == expected


def test_distinct_from_is_never_null() -> None:
    assert compiled("s IS DISTINCT FROM u").type == BOOLEAN().not_null()


@pytest.mark.parametrize(
    ("text", "row", "expected", "type_"),
    [
        ("CEIL(x)", {"x": decimal.Decimal("12.01")}, decimal.Decimal(13), DECIMAL(9, 0)),
        ("CEILING(x)", {"x": decimal.Decimal("-12.99")}, decimal.Decimal(-12), DECIMAL(9, 0)),
        ("FLOOR(x)", {"x": decimal.Decimal("-12.01")}, decimal.Decimal(-13), DECIMAL(9, 0)),
        ("FLOOR(f)", {"f": 2.5}, 2.0, None),
        ("CEIL(n)", {"n": 7}, 7, INT()),
        ("TRUNCATE(x, 1)", {"x": decimal.Decimal("-12.39")}, decimal.Decimal("-12.3"), DECIMAL(9, 1)),
        ("TRUNCATE(x)", {"x": decimal.Decimal("12.99")}, decimal.Decimal(12), DECIMAL(8, 0)),
        ("TRUNCATE(n, -1)", {"n": 17}, 10, INT()),
        ("TRUNCATE(f, 2)", {"f": 1.239}, 1.23, None),
    ],
)
def test_rounding_numbers(text: str, row: dict[str, Any], expected: Any, type_: Any) -> None:
    assert value(text, row) == expected
    if type_ is not None:
        assert compiled(text).type == type_


def test_rounding_null_is_null() -> None:
    for text in ("CEIL(x)", "FLOOR(f)", "TRUNCATE(x, 1)", "NULLIF(n, 1)"):
        assert value(text, {}) is None, text


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("UP_TO_38", DECIMAL(38, 6)), ("UP_TO_19", DECIMAL(19, 6)), ("up_to_19", DECIMAL(19, 6))],
)
def test_transform_decimal_precision_mode_bounds_decimal_arithmetic(mode: str, expected: Any) -> None:
    pipeline = PipelineConfig.model_validate({"transform.decimal.precision.mode": mode})
    schema = Schema((Column("x", DECIMAL(30, 10)), Column("y", DECIMAL(30, 10))), (), ())
    compiler = Compiler(
        TableId.parse("db.t"), schema, session=Session(decimal_precision=pipeline.decimal_precision)
    )
    assert compiler.compile(DIALECT.parse("SELECT x * y")[0].expressions[0]).type == expected
    assert compiled("x * 2").type == DECIMAL(20, 2)  # within either bound


def test_an_unknown_decimal_precision_mode_is_refused() -> None:
    with pytest.raises(ValidationError):
        PipelineConfig.model_validate({"transform.decimal.precision.mode": "UP_TO_50"})


def test_a_value_of_another_shape_than_its_type_fails_the_row_not_the_pipeline() -> None:
    # schemaless JSON may carry a list where a map was seen before
    with pytest.raises(ROW_ERRORS):
        compiled("m['k']").fn({"m": [1, 2]})
