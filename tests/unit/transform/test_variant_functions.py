"""Variant functions: PARSE_JSON, TRY_PARSE_JSON and a variant's subscripts, with Flink CDC's
semantics, checked against orjson (an independent JSON parser) as the oracle of what a document
holds."""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.expressions import compiled, value

from ferry.model.types import STRING, VARIANT, TypeWideningError, parse, render, widen
from ferry.model.variant import Variant
from ferry.transform.compiled import CompileError
from ferry.transform.sqlvalues import ROW_ERRORS
from ferry.transform.variant_functions import VariantError, parse_json, try_parse_json

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: numbers by value (a float the oracle reads may be a Decimal here)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float | Decimal):
        return float(a) == float(b)
    return bool(a == b)


@given(JSON)
def test_parse_json_holds_what_the_oracle_reads_and_writes_text_the_oracle_reads_back(document: Any) -> None:
    text = orjson.dumps(document).decode()
    variant = parse_json(text)
    assert variant is not None
    assert _same(orjson.loads(text), variant.value)
    assert _same(orjson.loads(str(variant)), variant.value)
    assert parse_json(variant) == variant


def test_objects_keys_sorted_compact_and_numbers_exact() -> None:
    variant = parse_json(
        '{"b": [1, 2.50, 1e3, null, true], "a": "x\\u00e9",\n "big": 123456789012345678901234567890}'
    )
    assert variant == '{"a":"xé","b":[1,2.50,1000.0,null,true],"big":123456789012345678901234567890}'
    assert variant is not None and variant.value["b"][1] == Decimal("2.50")
    assert isinstance(variant.value["b"][2], float)
    assert parse_json("1" * 39) == repr(float("1" * 39))


@pytest.mark.parametrize("text", ['{"a": 1} x', "[1]]", '{"a":1}{"a":2}', "1 2", "hello", "{", "NaN", "'a'"])
def test_what_is_not_one_json_document(text: str) -> None:
    with pytest.raises(VariantError, match="Failed to parse json string"):
        parse_json(text)
    assert try_parse_json(text) is None
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


def test_duplicate_keys_are_refused_unless_allowed_and_then_the_last_one_wins() -> None:
    text = '{"a": "123", "b": "456", "a": "789", "n": {"x": 1, "x": 2}}'
    with pytest.raises(VariantError, match="duplicate key 'x'"):
        parse_json(text)
    assert try_parse_json(text) is None
    assert parse_json(text, True) == '{"a":"789","b":"456","n":{"x":2}}'
    assert try_parse_json(text, True) == parse_json(text, True)


def test_json_null_is_a_value_and_sql_null_and_empty_strings_are_null() -> None:
    null = parse_json("null")
    assert isinstance(null, Variant) and null == "null" and null.value is None
    assert parse_json("") is None
    assert value("PARSE_JSON(s)", {"s": None}) is None
    assert value("TRY_PARSE_JSON(s)", {"s": ""}) is None


ROW = {"s": '{"k": [10, {"deep": "x"}, null], "n": 1.5}'}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PARSE_JSON(s)", '{"k":[10,{"deep":"x"},null],"n":1.5}'),
        ("PARSE_JSON(s)['k']", '[10,{"deep":"x"},null]'),
        ("PARSE_JSON(s)['k'][1]", "10"),
        ("PARSE_JSON(s)['k'][2]['deep']", '"x"'),
        ("PARSE_JSON(s)['k'][3]", "null"),
        ("PARSE_JSON(s)['k'][4]", None),
        ("PARSE_JSON(s)['k'][0]", None),
        ("PARSE_JSON(s)['nope']", None),
        ("PARSE_JSON(s)[1]", None),
        ("PARSE_JSON(s)['n']['x']", None),
        ("TRY_PARSE_JSON('[1, 2]')[2]", "2"),
        ("TRY_PARSE_JSON('{oops')", None),
        ("PARSE_JSON('{\"a\": 1, \"a\": 2}', TRUE)['a']", "2"),
    ],
)
def test_functions_in_expressions(text: str, expected: str | None) -> None:
    result = value(text, ROW)
    assert result == expected
    assert result is None or isinstance(result, Variant)


def test_a_variant_cast_to_string_is_its_json_text() -> None:
    text = value("CAST(PARSE_JSON(s) AS STRING)", ROW)
    assert type(text) is str and text == '{"k":[10,{"deep":"x"},null],"n":1.5}'
    assert value("CAST(PARSE_JSON(s)['k'][1] AS INT)", ROW) == 10


def test_the_variant_type() -> None:
    assert compiled("PARSE_JSON(s)").type == VARIANT()
    assert compiled("PARSE_JSON(s)['k'][1]").type == VARIANT()
    assert parse("VARIANT NOT NULL") == VARIANT().not_null() and render(VARIANT()) == "VARIANT"
    assert widen(VARIANT(), VARIANT().not_null()) == VARIANT()
    # as Flink CDC merges them: a variant and another type meet at its JSON text
    assert widen(VARIANT(), STRING()) == STRING()
    assert pickle.loads(pickle.dumps(parse_json('{"a": [1]}'))).value == {"a": [1]}
    with pytest.raises(TypeWideningError):
        parse("VARIANT<INT>")


def test_a_row_whose_json_is_bad_fails_in_parse_json_and_not_in_try_parse_json() -> None:
    with pytest.raises(ROW_ERRORS, match="Failed to parse json string"):
        value("PARSE_JSON(s)", {"s": "{oops"})
    with pytest.raises(CompileError, match="Failed to parse json string"):
        compiled("PARSE_JSON('{oops')")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PARSE_JSON(n)", "PARSE_JSON takes a string, not INT"),
        ("PARSE_JSON(s, n)", "allowDuplicateKeys is a BOOLEAN"),
        ("PARSE_JSON(s, b)", "allowDuplicateKeys must be a constant"),
        ("PARSE_JSON()", "takes a string"),
        ("PARSE_JSON(s)[ts]", "a variant's subscript is an integer or a string"),
    ],
)
def test_refusals(text: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compiled(text)
