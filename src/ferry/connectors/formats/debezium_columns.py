"""Debezium's column values read as the table's DDL declares the columns.

Two things come together here, for a table whose definition the schema-change topic gave (see
:mod:`~ferry.connectors.formats.definitions`):

* :func:`refine`: what a column's Connect type (from the record's schema envelope) becomes with the
  DDL's type beside it. The DDL is the source's own type, so it wins where it only says more
  (``VARCHAR(255)`` for a Connect ``string``, ``TINYINT`` for an ``int16``, ``TIMESTAMP(0)`` for a
  ``DATETIME`` sent as milliseconds) and where the connector's settings lost it:
  ``decimal.handling.mode=string`` (text → ``Decimal``), ``double`` (a double → ``Decimal``
  quantized to the column's scale, exact up to 15 significant digits) and
  ``bigint.unsigned.handling.mode=long`` (an ``int64`` → ``DECIMAL(20, 0)``, unwrapped). ``TINYINT(1)``
  (``BOOLEAN`` in ferry, an ``int16`` in Debezium) takes 0 and 1 only; spatial columns become
  MySQL's internal form (a 4-byte little-endian SRID, then the WKB). Where the two disagree on the
  kind of value (a column whose type changed while the DDL was read ahead of its rows) the
  record's own type is kept.

* :class:`PayloadRows`: rows without the envelope (``schemas.enable=false``). Each value's Connect
  representation is what Debezium's MySQL connector writes for the declared type, told from the
  JSON value: a JSON string in a ``DECIMAL`` column is base64 (``precise``) or decimal text
  (``string``), a JSON float is ``double`` mode, a JSON integer is a decimal written as a number
  (``JsonConverter``'s ``decimal.format=NUMERIC``) or, in a ``DECIMAL(20, 0)`` (``BIGINT
  UNSIGNED``), ``bigint.unsigned.handling.mode=long``, whose values above 2^63 - 1 come wrapped to
  negative numbers and are unwrapped (in both shapes). The
  value then goes through the same :func:`refine`, so a row decodes to the same values, and its
  table to the same schema, with the envelope or without it.

What a JSON value cannot tell, and is taken as the connector's defaults say
(``time.precision.mode=adaptive_time_microseconds``):

* ``TIME`` is microseconds (``adaptive`` with ``TIME(0..3)`` and ``connect`` send milliseconds);
* ``DATETIME(4..6)`` is microseconds (``connect`` sends milliseconds); ``DATETIME(0..3)`` is
  milliseconds in every mode;
* an all-digit ``DECIMAL(p, 0)`` text whose length is a multiple of 4 reads both as base64 and as
  decimal text: the reading that fits the column's precision wins, then the mode the table's
  other decimal values showed, then decimal text (base64 that is all digits is always a
  negative number of at least 6 digits per 4 characters);
* a ``DECIMAL`` wider than 38 digits is ``STRING`` in ferry and its scale is not in the
  definition: base64 text stays as it came (a JSON number becomes its text);
* a negative JSON integer in a ``DECIMAL(20, 0)`` is taken as a wrapped ``BIGINT UNSIGNED``
  (``bigint.unsigned.handling.mode=long``), not as a signed ``DECIMAL(20, 0)`` written with
  ``decimal.format=NUMERIC``: ferry's types do not tell the two columns apart.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from functools import lru_cache
from typing import Any

import orjson

from ferry.connectors.formats.connect_types import (
    CONVERSION_ERRORS,
    ConnectField,
    ConversionError,
    connect_field,
)
from ferry.model import types as t
from ferry.model.schema import Column, Schema
from ferry.model.types import DataType, TypeRoot

Convert = Callable[[Any], Any]
Row = dict[str, Any]

_DECIMAL_CONTEXT = Context(prec=2 * t.MAX_DECIMAL_PRECISION)
_GEOMETRY = "io.debezium.data.geometry."
_FAMILIES = (t.INTEGERS, t.FLOATS, t.BINARIES, t.CHARACTER)
_CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
#: What ferry makes of MySQL's ``BIGINT UNSIGNED`` (and ``SERIAL``).
_BIGINT_UNSIGNED = t.DECIMAL(20, 0)


# ----------------------------------------------------------------------------------- refinement


@dataclass(frozen=True, slots=True)
class Refinement:
    """A column's type with the DDL beside it, and how its Connect value becomes that type's."""

    data_type: DataType
    convert: Convert | None
    """Applied to the value the Connect type gave (never to ``None``); ``None`` when unchanged."""
    declared: bool
    """Whether ``data_type`` is the DDL's (else it is the record's own)."""


def refine(connect: ConnectField, declared: DataType) -> Refinement:
    """What a column of Connect type ``connect`` is when the DDL declares it ``declared``."""
    have, want = connect.data_type.root, declared.root
    convert: Convert | None = None
    if have is want or any(have in family and want in family for family in _FAMILIES):
        pass  # the DDL only says more (a width, a length, a precision)
    elif have in t.INTEGERS and want is TypeRoot.BOOLEAN:
        convert = _boolean
    elif want is TypeRoot.DECIMAL and have in t.INTEGERS:
        convert = _unsigned_bigint if declared.same_ignoring_nullability(_BIGINT_UNSIGNED) else Decimal
    elif want is TypeRoot.DECIMAL and have in t.FLOATS:
        convert = _quantizer(declared.scale or 0)
    elif want is TypeRoot.DECIMAL and have in t.CHARACTER:
        convert = _decimal_text
    elif want in t.BINARIES and have in t.CHARACTER and connect.label.startswith(_GEOMETRY):
        convert = _geometry_bytes
    else:
        return Refinement(connect.data_type, None, False)
    return Refinement(declared, convert, True)


def _boolean(value: int) -> bool:
    if value in (0, 1):
        return bool(value)
    raise ValueError("a TINYINT(1) (BOOLEAN) value other than 0 and 1")


def _unsigned_bigint(value: int) -> Decimal:
    # bigint.unsigned.handling.mode=long: values above 2^63 - 1 arrive wrapped, as negative longs
    return Decimal(value + (1 << 64) if value < 0 else value)


def _quantizer(scale: int) -> Convert:
    exponent = Decimal(1).scaleb(-scale)

    def quantize(value: float) -> Decimal:
        result = Decimal(repr(value))
        if not result.is_finite():
            raise ValueError("not a finite number")
        return result.quantize(exponent, context=_DECIMAL_CONTEXT)

    return quantize


def _decimal_text(value: str) -> Decimal:
    result = Decimal(value)
    if not result.is_finite():
        raise ValueError("not a finite number")
    return result


def _geometry_bytes(value: str) -> bytes:
    shape = orjson.loads(value)
    srid = shape.get("srid") or 0
    return int(srid).to_bytes(4, "little") + binascii.a2b_base64(shape["wkb"], strict_mode=True)


def refined_schema(definition: Schema, types: dict[str, DataType], keys: tuple[str, ...]) -> Schema:
    """The definition with the column types ``types`` and the record key's columns (else the
    DDL's primary key) as primary key."""
    columns = tuple(
        Column(c.name, types.get(c.name, c.type), c.comment, c.default) for c in definition.columns
    )
    names = {c.name for c in columns}
    primary = tuple(k for k in keys if k in names) or definition.primary_keys
    return Schema(columns, primary, definition.partition_keys, definition.comment)


# ---------------------------------------------------------------------------- with the envelope


@dataclass(frozen=True, slots=True)
class EnvelopeRefinement:
    """The columns of an envelope's row schema that the DDL refines, once per schema and table."""

    definition: Schema
    types: dict[str, DataType]
    converts: tuple[tuple[str, Convert], ...]

    @classmethod
    def of(cls, fields: dict[str, ConnectField], definition: Schema) -> EnvelopeRefinement:
        types: dict[str, DataType] = {}
        converts: list[tuple[str, Convert]] = []
        for column in definition.columns:
            refinement = refine(fields[column.name], column.type)
            types[column.name] = refinement.data_type
            if refinement.convert is not None:
                converts.append((column.name, refinement.convert))
        return cls(definition, types, tuple(converts))

    def apply(self, row: Row) -> None:
        """Refine a row the envelope's converter already converted, in place."""
        name = ""
        try:
            for name, convert in self.converts:
                value = row.get(name)
                if value is not None:
                    row[name] = convert(value)
        except CONVERSION_ERRORS as e:
            raise _error(name, row.get(name), self.types[name], e) from None

    def schema(self, keys: tuple[str, ...]) -> Schema:
        return refined_schema(self.definition, self.types, keys)


# ------------------------------------------------------------------------- without the envelope


_DECIMAL_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_NUMBER = {int: "a JSON integer", float: "a JSON number", str: "a JSON string", bool: "a JSON boolean"}


class PayloadRows:
    """Reads the payload-only rows of one table whose definition is known (see the module).

    One per (table, partition, set of columns): it remembers which decimal mode the rows showed.
    """

    __slots__ = ("_columns", "_decimal_text", "definition", "types")

    def __init__(self, definition: Schema) -> None:
        self.definition = definition
        self.types = {c.name: c.type for c in definition.columns}
        self._columns: dict[str, dict[type, Convert]] = {c.name: {} for c in definition.columns}
        self._decimal_text: bool | None = None

    def schema(self, keys: tuple[str, ...]) -> Schema:
        return refined_schema(self.definition, self.types, keys)

    def convert(self, row: Row) -> None:
        """Convert a row in place; raises :class:`ConversionError` naming the first bad field."""
        columns = self._columns
        if len(row) != len(columns) or any(name not in columns for name in row):
            self._complete(row)
        for name, readers in columns.items():
            value = row[name]
            if value is None:
                if not self.types[name].nullable:
                    raise ConversionError(name, "is null but the table's DDL says it is NOT NULL")
                continue
            reader = readers.get(type(value))
            if reader is None:
                reader = readers[type(value)] = self._reader(name, type(value))
            try:
                row[name] = reader(value)
            except ConversionError:
                raise
            except CONVERSION_ERRORS as e:
                raise _error(name, value, self.types[name], e) from None

    def convert_present(self, row: Row) -> None:
        """Convert the fields ``row`` has (a key's), without requiring the others."""
        for name, value in row.items():
            readers = self._columns.get(name)
            if readers is None:
                raise ConversionError(name, "is not a column in the table's DDL")
            if value is None:
                continue
            reader = readers.get(type(value)) or self._reader(name, type(value))
            try:
                row[name] = reader(value)
            except CONVERSION_ERRORS as e:
                raise _error(name, value, self.types[name], e) from None

    def _complete(self, row: Row) -> None:
        for name in row:
            if name not in self._columns:
                raise ConversionError(name, "is not a column in the table's DDL")
        for name in self._columns:
            row.setdefault(name, None)

    def _reader(self, name: str, kind: type) -> Convert:
        declared = self.types[name]
        if kind is str and declared.root is TypeRoot.DECIMAL:
            return self._decimal_reader(declared)
        connect = _representation(declared.with_nullable(True), kind, text=False)
        refinement = refine(connect, declared) if connect is not None else None
        if connect is None or refinement is None or not refinement.declared:
            what = _NUMBER.get(kind, "a JSON object" if kind is dict else "a JSON array")
            raise ConversionError(name, f"is {what} but the table's DDL says {declared}")
        return _chain(connect, refinement.convert)

    def _decimal_reader(self, declared: DataType) -> Convert:
        precision, scale = declared.precision or t.MAX_DECIMAL_PRECISION, declared.scale or 0
        from_text = _chain(_representation(declared, str, text=True), _decimal_text)
        from_base64 = _chain(_representation(declared, str, text=False), None)

        def read(value: str) -> Decimal:
            as_text = _DECIMAL_TEXT.fullmatch(value) is not None
            as_base64 = len(value) % 4 == 0 and _BASE64.fullmatch(value) is not None
            if as_text and as_base64:
                # all digits: Debezium's text of a column with a scale has a point, and the two
                # readings rarely both fit the precision
                text_fits = scale == 0 and len(value.lstrip("0")) <= precision
                base64_fits = _fits(from_base64(value), precision)
                if base64_fits and (not text_fits or self._decimal_text is False):
                    as_text = False
                else:
                    as_base64 = False
            elif as_text or as_base64:
                self._decimal_text = as_text
            if as_base64:
                result: Decimal = from_base64(value)
                return result
            if as_text:
                result = from_text(value)
                return result
            raise ValueError("neither base64 (decimal.handling.mode=precise) nor decimal text")

        return read


def _fits(value: Decimal, precision: int) -> bool:
    return len(value.as_tuple().digits) <= precision


def _chain(connect: ConnectField | None, then: Convert | None) -> Convert:
    assert connect is not None
    read = connect.read
    if then is None:
        return read
    after = then

    def convert(value: Any) -> Any:
        return after(read(value))

    return convert


@lru_cache(maxsize=1024)
def _representation(declared: DataType, kind: type, *, text: bool) -> ConnectField | None:
    """The Connect field Debezium's MySQL connector writes, as ``kind``, for a ``declared`` column."""
    schema = _connect_schema(declared, kind, text)
    return None if schema is None else connect_field({**schema, "optional": True})


def _connect_schema(declared: DataType, kind: type, text: bool) -> dict[str, Any] | None:
    root = declared.root
    if root is TypeRoot.DECIMAL:
        if kind is float or (kind is str and text):
            return {"type": "float64" if kind is float else "string"}
        if kind is int and declared.same_ignoring_nullability(_BIGINT_UNSIGNED):
            return {"type": "int64"}  # bigint.unsigned.handling.mode=long
        if kind is str or kind is int:
            parameters = {"scale": str(declared.scale or 0)}
            if declared.precision is not None:
                parameters["connect.decimal.precision"] = str(declared.precision)
            return {"type": "bytes", "name": _CONNECT_DECIMAL, "parameters": parameters}
        return None
    if root is TypeRoot.STRING and (kind is int or kind is float):
        # a DECIMAL wider than 38 digits (STRING in ferry) written as a number: its text
        parameters = {"scale": "0", "connect.decimal.precision": str(2 * t.MAX_DECIMAL_PRECISION)}
        return {"type": "bytes", "name": _CONNECT_DECIMAL, "parameters": parameters}
    if kind is bool:
        return {"type": "boolean"} if root is TypeRoot.BOOLEAN else None
    if kind is int:
        return _INTEGER_SCHEMAS.get(root) or _temporal_schema(declared)
    if kind is float:
        return {"type": "float64"} if root in t.FLOATS else None
    if kind is str:
        if root in t.CHARACTER:
            return {"type": "string"}
        if root in t.BINARIES:
            return {"type": "bytes"}
        if root in t.FLOATS:
            return {"type": "float64"}  # "NaN", "Infinity"
        if root is TypeRoot.TIMESTAMP_LTZ:
            return {"type": "string", "name": "io.debezium.time.ZonedTimestamp"}
        return None
    if kind is dict and root in t.BINARIES:
        return {"type": "struct", "name": "io.debezium.data.geometry.Geometry", "fields": []}
    return None


_INTEGER_SCHEMAS: dict[TypeRoot, dict[str, Any]] = {
    TypeRoot.BOOLEAN: {"type": "int16"},
    TypeRoot.TINYINT: {"type": "int16"},
    TypeRoot.SMALLINT: {"type": "int16"},
    TypeRoot.INT: {"type": "int32"},
    TypeRoot.BIGINT: {"type": "int64"},
    TypeRoot.FLOAT: {"type": "float64"},
    TypeRoot.DOUBLE: {"type": "float64"},
    TypeRoot.DATE: {"type": "int32", "name": "io.debezium.time.Date"},
    TypeRoot.TIME: {"type": "int64", "name": "io.debezium.time.MicroTime"},
}


def _temporal_schema(declared: DataType) -> dict[str, Any] | None:
    if declared.root is not TypeRoot.TIMESTAMP:
        return None
    if (declared.precision or 0) <= 3:
        return {"type": "int64", "name": "io.debezium.time.Timestamp"}
    return {"type": "int64", "name": "io.debezium.time.MicroTimestamp"}


def _error(name: str, value: Any, declared: DataType, cause: Exception) -> ConversionError:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    detail = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    return ConversionError(name, f"is not a valid {declared}: {text} ({detail})")
