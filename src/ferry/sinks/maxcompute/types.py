"""Which MaxCompute type holds each ferry type, its MaxCompute spelling, and MaxCompute's type names
read back as ferry types.

The mapping is Flink CDC's MaxCompute connector's: CHAR, VARCHAR, STRING and TIME are ``STRING``,
BINARY, VARBINARY and BYTES are ``BINARY``, TIMESTAMP is ``TIMESTAMP_NTZ`` and TIMESTAMP_LTZ and
TIMESTAMP_TZ are ``TIMESTAMP`` (an instant; both keep nanoseconds), ROW is ``STRUCT``; the others
keep their name. A DECIMAL MaxCompute cannot hold (precision above 38 or scale above 18) is a
``STRING``. Elements of ARRAY, MAP and STRUCT are nullable in MaxCompute.

This module imports no pyodps: the DDL it helps render is unit-tested without the extra.
"""

from __future__ import annotations

import re

from ferry.model import types as t
from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.exceptions import SinkTerminalError

#: MaxCompute's largest DECIMAL precision and scale.
MAX_PRECISION = 38
MAX_SCALE = 18

_SAME_NAME = {
    TypeRoot.BOOLEAN: "BOOLEAN",
    TypeRoot.TINYINT: "TINYINT",
    TypeRoot.SMALLINT: "SMALLINT",
    TypeRoot.INT: "INT",
    TypeRoot.BIGINT: "BIGINT",
    TypeRoot.FLOAT: "FLOAT",
    TypeRoot.DOUBLE: "DOUBLE",
    TypeRoot.STRING: "STRING",
    TypeRoot.BYTES: "BINARY",
    TypeRoot.DATE: "DATE",
    TypeRoot.TIMESTAMP: "TIMESTAMP_NTZ",
    TypeRoot.TIMESTAMP_LTZ: "TIMESTAMP",
}
_AS_STRING = (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING, TypeRoot.TIME, TypeRoot.VARIANT)
_AS_BINARY = (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES)


def sink_type(source: DataType) -> DataType:
    """The type a MaxCompute column created for ``source`` has, read back as a ferry type."""
    root = source.root
    if root in _AS_STRING:
        stored = t.STRING()
    elif root in _AS_BINARY:
        stored = t.BYTES()
    elif root is TypeRoot.DECIMAL:
        precision, scale = source.precision or 10, source.scale or 0
        fits = precision <= MAX_PRECISION and scale <= MAX_SCALE
        stored = t.DECIMAL(precision, scale) if fits else t.STRING()
    elif root is TypeRoot.TIMESTAMP:
        stored = t.TIMESTAMP(9)
    elif root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        stored = t.TIMESTAMP_LTZ(9)
    elif root is TypeRoot.ARRAY:
        assert source.element is not None
        stored = t.ARRAY(sink_type(source.element).with_nullable(True))
    elif root is TypeRoot.MAP:
        assert source.key is not None and source.element is not None
        stored = t.MAP(
            sink_type(source.key).with_nullable(True), sink_type(source.element).with_nullable(True)
        )
    elif root is TypeRoot.ROW:
        stored = t.ROW(*(t.Field(f.name, sink_type(f.type).with_nullable(True)) for f in source.fields))
    else:
        stored = DataType(root)
    return stored.with_nullable(source.nullable)


def type_name(source: DataType) -> str:
    """The MaxCompute spelling of the type that holds ``source`` (``DECIMAL(10,2)``, ``ARRAY<INT>``)."""
    stored = sink_type(source)
    root = stored.root
    if root is TypeRoot.DECIMAL:
        return f"DECIMAL({stored.precision},{stored.scale})"
    if root is TypeRoot.ARRAY:
        assert stored.element is not None
        return f"ARRAY<{type_name(stored.element)}>"
    if root is TypeRoot.MAP:
        assert stored.key is not None and stored.element is not None
        return f"MAP<{type_name(stored.key)},{type_name(stored.element)}>"
    if root is TypeRoot.ROW:
        fields = ",".join(f"{quote(f.name)}:{type_name(f.type)}" for f in stored.fields)
        return f"STRUCT<{fields}>"
    try:
        return _SAME_NAME[root]
    except KeyError:
        raise SinkTerminalError(f"no MaxCompute type for {source}", sink="maxcompute") from None


def quote(name: str) -> str:
    """A backquoted MaxCompute identifier (a backquote inside is doubled)."""
    if "\x00" in name:
        raise SinkTerminalError(f"identifier {name!r} contains a NUL character", sink="maxcompute")
    return "`" + name.replace("`", "``") + "`"


# ----------------------------------------------------------------------------------- reading back

# A reader of ferry's own: sqlglot has no MaxCompute dialect, and its Hive and Spark ones refuse
# interval_day_time, interval_year_month and void, and Hive's reads timestamp_ntz as TIMESTAMP.
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z_0-9]*|\d+|[(),<>:])")
_NAMED = {
    "boolean": t.BOOLEAN(),
    "tinyint": t.TINYINT(),
    "smallint": t.SMALLINT(),
    "int": t.INT(),
    "bigint": t.BIGINT(),
    "float": t.FLOAT(),
    "double": t.DOUBLE(),
    "string": t.STRING(),
    "json": t.STRING(),
    "binary": t.BYTES(),
    "date": t.DATE(),
    "datetime": t.TIMESTAMP(3),
    "timestamp": t.TIMESTAMP_LTZ(9),
    "timestamp_ntz": t.TIMESTAMP(9),
    "interval_day_time": t.STRING(),
    "interval_year_month": t.STRING(),
    "void": t.STRING(),
}


def from_type_name(text: str) -> DataType:
    """The ferry type of a MaxCompute type name as pyodps gives it (``decimal(10,2)``, ``array<int>``)."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != text.replace(" ", ""):
        raise SinkTerminalError(f"cannot read MaxCompute type {text!r}", sink="maxcompute")
    parsed, rest = _parse(tokens, text)
    if rest:
        raise SinkTerminalError(f"cannot read MaxCompute type {text!r}", sink="maxcompute")
    return parsed


def _parse(tokens: list[str], text: str) -> tuple[DataType, list[str]]:
    if not tokens:
        raise SinkTerminalError(f"MaxCompute type {text!r} ends too early", sink="maxcompute")
    head, rest = tokens[0].lower(), tokens[1:]
    if head in ("decimal", "varchar", "char"):
        args: list[int] = []
        if rest[:1] == ["("]:
            close = rest.index(")")
            args = [int(x) for x in rest[1:close] if x != ","]
            rest = rest[close + 1 :]
        if head == "decimal":
            return (t.DECIMAL(*args) if args else t.DECIMAL(MAX_PRECISION, MAX_SCALE)), rest
        if not args:
            return t.STRING(), rest
        return (t.VARCHAR(args[0]) if head == "varchar" else t.CHAR(args[0])), rest
    if head in ("array", "map", "struct"):
        if rest[:1] != ["<"]:
            raise SinkTerminalError(f"cannot read MaxCompute type {text!r}", sink="maxcompute")
        rest = rest[1:]
        if head == "array":
            element, rest = _parse(rest, text)
            return t.ARRAY(element), _expect(rest, ">", text)
        if head == "map":
            key, rest = _parse(rest, text)
            value, rest = _parse(_expect(rest, ",", text), text)
            return t.MAP(key, value), _expect(rest, ">", text)
        fields = []
        while True:
            name = rest[0][1:-1].replace("``", "`") if rest[0].startswith("`") else rest[0]
            field_type, rest = _parse(_expect(rest[1:], ":", text), text)
            fields.append(t.Field(name, field_type))
            if rest[:1] == [","]:
                rest = rest[1:]
                continue
            return t.ROW(*fields), _expect(rest, ">", text)
    if head in _NAMED:
        return _NAMED[head], rest
    raise SinkTerminalError(f"no ferry type for MaxCompute type {text!r}", sink="maxcompute")


def _expect(tokens: list[str], token: str, text: str) -> list[str]:
    if tokens[:1] != [token]:
        raise SinkTerminalError(f"cannot read MaxCompute type {text!r}", sink="maxcompute")
    return tokens[1:]
