"""Debezium change events written by an Avro converter (``debezium-avro``, Flink's
``debezium-avro-confluent``): the Confluent wire format, writer schemas in a schema registry.

Each value is a Debezium envelope record (``before``, ``after``, ``source``, ``op``, ``ts_ms``); its
writer schema is fetched once per schema id (see :mod:`schema_registry`) and the ``after`` (or
``before``) record schema is converted to ferry types once per id, with Kafka Connect's Avro
conventions (see :mod:`connect_avro`): rows get the same types and Python values as the same
rows written by the JSON converter and read by ``debezium-json``.

Schema changes are learnt from the writer schema's drift: a record whose writer schema id differs
from the last one of its table in its partition gives a
:class:`~ferry.model.events.SchemaObserved` when the table schema it describes differs from the
last one emitted. Keys in the same wire format name the primary key columns; a record whose key
holds other values than its row is a bad record with both; a record with a key and no value
(Debezium's tombstone after a delete) is a :class:`~ferry.model.events.Tombstone`.
Table ids are read from the ``source`` block as ``debezium-json`` reads them.

The schema registry is asked only before a batch is decoded: when it cannot be reached, the batch
raises :class:`~ferry.connectors.formats.schema_registry.SchemaRegistryUnavailableError` (a
transient error: nothing of the batch was emitted, so it can be decoded again) rather than turning
records into bad records. A record that is not in the wire format, names a schema id the registry
does not have, or does not decode is a bad record with the reason.

:class:`DebeziumAvroSchemaChangeDecoder` reads Debezium's schema-change topic written by the same
converter: the same events as ``debezium-schema-change``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats import bad_record, check_key, internal_error
from ferry.connectors.formats.connect_avro import AvroRow
from ferry.connectors.formats.connect_types import ConversionError
from ferry.connectors.formats.debezium import DebeziumChangeDecoder
from ferry.connectors.formats.debezium_schema_change import DebeziumSchemaChangeDecoder
from ferry.connectors.formats.placeholders import Markers, Placeholders, mark
from ferry.connectors.formats.schema_registry import ConfluentAvroReader, WriterSchema, schema_id_of
from ferry.connectors.record import RecordLike
from ferry.model.events import (
    DataChange,
    Event,
    Op,
    SchemaObserved,
    SourcePosition,
    Tombstone,
)
from ferry.model.schema import Schema, TableId
from ferry.model.unavailable import DEFAULT_PLACEHOLDER

__all__ = ["DebeziumAvroDecoder", "DebeziumAvroSchemaChangeDecoder"]

_OPS = {"c": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE, "r": Op.READ}
_new = tuple.__new__
Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class _Plan:
    """What one envelope writer schema says about rows: their converter and table schemas."""

    row: AvroRow | None
    error: str | None = None
    schemas: dict[tuple[str, ...], Schema] = field(default_factory=dict)
    unavailable: Markers | None = None
    """Per column, the value Debezium's unavailable-value placeholder is read as (None: not
    found yet)."""

    def schema(self, keys: tuple[str, ...]) -> Schema:
        schema = self.schemas.get(keys)
        if schema is None:
            assert self.row is not None
            names = self.row.names
            schema = self.schemas[keys] = Schema(self.row.columns, tuple(k for k in keys if k in names))
        return schema


@dataclass(slots=True, eq=False)
class _Table:
    """Per (table, partition) state."""

    table_id: TableId
    connector: str | None = None
    """The ``source.connector`` of the table's change events (``mysql``, ``postgresql``, ...)."""
    emitted: Schema | None = None
    """The schema last emitted for the table in this partition."""


def _reader(
    url: str, user_info: SecretStr | str | None, reader: ConfluentAvroReader | None
) -> ConfluentAvroReader:
    return reader if reader is not None else ConfluentAvroReader(url, user_info)


def _values_and_keys(records: Sequence[RecordLike]) -> Iterator[bytes | None]:
    for record in records:
        yield record.value()
        yield record.key()


class DebeziumAvroDecoder(DebeziumChangeDecoder[_Table]):
    """Decodes ``debezium-avro`` records (see the module documentation).

    ``schema_registry_url`` is one or more comma-separated URLs of a Confluent-compatible schema
    registry, ``schema_registry_user_info`` its HTTP basic credentials (``user:password``, a
    secret, never logged); ``reader`` replaces the reader built from them.
    """

    ddl_field = "tableChanges"
    ddl_format = "debezium-avro-schema-change"

    def __init__(
        self,
        schema_registry_url: str,
        schema_registry_user_info: SecretStr | str | None = None,
        *,
        reader: ConfluentAvroReader | None = None,
        unavailable_value_placeholder: str = DEFAULT_PLACEHOLDER,
    ) -> None:
        self._reader = _reader(schema_registry_url, schema_registry_user_info, reader)
        self._placeholders = Placeholders(unavailable_value_placeholder)
        """Debezium's ``unavailable.value.placeholder``: an update's column holding it is
        :data:`~ferry.model.unavailable.UNAVAILABLE` (:mod:`placeholders`)."""
        self._plans: dict[int, _Plan] = {}
        self._key_names: dict[int, tuple[str, ...]] = {}
        self._tables: dict[tuple[Any, ...], _Table] = {}

    def __repr__(self) -> str:
        return f"DebeziumAvroDecoder({self._reader!r})"

    def close(self) -> None:
        """Close the connections to the schema registry."""
        self._reader.close()

    def decode(self, records: Sequence[RecordLike]) -> list[Event]:
        self._reader.fetch(_values_and_keys(records))
        out: list[Event] = []
        append = out.append
        read, tables, ops, new, position_type = (
            self._reader.read,
            self._tables,
            _OPS,
            _new,
            SourcePosition,
        )
        for record in records:
            try:
                topic, partition = record.topic(), record.partition()
                position = new(position_type, (topic, partition, record.offset()))
                value = record.value()
                if value is None:
                    append(Tombstone(position, record.key()))
                    continue
                writer, envelope = read(value)
                if type(envelope) is not dict:
                    raise DecodeError("not a Debezium change event: the value is not an Avro record")
                plan = self._plans.get(writer.schema_id) or self._plan(writer)
                source = envelope.get("source")
                if type(source) is dict and (name := source.get("table")):
                    table = tables.get((source.get("db"), source.get("schema"), name, topic, partition))
                    if table is None:
                        table = self._new_table(source, topic, partition)
                else:
                    table = self._topic_table(topic, partition)
                op = ops.get(envelope.get("op"))  # type: ignore[arg-type]
                if op is None:
                    self._no_row_op(envelope, table.table_id, record, position, out)
                    continue
                if plan.error is not None:
                    raise DecodeError(plan.error)
                assert plan.row is not None
                before: Row | None = envelope.get("before")
                after: Row | None = envelope.get("after")
                if (before is not None and type(before) is not dict) or (
                    after is not None and type(after) is not dict
                ):
                    raise DecodeError("'before' and 'after' must be Avro records or null")
                key = record.key()
                try:
                    if after is not None:
                        plan.row.convert(after)
                    if before is not None:
                        plan.row.convert(before)
                except ConversionError as e:
                    raise DecodeError(e.reason) from None
                schema = plan.schema(keys := self._keys(key))
                if keys:
                    self._check_key(key, after if after is not None else before, plan.row)
                if op is Op.DELETE:
                    if before is None:
                        before = self._key_row(key, plan.row)
                elif after is None:
                    raise DecodeError(f"op {envelope['op']!r} without an 'after' row")
                elif op is Op.UPDATE:
                    markers = plan.unavailable
                    if markers is None:
                        markers = plan.unavailable = self._placeholders.value_markers(plan.row.columns)
                    if markers:
                        after = mark(after, markers)
                if table.emitted is not schema:
                    if table.emitted is None or table.emitted != schema:
                        append(SchemaObserved(table.table_id, schema, position, connector=table.connector))
                    table.emitted = schema
                ts = (source.get("ts_ms") if type(source) is dict else None) or envelope.get("ts_ms")
                append(new(DataChange, (table.table_id, op, before, after, position, ts)))
            except DecodeError as e:
                append(bad_record(record, e.reason))
            except Exception as e:  # a record must never stop the batch
                append(bad_record(record, internal_error(e)))
        return out

    # ---------------------------------------------------------------------------- schemas

    def _plan(self, writer: WriterSchema) -> _Plan:
        plan = self._plans[writer.schema_id] = _build_plan(writer)
        return plan

    def _keys(self, key: bytes | None) -> tuple[str, ...]:
        """The primary key columns: the fields of the key's record (none for other keys)."""
        schema_id = schema_id_of(key)
        if schema_id is None:
            return ()
        names = self._key_names.get(schema_id)
        if names is None:
            try:
                schema = self._reader.schema(schema_id).schema
            except DecodeError:
                return ()  # a key whose schema cannot be read names no columns
            fields = schema.get("fields") if type(schema) is dict else None
            names = tuple(f["name"] for f in fields or () if type(f) is dict and type(f.get("name")) is str)
            self._key_names[schema_id] = names
        return names

    def _check_key(self, key: bytes | None, row: Row | None, converter: AvroRow) -> None:
        """A record whose key names other values than its row would be written under the row's key:
        it is a bad record (with both, as read)."""
        if key is None or row is None:
            return
        _, document = self._reader.read(key, "key")
        if type(document) is not dict:
            return
        with contextlib.suppress(ConversionError):  # else the key's values are compared as read
            converter.convert_present(document)  # as the row's values are
        check_key(document, row)

    def _key_row(self, key: bytes | None, row: AvroRow) -> Row:
        """A delete's before-image when the record has none: the key's fields."""
        document: Any = None
        if key is not None and schema_id_of(key) is not None:
            _, document = self._reader.read(key, "key")
        if type(document) is not dict or not document:
            raise DecodeError(
                "delete without a before-image or a key (a PostgreSQL table needs REPLICA IDENTITY FULL)"
            )
        try:
            row.convert_present(document)
        except ConversionError as e:
            raise DecodeError(f"key {e.reason}") from None
        return document

    # ----------------------------------------------------------------------------- tables

    def _table_state(self, table_id: TableId, connector: str | None) -> _Table:
        return _Table(table_id, connector)


def _build_plan(writer: WriterSchema) -> _Plan:
    schema = writer.schema
    if type(schema) is not dict or schema.get("type") != "record":
        return _Plan(None, f"schema id {writer.schema_id} is not an Avro record: not a Debezium envelope")
    fields = {f.get("name"): f for f in schema.get("fields") or () if type(f) is dict}
    row_fields = [fields[n] for n in ("before", "after") if n in fields]
    if not row_fields:
        return _Plan(
            None,
            f"schema id {writer.schema_id} does not describe a change event: it has no 'after' or 'before'",
        )
    # Both are the optional row record: the first defines it, the second names it.
    records = []
    for row_field in row_fields:
        members = row_field.get("type")
        for member in members if type(members) is list else [members]:
            if type(member) is dict and member.get("type") == "record":
                records.append(member)
    if not records:
        return _Plan(None, f"schema id {writer.schema_id}: 'before' and 'after' are not Avro records")
    try:
        return _Plan(AvroRow(records[0], namespace=_namespace(schema), referenced=writer.referenced))
    except DecodeError as e:
        return _Plan(None, f"schema id {writer.schema_id} is invalid: {e.reason}")


def _namespace(schema: Row) -> str | None:
    name = schema.get("name")
    namespace = schema.get("namespace")
    if isinstance(name, str) and "." in name:
        return name.rsplit(".", 1)[0]
    return namespace if isinstance(namespace, str) else None


class DebeziumAvroSchemaChangeDecoder(DebeziumSchemaChangeDecoder):
    """Decodes Debezium's schema-change topic written by an Avro converter: each value is the
    schema-change record (``databaseName``, ``ddl``, ``tableChanges`` ...) that
    ``debezium-schema-change`` reads as JSON, and it gives the same events."""

    message_kind = "a Debezium schema-change event"

    def __init__(
        self,
        schema_registry_url: str,
        schema_registry_user_info: SecretStr | str | None = None,
        *,
        reader: ConfluentAvroReader | None = None,
    ) -> None:
        self._reader = _reader(schema_registry_url, schema_registry_user_info, reader)

    def close(self) -> None:
        """Close the connections to the schema registry."""
        self._reader.close()

    def decode(self, records: Sequence[RecordLike]) -> list[Event]:
        self._reader.fetch(record.value() for record in records)
        return super().decode(records)

    def parse(self, record: RecordLike) -> tuple[SourcePosition, dict[str, Any]]:
        value = record.value()
        if value is None:
            raise DecodeError("tombstone (null value)")
        _, message = self._reader.read(value)
        if type(message) is not dict:
            raise DecodeError(f"not {self.message_kind}: the value is not an Avro record")
        return SourcePosition(record.topic(), record.partition(), record.offset()), message
