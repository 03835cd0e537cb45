"""Debezium JSON change events, with the Kafka Connect envelope (``{"schema": ..., "payload": ...}``)
or without it (the payload alone).

With the envelope, the table schema is the ``after`` (or ``before``) struct of the record's own
schema, converted to ferry types once per distinct schema (see :mod:`connect_types`) and cached
by the bytes that precede ``"payload":`` in the record, so that the schema text of the following
records is neither parsed nor converted again: only the payload is parsed. Without it, the schema
is inferred from the values (:class:`~ferry.connectors.formats.InferredTable`).

Table ids: MySQL ``source.db``/``source.table``; PostgreSQL and the other connectors whose source
block has a ``schema``: ``source.schema``/``source.table``; without a source block, the last two
parts of the topic name (``server.db.table``). Primary keys are the fields of the record key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats import (
    InferredTable,
    bad_record,
    internal_error,
    json_error,
)
from ferry.connectors.formats.connect_types import ConversionError, RowConverter
from ferry.connectors.record import RecordLike
from ferry.pipeline.events import (
    DataChange,
    Event,
    Op,
    SchemaObserved,
    SourcePosition,
    TruncateTable,
)
from ferry.pipeline.schema import Schema, TableId

_OPS = {"c": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE, "r": Op.READ}
_ENVELOPE = b'{"schema":'
_PAYLOAD_KEY = b'"payload"'
_MAX_CACHED_SCHEMAS = 1024
#: Builds a NamedTuple without its Python-level ``__new__`` (the hot path makes two per record).
_new = tuple.__new__
Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class _Plan:
    """What one envelope schema says about rows: their converter and their table schema."""

    row: RowConverter | None
    error: str | None = None
    schemas: dict[tuple[str, ...], Schema] = field(default_factory=dict)

    def schema(self, keys: tuple[str, ...]) -> Schema:
        schema = self.schemas.get(keys)
        if schema is None:
            assert self.row is not None
            names = self.row.names
            schema = Schema(self.row.columns, tuple(k for k in keys if k in names))
            self.schemas[keys] = schema
        return schema


_INFER = _Plan(None)


@dataclass(slots=True, eq=False)
class _Table:
    """Per (table, partition) state."""

    table_id: TableId
    inferred: InferredTable = field(default_factory=InferredTable.empty)
    emitted: Schema | None = None
    """The schema last emitted for the table in this partition."""


class DebeziumJsonDecoder:
    """Decodes ``debezium-json`` records (see the module documentation)."""

    def __init__(self) -> None:
        self._tables: dict[tuple[Any, ...], _Table] = {}
        self._plans: dict[bytes, _Plan] = {}
        self._last_plan: dict[tuple[str, int], tuple[bytes, _Plan]] = {}
        self._last_key: dict[tuple[str, int], tuple[bytes, tuple[str, ...]]] = {}

    def decode(self, records: Sequence[RecordLike]) -> list[Event]:
        out: list[Event] = []
        append = out.append
        last_plan = self._last_plan
        tables = self._tables
        loads, envelope, ops, new, position_type, delete = (
            orjson.loads,
            _ENVELOPE,
            _OPS,
            _new,
            SourcePosition,
            Op.DELETE,
        )
        for record in records:
            try:
                value = record.value()
                if value is None:
                    append(bad_record(record, "tombstone (null value)"))
                    continue
                topic = record.topic()
                partition = record.partition()
                position = new(position_type, (topic, partition, record.offset()))
                plan = _INFER
                payload: Any = None
                if value.startswith(envelope):
                    cached = last_plan.get((topic, partition))
                    if cached is not None and value.startswith(cached[0]):
                        end = value.rfind(b"}")
                        if end == len(value) - 1 or not value[end + 1 :].strip():
                            try:
                                payload = loads(value[len(cached[0]) : end])
                                plan = cached[1]
                            except orjson.JSONDecodeError:
                                plan = _INFER
                    if plan is _INFER:
                        payload, plan = self._envelope(_parse(value), value, topic, partition)
                else:
                    try:
                        payload = loads(value)
                    except orjson.JSONDecodeError as e:
                        raise DecodeError(json_error(e)) from None
                    if type(payload) is dict and "payload" in payload and "schema" in payload:
                        payload, plan = self._envelope(payload, value, topic, partition)
                if type(payload) is not dict:
                    raise DecodeError("not a Debezium change event: the payload is not a JSON object")
                source = payload.get("source")
                if type(source) is dict and (name := source.get("table")):
                    table = tables.get((source.get("db"), source.get("schema"), name, partition))
                    if table is None:
                        table = self._new_table(source, partition)
                else:
                    table = self._topic_table(topic, partition)
                op = ops.get(payload.get("op"))  # type: ignore[arg-type]
                if op is None:
                    self._no_row_op(payload, table.table_id, record, position, out)
                    continue
                if plan.error is not None:
                    raise DecodeError(plan.error)
                before: Row | None = payload.get("before")
                after: Row | None = payload.get("after")
                if (before is not None and type(before) is not dict) or (
                    after is not None and type(after) is not dict
                ):
                    raise DecodeError("'before' and 'after' must be JSON objects or null")
                key = record.key()
                keys = () if key is None else self._key_names(key, topic, partition)
                row = plan.row
                if row is not None:
                    try:
                        if after is not None:
                            row.convert(after)
                        if before is not None:
                            row.convert(before)
                    except ConversionError as e:
                        raise DecodeError(e.reason) from None
                    schema = plan.schema(keys)
                else:
                    inferred = table.inferred
                    changed = inferred.with_keys(keys) if keys != inferred.keys else False
                    if after is not None and inferred.observe(after):
                        changed = True
                    if before is not None and inferred.observe(before):
                        changed = True
                    schema = inferred.rebuild() if changed else inferred.schema
                if op is delete:
                    if before is None:
                        before = self._key_row(key, plan)
                elif after is None:
                    raise DecodeError(f"op {payload['op']!r} without an 'after' row")
                if table.emitted is not schema:
                    if table.emitted is None or table.emitted != schema:
                        append(SchemaObserved(table.table_id, schema, position))
                    table.emitted = schema
                ts = source.get("ts_ms") if type(source) is dict else None
                append(
                    new(DataChange, (table.table_id, op, before, after, position, ts or payload.get("ts_ms")))
                )
            except DecodeError as e:
                append(bad_record(record, e.reason))
            except Exception as e:  # a record must never stop the batch
                append(bad_record(record, internal_error(e)))
        return out

    # ------------------------------------------------------------------------------ envelope

    def _envelope(self, document: Any, value: bytes, topic: str, partition: int) -> tuple[Any, _Plan]:
        """The payload and the plan of a parsed record (a bare payload when it has no envelope)."""
        if type(document) is dict and "payload" in document and "schema" in document:
            schema = document["schema"]
            if not schema:
                return document["payload"], _INFER
            return document["payload"], self._plan(schema, value, topic, partition)
        return document, _INFER

    def _plan(self, schema: Any, value: bytes, topic: str, partition: int) -> _Plan:
        prefix = _schema_prefix(value, schema)
        cache_key = prefix if prefix is not None else orjson.dumps(schema)
        plan = self._plans.get(cache_key)
        if plan is None:
            if len(self._plans) >= _MAX_CACHED_SCHEMAS:
                self._plans.clear()
            plan = self._plans[cache_key] = _build_plan(schema)
        if prefix is not None:
            self._last_plan[(topic, partition)] = (prefix, plan)
        return plan

    def _key_names(self, key: bytes, topic: str, partition: int) -> tuple[str, ...]:
        cached = self._last_key.get((topic, partition))
        if cached is not None and key.startswith(cached[0]):
            return cached[1]
        try:
            document = orjson.loads(key)
        except orjson.JSONDecodeError:
            return ()  # a key that is not JSON names no columns
        if type(document) is not dict:
            return ()
        if "schema" in document and "payload" in document:
            schema = document["schema"]
            fields = schema.get("fields") if type(schema) is dict else None
            if type(fields) is list:
                names = tuple(f["field"] for f in fields if type(f) is dict and type(f.get("field")) is str)
            else:
                payload = document["payload"]
                names = tuple(payload) if type(payload) is dict else ()
            prefix = _schema_prefix(key, schema)
            if prefix is not None:
                self._last_key[(topic, partition)] = (prefix, names)
            return names
        return tuple(document)

    def _key_row(self, key: bytes | None, plan: _Plan) -> Row:
        """A delete's before-image when the record has none: the key's fields."""
        document = None
        if key is not None:
            try:
                document = orjson.loads(key)
            except orjson.JSONDecodeError:
                document = None
        if type(document) is dict and "schema" in document and "payload" in document:
            document = document["payload"]
        if type(document) is not dict or not document:
            raise DecodeError(
                "delete without a before-image or a key (a PostgreSQL table needs REPLICA IDENTITY FULL)"
            )
        if plan.row is not None:
            try:
                plan.row.convert_present(document)
            except ConversionError as e:
                raise DecodeError(f"key {e.reason}") from None
        return document

    # --------------------------------------------------------------------------------- tables

    def _new_table(self, source: Row, partition: int) -> _Table:
        db, schema, name = source.get("db"), source.get("schema"), source["table"]
        table_id = TableId(None, str(schema) if schema else (str(db) if db else None), str(name))
        table = self._tables[(db, schema, name, partition)] = _Table(table_id)
        return table

    def _topic_table(self, topic: str, partition: int) -> _Table:
        state_key = ("topic", topic, partition)
        table = self._tables.get(state_key)
        if table is None:
            parts = topic.split(".")
            table_id = TableId(None, parts[-2], parts[-1]) if len(parts) >= 2 else TableId(None, None, topic)
            table = self._tables[state_key] = _Table(table_id)
        return table

    def _no_row_op(
        self, payload: Row, table_id: TableId, record: RecordLike, position: SourcePosition, out: list[Event]
    ) -> None:
        code = payload.get("op")
        if code == "t":
            out.append(TruncateTable(table_id))
        elif code == "m":
            out.append(bad_record(record, "unsupported op 'm' (a logical decoding message)", position))
        elif code is None:
            hint = (
                " (a schema-change event: use the debezium-schema-change format)" if "ddl" in payload else ""
            )
            out.append(bad_record(record, f"not a Debezium change event: no 'op' field{hint}", position))
        else:
            out.append(bad_record(record, f"unknown op {code!r}", position))


def _parse(value: bytes) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as e:
        raise DecodeError(json_error(e)) from None


def _build_plan(schema: Any) -> _Plan:
    if type(schema) is not dict or schema.get("type") != "struct" or type(schema.get("fields")) is not list:
        return _Plan(None, "the record's schema is not a Kafka Connect struct")
    fields = {f.get("field"): f for f in schema["fields"] if type(f) is dict}
    row_schema = fields.get("after") or fields.get("before")
    if row_schema is None:
        return _Plan(
            None, "the record's schema does not describe a change event: it has no 'after' or 'before'"
        )
    try:
        return _Plan(RowConverter(row_schema))
    except DecodeError as e:
        return _Plan(None, f"the record's schema is invalid: {e.reason}")


def _schema_prefix(value: bytes, schema: Any) -> bytes | None:
    """The bytes of ``value`` up to and including ``"payload":`` when the schema comes first.

    Any later record that starts with the same bytes has the same schema, so the text between the
    prefix and the final ``}`` is its payload.
    """
    if not value.startswith(_ENVELOPE):
        return None
    expected = {"schema": schema, "payload": None}
    start = 0
    while (index := value.find(_PAYLOAD_KEY, start)) >= 0:
        start = index + len(_PAYLOAD_KEY)
        end = start
        while end < len(value) and value[end] in b" \t\r\n":
            end += 1
        if end < len(value) and value[end : end + 1] == b":":
            prefix = value[: end + 1]
            try:
                if orjson.loads(prefix + b"null}") == expected:
                    return prefix
            except orjson.JSONDecodeError:
                pass
    return None
