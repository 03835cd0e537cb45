"""Typed decoding of Debezium JSON change events whose row types are known (msgspec).

Once a partition's rows are known to have a shape (the envelope's Connect schema, or the column
types inferred from the rows so far when there is no envelope), a record of that shape is decoded
by a :class:`msgspec.json.Decoder` of a struct made for it: the JSON value of each column is checked
against its type while it is parsed, fields of the source block that ferry does not read are
skipped, and only the columns whose JSON form is not their Python value (base64 decimals, epoch
days and microseconds ...) are converted afterwards. Those whose reader has a columnar form
(:func:`~ferry.connectors.formats.connect_types.column_reader`: epoch timestamps and dates, base64
decimals) are checked while parsing against what that form reads (integers within the range of
dates, base64 text decoded by the parser) and converted a column at a time once the batch is read
(:meth:`TypedPayloads.convert_columns`); the others row by row, by the same readers the generic
path uses.

A typed decoder only ever accepts what the generic path (``orjson`` and
:class:`~ferry.connectors.formats.connect_types.RowConverter` or
:class:`~ferry.connectors.formats.InferredTable`) reads to the same values with the same table
schema. Anything else (a value of another type, a column missing or not in the schema, a null
where the schema forbids one, an integer that orjson would read as a float, an op without its row)
makes :meth:`TypedPayloads.decode` fail, and the record is decoded again the generic way, which
names what is wrong with it. This module has no error messages of its own.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from ferry.connectors.formats import InferredTable
from ferry.connectors.formats.connect_types import (
    ColumnReader,
    ConnectField,
    RowConverter,
    column_reader,
    json_input,
)
from ferry.model.raw_values import convert_columns
from ferry.model.schema import Schema

#: Integers of 64 bits (orjson reads integers beyond 64 bits as floats; those, and those between
#: 2**63 and 2**64, take the generic path).
Int = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_NONE = type(None)
#: Python type of a JSON value a reader takes → the type to check it against while parsing.
_VALUE_TYPES: dict[type, Any] = {int: Int, float: float, bool: bool, str: str}
_INPUT_TYPES: dict[str, Any] = {"int": Int, "text": str, "decimal": str | Int | float}
#: Consecutive records a typed decoder may fail on before it is given up (a partition whose
#: records are of another shape, such as flattened rows).
MAX_MISSES = 64

Convert = Callable[[Any], Any]
_asdict = msgspec.structs.asdict


class Source(msgspec.Struct, gc=False):
    """The fields of a change event's ``source`` block that name its table, its time and its place
    in the source's log (MySQL's binlog ``file``, ``pos`` and ``row``; PostgreSQL's ``lsn``)."""

    db: str | None = None
    schema: str | None = None
    table: str | None = None
    ts_ms: Int | None = None
    file: str | None = None
    pos: Int | None = None
    row: Int | None = None
    lsn: Int | None = None

    def order(self) -> tuple[str, int, int] | None:
        """Where the change stands in the source's log (see :mod:`.source_order`)."""
        if self.file is not None and self.pos is not None:
            return (self.file, self.pos, self.row or 0)
        return None if self.lsn is None else ("", self.lsn, 0)


class TypedPayloads:
    """Decodes the payloads of one row shape: ``decode(bytes)`` gives a struct with ``op``,
    ``source`` (:class:`Source`), ``before``, ``after`` (row structs or None) and ``ts_ms``;
    :meth:`row` turns a row struct into the row ferry emits, or None when the generic path must
    decide."""

    __slots__ = (
        "_optional",
        "_required",
        "columnar",
        "decode",
        "misses",
        "plain",
        "schema",
        "unavailable",
    )

    def __init__(
        self,
        columns: list[tuple[str, Any]],
        *,
        required: tuple[tuple[str, Convert], ...] = (),
        optional: tuple[tuple[str, Convert], ...] = (),
        schema: Schema | None = None,
        columnar: tuple[tuple[str, ColumnReader], ...] = (),
    ) -> None:
        row = msgspec.defstruct("Row", columns, forbid_unknown_fields=True, gc=False)
        payload = msgspec.defstruct(
            "Payload",
            [
                ("op", str),
                ("source", Source | None, None),
                ("before", row | None, None),
                ("after", row | None, None),
                ("ts_ms", Int | None, None),
            ],
            gc=False,  # no struct here refers to another object that could refer back to it
        )
        self.decode: Callable[[bytes], Any] = msgspec.json.Decoder(payload).decode
        self._required = required
        self._optional = optional
        self.plain = not (required or optional)
        """Whether :meth:`row` is the struct's fields as they are (``msgspec.structs.asdict``)."""
        self.columnar = columnar
        """The columns converted a column at a time, by :meth:`convert_columns`."""
        self.schema = schema
        """The inferred schema this decoder was made for (None for an envelope's)."""
        self.misses = 0
        self.unavailable: tuple[tuple[str, Any], ...] = ()
        """Per column, the value Debezium's unavailable-value placeholder is read as: an
        update's column equal to it is marked (:mod:`~ferry.connectors.formats.placeholders`)."""

    @classmethod
    def of_connect(cls, converter: RowConverter) -> TypedPayloads | None:
        """The typed decoder of the rows a Connect struct schema describes, or None when one of its
        fields reads values this module does not type (structs, arrays, maps ...)."""
        columns: list[tuple[str, Any]] = []
        required: list[tuple[str, Convert]] = []
        optional: list[tuple[str, Convert]] = []
        columnar: list[tuple[str, ColumnReader]] = []
        field: ConnectField
        for name, field in converter.fields.items():
            kind = json_input(field)
            if kind is None:
                return None
            nullable = field.data_type.nullable
            reader = column_reader(field)
            if kind == "value":
                assert field.python_type is not None
                value_type = _VALUE_TYPES[field.python_type]
            elif reader is not None and reader.input == "int" and reader.bounds is not None:
                low, high = reader.bounds
                value_type = Annotated[int, msgspec.Meta(ge=low, le=high)]
                columnar.append((name, reader))
            elif reader is not None and reader.input == "base64" and kind == "decimal":
                # base64 text is decoded by the parser (no more leniently than the reader:
                # tests/unit/formats/test_debezium_typed.py), which refuses numbers beyond doubles
                value_type = bytes | Int | float
                columnar.append((name, reader))
            else:
                assert field.convert is not None
                value_type = _INPUT_TYPES[kind]
                (optional if nullable else required).append((name, field.convert))
            columns.append((name, value_type | None if nullable else value_type))
        return cls._made(columns, tuple(required), tuple(optional), columnar=tuple(columnar))

    @classmethod
    def of_inferred(cls, inferred: InferredTable) -> TypedPayloads | None:
        """The typed decoder of payload-only rows with exactly the columns and value types seen so
        far, or None when a column holds JSON objects or arrays."""
        if inferred.json_columns:
            return None
        columns: list[tuple[str, Any]] = []
        for name, kind in inferred.kinds.items():
            if kind is _NONE:
                columns.append((name, None))
                continue
            value_type = _VALUE_TYPES.get(kind)
            if value_type is None:
                return None
            if kind is float:
                # an integer in a column of floats stays an integer, as the generic path keeps it
                # (the column stays DOUBLE: a 64-bit integer widens it to nothing else)
                value_type = float | Int
            columns.append((name, value_type | None))
        return cls._made(columns, schema=inferred.schema)

    @classmethod
    def _made(
        cls,
        columns: list[tuple[str, Any]],
        required: tuple[tuple[str, Convert], ...] = (),
        optional: tuple[tuple[str, Convert], ...] = (),
        schema: Schema | None = None,
        *,
        columnar: tuple[tuple[str, ColumnReader], ...] = (),
    ) -> TypedPayloads | None:
        if not columns or any(not n.isidentifier() or keyword.iskeyword(n) for n, _ in columns):
            return None  # a struct's fields are Python names; other rows take the generic path
        try:
            return cls(
                columns,
                required=required,
                optional=optional,
                schema=schema,
                columnar=columnar,
            )
        except (TypeError, ValueError):
            return None

    def row(self, struct: Any) -> dict[str, Any] | None:
        """The row of a decoded row struct, its values converted but those of :attr:`columnar`
        (see :meth:`convert_columns`); None when the generic path must read it (a value its reader
        refuses, a null where the schema forbids one)."""
        row: dict[str, Any] = _asdict(struct)
        try:
            for name, convert in self._required:
                value = row[name]
                if value is None:
                    return None
                row[name] = convert(value)
            for name, convert in self._optional:
                value = row[name]
                if value is not None:
                    row[name] = convert(value)
        except Exception:  # the generic path reads it again and names the error
            return None
        return row

    def convert_columns(
        self, rows: list[dict[str, Any]], columns: tuple[tuple[str, ColumnReader], ...] | None = None
    ) -> None:
        """Convert, in place, the :attr:`columnar` columns (or those of them in ``columns``) of rows
        :meth:`row` made: each column's values of all the rows in one call. Their values were
        checked while parsing, so this does not fail."""
        convert_columns(rows, self.columnar if columns is None else columns)
