"""MySQL column types: their text (``varchar(255)``, ``int(11) unsigned``, ``enum('a','b')``) to a
:class:`~ferry.model.types.DataType`, and the string form of a value to a Python value.

Canal sends every value as a string and the column types as MySQL text (``mysqlType``); Maxwell's
DDL events, Debezium's schema-change topic and DDL statements name MySQL types too. The mapping
follows Flink CDC's MySQL type mapping: unsigned integers widen one step (``INT UNSIGNED`` is a
``BIGINT``, ``BIGINT UNSIGNED`` a ``DECIMAL(20, 0)``), ``TINYINT(1)``, ``BOOL`` and ``BIT(1)`` are
``BOOLEAN``, ``DATETIME`` is a ``TIMESTAMP`` and ``TIMESTAMP`` a ``TIMESTAMP_LTZ``, decimals wider
than 38 digits and the textual types (``ENUM``, ``SET``, ``JSON``, ``TEXT``) are ``STRING``, spatial
types are ``BYTES`` (MySQL's internal SRID + WKB form).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ferry.connectors.exceptions import DecodeError
from ferry.model import types as t
from ferry.model.types import DataType

Converter = Callable[[str], Any]

# Not sqlglot's MySQL dialect: it reads REAL as FLOAT, INT8 as TINYINT and LONG as BIGINT, takes
# int(x), and refuses the spatial types, MIDDLEINT and NATIONAL CHAR.
_TYPE = re.compile(
    r"\s*(?P<name>[A-Za-z_][A-Za-z_0-9]*(?:\s+(?:PRECISION|VARYING))?)\s*(?:\((?P<args>.*)\))?\s*(?P<rest>.*)",
    re.IGNORECASE | re.DOTALL,
)
_QUOTED = re.compile(r"'((?:[^'\\]|\\.|'')*)'")
_SPATIAL = frozenset(
    {
        "GEOMETRY",
        "POINT",
        "LINESTRING",
        "POLYGON",
        "MULTIPOINT",
        "MULTILINESTRING",
        "MULTIPOLYGON",
        "GEOMETRYCOLLECTION",
        "GEOMCOLLECTION",
    }
)
_TEXT = frozenset({"TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "JSON", "LONG", "LONG VARCHAR"})
_BLOB = frozenset({"TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "LONG VARBINARY"})
_DECIMAL = frozenset({"DECIMAL", "DEC", "NUMERIC", "FIXED"})


@dataclass(frozen=True, slots=True)
class MySqlType:
    """A parsed MySQL column type: its ferry type and how to read its values from text."""

    name: str
    data_type: DataType
    convert: Converter | None
    """Turns the string form of a value into a Python value; ``None`` keeps the string."""
    values: tuple[str, ...] = ()
    """The members of an ``ENUM`` or ``SET``."""


def parse_mysql_type(text: str, time_zone: tzinfo = UTC) -> MySqlType:
    """Parse MySQL type text. ``time_zone`` is the server's, for ``TIMESTAMP`` values given as text.

    Raises :class:`DecodeError` for text that is not a MySQL type.
    """
    return _parse(text, time_zone)


def mysql_data_type(text: str) -> DataType:
    return _parse(text, UTC).data_type


@lru_cache(maxsize=4096)
def _parse(text: str, time_zone: tzinfo) -> MySqlType:
    m = _TYPE.fullmatch(text)
    if m is None:
        raise DecodeError(f"not a MySQL type: {text!r}")
    name = " ".join(m["name"].upper().split())
    args = m["args"]
    rest = m["rest"].upper().split()
    unsigned = "UNSIGNED" in rest or "ZEROFILL" in rest
    values: tuple[str, ...] = ()
    numbers: list[int] = []
    if args is not None:
        if name in ("ENUM", "SET"):
            values = tuple(v.replace("''", "'").replace("\\'", "'") for v in _QUOTED.findall(args))
        else:
            try:
                numbers = [int(a) for a in args.split(",") if a.strip()]
            except ValueError:
                raise DecodeError(f"not a MySQL type: {text!r}") from None
    return mysql_type(name, numbers, unsigned=unsigned, values=values, time_zone=time_zone)


def mysql_type(
    name: str,
    numbers: Sequence[int] = (),
    *,
    unsigned: bool = False,
    values: Sequence[str] = (),
    time_zone: tzinfo = UTC,
) -> MySqlType:
    """The type for a MySQL type name with its numeric arguments (length, or precision and scale)."""
    name = name.upper()
    if name.endswith(" UNSIGNED"):
        name, unsigned = name[: -len(" UNSIGNED")], True
    first = numbers[0] if numbers else None
    second = numbers[1] if len(numbers) > 1 else None
    dt, convert = _map(name, first, second, unsigned=unsigned, values=tuple(values), tz=time_zone)
    return MySqlType(name, dt, convert, tuple(values))


def _to_int(value: Any) -> int:
    """An integer column's value: Canal's text of it, or a JSON integer; never a boolean or a
    fraction (``int()`` would take ``true`` as 1 and cut ``0.5`` to 0)."""
    if type(value) is int:
        return value
    if type(value) is str:
        return int(value)
    raise TypeError(f"not an integer: {value!r}")


def _map(
    name: str, first: int | None, second: int | None, *, unsigned: bool, values: tuple[str, ...], tz: tzinfo
) -> tuple[DataType, Converter | None]:
    if name in ("TINYINT", "INT1"):
        if first == 1 and not unsigned:
            return t.BOOLEAN(), _to_bool
        return (t.SMALLINT() if unsigned else t.TINYINT()), _to_int
    if name in ("SMALLINT", "INT2"):
        return (t.INT() if unsigned else t.SMALLINT()), _to_int
    if name in ("MEDIUMINT", "INT3", "MIDDLEINT"):
        return t.INT(), _to_int
    if name in ("INT", "INTEGER", "INT4"):
        return (t.BIGINT() if unsigned else t.INT()), _to_int
    if name in ("BIGINT", "INT8"):
        return (t.DECIMAL(20, 0) if unsigned else t.BIGINT()), (_to_decimal if unsigned else _to_int)
    if name == "SERIAL":
        return t.DECIMAL(20, 0).not_null(), _to_decimal
    if name in ("BOOL", "BOOLEAN"):
        return t.BOOLEAN(), _to_bool
    if name == "BIT":
        if first is None or first == 1:
            return t.BOOLEAN(), _to_bool
        return t.BINARY((first + 7) // 8), _bits_converter((first + 7) // 8)
    if name == "FLOAT":
        if first is not None and second is None and first > 24:
            return t.DOUBLE(), float
        return t.FLOAT(), float
    if name in ("DOUBLE", "DOUBLE PRECISION", "REAL", "FLOAT8"):
        return t.DOUBLE(), float
    if name == "FLOAT4":
        return t.FLOAT(), float
    if name in _DECIMAL:
        precision = 10 if first is None else first
        scale = 0 if second is None else second
        if precision > t.MAX_DECIMAL_PRECISION or scale > precision:
            return t.STRING(), None
        return t.DECIMAL(precision, scale), _to_decimal
    if name in ("CHAR", "NCHAR", "CHARACTER", "NATIONAL CHAR"):
        return (t.CHAR(first) if first else t.CHAR(1) if first is None else t.STRING()), None
    if name in ("VARCHAR", "NVARCHAR", "CHARACTER VARYING", "CHAR VARYING", "VARCHARACTER"):
        return (t.VARCHAR(first) if first else t.STRING()), None
    if name in _TEXT:
        return t.STRING(), None
    if name in ("ENUM", "SET"):
        return t.STRING(), _enum_converter(values) if name == "ENUM" else _set_converter(values)
    if name == "BINARY":
        return (t.BINARY(first) if first else t.BINARY(1) if first is None else t.BYTES()), _to_bytes
    if name == "VARBINARY":
        return (t.VARBINARY(first) if first else t.BYTES()), _to_bytes
    if name in _BLOB:
        return t.BYTES(), _to_bytes
    if name == "DATE":
        return t.DATE(), _to_date
    if name == "TIME":
        return t.TIME(first or 0), _to_time
    if name == "DATETIME":
        return t.TIMESTAMP(first or 0), _to_datetime
    if name == "TIMESTAMP":
        return t.TIMESTAMP_LTZ(first or 0), _timestamp_converter(tz)
    if name == "YEAR":
        return t.INT(), int
    if name in _SPATIAL:
        return t.BYTES(), _to_bytes
    raise DecodeError(f"unknown MySQL type {name}")


# ----------------------------------------------------------------------------------- converters


def _to_bool(text: str) -> bool:
    if text in ("1", "true", "TRUE", "\x01"):
        return True
    if text in ("0", "false", "FALSE", "\x00", ""):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _to_decimal(text: str) -> Decimal:
    value = Decimal(text)
    if not value.is_finite():
        raise ValueError(f"not a decimal number: {text!r}")
    return value


def _to_bytes(text: str) -> bytes:
    # Canal decodes binary values as ISO-8859-1, which maps every byte to one character.
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode()


def _bits_converter(size: int) -> Converter:
    def convert(text: str) -> bytes:
        if text.isdigit():
            return int(text).to_bytes(size, "big")
        return _to_bytes(text)

    return convert


def _enum_converter(members: tuple[str, ...]) -> Converter | None:
    if not members:
        return None
    known = frozenset(members)

    def convert(text: str) -> str:
        # Binlog rows carry an ENUM as its 1-based index; some writers pass it on unchanged.
        if text in known or not text.isdigit():
            return text
        index = int(text)
        if index == 0:
            return ""
        return members[index - 1]

    return convert


def _set_converter(members: tuple[str, ...]) -> Converter | None:
    if not members:
        return None
    known = frozenset(members)

    def convert(text: str) -> str:
        # Binlog rows carry a SET as a bit mask of its members.
        if text in known or not text.isdigit() or "," in text:
            return text
        mask = int(text)
        if mask >= 1 << len(members):
            raise ValueError(f"set bit mask {mask} has more bits than the {len(members)} members")
        return ",".join(m for i, m in enumerate(members) if mask >> i & 1)

    return convert


def _is_zero_date(text: str) -> bool:
    return text.startswith("0000-00-00")


def _to_date(text: str) -> date | None:
    if _is_zero_date(text):
        return None
    return date.fromisoformat(text)


def _to_datetime(text: str) -> datetime | None:
    if _is_zero_date(text):
        return None
    return datetime.fromisoformat(text)


def _timestamp_converter(tz: tzinfo) -> Converter:
    def convert(text: str) -> datetime | None:
        if _is_zero_date(text):
            return None
        value = datetime.fromisoformat(text)
        if value.tzinfo is None:
            value = value.replace(tzinfo=tz)
        return value.astimezone(UTC)

    return convert


def _to_time(text: str) -> time:
    return time.fromisoformat(text)
