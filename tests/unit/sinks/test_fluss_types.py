"""The Fluss sink's type mapping, its reading of the server's type names, and value conversion.

What the server really stores for each type is checked against a running cluster in
``tests/integration/test_fluss_sink.py``; these tests need nothing running.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from ferry.model import types as T
from ferry.model.schema import Column, Schema
from ferry.model.types import DataType
from ferry.sinks.fluss.types import (
    FlussTypeError,
    fluss_sql,
    parse_fluss_type,
    sink_type,
    to_arrow_schema,
    to_arrow_type,
    value_converter,
)


@pytest.mark.parametrize(
    ("source", "stored"),
    [
        (T.INT().not_null(), T.INT().not_null()),
        (T.DECIMAL(38, 10), T.DECIMAL(38, 10)),
        (T.CHAR(3), T.STRING()),
        (T.VARCHAR(20).not_null(), T.STRING().not_null()),
        (T.BINARY(16), T.BYTES()),
        (T.VARBINARY(8), T.BYTES()),
        (T.TIME(0), T.TIME(0)),
        (T.TIME(2), T.TIME(3)),
        (T.TIME(6), T.TIME(3)),
        (T.TIMESTAMP(1), T.TIMESTAMP(3)),
        (T.TIMESTAMP(6), T.TIMESTAMP(6)),
        (T.TIMESTAMP(7), T.TIMESTAMP(9)),
        (T.TIMESTAMP_TZ(3), T.TIMESTAMP_LTZ(3)),
        (T.TIMESTAMP_LTZ(4), T.TIMESTAMP_LTZ(6)),
        (T.ARRAY(T.VARCHAR(5)), T.ARRAY(T.STRING())),
        (T.MAP(T.VARCHAR(5), T.TIME(6)), T.MAP(T.STRING().not_null(), T.TIME(3))),
        (
            T.ROW(T.Field("a", T.CHAR(1)), T.Field("b", T.INT())),
            T.ROW(T.Field("a", T.STRING()), T.Field("b", T.INT())),
        ),
    ],
)
def test_sink_type_is_what_fluss_stores(source: DataType, stored: DataType) -> None:
    assert sink_type(source) == stored
    # a stored type is stored as it is
    assert sink_type(stored) == stored


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("int NOT NULL", T.INT().not_null()),
        ("tinyint", T.TINYINT()),
        ("decimal(10,2)", T.DECIMAL(10, 2)),
        ("string", T.STRING()),
        ("char(5)", T.CHAR(5)),
        ("binary(16)", DataType(T.TypeRoot.BINARY, length=16)),
        ("bytes", T.BYTES()),
        ("time", T.TIME(0)),
        ("time(3)", T.TIME(3)),
        ("timestamp", T.TIMESTAMP(6)),
        ("timestamp(0)", T.TIMESTAMP(0)),
        ("timestamp_ltz", T.TIMESTAMP_LTZ(6)),
        ("timestamp_ltz(3) NOT NULL", T.TIMESTAMP_LTZ(3).not_null()),
        ("array<int>", T.ARRAY(T.INT())),
        ("map<string NOT NULL,bigint>", T.MAP(T.STRING().not_null(), T.BIGINT())),
        ("row<a: int, b: string>", T.ROW(T.Field("a", T.INT()), T.Field("b", T.STRING()))),
        (
            "row<`a b`: array<int NOT NULL>> NOT NULL",
            T.ROW(T.Field("a b", T.ARRAY(T.INT().not_null()))).not_null(),
        ),
    ],
)
def test_reads_the_servers_type_names(text: str, expected: DataType) -> None:
    assert parse_fluss_type(text) == expected


@pytest.mark.parametrize("text", ["varchar(3)", "int NOT", "map<int>", "decimal(10,", "int extra"])
def test_an_unreadable_type_name_is_an_error_that_quotes_it(text: str) -> None:
    with pytest.raises(FlussTypeError, match="Fluss type"):
        parse_fluss_type(text)


def test_arrow_types_carry_units_zones_and_nullability() -> None:
    assert to_arrow_type(T.TIME(6)) == pa.time32("ms")
    assert to_arrow_type(T.TIMESTAMP(9)) == pa.timestamp("ns")
    assert to_arrow_type(T.TIMESTAMP_TZ(3)) == pa.timestamp("ms", tz="UTC")
    assert to_arrow_type(T.VARCHAR(3)) == pa.string()
    assert to_arrow_type(T.MAP(T.STRING(), T.INT().not_null())) == pa.map_(
        pa.string(), pa.field("value", pa.int32(), nullable=False)
    )
    schema = Schema.of(
        [Column("id", T.INT()), Column("v", T.STRING().not_null()), Column("w", T.INT())], ["id"]
    )
    arrow = to_arrow_schema(schema)
    # a primary-key column is NOT NULL even when the source did not say so
    assert [(f.name, f.nullable) for f in arrow] == [("id", False), ("v", False), ("w", True)]


def test_added_columns_are_spelt_for_flusss_parser() -> None:
    assert fluss_sql(T.VARCHAR(10)) == "STRING"
    assert fluss_sql(T.DECIMAL(10, 2).not_null()) == "DECIMAL(10, 2) NOT NULL"
    assert fluss_sql(T.TIMESTAMP_TZ(3)) == "TIMESTAMP_LTZ(3)"
    assert fluss_sql(T.ROW(T.Field("a", T.CHAR(1)))) == "ROW<`a` STRING>"


def test_values_are_converted_to_what_the_client_takes() -> None:
    decimal = value_converter(T.DECIMAL(10, 2))
    assert decimal is not None
    assert decimal(3) == Decimal(3) and isinstance(decimal(3), Decimal)
    assert decimal(1.25) == Decimal("1.25")
    assert decimal(Decimal("2.50")) == Decimal("2.50")
    naive = value_converter(T.TIMESTAMP(6))
    assert naive is not None
    aware = datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert naive(aware) == datetime(2024, 1, 1, 10)
    assert naive(datetime(2024, 1, 1, 10)) == datetime(2024, 1, 1, 10)
    day = value_converter(T.DATE())
    assert day is not None and day(datetime(2020, 1, 2, 3)) == date(2020, 1, 2)
    millis = value_converter(T.TIME(3))
    assert millis is not None and millis(time(1, 2, 3, 456789)) == time(1, 2, 3, 456000)
    nested = value_converter(T.MAP(T.STRING(), T.ARRAY(T.DECIMAL(5, 1))))
    assert nested is not None
    assert nested({"a": [1, None]}) == {"a": [Decimal(1), None]}
    row = value_converter(T.ROW(T.Field("t", T.TIMESTAMP(3)), T.Field("s", T.STRING())))
    assert row is not None
    assert row({"t": datetime(2024, 1, 1, tzinfo=UTC), "s": "x"}) == {"t": datetime(2024, 1, 1), "s": "x"}
    # types the client takes as they are need no conversion
    assert value_converter(T.STRING()) is None
    assert value_converter(T.ARRAY(T.INT())) is None
    assert value_converter(T.TIMESTAMP_LTZ(3)) is None
