"""ferry's types at Fluss: what a Fluss table stores for each, as Arrow, as Fluss SQL, and back.

Fluss has no VARCHAR, VARBINARY or zoned TIMESTAMP: character types are stored as ``STRING``,
binary ones as ``BYTES`` and ``TIMESTAMP_TZ`` as ``TIMESTAMP_LTZ`` (the instant is kept). Times
and timestamps take the precisions of Arrow's units (0, 3, 6, 9), rounded up; a ``TIME`` holds
milliseconds at most, as Fluss stores it. A map's keys are ``NOT NULL``.

:func:`sink_type` is that mapping in ferry's types; :func:`to_arrow_schema` is what the sink hands
the Python client to create a table; :func:`fluss_sql` is the type as Fluss's own parser reads it
(for added columns); :func:`parse_fluss_type` reads back what the server reports. This module
imports no client library.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ferry.model import types as T
from ferry.model.schema import Column, Schema
from ferry.model.types import DataType, TypeRoot

#: Arrow's time units by precision; a precision is rounded up to the next of these.
_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}
#: A TIME at Fluss is milliseconds since midnight.
MAX_TIME_PRECISION = 3
_SAME = {
    TypeRoot.BOOLEAN: pa.bool_(),
    TypeRoot.TINYINT: pa.int8(),
    TypeRoot.SMALLINT: pa.int16(),
    TypeRoot.INT: pa.int32(),
    TypeRoot.BIGINT: pa.int64(),
    TypeRoot.FLOAT: pa.float32(),
    TypeRoot.DOUBLE: pa.float64(),
    TypeRoot.DATE: pa.date32(),
}


class FlussTypeError(ValueError):
    """A type Fluss cannot store, or a type name the server reported that ferry cannot read."""


def _precision(p: int | None, default: int, at_most: int = 9) -> int:
    wanted = min(default if p is None else p, at_most)
    return next(unit for unit in sorted(_UNITS) if unit >= wanted)


def sink_type(t: DataType) -> DataType:
    """The type a Fluss table stores for a ferry type (nullability kept)."""
    root = t.root
    if root in _SAME or root is TypeRoot.DECIMAL:
        stored = t
    elif root in T.CHARACTER or root is TypeRoot.VARIANT:
        stored = T.STRING()
    elif root in T.BINARIES:
        stored = T.BYTES()
    elif root is TypeRoot.TIME:
        stored = T.TIME(_precision(t.precision, 0, MAX_TIME_PRECISION))
    elif root is TypeRoot.TIMESTAMP:
        stored = T.TIMESTAMP(_precision(t.precision, 6))
    elif root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        stored = T.TIMESTAMP_LTZ(_precision(t.precision, 6))
    elif root is TypeRoot.ARRAY:
        assert t.element is not None
        stored = T.ARRAY(sink_type(t.element))
    elif root is TypeRoot.MAP:
        assert t.key is not None and t.element is not None
        stored = T.MAP(sink_type(t.key).not_null(), sink_type(t.element))
    elif root is TypeRoot.ROW:
        stored = T.ROW(*(T.Field(f.name, sink_type(f.type)) for f in t.fields))
    else:  # pragma: no cover - every root is handled above
        raise FlussTypeError(f"Fluss has no type for {t}")
    return stored.with_nullable(t.nullable)


def sink_schema(schema: Schema) -> Schema:
    """``schema`` with every column's type as Fluss stores it."""
    return schema.with_columns(Column(c.name, sink_type(c.type), c.comment, c.default) for c in schema)


def to_arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type from which the Python client derives the Fluss type :func:`sink_type` gives."""
    s = sink_type(t)
    root = s.root
    if root in _SAME:
        return _SAME[root]
    if root is TypeRoot.DECIMAL:
        return pa.decimal128(s.precision or 10, s.scale or 0)
    if root is TypeRoot.STRING:
        return pa.string()
    if root is TypeRoot.BYTES:
        return pa.binary()
    if root is TypeRoot.TIME:
        unit = _UNITS[s.precision or 0]
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    if root is TypeRoot.TIMESTAMP:
        return pa.timestamp(_UNITS[s.precision or 0])
    if root is TypeRoot.TIMESTAMP_LTZ:
        return pa.timestamp(_UNITS[s.precision or 0], tz="UTC")
    if root is TypeRoot.ARRAY:
        assert s.element is not None
        return pa.list_(_arrow_field("element", s.element))
    if root is TypeRoot.MAP:
        assert s.key is not None and s.element is not None
        return pa.map_(to_arrow_type(s.key), _arrow_field("value", s.element))
    if root is TypeRoot.ROW:
        return pa.struct([_arrow_field(f.name, f.type) for f in s.fields])
    raise FlussTypeError(f"Fluss has no type for {t}")  # pragma: no cover


def _arrow_field(name: str, t: DataType) -> pa.Field:
    return pa.field(name, to_arrow_type(t), nullable=t.nullable)


def to_arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema of a table's columns; primary-key columns are NOT NULL, as Fluss wants."""
    keys = set(schema.primary_keys)
    return pa.schema(
        [
            pa.field(c.name, to_arrow_type(c.type), nullable=c.type.nullable and c.name not in keys)
            for c in schema
        ]
    )


def fluss_sql(t: DataType) -> str:
    """The stored type in Fluss SQL spelling (``DECIMAL(10, 2)``, ``ROW<`a` INT>``), for added columns."""
    return T.render(sink_type(t))


# ----------------------------------------------------------------------------------- reading back

# A reader of ferry's own: sqlglot has no Fluss (nor Flink) dialect, fails on bytes and row<a: int>,
# and drops a trailing NOT NULL.
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z_0-9$]*|\d+|[(),<>:])")
_NAMES = {
    "boolean": TypeRoot.BOOLEAN,
    "tinyint": TypeRoot.TINYINT,
    "smallint": TypeRoot.SMALLINT,
    "int": TypeRoot.INT,
    "integer": TypeRoot.INT,
    "bigint": TypeRoot.BIGINT,
    "float": TypeRoot.FLOAT,
    "double": TypeRoot.DOUBLE,
    "decimal": TypeRoot.DECIMAL,
    "char": TypeRoot.CHAR,
    "string": TypeRoot.STRING,
    "binary": TypeRoot.BINARY,
    "bytes": TypeRoot.BYTES,
    "date": TypeRoot.DATE,
    "time": TypeRoot.TIME,
    "timestamp": TypeRoot.TIMESTAMP,
    "timestamp_ltz": TypeRoot.TIMESTAMP_LTZ,
    "array": TypeRoot.ARRAY,
    "map": TypeRoot.MAP,
    "row": TypeRoot.ROW,
}


def parse_fluss_type(text: str) -> DataType:
    """A type as the server reports it (``int NOT NULL``, ``decimal(10,2)``, ``row<a: int>``)."""
    parser = _Parser(text)
    t = parser.parse()
    if parser.peek() is not None:
        raise FlussTypeError(f"unexpected {parser.peek()!r} in Fluss type {text!r}")
    return t


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                if not text[pos:].strip():
                    break
                raise FlussTypeError(f"cannot read Fluss type {text!r} at character {pos}")
            self.tokens.append(match.group(1))
            pos = match.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise FlussTypeError(f"Fluss type {self.text!r} ends too early")
        self.i += 1
        return token

    def accept(self, token: str) -> bool:
        if (self.peek() or "").lower() == token:
            self.i += 1
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            raise FlussTypeError(f"expected {token!r} in Fluss type {self.text!r}, found {self.peek()!r}")

    def ints(self) -> list[int]:
        if not self.accept("("):
            return []
        values = [int(self.take())]
        while self.accept(","):
            values.append(int(self.take()))
        self.expect(")")
        return values

    def parse(self) -> DataType:
        name = self.take()
        root = _NAMES.get(name.lower())
        if root is None:
            raise FlussTypeError(f"unknown type {name!r} in Fluss type {self.text!r}")
        if root is TypeRoot.ARRAY:
            self.expect("<")
            t = T.ARRAY(self.parse())
            self.expect(">")
        elif root is TypeRoot.MAP:
            self.expect("<")
            key = self.parse()
            self.expect(",")
            t = T.MAP(key, self.parse())
            self.expect(">")
        elif root is TypeRoot.ROW:
            self.expect("<")
            fields = []
            while True:
                field_name = T.unquote_name(self.take())
                self.accept(":")
                fields.append(T.Field(field_name, self.parse()))
                if not self.accept(","):
                    break
            self.expect(">")
            t = T.ROW(*fields)
        else:
            args = self.ints()
            if root is TypeRoot.DECIMAL:
                t = T.DECIMAL(args[0] if args else 10, args[1] if len(args) > 1 else 0)
            elif root in (TypeRoot.CHAR, TypeRoot.BINARY):
                t = DataType(root, length=args[0] if args else 1)
            elif root is TypeRoot.TIME:
                t = T.TIME(args[0] if args else 0)
            elif root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
                t = DataType(root, precision=args[0] if args else 6)
            else:
                t = DataType(root)
        if self.accept("not"):
            self.expect("null")
            return t.not_null()
        return t


# ----------------------------------------------------------------------------------- values

#: A value as ferry carries it → the value the Python client takes for the stored type.
Convert = Callable[[Any], Any]


def value_converter(t: DataType) -> Convert | None:
    """How to hand a value of stored type ``t`` to the client, or ``None`` when it takes it as it is.

    The client wants a ``Decimal`` for a DECIMAL, a naive ``datetime`` for a TIMESTAMP, a ``date``
    for a DATE and whole milliseconds in a TIME; ferry's rows may carry numbers, aware datetimes
    or microseconds there.
    """
    root = t.root
    if root is TypeRoot.DECIMAL:
        return _decimal
    if root is TypeRoot.TIMESTAMP:
        return _naive
    if root is TypeRoot.DATE:
        return _date
    if root is TypeRoot.TIME:
        return _millis
    if root is TypeRoot.ARRAY:
        assert t.element is not None
        inner = value_converter(t.element)
        return None if inner is None else (lambda v: None if v is None else [_maybe(inner, x) for x in v])
    if root is TypeRoot.MAP:
        assert t.key is not None and t.element is not None
        key, value = value_converter(t.key), value_converter(t.element)
        if key is None and value is None:
            return None
        return lambda v: None if v is None else {_maybe(key, k): _maybe(value, x) for k, x in _items(v)}
    if root is TypeRoot.ROW:
        converters = {f.name: value_converter(f.type) for f in t.fields}
        if all(c is None for c in converters.values()):
            return None
        return lambda v: (
            None if v is None else {name: _maybe(converters.get(name), x) for name, x in dict(v).items()}
        )
    return None


def _maybe(convert: Convert | None, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


def _items(value: Any) -> Any:
    return value.items() if isinstance(value, dict) else value


def _decimal(value: Any) -> Any:
    if value is None or isinstance(value, Decimal):
        return value
    if isinstance(value, int | str):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    return value


def _naive(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _date(value: Any) -> Any:
    return value.date() if isinstance(value, datetime) else value


def _millis(value: Any) -> Any:
    if isinstance(value, time) and value.microsecond % 1000:
        return value.replace(microsecond=value.microsecond - value.microsecond % 1000)
    return value


__all__ = [
    "MAX_TIME_PRECISION",
    "FlussTypeError",
    "fluss_sql",
    "parse_fluss_type",
    "sink_schema",
    "sink_type",
    "to_arrow_schema",
    "to_arrow_type",
    "value_converter",
]
