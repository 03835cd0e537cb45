"""Format decoders: Kafka records in, ferry events out.

A :class:`Decoder` is called once per consumed batch and returns, in record order, for each record:
a :class:`~ferry.model.events.SchemaObserved` when the schema of the record's table (in that
partition) differs from the last one the decoder emitted for it, then the record's
:class:`~ferry.model.events.DataChange` (or changes: Canal packs several rows in one message),
or a :class:`~ferry.model.events.SchemaHint` for a DDL message, or a
:class:`~ferry.model.events.Tombstone` for a record with a key and no value (``debezium-json``),
or a :class:`~ferry.model.events.BadRecord` naming what is wrong with it. A decoder never raises
for a bad record and never drops one silently.

:func:`decoder_for` builds a decoder by format name. The decoders are imported on first use.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Protocol

import orjson

from ferry.connectors.exceptions import DecodeError, UnknownFormatError
from ferry.connectors.record import RecordLike
from ferry.model.events import BadRecord, Event, SchemaChange, SchemaHint, SourcePosition
from ferry.model.exceptions import TypeWideningError
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BOOLEAN, DECIMAL, DOUBLE, STRING, DataType, widen

__all__ = ["FORMATS", "Decoder", "decoder_for"]


class Decoder(Protocol):
    """Turns one consumed batch of records into events (see the module documentation)."""

    def decode(self, records: Sequence[RecordLike]) -> list[Event]: ...


#: Format name → ``module:class`` of its decoder, relative to this package.
FORMATS: dict[str, str] = {
    "debezium-json": "debezium:DebeziumJsonDecoder",
    "debezium-schema-change": "debezium_schema_change:DebeziumSchemaChangeDecoder",
    "debezium-avro": "debezium_avro:DebeziumAvroDecoder",
    "debezium-avro-confluent": "debezium_avro:DebeziumAvroDecoder",
    "debezium-avro-schema-change": "debezium_avro:DebeziumAvroSchemaChangeDecoder",
    "canal-json": "canal:CanalJsonDecoder",
    "maxwell-json": "maxwell:MaxwellJsonDecoder",
}


def decoder_for(format: str, **options: Any) -> Decoder:
    """A new decoder for ``format`` (one of :data:`FORMATS`), configured with ``options``."""
    target = FORMATS.get(format)
    if target is None:
        known = ", ".join(sorted(FORMATS))
        raise UnknownFormatError(f"unknown format {format!r}; the known formats are {known}", format=format)
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(f"{__name__}.{module_name}"), class_name)
    accepted = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(accepted) if accepted else "no options"
        raise UnknownFormatError(
            f"format {format!r} has no option {', '.join(map(repr, unknown))}; it takes {takes}",
            format=format,
        )
    decoder: Decoder = cls(**options)
    return decoder


# ------------------------------------------------------------------------ shared by the decoders


def position_of(record: RecordLike) -> SourcePosition:
    return SourcePosition(record.topic(), record.partition(), record.offset())


def bad_record(record: RecordLike, reason: str, position: SourcePosition | None = None) -> BadRecord:
    return BadRecord(position or position_of(record), reason, record.key(), record.value())


def json_error(error: orjson.JSONDecodeError) -> str:
    return f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}"


def internal_error(error: Exception) -> str:
    return f"cannot decode the record: {type(error).__name__}: {error}"


def _same_key_value(in_key: Any, in_row: Any) -> bool:
    """Whether a key's value names the row's: equal, or the same text when one of them is text
    (Canal writes every value of a row as text, its key as JSON may not). A boolean names only the
    same boolean (``true`` is not the number 1)."""
    if type(in_key) is bool or type(in_row) is bool:
        return type(in_key) is type(in_row) and in_key == in_row
    if in_key == in_row:
        return True
    if type(in_key) is str or type(in_row) is str:
        kinds = (str, int, float, Decimal)
        return type(in_key) in kinds and type(in_row) in kinds and str(in_key) == str(in_row)
    return False


def key_mismatch(key_values: dict[str, Any], row: dict[str, Any], *, columns: bool = False) -> str | None:
    """The reason a record is bad when its key names other values than its row (the row would be
    written under its own key, not the record's), or None. With ``columns`` (a key whose fields are
    the table's key columns: Debezium's, Maxwell's ``pk.``), a key field the row does not have is a
    mismatch too, and so is a null in the key; otherwise only the key's fields that are columns of
    the row are compared."""
    differ = [
        n
        for n, v in key_values.items()
        if (n in row and not _same_key_value(v, row[n])) or (columns and (n not in row or v is None))
    ]
    if not differ:
        return None
    return "the record key does not match its row: " + ", ".join(
        f"{n} is {key_values[n]!r} in the key and {row[n]!r} in the row"
        if n in row
        else f"{n} is {key_values[n]!r} in the key and not a column of the row"
        for n in differ
    )


def check_key(key_values: dict[str, Any], row: dict[str, Any], *, columns: bool = False) -> None:
    """Raise :class:`DecodeError` when ``key_values`` do not match ``row`` (see :func:`key_mismatch`)."""
    reason = key_mismatch(key_values, row, columns=columns)
    if reason is not None:
        raise DecodeError(reason)


def check_key_values(keys: list[str], row: dict[str, Any]) -> None:
    """Raise :class:`DecodeError` when ``row`` has no value for one of the primary key columns
    ``keys`` (the message's own list of them): such a row cannot be written by key."""
    for key in keys:
        if row.get(key) is None:
            raise DecodeError(f"the row has no value for primary key column {key!r}")


def json_key(key: bytes | None) -> Any:
    """A record key parsed as JSON, or None when there is none or it is not JSON."""
    if key is None:
        return None
    try:
        return orjson.loads(key)
    except orjson.JSONDecodeError:
        return None


class JsonMessageDecoder:
    """The record loop of decoders that read one JSON object per record (Canal, Maxwell,
    Debezium's schema-change topic): a record that fails becomes a ``BadRecord`` with the reason,
    and the batch goes on."""

    #: What a record should be, for the error a non-object gets ("a Canal message").
    message_kind: ClassVar[str] = "a JSON object"

    def decode(self, records: Sequence[RecordLike]) -> list[Event]:
        out: list[Event] = []
        for record in records:
            try:
                self.decode_record(record, out)
            except DecodeError as e:
                out.append(bad_record(record, e.reason))
            except Exception as e:  # a record must never stop the batch
                out.append(bad_record(record, internal_error(e)))
        return out

    def decode_record(self, record: RecordLike, out: list[Event]) -> None:
        """Append the events of one record to ``out``; raise :class:`DecodeError` for a bad one."""
        raise NotImplementedError

    def parse(self, record: RecordLike) -> tuple[SourcePosition, dict[str, Any]]:
        """The record's position and its JSON object."""
        value = record.value()
        if value is None:
            raise DecodeError("tombstone (null value)")
        try:
            message = orjson.loads(value)
        except orjson.JSONDecodeError as e:
            raise DecodeError(json_error(e)) from None
        if type(message) is not dict:
            raise DecodeError(f"not {self.message_kind}: expected a JSON object")
        position: SourcePosition = tuple.__new__(
            SourcePosition, (record.topic(), record.partition(), record.offset())
        )
        return position, message

    def unknown_type(self, kind: Any) -> DecodeError:
        """The error of a message whose ``type`` is ``kind``, one the decoder does not know."""
        return DecodeError(
            f"unknown type {kind!r}" if kind is not None else f"not {self.message_kind}: no 'type'"
        )

    @staticmethod
    def message_table(message: dict[str, Any]) -> tuple[str, str]:
        """The ``database`` and ``table`` a row message names."""
        database, name = message.get("database"), message.get("table")
        if not (isinstance(database, str) and database and isinstance(name, str) and name):
            raise DecodeError("the message names no table (no 'database' and 'table')")
        return database, name


def hints(
    changes: list[SchemaChange], ddl: str, *, ordered: bool, position: SourcePosition | None
) -> list[SchemaHint]:
    """One hint per table, in the order the tables first appear in ``changes``."""
    by_table: dict[TableId, list[SchemaChange]] = {}
    for change in changes:
        by_table.setdefault(change.table_id, []).append(change)
    return [SchemaHint(t, tuple(c), ddl, ordered, position) for t, c in by_table.items()]


_NONE = type(None)
_MISSING: Any = object()
_INT64 = (-(1 << 63), (1 << 63) - 1)


def value_type(value: Any) -> DataType:
    """The type inferred from one JSON value (objects and arrays are kept as JSON text)."""
    kind = type(value)
    if kind is bool:
        return BOOLEAN()
    if kind is int:
        if _INT64[0] <= value <= _INT64[1]:
            return BIGINT()
        digits = len(str(abs(value)))
        return DECIMAL(max(digits, 20), 0) if digits <= 38 else STRING()
    if kind is float:
        return DOUBLE()
    return STRING()


@dataclass(slots=True, eq=False)
class InferredTable:
    """The schema of one table (in one partition) inferred from the JSON values of its rows.

    A column's type is that of its first non-null value, widened when a later value disagrees;
    a column seen only as null is ``STRING`` until a value shows its type. Columns keep the order
    in which they were first seen; all are nullable except the primary key. Object and array
    values are turned into JSON text, in place.
    """

    kinds: dict[str, type]
    types: dict[str, DataType]
    keys: tuple[str, ...]
    json_columns: tuple[str, ...]
    schema: Schema

    @classmethod
    def empty(cls) -> InferredTable:
        return cls({}, {}, (), (), Schema(()))

    def observe(self, row: dict[str, Any]) -> bool:
        """Fold one row into the schema; True when the schema changed."""
        kinds = self.kinds
        changed = False
        for name, value in row.items():
            kind = kinds.get(name, _MISSING)
            if kind is not type(value):
                if value is None and kind is not _MISSING:
                    continue
                changed = self._learn(name, value, kind) or changed
        if self.json_columns:
            for name in self.json_columns:
                value = row.get(name)
                if value is not None and type(value) is not str:
                    row[name] = orjson.dumps(value).decode()
        return changed

    def with_keys(self, keys: tuple[str, ...]) -> bool:
        """Set the primary key; True when it changed."""
        if keys == self.keys:
            return False
        self.keys = keys
        return True

    def rebuild(self) -> Schema:
        keys = tuple(k for k in self.keys if k in self.types)
        columns = tuple(Column(n, t.not_null() if n in keys else t) for n, t in self.types.items())
        self.schema = Schema(columns, keys)
        return self.schema

    def _learn(self, name: str, value: Any, kind: Any) -> bool:
        old = self.types.get(name)
        if value is None:
            self.kinds[name] = _NONE
            self.types[name] = STRING()
            return True
        new = value_type(value)
        if kind is not _MISSING and kind is not _NONE and old is not None:
            try:
                new = widen(old, new)
            except TypeWideningError:
                new = STRING()
        self.kinds[name] = type(value)
        self.types[name] = new
        if type(value) in (dict, list) and name not in self.json_columns:
            self.json_columns = (*self.json_columns, name)
        return new != old
