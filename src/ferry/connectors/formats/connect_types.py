"""Kafka Connect schemas (as ``JsonConverter`` writes them) to ferry types, and their JSON values to
Python values.

A Connect schema is a JSON object ``{"type": "int32", "optional": false, "name": ..., "parameters":
...}``; structs list ``fields``, arrays have ``items``, maps ``keys`` and ``values``. Logical types
(``name``) refine the physical type: Kafka Connect's ``Decimal``/``Date``/``Time``/``Timestamp``,
and Debezium's ``io.debezium.time.*`` and ``io.debezium.data.*``.

:class:`RowConverter` is built once per distinct struct schema and then applied to every row that
schema describes: it checks each value against its declared type and converts, in place, only the
columns whose JSON form is not already the Python value (base64 bytes, decimals, epoch days ...).
"""

from __future__ import annotations

import binascii
import decimal
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy
import orjson

from ferry.connectors.exceptions import DecodeError
from ferry.model import types as t
from ferry.model.defaults import default_text
from ferry.model.schema import Column
from ferry.model.types import DataType, Field

Convert = Callable[[Any], Any]
ConnectSchema = Mapping[str, Any]

_EPOCH = datetime(1970, 1, 1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
#: Scales a decimal without rounding it, whatever its number of digits.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
#: An unscaled integer and an exponent → the exact decimal (the context's method takes the integer
#: as it is: no Decimal made first, a quarter faster than ``Decimal(unscaled).scaleb(...)``).
_scaleb = _EXACT.scaleb
#: Errors a value converter raises for a value that does not fit its type.
CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, KeyError, IndexError, AttributeError)


class ConversionError(DecodeError):
    """A value contradicts the schema that the record itself declares."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"field {field!r} {detail}")
        self.field = field
        self.detail = detail

    def within(self, parent: str) -> ConversionError:
        return ConversionError(f"{parent}.{self.field}", self.detail)


@dataclass(frozen=True, slots=True)
class ConnectField:
    """How one Connect-typed value maps to ferry: its type, and how to read it."""

    data_type: DataType
    label: str
    """The declared type, for messages: ``INT32``, or a logical name."""
    python_type: type | None
    """The Python type of values that need no conversion; ``None`` when ``convert`` is needed."""
    convert: Convert | None

    def read(self, value: Any) -> Any:
        """The Python value of one JSON value (``None`` stays ``None``)."""
        if value is None:
            return None
        if self.convert is not None:
            return self.convert(value)
        return _check(self, value)


# --------------------------------------------------------------------------------- type mapping


def connect_field(schema: ConnectSchema) -> ConnectField:
    """The ferry type and reader for a Connect schema; raises :class:`DecodeError` if it is invalid."""
    if not isinstance(schema, Mapping):
        raise DecodeError(f"a Connect schema is a JSON object, got {schema!r}")
    kind = schema.get("type")
    name = schema.get("name")
    nullable = bool(schema.get("optional", False))
    if isinstance(name, str):
        logical = _LOGICAL.get(name)
        if logical is not None:
            field = logical(schema)
            return _nullable(field, nullable)
        if name.startswith("io.debezium.data.geometry."):
            return _nullable(ConnectField(t.STRING(), name, None, _json_text), nullable)
    if not isinstance(kind, str):
        raise DecodeError(f"a Connect schema needs a 'type', got {_short(schema)}")
    kind = kind.lower()
    source_type = _source_decimal(schema) if kind == "string" else None
    if source_type is not None:
        return _nullable(source_type, nullable)
    simple = _PHYSICAL.get(kind)
    if simple is not None:
        data_type, python_type = simple
        return _nullable(ConnectField(data_type, kind.upper(), python_type, None), nullable)
    if kind == "bytes":
        return _nullable(ConnectField(t.BYTES(), "BYTES", None, _base64), nullable)
    if kind == "struct":
        row = RowConverter(schema)
        data_type = t.ROW(*(Field(c.name, c.type) for c in row.columns))
        return _nullable(ConnectField(data_type, "STRUCT", None, row.nested), nullable)
    if kind == "array":
        items = connect_field(schema.get("items") or {})
        convert = None if items.convert is None else _array_converter(items)
        return _nullable(
            ConnectField(t.ARRAY(items.data_type), "ARRAY", list if convert is None else None, convert),
            nullable,
        )
    if kind == "map":
        keys = connect_field(schema.get("keys") or {})
        values = connect_field(schema.get("values") or {})
        data_type = t.MAP(keys.data_type, values.data_type)
        return _nullable(ConnectField(data_type, "MAP", None, _map_converter(keys, values)), nullable)
    raise DecodeError(f"unknown Connect type {kind!r}")


def connect_data_type(schema: ConnectSchema) -> DataType:
    return connect_field(schema).data_type


_PHYSICAL: dict[str, tuple[DataType, type]] = {
    "int8": (t.TINYINT(), int),
    "int16": (t.SMALLINT(), int),
    "int32": (t.INT(), int),
    "int64": (t.BIGINT(), int),
    "float32": (t.FLOAT(), float),
    "float": (t.FLOAT(), float),
    "float64": (t.DOUBLE(), float),
    "double": (t.DOUBLE(), float),
    "boolean": (t.BOOLEAN(), bool),
    "string": (t.STRING(), str),
}


def _nullable(field: ConnectField, nullable: bool) -> ConnectField:
    if field.data_type.nullable is nullable:
        return field
    return ConnectField(
        field.data_type.with_nullable(nullable), field.label, field.python_type, field.convert
    )


def _parameter(schema: ConnectSchema, key: str) -> str | None:
    parameters = schema.get("parameters")
    if isinstance(parameters, Mapping):
        value = parameters.get(key)
        return None if value is None else str(value)
    return None


def _int_parameter(schema: ConnectSchema, key: str) -> int | None:
    value = _parameter(schema, key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise DecodeError(f"parameter {key!r} of {schema.get('name')} is not a number: {value!r}") from None


def _decimal(schema: ConnectSchema) -> ConnectField:
    name = str(schema.get("name"))
    scale = _int_parameter(schema, "scale") or 0
    precision = _int_parameter(schema, "connect.decimal.precision")
    precision = t.MAX_DECIMAL_PRECISION if precision is None else precision
    if scale > precision:
        raise DecodeError(f"{name} declares scale {scale} greater than precision {precision}")
    from_bytes = str(schema.get("type", "bytes")).lower() == "bytes"
    convert = _decimal_converter(scale, from_bytes)
    if precision > t.MAX_DECIMAL_PRECISION:
        return ConnectField(t.STRING(), name, None, _as_text(convert))
    return ConnectField(t.DECIMAL(precision, scale), name, None, convert)


def _source_decimal(schema: ConnectSchema) -> ConnectField | None:
    """A decimal sent as text (``decimal.handling.mode=string``) when the schema carries the source
    column type (``column.propagate.source.type``)."""
    source = _parameter(schema, "__debezium.source.column.type")
    if source is None or source.split()[0].upper() not in ("DECIMAL", "NUMERIC", "FIXED", "DEC"):
        return None
    precision = _int_parameter(schema, "__debezium.source.column.length")
    scale = _int_parameter(schema, "__debezium.source.column.scale") or 0
    if precision is None or precision > t.MAX_DECIMAL_PRECISION or scale > precision:
        return None
    return ConnectField(t.DECIMAL(precision, scale), f"{source} text", None, _decimal_text)


def _variable_scale_decimal(schema: ConnectSchema) -> ConnectField:
    return ConnectField(
        t.DECIMAL(t.MAX_DECIMAL_PRECISION, 18), str(schema.get("name")), None, _variable_decimal
    )


def _bits(schema: ConnectSchema) -> ConnectField:
    length = _int_parameter(schema, "length")
    data_type = t.BINARY((length + 7) // 8) if length else t.BYTES()
    return ConnectField(data_type, "io.debezium.data.Bits", None, _base64)


def _fixed(
    data_type: DataType, convert: Convert | None, python_type: type | None = None
) -> Callable[[ConnectSchema], ConnectField]:
    def build(schema: ConnectSchema) -> ConnectField:
        return ConnectField(data_type, str(schema.get("name")), python_type, convert)

    return build


# ----------------------------------------------------------------------------------- converters


def _check(field: ConnectField, value: Any) -> Any:
    if type(value) is field.python_type:
        return value
    if field.python_type is float and type(value) is int:
        return float(value)
    if field.python_type is float and value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    raise TypeError(f"expected {field.label}")


def _base64(value: str) -> bytes:
    return binascii.a2b_base64(value, strict_mode=True)


#: Bytes decimals' readers → their scale (the readers are closures, made per scale).
_BYTES_DECIMAL_SCALES: weakref.WeakKeyDictionary[Convert, int] = weakref.WeakKeyDictionary()


def _decimal_converter(scale: int, from_bytes: bool) -> Convert:
    def convert(value: Any) -> Decimal:
        kind = type(value)
        if kind is str:
            if not from_bytes:
                return _decimal_text(value)
            unscaled = int.from_bytes(binascii.a2b_base64(value, strict_mode=True), "big", signed=True)
            return _scaleb(unscaled, -scale) if scale else Decimal(unscaled)
        if kind is int or kind is float:
            # Decimals written as JSON numbers (Flink CDC's and Debezium's numeric decimal format).
            return _decimal_text(repr(value))
        raise TypeError("expected base64 text or a number")

    if from_bytes:
        _BYTES_DECIMAL_SCALES[convert] = scale
    return convert


def _decimal_text(value: str) -> Decimal:
    if type(value) is not str:
        raise TypeError("expected text")
    result = Decimal(value)
    if not result.is_finite():
        raise ValueError("not a finite number")
    return result


def _variable_decimal(value: Mapping[str, Any]) -> Decimal:
    scale = value["scale"]
    unscaled = int.from_bytes(binascii.a2b_base64(value["value"], strict_mode=True), "big", signed=True)
    if type(scale) is not int:
        raise TypeError("scale is not a number")
    return Decimal(f"{unscaled}E{-scale:+d}")


def _as_text(convert: Convert) -> Convert:
    def text(value: Any) -> str:
        return format(convert(value), "f")

    return text


def _days(value: int) -> date:
    if type(value) is not int:
        raise TypeError("expected a number of days")
    return date.fromordinal(_EPOCH_ORDINAL + value)


def _time_of(micros: int) -> time:
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return time(hour, minute, second, micro)


def _millis_time(value: int) -> time:
    if type(value) is not int:
        raise TypeError("expected milliseconds")
    return _time_of(value * 1000)


def _micros_time(value: int) -> time:
    if type(value) is not int:
        raise TypeError("expected microseconds")
    return _time_of(value)


def _nanos_time(value: int) -> time:
    if type(value) is not int:
        raise TypeError("expected nanoseconds")
    return _time_of(value // 1000)


def _millis_timestamp(value: int) -> datetime:
    if type(value) is not int:
        raise TypeError("expected milliseconds")
    return _EPOCH + timedelta(0, 0, 0, value)  # positional: days, seconds, µs, ms


def _micros_timestamp(value: int) -> datetime:
    if type(value) is not int:
        raise TypeError("expected microseconds")
    return _EPOCH + timedelta(0, 0, value)


def _nanos_timestamp(value: int) -> datetime:
    if type(value) is not int:
        raise TypeError("expected nanoseconds")
    return _EPOCH + timedelta(0, 0, value // 1000)


def _zoned_timestamp(value: str) -> datetime:
    result = datetime.fromisoformat(value)
    if result.tzinfo is None:
        raise ValueError("no time zone")
    return result.astimezone(UTC)


def _iso_date(value: str) -> date:
    return date.fromisoformat(value)


def _iso_time(value: str) -> time:
    return time.fromisoformat(value.removesuffix("Z"))


def _text(value: str) -> str:
    if type(value) is not str:
        raise TypeError("expected text")
    return value


def _json_text(value: Any) -> str:
    if type(value) is str:
        return value
    return orjson.dumps(value).decode()


def _array_converter(items: ConnectField) -> Convert:
    read = items.read

    def convert(value: list[Any]) -> list[Any]:
        if type(value) is not list:
            raise TypeError("expected an array")
        return [read(v) for v in value]

    return convert


def _map_converter(keys: ConnectField, values: ConnectField) -> Convert:
    read_key, read_value = keys.read, values.read

    def convert(value: Any) -> dict[Any, Any]:
        if type(value) is dict:
            if keys.python_type is str and values.convert is None and values.python_type is None:
                return value
            return {read_key(k): read_value(v) for k, v in value.items()}
        if type(value) is list:
            # JsonConverter writes maps with non-text keys as [[key, value], ...].
            return {read_key(k): read_value(v) for k, v in value}
        raise TypeError("expected a map")

    return convert


_LOGICAL: dict[str, Callable[[ConnectSchema], ConnectField]] = {
    "org.apache.kafka.connect.data.Decimal": _decimal,
    "org.apache.kafka.connect.data.Date": _fixed(t.DATE(), _days),
    "org.apache.kafka.connect.data.Time": _fixed(t.TIME(3), _millis_time),
    "org.apache.kafka.connect.data.Timestamp": _fixed(t.TIMESTAMP(3), _millis_timestamp),
    "io.debezium.time.Date": _fixed(t.DATE(), _days),
    "io.debezium.time.Time": _fixed(t.TIME(3), _millis_time),
    "io.debezium.time.MicroTime": _fixed(t.TIME(6), _micros_time),
    "io.debezium.time.NanoTime": _fixed(t.TIME(9), _nanos_time),
    "io.debezium.time.Timestamp": _fixed(t.TIMESTAMP(3), _millis_timestamp),
    "io.debezium.time.MicroTimestamp": _fixed(t.TIMESTAMP(6), _micros_timestamp),
    "io.debezium.time.NanoTimestamp": _fixed(t.TIMESTAMP(9), _nanos_timestamp),
    "io.debezium.time.ZonedTimestamp": _fixed(t.TIMESTAMP_LTZ(6), _zoned_timestamp),
    "io.debezium.time.ZonedTime": _fixed(t.STRING(), None, str),
    "io.debezium.time.IsoDate": _fixed(t.DATE(), _iso_date),
    "io.debezium.time.IsoTime": _fixed(t.TIME(6), _iso_time),
    "io.debezium.time.IsoTimestamp": _fixed(t.TIMESTAMP_LTZ(6), _zoned_timestamp),
    "io.debezium.time.Year": _fixed(t.INT(), None, int),
    "io.debezium.time.MicroDuration": _fixed(t.BIGINT(), None, int),
    "io.debezium.time.NanoDuration": _fixed(t.BIGINT(), None, int),
    "io.debezium.time.Interval": _fixed(t.STRING(), None, str),
    "io.debezium.data.Json": _fixed(t.STRING(), None, str),
    "io.debezium.data.Enum": _fixed(t.STRING(), None, str),
    "io.debezium.data.EnumSet": _fixed(t.STRING(), None, str),
    "io.debezium.data.Uuid": _fixed(t.STRING(), None, str),
    "io.debezium.data.Xml": _fixed(t.STRING(), None, str),
    "io.debezium.data.Ltree": _fixed(t.STRING(), None, str),
    "io.debezium.data.Bits": _bits,
    "io.debezium.data.VariableScaleDecimal": _variable_scale_decimal,
}


#: The readers that take an epoch count (an integer) or text, by what they take.
_INPUTS: dict[Convert, str] = {
    **dict.fromkeys((_days, _millis_time, _micros_time, _nanos_time), "int"),
    **dict.fromkeys((_millis_timestamp, _micros_timestamp, _nanos_timestamp), "int"),
    **dict.fromkeys((_base64, _decimal_text, _zoned_timestamp, _iso_date, _iso_time), "text"),
}
_DECIMAL_READER = _decimal_converter(0, True).__code__


# ------------------------------------------------------------------------- columnar readers

ColumnConvert = Callable[[list[Any]], list[Any]]


@dataclass(frozen=True, slots=True)
class ColumnReader:
    """A reader's columnar form, for a decoder that checks the JSON values while parsing and
    converts a batch's values of a column at once.

    ``input`` is what the values must be for :attr:`convert` to read them: ``"int"``, an integer
    between ``bounds`` (inclusive), or ``"base64"``, the bytes of base64 text (decoded by the
    parser) or a number (an integer of 64 bits or a finite double). ``convert`` turns a list of
    such values into what the field's reader gives for each of them, in one call, and never fails
    on them. ``unit`` and ``divisor`` (an epoch count's unit, ``"us"``, ``"ms"`` or ``"D"``, once
    divided by ``divisor``) or ``scale`` (a decimal's) say what the values are to a writer that
    converts them itself (a :class:`~ferry.model.raw_values.ColumnForm`).
    """

    input: str
    bounds: tuple[int, int] | None
    convert: ColumnConvert
    unit: str = "decimal"
    divisor: int = 1
    scale: int = 0


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


_MICROS = (_micros(datetime.min), _micros(datetime.max))
_MILLIS = (-(-_MICROS[0] // 1000), _MICROS[1] // 1000)
_DAYS = (1 - _EPOCH_ORDINAL, date.max.toordinal() - _EPOCH_ORDINAL)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _epoch_column(unit: str, divisor: int = 1) -> ColumnConvert:
    """Epoch counts to datetimes (or dates, ``unit`` ``"D"``): numpy's datetime64 gives the
    same naive values as the readers' ``_EPOCH + timedelta(...)``, for the whole column at once."""
    kind = numpy.dtype(f"datetime64[{unit}]")

    def convert(values: list[Any]) -> list[Any]:
        counts = numpy.array(values, dtype=numpy.int64)
        if divisor != 1:
            counts //= divisor  # floor division, as the reader's ``//``
        result: list[Any] = counts.astype(kind).tolist()
        return result

    return convert


def _decimal_column(scale: int, reader: Convert) -> ColumnConvert:
    scaleb, from_bytes, exponent = _scaleb, int.from_bytes, -scale

    def convert(values: list[Any]) -> list[Any]:
        # numbers (JSON numbers of 64 bits or finite doubles, as a parser gives them) by the reader
        if scale:
            return [
                scaleb(from_bytes(v, "big", signed=True), exponent) if type(v) is bytes else reader(v)
                for v in values
            ]
        return [Decimal(from_bytes(v, "big", signed=True)) if type(v) is bytes else reader(v) for v in values]

    return convert


_COLUMN_READERS: dict[Convert, ColumnReader] = {
    _micros_timestamp: ColumnReader("int", _MICROS, _epoch_column("us"), "us"),
    _millis_timestamp: ColumnReader("int", _MILLIS, _epoch_column("ms"), "ms"),
    _nanos_timestamp: ColumnReader("int", (_INT64_MIN, _INT64_MAX), _epoch_column("us", 1000), "us", 1000),
    _days: ColumnReader("int", _DAYS, _epoch_column("D"), "D"),
}


def column_reader(field: ConnectField) -> ColumnReader | None:
    """The columnar form of a field's reader, when it has one (epoch timestamps and dates,
    base64 decimals)."""
    convert = field.convert
    if convert is None:
        return None
    reader = _COLUMN_READERS.get(convert)
    if reader is None:
        scale = _BYTES_DECIMAL_SCALES.get(convert)
        if scale is not None:
            reader = ColumnReader("base64", None, _decimal_column(scale, convert), scale=scale)
    return reader


def json_input(field: ConnectField) -> str | None:
    """What JSON values a field's reader takes, for a decoder that checks them while parsing:
    ``"value"`` (no conversion: values of ``python_type``, or integers for a float), ``"int"``
    (epoch counts), ``"text"``, ``"decimal"`` (base64 text, or a number), or None for readers of
    other values (structs, arrays, maps, variable-scale decimals, geometries)."""
    convert = field.convert
    if convert is None:
        return "value" if field.python_type in (int, float, bool, str) else None
    kind = _INPUTS.get(convert)
    if kind is None and getattr(convert, "__code__", None) is _DECIMAL_READER:
        return "decimal"
    return kind


# --------------------------------------------------------------------------------------- rows


class RowConverter:
    """Checks and converts the rows of one Connect struct schema, in place."""

    __slots__ = (
        "_by_name",
        "_convert_optional",
        "_convert_required",
        "_optional",
        "_required",
        "columns",
        "names",
        "width",
    )

    def __init__(self, schema: ConnectSchema) -> None:
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise DecodeError(f"a struct schema needs a 'fields' list, got {_short(schema)}")
        columns: list[Column] = []
        by_name: dict[str, ConnectField] = {}
        for f in fields:
            name = f.get("field") if isinstance(f, Mapping) else None
            if not isinstance(name, str):
                raise DecodeError(f"a struct field needs a 'field' name, got {_short(f)}")
            if name in by_name:
                raise DecodeError(f"field {name!r} is declared twice")
            try:
                field = connect_field(f)
            except DecodeError as e:
                raise DecodeError(f"field {name!r}: {e.reason}") from None
            by_name[name] = field
            comment = f.get("doc") if f.get("name") is None else None
            columns.append(Column(name, field.data_type, comment, _default_text(field, f.get("default"))))
        self.columns = tuple(columns)
        self.names = frozenset(by_name)
        self.width = len(by_name)
        self._by_name = by_name
        self._required = tuple(
            (n, f.python_type)
            for n, f in by_name.items()
            if f.python_type is not None and not f.data_type.nullable
        )
        self._optional = tuple(
            (n, f.python_type)
            for n, f in by_name.items()
            if f.python_type is not None and f.data_type.nullable
        )
        self._convert_required = tuple(
            (n, f.convert) for n, f in by_name.items() if f.convert is not None and not f.data_type.nullable
        )
        self._convert_optional = tuple(
            (n, f.convert) for n, f in by_name.items() if f.convert is not None and f.data_type.nullable
        )

    @property
    def fields(self) -> dict[str, ConnectField]:
        """Each field's name and Connect type, in schema order."""
        return self._by_name

    def convert(self, row: dict[str, Any]) -> None:
        """Check ``row`` against the schema and turn its values into Python values, in place.

        Raises :class:`ConversionError` naming the first field that contradicts the schema.
        """
        if len(row) != self.width:
            self._complete(row)
        try:
            for name, kind in self._required:
                if type(row[name]) is not kind:
                    self._fix(row, name)
            for name, kind in self._optional:
                value = row[name]
                if value is not None and type(value) is not kind:
                    self._fix(row, name)
        except KeyError:
            self._complete(row)
            return self.convert(row)
        name = ""
        try:
            for name, convert in self._convert_required:
                value = row[name]
                if value is None:
                    raise ConversionError(name, "is null but its schema says it is not optional")
                row[name] = convert(value)
            for name, convert in self._convert_optional:
                value = row[name]
                if value is not None:
                    row[name] = convert(value)
        except ConversionError as e:
            if e.field == name:
                raise
            raise e.within(name) from None
        except CONVERSION_ERRORS as e:
            raise self._error(name, row.get(name), e) from None
        return None

    def convert_present(self, row: dict[str, Any]) -> None:
        """Convert the fields ``row`` has (a key's fields), without requiring the others."""
        for name, value in row.items():
            field = self._by_name.get(name)
            if field is None:
                raise ConversionError(name, "is not in the record's schema")
            try:
                row[name] = field.read(value)
            except CONVERSION_ERRORS as e:
                raise self._error(name, value, e) from None

    def nested(self, value: Any) -> dict[str, Any]:
        """The converter of a struct-typed value inside another row."""
        if type(value) is not dict:
            raise TypeError("expected a struct")
        self.convert(value)
        return value

    def _complete(self, row: dict[str, Any]) -> None:
        for name in row:
            if name not in self.names:
                raise ConversionError(name, "is not in the record's schema")
        for name, field in self._by_name.items():
            if name not in row:
                if not field.data_type.nullable:
                    raise ConversionError(name, "is missing and its schema says it is not optional")
                row[name] = None

    def _fix(self, row: dict[str, Any], name: str) -> None:
        field = self._by_name[name]
        value = row[name]
        if value is None:
            raise ConversionError(name, "is null but its schema says it is not optional")
        try:
            row[name] = _check(field, value)
        except TypeError as e:
            raise self._error(name, value, e) from None

    def _error(self, name: str, value: Any, cause: Exception) -> ConversionError:
        field = self._by_name.get(name)
        label = field.label if field is not None else "value"
        if field is not None and field.python_type is not None:
            article = "an" if label[:1].upper() in "AEIOU" else "a"
            return ConversionError(name, f"is not {article} {label}: {_short(value)}")
        detail = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        return ConversionError(name, f"is not a valid {label}: {_short(value)} ({detail})")


def _default_text(field: ConnectField, default: Any) -> str | None:
    """A field's ``default`` (Connect's encoding of the type, as its values) as the column's."""
    if default is None:
        return None
    try:
        value = field.read(default)
    except CONVERSION_ERRORS:
        return None
    return default_text(value)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
