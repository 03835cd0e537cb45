from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.mysql_types import mysql_data_type, mysql_type, parse_mysql_type


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("varchar(255)", "VARCHAR(255)"),
        ("VARCHAR(0)", "STRING"),
        ("char(3)", "CHAR(3)"),
        ("int(11)", "INT"),
        ("INTEGER", "INT"),
        ("int(11) unsigned", "BIGINT"),
        ("INT UNSIGNED", "BIGINT"),
        ("tinyint", "TINYINT"),
        ("TINYINT(2) unsigned zerofill", "SMALLINT"),
        ("tinyint(1)", "BOOLEAN"),
        ("BOOL", "BOOLEAN"),
        ("bit", "BOOLEAN"),
        ("bit(64)", "BINARY(8)"),
        ("smallint unsigned", "INT"),
        ("mediumint unsigned", "INT"),
        ("bigint", "BIGINT"),
        ("bigint(20) unsigned", "DECIMAL(20, 0)"),
        ("SERIAL", "DECIMAL(20, 0) NOT NULL"),
        ("decimal(10,2)", "DECIMAL(10, 2)"),
        ("DECIMAL(8, 0) unsigned zerofill", "DECIMAL(8, 0)"),
        ("decimal", "DECIMAL(10, 0)"),
        ("NUMERIC(8,3)", "DECIMAL(8, 3)"),
        ("FIXED(40,3)", "STRING"),
        ("float", "FLOAT"),
        ("FLOAT(4) unsigned zerofill", "FLOAT"),
        ("float(30)", "DOUBLE"),
        ("double", "DOUBLE"),
        ("DOUBLE PRECISION(10,7) unsigned zerofill", "DOUBLE"),
        ("REAL", "DOUBLE"),
        ("date", "DATE"),
        ("time", "TIME(0)"),
        ("time(3)", "TIME(3)"),
        ("datetime", "TIMESTAMP(0)"),
        ("DATETIME(6)", "TIMESTAMP(6)"),
        ("timestamp", "TIMESTAMP_LTZ(0)"),
        ("TIMESTAMP(3)", "TIMESTAMP_LTZ(3)"),
        ("year", "INT"),
        ("text", "STRING"),
        ("LONGTEXT", "STRING"),
        ("json", "STRING"),
        ("enum('red','white')", "STRING"),
        ("SET('a','b')", "STRING"),
        ("binary(16)", "BINARY(16)"),
        ("VARBINARY(10)", "VARBINARY(10)"),
        ("blob", "BYTES"),
        ("point", "BYTES"),
        ("GEOMETRYCOLLECTION", "BYTES"),
    ],
)
def test_type_text(text: str, expected: str) -> None:
    assert str(mysql_data_type(text)) == expected


def test_unknown_type() -> None:
    with pytest.raises(DecodeError, match="unknown MySQL type FROBNICATOR"):
        mysql_data_type("frobnicator(3)")
    with pytest.raises(DecodeError, match="not a MySQL type"):
        mysql_data_type("int(x)")


def test_type_from_parts() -> None:
    assert str(mysql_type("BIGINT", unsigned=True).data_type) == "DECIMAL(20, 0)"
    assert str(mysql_type("INT UNSIGNED").data_type) == "BIGINT"
    assert str(mysql_type("decimal", [12, 4]).data_type) == "DECIMAL(12, 4)"
    assert mysql_type("ENUM", values=["a", "b"]).values == ("a", "b")


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("int(11)", "-42", -42),
        ("bigint unsigned", "18446744073709551615", Decimal("18446744073709551615")),
        ("tinyint(1)", "1", True),
        ("tinyint(1)", "0", False),
        ("BOOLEAN", "1", True),
        ("bit(16)", "258", b"\x01\x02"),
        ("float", "1.5", 1.5),
        ("DECIMAL(8,3)", "12345.110", Decimal("12345.110")),
        ("FIXED(40,3)", "123456789876543212345678987654321.110", "123456789876543212345678987654321.110"),
        ("varchar(20)", "Apache Paimon", "Apache Paimon"),
        ("date", "2023-03-23", date(2023, 3, 23)),
        ("date", "0000-00-00", None),
        ("DATETIME(3)", "2023-03-23 14:30:05.123", datetime(2023, 3, 23, 14, 30, 5, 123000)),
        ("TIMESTAMP(6)", "2023-03-23 15:00:10.123456", datetime(2023, 3, 23, 15, 0, 10, 123456, tzinfo=UTC)),
        ("time", "10:13:23", time(10, 13, 23)),
        ("year", "2023", 2023),
        ("ENUM('value1','value2','value3')", "1", "value1"),
        ("ENUM('value1','value2','value3')", "value3", "value3"),
        ("SET('a','b','c','d')", "3", "a,b"),
        ("SET('a','b','c','d')", "a,d", "a,d"),
        ("BINARY(10)", "bytes", b"bytes"),
        ("blob", "\x00\xff", b"\x00\xff"),
        ("POINT", "\x00\x00\x00\x00\x01\x01", b"\x00\x00\x00\x00\x01\x01"),
    ],
)
def test_values_from_text(text: str, value: str, expected: object) -> None:
    parsed = parse_mysql_type(text)
    result = value if parsed.convert is None else parsed.convert(value)
    assert result == expected
    assert type(result) is type(expected)


def test_timestamps_are_read_in_the_server_time_zone() -> None:
    parsed = parse_mysql_type("timestamp", ZoneInfo("Asia/Shanghai"))
    assert parsed.convert is not None
    assert parsed.convert("2023-03-23 08:00:00") == datetime(2023, 3, 23, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("int", "abc"),
        ("date", "23/03/2023"),
        ("tinyint(1)", "yes"),
        ("decimal(5,2)", "NaN"),
        ("time", "838:59:59"),
    ],
)
def test_bad_values_raise(text: str, value: str) -> None:
    convert = parse_mysql_type(text).convert
    assert convert is not None
    with pytest.raises((ValueError, ArithmeticError)):
        convert(value)
