from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from format_fixtures import documents

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.connect_types import (
    ConversionError,
    RowConverter,
    connect_data_type,
    connect_field,
)


def field(kind: str, name: str | None = None, optional: bool = True, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind, "optional": optional, **extra}
    if name is not None:
        schema["name"] = name
    return schema


def decimal(scale: int, precision: int | None = None, kind: str = "bytes") -> dict[str, Any]:
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return field(kind, "org.apache.kafka.connect.data.Decimal", parameters=parameters)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (field("int8"), "TINYINT"),
        (field("int16"), "SMALLINT"),
        (field("int32", optional=False), "INT NOT NULL"),
        (field("int64"), "BIGINT"),
        (field("float32"), "FLOAT"),
        (field("float"), "FLOAT"),
        (field("float64"), "DOUBLE"),
        (field("double"), "DOUBLE"),
        (field("boolean"), "BOOLEAN"),
        (field("string"), "STRING"),
        (field("bytes"), "BYTES"),
        (decimal(4, 8), "DECIMAL(8, 4)"),
        (decimal(0), "DECIMAL(38, 0)"),
        (decimal(3, 40), "STRING"),
        (field("int32", "org.apache.kafka.connect.data.Date"), "DATE"),
        (field("int32", "org.apache.kafka.connect.data.Time"), "TIME(3)"),
        (field("int64", "org.apache.kafka.connect.data.Timestamp"), "TIMESTAMP(3)"),
        (field("int32", "io.debezium.time.Date"), "DATE"),
        (field("int32", "io.debezium.time.Time"), "TIME(3)"),
        (field("int64", "io.debezium.time.MicroTime"), "TIME(6)"),
        (field("int64", "io.debezium.time.NanoTime"), "TIME(9)"),
        (field("int64", "io.debezium.time.Timestamp"), "TIMESTAMP(3)"),
        (field("int64", "io.debezium.time.MicroTimestamp"), "TIMESTAMP(6)"),
        (field("int64", "io.debezium.time.NanoTimestamp"), "TIMESTAMP(9)"),
        (field("string", "io.debezium.time.ZonedTimestamp"), "TIMESTAMP_LTZ(6)"),
        (field("string", "io.debezium.time.ZonedTime"), "STRING"),
        (field("int32", "io.debezium.time.Year"), "INT"),
        (field("string", "io.debezium.data.Json"), "STRING"),
        (field("string", "io.debezium.data.Enum", parameters={"allowed": "a,b"}), "STRING"),
        (field("string", "io.debezium.data.EnumSet"), "STRING"),
        (field("string", "io.debezium.data.Uuid"), "STRING"),
        (field("bytes", "io.debezium.data.Bits", parameters={"length": "64"}), "BINARY(8)"),
        (field("struct", "io.debezium.data.VariableScaleDecimal", fields=[]), "DECIMAL(38, 18)"),
        (field("struct", "io.debezium.data.geometry.Point", fields=[]), "STRING"),
        (field("array", items=field("int32")), "ARRAY<INT>"),
        (
            field("map", keys=field("string", optional=False), values=field("int64")),
            "MAP<STRING NOT NULL, BIGINT>",
        ),
        (
            field(
                "struct",
                fields=[{**field("int32", optional=False), "field": "a"}, {**field("string"), "field": "b"}],
            ),
            "ROW<`a` INT NOT NULL, `b` STRING>",
        ),
        (
            field(
                "string",
                parameters={
                    "__debezium.source.column.type": "DECIMAL",
                    "__debezium.source.column.length": "2",
                    "__debezium.source.column.scale": "1",
                },
            ),
            "DECIMAL(2, 1)",
        ),
    ],
)
def test_connect_types(schema: dict[str, Any], expected: str) -> None:
    assert str(connect_data_type(schema)) == expected


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        (decimal(4, 8), "EtaH", Decimal("123.4567")),
        (decimal(2, 10), "/zg=", Decimal("-2.00")),
        (decimal(0), "AP//////////", Decimal("18446744073709551615")),
        (decimal(1, 2), 1.1, Decimal("1.1")),
        (decimal(0, 10), 123, Decimal("123")),
        (decimal(3, 40), "F8bjwqHo0RQZ/Jj5o9PW", "123456789876543212345678987654321.110"),
        (decimal(2, 10, kind="string"), "12.34", Decimal("12.34")),
        (field("int32", "io.debezium.time.Date"), 18460, date(2020, 7, 17)),
        (field("int32", "org.apache.kafka.connect.data.Date"), -1, date(1969, 12, 31)),
        (field("int32", "io.debezium.time.Time"), 64822123, time(18, 0, 22, 123000)),
        (field("int64", "io.debezium.time.MicroTime"), 64822000000, time(18, 0, 22)),
        (field("int64", "io.debezium.time.NanoTime"), 64822000001000, time(18, 0, 22, 1)),
        (
            field("int64", "io.debezium.time.Timestamp"),
            1595008822123,
            datetime(2020, 7, 17, 18, 0, 22, 123000),
        ),
        (
            field("int64", "io.debezium.time.MicroTimestamp"),
            1595008822123456,
            datetime(2020, 7, 17, 18, 0, 22, 123456),
        ),
        (
            field("int64", "io.debezium.time.NanoTimestamp"),
            1595008822123456789,
            datetime(2020, 7, 17, 18, 0, 22, 123456),
        ),
        (
            field("string", "io.debezium.time.ZonedTimestamp"),
            "2020-07-17T18:00:22Z",
            datetime(2020, 7, 17, 18, 0, 22, tzinfo=UTC),
        ),
        (
            field("string", "io.debezium.time.ZonedTimestamp"),
            "2020-07-17T20:00:22.5+02:00",
            datetime(2020, 7, 17, 18, 0, 22, 500000, tzinfo=UTC),
        ),
        (field("bytes"), "EA==", b"\x10"),
        (field("bytes", "io.debezium.data.Bits", parameters={"length": "64"}), "BAQEBAQEBAQ=", b"\x04" * 8),
        (
            field("struct", "io.debezium.data.VariableScaleDecimal", fields=[]),
            {"scale": 3, "value": "MDk="},
            Decimal("12.345"),
        ),
        (
            field("struct", "io.debezium.data.geometry.Point", fields=[]),
            {"x": 1.0, "y": 1.0, "wkb": "AQ==", "srid": None},
            '{"x":1.0,"y":1.0,"wkb":"AQ==","srid":null}',
        ),
        (
            field("array", items=field("int32", "io.debezium.time.Date")),
            [0, 1],
            [date(1970, 1, 1), date(1970, 1, 2)],
        ),
        (field("map", keys=field("int32"), values=field("string")), [[1, "a"], [2, "b"]], {1: "a", 2: "b"}),
        (field("map", keys=field("string"), values=field("bytes")), {"k": "EA=="}, {"k": b"\x10"}),
        (field("float64"), 1, 1.0),
    ],
)
def test_values(schema: dict[str, Any], value: Any, expected: Any) -> None:
    result = connect_field(schema).read(value)
    assert result == expected
    assert type(result) is type(expected)


def test_invalid_schemas() -> None:
    with pytest.raises(DecodeError, match="declares scale 65 greater than precision 1"):
        connect_field(decimal(65, 1))
    with pytest.raises(DecodeError, match="unknown Connect type 'int128'"):
        connect_field(field("int128"))
    with pytest.raises(DecodeError, match="field 'a' is declared twice"):
        RowConverter(
            field("struct", fields=[{**field("int32"), "field": "a"}, {**field("int32"), "field": "a"}])
        )


def row_converter() -> RowConverter:
    return RowConverter(
        field(
            "struct",
            fields=[
                {**field("int32", optional=False), "field": "id"},
                {**field("string"), "field": "name"},
                {**field("double"), "field": "weight"},
                {**field("int32", "io.debezium.time.Date"), "field": "day"},
                {**field("struct", fields=[{**field("bytes"), "field": "raw"}]), "field": "inner"},
            ],
        )
    )


def test_rows_are_checked_and_converted_in_place() -> None:
    converter = row_converter()
    row = {"id": 1, "name": "a", "weight": 2, "day": 0, "inner": {"raw": "EA=="}}
    converter.convert(row)
    assert row == {"id": 1, "name": "a", "weight": 2.0, "day": date(1970, 1, 1), "inner": {"raw": b"\x10"}}
    assert type(row["weight"]) is float
    assert [c.name for c in converter.columns] == ["id", "name", "weight", "day", "inner"]


def test_a_missing_optional_field_is_null() -> None:
    row: dict[str, Any] = {"id": 1}
    row_converter().convert(row)
    assert row == {"id": 1, "name": None, "weight": None, "day": None, "inner": None}


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": "abc"}, "field 'id' is not an INT32: 'abc'"),
        ({"id": True}, "field 'id' is not an INT32: True"),
        ({"id": None}, "field 'id' is null but its schema says it is not optional"),
        ({"name": "x"}, "field 'id' is missing and its schema says it is not optional"),
        ({"id": 1, "name": 5}, "field 'name' is not a STRING: 5"),
        (
            {"id": 1, "day": "monday"},
            "field 'day' is not a valid io.debezium.time.Date: 'monday' (expected a number of days)",
        ),
        ({"id": 1, "inner": {"raw": "!!"}}, "field 'inner.raw' is not a valid BYTES: '!!'"),
        ({"id": 1, "extra": 2}, "field 'extra' is not in the record's schema"),
    ],
)
def test_rows_contradicting_their_schema(row: dict[str, Any], reason: str) -> None:
    with pytest.raises(ConversionError) as raised:
        row_converter().convert(row)
    assert raised.value.reason.startswith(reason)


def test_all_types_values_match_the_sql_that_produced_them() -> None:
    """The Flink CDC all-types record (column_type_test.sql): each field read with its declared schema."""
    snapshot = documents("apache-flink-cdc/debezium-data-schema-include.json")[0]
    (after,) = [f for f in snapshot["schema"]["fields"] if f["field"] == "after"]
    schemas = {f["field"]: f for f in after["fields"]}
    values = snapshot["payload"]["after"]

    def read(name: str) -> Any:
        return connect_field(schemas[name]).read(values[name])

    assert read("decimal_c") == Decimal("123.4567")  # DECIMAL(8, 4) 123.4567
    assert read("numeric_c") == Decimal("346")  # NUMERIC(6, 0) 345.6
    assert read("date_c") == date(2020, 7, 17)
    assert read("time_c") == time(18, 0, 22)
    assert read("datetime3_c") == datetime(2020, 7, 17, 18, 0, 22, 123000)
    assert read("datetime6_c") == datetime(2020, 7, 17, 18, 0, 22, 123456)
    assert read("timestamp_c") == datetime(2020, 7, 17, 18, 0, 22, tzinfo=UTC)
    assert read("file_uuid") == bytes.fromhex("651aed08390f4893b2f136923e7b7400")
    assert read("bit_c") == int(
        "0000010000000100000001000000010000000100000001000000010000000100", 2
    ).to_bytes(8)
    assert read("tiny_blob_c") == bytes.fromhex("10")  # UNHEX(HEX(16))
    assert read("year_c") == 2021
    assert read("json_c") == '{"key1": "value1"}'
    assert str(connect_data_type(schemas["decimal_c"])) == "DECIMAL(8, 4)"
