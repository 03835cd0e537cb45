"""The expressions of transforms: SQL NULL semantics, each operator and function, types, errors."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest

from ferry.model import types as T
from ferry.model.schema import Column, Schema, TableId
from ferry.transform.blocks import parse_filter, parse_projection
from ferry.transform.expressions import CompileError, Compiler
from ferry.transform.sqlvalues import ExpressionError

TID = TableId.parse("shop.orders")
SCHEMA = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("name", T.STRING()),
        Column("price", T.DECIMAL(10, 2)),
        Column("qty", T.INT()),
        Column("big", T.BIGINT()),
        Column("ratio", T.DOUBLE()),
        Column("flag", T.BOOLEAN()),
        Column("code", T.VARCHAR(10)),
        Column("day", T.DATE()),
        Column("at", T.TIMESTAMP(3)),
    ],
    ["id"],
)
ROW: dict[str, Any] = {
    "id": 7,
    "name": "Ada Lovelace",
    "price": Decimal("12.50"),
    "qty": 3,
    "big": 5_000_000_000,
    "ratio": 0.5,
    "flag": True,
    "code": "42",
    "day": dt.date(2024, 3, 1),
    "at": dt.datetime(2024, 3, 1, 12, 30),
}
NULLS = dict.fromkeys(ROW)


def compiled(text: str) -> Any:
    return Compiler(TID, SCHEMA).compile(parse_filter(text))


def value(text: str, row: dict[str, Any] | None = None) -> Any:
    return compiled(text).fn(ROW if row is None else row)


def type_of(text: str) -> str:
    return str(compiled(text).type)


# --------------------------------------------------------------------------------------------------
# NULL semantics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("qty + NULL", None),
        ("price * qty", None),
        ("NULL = NULL", None),
        ("qty = 3", None),
        ("qty <> 3", None),
        ("name LIKE 'A%'", None),
        ("qty IN (1, 2)", None),
        ("qty BETWEEN 1 AND 5", None),
        ("UPPER(name)", None),
        ("CAST(code AS INT)", None),
        ("ABS(qty)", None),
        ("ROUND(price, 1)", None),
        ("MOD(qty, 2)", None),
        ("SUBSTR(name, 1, 2)", None),
        ("CHAR_LENGTH(name)", None),
        ("NOT flag", None),
        ("qty IS NULL", True),
        ("qty IS NOT NULL", False),
        ("flag IS TRUE", False),
        ("flag IS NOT FALSE", True),
        ("COALESCE(qty, big, 9)", 9),
        ("CASE WHEN flag THEN 1 ELSE 2 END", 2),
        ("CASE qty WHEN 3 THEN 'three' END", None),
    ],
)
def test_null_in_gives_null_out(text: str, expected: Any) -> None:
    assert value(text, NULLS) == expected


@pytest.mark.parametrize(("text", "expected"), [("CONCAT(name, 'x')", "nullx"), ("name || 'x'", "nullx")])
def test_concatenation_writes_null_as_flink_cdc_does(text: str, expected: str) -> None:
    """Flink CDC joins texts as Java's ``String.join`` does: a NULL is the text ``null``."""
    assert value(text, NULLS) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NULL AND FALSE", False),
        ("FALSE AND NULL", False),
        ("NULL AND TRUE", None),
        ("TRUE AND TRUE", True),
        ("NULL OR TRUE", True),
        ("TRUE OR NULL", True),
        ("NULL OR FALSE", None),
        ("FALSE OR FALSE", False),
        ("NOT NULL", None),
        ("NOT FALSE", True),
        ("qty IN (1, NULL)", None),
        ("qty IN (3, NULL)", True),
        ("qty NOT IN (1, NULL)", None),
        ("qty NOT IN (1, 2)", True),
        ("qty IN (1, qty)", True),
        ("qty IN (1, big)", False),
        ("qty IN (1, CAST(NULL AS INT))", None),
    ],
)
def test_three_valued_logic(text: str, expected: Any) -> None:
    assert value(text) is expected


# --------------------------------------------------------------------------------------------------
# Operators


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("qty + 2", 5),
        ("qty - 5", -2),
        ("qty * big", 15_000_000_000),
        ("7 / 2", 3),
        ("-7 / 2", -3),
        ("7 % 3", 1),
        ("-7 % 3", -1),
        ("MOD(7, -3)", 1),
        ("-qty", -3),
        ("price * qty", Decimal("37.50")),
        ("price + 1", Decimal("13.50")),
        ("price - 0.125", Decimal("12.375")),
        ("price / 3", Decimal("4.1666666666667")),  # DECIMAL(23, 13), as Flink derives it
        ("price % 5", Decimal("2.50")),
        ("ratio * 4", 2.0),
        ("ratio + price", 13.0),
        ("ratio / 4", 0.125),
        ("MOD(ratio * 11, 2)", 1.5),
        ("(qty + 1) * 2", 8),
    ],
)
def test_arithmetic(text: str, expected: Any) -> None:
    result = value(text)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("qty = 3", True),
        ("qty <> 3", False),
        ("qty != 4", True),
        ("qty < 4", True),
        ("qty <= 3", True),
        ("qty > 3", False),
        ("qty >= 4", False),
        ("price > 12.4", True),
        ("price = 12.5", True),
        ("ratio < price", True),
        ("name = 'Ada Lovelace'", True),
        ("name < 'B'", True),
        ("code = 42", True),  # text is cast to the other side's type
        ("42 = code", True),
        ("day = '2024-03-01'", True),
        ("at > '2024-03-01 12:00:00'", True),
        ("day < at", True),  # a DATE meets a TIMESTAMP at midnight
        ("flag = TRUE", True),
        ("flag = 'true'", True),
        ("qty BETWEEN 3 AND 4", True),
        ("qty NOT BETWEEN 3 AND 4", False),
        ("qty IN (1, 2, 3)", True),
        ("code IN (41, 42)", True),
        ("name NOT IN ('a', 'b')", True),
    ],
)
def test_comparisons(text: str, expected: bool) -> None:
    assert value(text) is expected


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("name LIKE 'Ada%'", True),
        ("name LIKE '%love%'", False),
        ("name LIKE '%Love%'", True),
        ("name LIKE 'Ad_ Lovelace'", True),
        ("name LIKE 'Ad_'", False),
        ("name NOT LIKE 'Ada%'", False),
        ("'50%' LIKE '50!%' ESCAPE '!'", True),
        ("'50x' LIKE '50!%' ESCAPE '!'", False),
        ("'a.c' LIKE 'a.c'", True),
        ("'abc' LIKE 'a.c'", False),
        ("name LIKE CONCAT(SUBSTR(name, 1, 3), '%')", True),
    ],
)
def test_like(pattern: str, expected: bool) -> None:
    assert value(pattern) is expected


def test_case_if_and_coalesce() -> None:
    case = "CASE WHEN qty > 5 THEN 'many' WHEN qty > 1 THEN 'some' ELSE 'few' END"
    assert value(case) == "some"
    assert value(case, {**ROW, "qty": 9}) == "many"
    assert value(case, {**ROW, "qty": None}) == "few"
    assert value("CASE qty WHEN 1 THEN 'one' WHEN 3 THEN 'three' ELSE 'other' END") == "three"
    assert value("CASE WHEN qty > 5 THEN 1 END") is None
    assert value("IF(flag, qty, 0)") == 3
    assert value("IF(flag, qty, 0)", {**ROW, "flag": None}) == 0
    assert value("COALESCE(NULL, qty, big)") == 3
    # branches meet at a common type, and values are brought to it
    assert type_of("CASE WHEN flag THEN qty ELSE 2.5 END") == "DECIMAL(11, 1)"
    assert value("CASE WHEN flag THEN qty ELSE 2.5 END") == Decimal(3)
    assert type_of("COALESCE(ratio, qty)") == "DOUBLE"
    assert value("COALESCE(NULL, qty, ratio)") == 3.0 and type(value("COALESCE(NULL, qty, ratio)")) is float
    assert value("COALESCE(name, qty)", {**ROW, "name": None}) == "3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CAST(code AS INT)", 42),
        ("CAST(' 17 ' AS BIGINT)", 17),
        ("CAST(3.7 AS INT)", 3),
        ("CAST(-3.7 AS INT)", -3),
        ("CAST(ratio AS DECIMAL(5, 2))", Decimal("0.50")),
        ("CAST('2.345' AS DECIMAL(5, 2))", Decimal("2.35")),
        ("CAST(price AS STRING)", "12.50"),
        ("CAST(qty AS DOUBLE)", 3.0),
        ("CAST(flag AS STRING)", "TRUE"),
        ("CAST(day AS STRING)", "2024-03-01"),
        ("CAST(at AS STRING)", "2024-03-01 12:30:00"),
        ("CAST('hello' AS VARCHAR(3))", "hel"),
        ("CAST('ab' AS CHAR(4))", "ab  "),
        ("CAST('2024-02-29' AS DATE)", dt.date(2024, 2, 29)),
        ("CAST('2024-02-29 10:00:00' AS DATE)", dt.date(2024, 2, 29)),
        ("CAST(day AS TIMESTAMP)", dt.datetime(2024, 3, 1)),
        ("CAST('2024-02-29 10:00:00' AS TIMESTAMP(3))", dt.datetime(2024, 2, 29, 10)),
        ("CAST('true' AS BOOLEAN)", True),
        ("CAST(0 AS BOOLEAN)", False),
        ("CAST('ab' AS BYTES)", b"ab"),
        ("TRY_CAST('abc' AS INT)", None),
        ("TRY_CAST('12' AS INT)", 12),
    ],
)
def test_cast(text: str, expected: Any) -> None:
    result = value(text)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("UPPER(name)", "ADA LOVELACE"),
        ("LOWER(name)", "ada lovelace"),
        ("UPPER(qty)", "3"),
        ("TRIM('  a b  ')", "a b"),
        ("TRIM(LEADING 'x' FROM 'xxaxx')", "axx"),
        ("TRIM(TRAILING 'x' FROM 'xxaxx')", "xxa"),
        ("TRIM(BOTH 'x' FROM 'xxaxx')", "a"),
        ("CONCAT(name, '/', qty)", "Ada Lovelace/3"),
        ("name || '!'", "Ada Lovelace!"),
        ("SUBSTR(name, 5)", "Lovelace"),
        ("SUBSTR(name, 1, 3)", "Ada"),
        ("SUBSTR(name, -4)", "lace"),
        ("SUBSTR(name, -4, 2)", "la"),
        ("SUBSTRING(name FROM 5 FOR 4)", "Love"),
        ("SUBSTR(name, 0, 3)", "Ada"),
        ("SUBSTR(name, 50)", ""),
        ("CHAR_LENGTH(name)", 12),
        ("CHARACTER_LENGTH('')", 0),
        ("ABS(-qty)", 3),
        ("ABS(price - 20)", Decimal("7.50")),
        ("ROUND(price, 1)", Decimal("12.5")),
        ("ROUND(12.345, 2)", Decimal("12.35")),
        ("ROUND(-2.5)", Decimal("-3")),
        ("ROUND(ratio)", 1.0),
        ("ROUND(1250, -2)", 1300),
        ("ROUND(-1250, -2)", -1300),
        ("ROUND(qty)", 3),
        ("MOD(qty, 2)", 1),
        ("__table_name__", "orders"),
        ("__schema_name__", "shop"),
        ("__namespace_name__", None),
    ],
)
def test_functions(text: str, expected: Any) -> None:
    result = value(text)
    assert result == expected and type(result) is type(expected)


# --------------------------------------------------------------------------------------------------
# Types


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("qty", "INT"),
        ("id", "INT NOT NULL"),
        ("qty + 1", "INT"),
        ("qty + big", "BIGINT"),
        ("qty * ratio", "DOUBLE"),
        ("qty + 1.5", "DECIMAL(12, 1)"),
        ("price + price", "DECIMAL(11, 2)"),
        ("price * qty", "DECIMAL(20, 2)"),
        ("price / qty", "DECIMAL(21, 13)"),
        ("price % 3", "DECIMAL(10, 2)"),
        ("CAST(price AS DECIMAL(38, 30)) * CAST(price AS DECIMAL(38, 30))", "DECIMAL(38, 22)"),
        ("UPPER(name)", "STRING"),
        ("CONCAT(name, qty)", "STRING"),
        ("SUBSTR(code, 1, 2)", "STRING"),
        ("CHAR_LENGTH(name)", "INT"),
        ("qty > 1", "BOOLEAN"),
        ("qty IS NULL", "BOOLEAN NOT NULL"),
        ("name LIKE 'a%' AND flag", "BOOLEAN"),
        ("CAST(qty AS VARCHAR(5))", "VARCHAR(5)"),
        ("CAST(code AS DECIMAL(6, 1))", "DECIMAL(6, 1)"),
        ("CAST(at AS DATE)", "DATE"),
        ("COALESCE(qty, big)", "BIGINT"),
        ("CASE WHEN flag THEN name ELSE code END", "STRING"),
        ("ABS(big)", "BIGINT"),
        ("ROUND(price, 1)", "DECIMAL(10, 1)"),
        ("ROUND(price)", "DECIMAL(9, 0)"),
        ("ROUND(ratio, 2)", "DOUBLE"),
        ("'text'", "STRING NOT NULL"),
        ("12", "INT NOT NULL"),
        ("5000000000", "BIGINT NOT NULL"),
        ("1.25", "DECIMAL(3, 2) NOT NULL"),
        ("1e3", "DOUBLE NOT NULL"),
    ],
)
def test_types_are_inferred_from_the_expression(text: str, expected: str) -> None:
    assert type_of(text) == expected


def test_integer_arithmetic_widens_with_the_type_lattice() -> None:
    assert T.widen(T.INT(), T.BIGINT()) == compiled("qty * big").type
    assert T.widen(T.INT(), T.DOUBLE()) == compiled("qty - ratio").type


# --------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("qty * 1000000000", "out of the range of INT"),
        ("qty / 0", "division by zero"),
        ("price / 0", "division by zero"),
        ("ratio / 0", "division by zero"),
        ("MOD(qty, 0)", "division by zero"),
        ("CAST(name AS INT)", "cannot cast 'Ada Lovelace' to INT: not a number"),
        ("CAST(big AS INT)", "out of the range of INT"),
        ("CAST(price * 100 AS DECIMAL(4, 1))", "does not fit DECIMAL(4, 1)"),
        ("CAST(name AS DATE)", "Invalid isoformat string"),
        ("CAST(name AS BOOLEAN)", "cannot cast 'Ada Lovelace' to BOOLEAN: not a boolean"),
        ("name = 5", "cannot cast 'Ada Lovelace' to INT"),
    ],
)
def test_an_expression_that_fails_on_a_row_says_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        value(text)


def test_a_failed_cast_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        value("CAST(code AS INT)", {**ROW, "code": "4x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("missing + 1", "column 'missing' does not exist in table shop.orders (its columns: id, name,"),
        ("POWER(qty, 2)", "POWER(qty, 2) is not supported; transforms support"),
        ("name + 1", "name is a STRING, not a number"),
        ("qty AND flag", "qty is a INT, not a condition"),
        ("NOT name", "not a condition"),
        ("flag = 1", "cannot compare BOOLEAN with INT"),
        ("day = 'not a date'", "cannot cast 'not a date' to DATE"),
        ("ROUND(price, qty)", "ROUND takes a constant integer"),
        ("CAST(qty AS ARRAY<INT>)", "CAST to ARRAY<INT> is not supported"),
        ("qty IN (SELECT 1)", "IN takes a list of values, not a query"),
    ],
)
def test_an_expression_that_cannot_be_compiled_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(CompileError, match=re.escape(message)):
        compiled(text)


def test_a_missing_column_is_named_in_the_error() -> None:
    with pytest.raises(CompileError) as error:
        compiled("UPPER(nmae)")
    assert error.value.column == "nmae"


def test_names_match_columns_ignoring_case_when_only_one_fits() -> None:
    assert value("UPPER(NAME)") == "ADA LOVELACE"
    assert value("`Qty` + 1") == 4


# --------------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,, name", "empty item between commas"),
        ("id, name,", "empty item between commas"),
        ("UPPER(name", "near character"),
        ("'abc", "a quote is not closed"),
        ("id name qty", "near character"),
    ],
)
def test_a_projection_that_does_not_parse_says_where(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_projection(text)


def test_a_filter_is_one_condition() -> None:
    with pytest.raises(ValueError, match="one condition"):
        parse_filter("qty > 1, flag")
    assert parse_projection("\\*, 1 AS one").expressions[0].sql() == "*"  # YAML's escaped star
