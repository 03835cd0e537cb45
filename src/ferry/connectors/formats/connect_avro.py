"""Avro schemas written by Kafka Connect's Avro converters, read back as the Connect schemas they
encode, so that an Avro row gets exactly the ferry types and Python values that the same row gets
from the JSON converter (see :mod:`connect_types`).

Connect's ``AvroData`` writes a Connect schema as Avro with a few conventions:

* an optional value is a union of ``null`` and its type;
* ``connect.name`` carries the logical name (``io.debezium.time.Date``,
  ``org.apache.kafka.connect.data.Decimal`` ...), ``connect.parameters`` the parameters (a
  decimal's ``scale`` and ``connect.decimal.precision``), ``connect.type`` the integer width that
  Avro lacks (``int8``, ``int16``), ``connect.doc`` and ``connect.version`` the rest;
* Kafka Connect's own logical types also carry the Avro ``logicalType`` (``decimal``, ``date``,
  ``time-millis``, ``timestamp-millis``);
* a map whose keys are not text is an array of ``io.confluent.connect.avro.MapEntry`` records.

A schema written by another Avro producer has no ``connect.*`` properties: its Avro logical types
stand for the Connect types they are closest to (``timestamp-micros`` for Debezium's
``MicroTimestamp``, ``uuid`` for ``io.debezium.data.Uuid`` ...).

Values come from fastavro without its logical-type conversion (see :mod:`schema_registry`):
integers, text, floats and booleans are what the JSON converter gives too, so the converters of
:mod:`connect_types` apply to them unchanged; bytes, decimals and nested records are converted here.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.connect_types import (
    CONVERSION_ERRORS,
    ConnectField,
    ConversionError,
    connect_field,
)
from ferry.model import types as t
from ferry.model.defaults import default_text
from ferry.model.schema import Column

__all__ = ["AvroRow", "connect_schema"]

Convert = Callable[[Any], Any]
ConnectSchema = dict[str, Any]

_PRIMITIVES: dict[str, str] = {
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "bytes",
    "string": "string",
}
#: Avro logical types of producers other than Connect → the Connect logical name they stand for.
_AVRO_LOGICAL: dict[str, str] = {
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "time-micros": "io.debezium.time.MicroTime",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "local-timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "timestamp-micros": "io.debezium.time.MicroTimestamp",
    "local-timestamp-micros": "io.debezium.time.MicroTimestamp",
    "timestamp-nanos": "io.debezium.time.NanoTimestamp",
    "local-timestamp-nanos": "io.debezium.time.NanoTimestamp",
    "uuid": "io.debezium.data.Uuid",
}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_GEOMETRY_PREFIX = "io.debezium.data.geometry."
_MAP_ENTRY = "io.confluent.connect.avro.MapEntry"
#: The Connect schema given to unions of several types: their values become JSON text.
_UNION = "ferry.avro.Union"


class _Names:
    """Named Avro types seen so far (records, enums, fixed), by full name."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[dict[str, Any], str | None]] = {}

    def define(self, schema: dict[str, Any], namespace: str | None) -> str | None:
        """Record a named type; returns the namespace of the names inside it."""
        name = schema.get("name")
        if not isinstance(name, str):
            return namespace
        space = schema.get("namespace", namespace)
        full = name if "." in name or not space else f"{space}.{name}"
        inner = full.rsplit(".", 1)[0] if "." in full else None
        self.types[full] = (schema, inner)
        return inner

    def resolve(self, name: str, namespace: str | None) -> tuple[dict[str, Any], str | None]:
        """A named type and the namespace inside it, by full name or relative to ``namespace``."""
        found = self.types.get(name) or (self.types.get(f"{namespace}.{name}") if namespace else None)
        if found is None:
            raise DecodeError(f"unknown Avro type {name!r}")
        return found


# ------------------------------------------------------------------------ Avro → Connect schema


def connect_schema(avro: Any) -> ConnectSchema:
    """The Connect schema (in ``JsonConverter``'s form) that ``avro`` encodes."""
    return _Translator().connect(avro, None)[0]


class _Translator:
    """Walks an Avro schema once, resolving named types, into Connect schemas and Avro readers."""

    def __init__(self) -> None:
        self.names = _Names()

    def connect(self, avro: Any, namespace: str | None) -> tuple[ConnectSchema, Any, str | None]:
        """The Connect schema of ``avro``, the Avro type it stands for (named types resolved,
        ``null`` taken out of an optional union), and the namespace inside it."""
        if isinstance(avro, str):
            if avro in _PRIMITIVES:
                return {"type": _PRIMITIVES[avro], "optional": False}, avro, namespace
            if avro == "null":
                raise DecodeError("a field of type null has no values")
            resolved, inner = self.names.resolve(avro, namespace)
            return self.connect_named(resolved, inner, defined=True)
        if isinstance(avro, list):
            members = [m for m in avro if m != "null"]
            if len(members) == 1:
                schema, resolved, inner = self.connect(members[0], namespace)
                return {**schema, "optional": len(members) < len(avro)}, resolved, inner
            for member in members:
                self.connect(member, namespace)  # defines the named types the union holds
            return {"type": "string", "optional": "null" in avro, "name": _UNION}, avro, namespace
        if not isinstance(avro, dict):
            raise DecodeError(f"not an Avro schema: {avro!r}")
        return self.connect_named(avro, namespace, defined=False)

    def connect_named(
        self, avro: dict[str, Any], namespace: str | None, *, defined: bool
    ) -> tuple[ConnectSchema, Any, str | None]:
        kind = avro.get("type")
        if isinstance(kind, dict | list):
            return self.connect(kind, namespace)
        inner = namespace
        if kind in ("record", "error", "enum", "fixed") and not defined:
            inner = self.names.define(avro, namespace)
        schema: ConnectSchema = {"optional": False}
        name = avro.get("connect.name")
        logical = avro.get("logicalType")
        if kind in ("record", "error"):
            fields = avro.get("fields")
            if not isinstance(fields, list):
                raise DecodeError(f"the Avro record {avro.get('name')!r} has no fields")
            schema["type"] = "struct"
            schema["fields"] = []
            for f in fields:
                field_schema, _, _ = self.connect(f.get("type"), inner)
                schema["fields"].append({**field_schema, "field": f.get("name")})
        elif kind == "enum":
            schema["type"] = "string"
        elif kind == "fixed":
            schema["type"] = "bytes"
        elif kind == "array":
            items, items_avro, _ = self.connect(avro.get("items"), inner)
            entry = items_avro if isinstance(items_avro, dict) else {}
            if entry.get("type") == "record" and _is_map_entry(entry):
                keys, values = items["fields"][0], items["fields"][1]
                schema.update(type="map", keys=_bare(keys), values=_bare(values))
            else:
                schema.update(type="array", items=items)
        elif kind == "map":
            values, _, _ = self.connect(avro.get("values"), inner)
            schema.update(type="map", keys={"type": "string", "optional": False}, values=values)
        elif kind in _PRIMITIVES:
            schema["type"] = _PRIMITIVES[str(kind)]
            width = avro.get("connect.type")
            if kind == "int" and width in ("int8", "int16"):
                schema["type"] = width
        else:
            raise DecodeError(f"unknown Avro type {kind!r}")
        if isinstance(name, str):
            schema["name"] = name
            parameters = avro.get("connect.parameters")
            if isinstance(parameters, Mapping):
                schema["parameters"] = {str(k): str(v) for k, v in parameters.items()}
        elif logical == "decimal" and kind in ("bytes", "fixed"):
            schema["name"] = _DECIMAL
            schema["parameters"] = {
                "scale": str(avro.get("scale", 0)),
                "connect.decimal.precision": str(avro.get("precision", t.MAX_DECIMAL_PRECISION)),
            }
        elif isinstance(logical, str) and logical in _AVRO_LOGICAL:
            schema["name"] = _AVRO_LOGICAL[logical]
        if isinstance(avro.get("connect.version"), int):
            schema["version"] = avro["connect.version"]
        if isinstance(avro.get("connect.doc"), str):
            schema["doc"] = avro["connect.doc"]
        return schema, avro, inner

    # ----------------------------------------------------------------------------- readers

    def reader(
        self, avro: Any, schema: ConnectSchema, field: ConnectField, namespace: str | None
    ) -> Convert | None:
        """How a non-null Avro value of ``avro`` (resolved by :meth:`connect`) becomes the Python
        value the JSON converter gives; None when it already is."""
        name = schema.get("name")
        kind = avro.get("type") if isinstance(avro, dict) else avro
        if name == _UNION:
            return _union_text
        if kind in ("bytes", "fixed"):
            if name == _DECIMAL:
                convert = _unscaled_decimal(int(schema.get("parameters", {}).get("scale", 0)))
                return _as_text(convert) if field.data_type.root is t.STRING().root else convert
            return None
        if kind in ("record", "error"):
            if name == _VARIABLE_DECIMAL:
                return _variable_decimal
            if isinstance(name, str) and name.startswith(_GEOMETRY_PREFIX):
                return _json_text
            return AvroRow(avro, self, namespace).nested_reader()
        if kind == "array":
            if schema["type"] == "map":
                return self._map_entries(avro, schema, namespace)
            items_avro = avro["items"]
            items, resolved, inner = self.connect(items_avro, namespace)
            read = self.reader(resolved, items, connect_field(items), inner)
            return None if read is None else _each(read)
        if kind == "map":
            values, resolved, inner = self.connect(avro["values"], namespace)
            read = self.reader(resolved, values, connect_field(values), inner)
            return None if read is None else _each_value(read)
        return field.convert

    def _map_entries(self, avro: dict[str, Any], schema: ConnectSchema, namespace: str | None) -> Convert:
        _, entry, inner = self.connect(avro["items"], namespace)
        readers = []
        for f in entry["fields"][:2]:
            connect, resolved, deeper = self.connect(f["type"], inner)
            readers.append(self.reader(resolved, connect, connect_field(connect), deeper))
        read_key, read_value = (r or _same for r in readers)

        def convert(value: list[dict[str, Any]]) -> dict[Any, Any]:
            return {
                None if e["key"] is None else read_key(e["key"]): (
                    None if e["value"] is None else read_value(e["value"])
                )
                for e in value
            }

        return convert


def _is_map_entry(record: dict[str, Any]) -> bool:
    fields = record.get("fields")
    names = [f.get("name") for f in fields] if isinstance(fields, list) else []
    full = record.get("connect.name") or f"{record.get('namespace', '')}.{record.get('name')}"
    return names == ["key", "value"] and full == _MAP_ENTRY


def _bare(field: dict[str, Any]) -> ConnectSchema:
    return {k: v for k, v in field.items() if k != "field"}


# ----------------------------------------------------------------------------------------- rows


class AvroRow:
    """The columns of one Avro record schema, and the conversion of its decoded rows in place."""

    __slots__ = ("_converts", "_readers", "columns", "names")

    def __init__(
        self,
        avro: dict[str, Any],
        translator: _Translator | None = None,
        namespace: str | None = None,
        *,
        referenced: Sequence[Any] = (),
    ) -> None:
        """``referenced``: the schemas that define the named types ``avro`` refers to (schema
        references), theirs first."""
        if translator is None:
            translator = _Translator()
            for schema in referenced:
                translator.connect(schema, None)  # defines its named types
            namespace = translator.names.define(avro, namespace)
        fields = avro.get("fields")
        if avro.get("type") not in ("record", "error") or not isinstance(fields, list):
            raise DecodeError("the row schema is not an Avro record")
        columns: list[Column] = []
        readers: dict[str, Convert | None] = {}
        for f in fields:
            name = f.get("name") if isinstance(f, dict) else None
            if not isinstance(name, str):
                raise DecodeError(f"an Avro record field needs a name, got {f!r}")
            if name in readers:
                raise DecodeError(f"field {name!r} is declared twice")
            try:
                schema, resolved, inner = translator.connect(f.get("type"), namespace)
                field = connect_field(schema)
                read = translator.reader(resolved, schema, field, inner)
            except DecodeError as e:
                raise DecodeError(f"field {name!r}: {e.reason}") from None
            readers[name] = read
            doc = f.get("doc") if schema.get("name") is None else None
            comment = doc if isinstance(doc, str) else None
            columns.append(Column(name, field.data_type, comment, _default_text(f, resolved, read)))
        self.columns = tuple(columns)
        self.names = frozenset(readers)
        self._readers = readers
        self._converts = tuple((n, r) for n, r in readers.items() if r is not None)

    def convert(self, row: dict[str, Any]) -> None:
        """Turn the Avro values of ``row`` into the JSON decoder's Python values, in place."""
        name = ""
        try:
            for name, convert in self._converts:
                value = row[name]
                if value is not None:
                    row[name] = convert(value)
        except ConversionError as e:
            raise e.within(name) from None
        except CONVERSION_ERRORS as e:
            raise ConversionError(name, f"cannot be converted: {type(e).__name__}: {e}") from None

    def convert_present(self, row: dict[str, Any]) -> None:
        """Convert the fields ``row`` has (a key's fields), by this schema's field names."""
        for name, value in row.items():
            if name not in self._readers:
                raise ConversionError(name, "is not in the record's schema")
            convert = self._readers[name]
            if convert is not None and value is not None:
                try:
                    row[name] = convert(value)
                except CONVERSION_ERRORS as e:
                    raise ConversionError(name, f"cannot be converted: {type(e).__name__}: {e}") from None

    def nested_reader(self) -> Convert | None:
        if not self._converts:
            return None

        def read(value: dict[str, Any]) -> dict[str, Any]:
            self.convert(value)
            return value

        return read


def _default_text(field: dict[str, Any], avro: Any, read: Convert | None) -> str | None:
    """The column default as text, from the Avro field's default (the Connect default)."""
    default = field.get("default")
    if default is None:
        return None
    kind = avro.get("type") if isinstance(avro, dict) else avro
    try:
        if kind in ("bytes", "fixed") and isinstance(default, str):
            default = default.encode("latin-1")  # Avro writes bytes defaults as code points 0-255
        value = default if read is None else read(default)
    except (*CONVERSION_ERRORS, DecodeError):
        return None
    return default_text(value)


# ----------------------------------------------------------------------------------- converters


def _same(value: Any) -> Any:
    return value


def _unscaled_decimal(scale: int) -> Convert:
    def convert(value: bytes) -> Decimal:
        unscaled = int.from_bytes(value, "big", signed=True)
        return Decimal(f"{unscaled}E-{scale}") if scale else Decimal(unscaled)

    return convert


def _as_text(convert: Convert) -> Convert:
    def text(value: Any) -> str:
        return format(convert(value), "f")

    return text


def _variable_decimal(value: dict[str, Any]) -> Decimal:
    scale = value["scale"]
    unscaled = int.from_bytes(value["value"], "big", signed=True)
    return Decimal(f"{unscaled}E{-scale:+d}")


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return binascii.b2a_base64(value, newline=False).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json_text(value: Any) -> str:
    """JSON text of a value, its bytes in base64 (as the JSON converter writes them)."""
    return orjson.dumps(value, default=_json_default).decode()


def _union_text(value: Any) -> str:
    return value if isinstance(value, str) else _json_text(value)


def _each(read: Convert) -> Convert:
    def convert(value: list[Any]) -> list[Any]:
        return [None if v is None else read(v) for v in value]

    return convert


def _each_value(read: Convert) -> Convert:
    def convert(value: dict[str, Any]) -> dict[str, Any]:
        return {k: None if v is None else read(v) for k, v in value.items()}

    return convert
