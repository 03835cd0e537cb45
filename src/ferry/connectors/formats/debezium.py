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

Other shapes of the same topics:

* A tombstone (a key and a null value, which Debezium writes after each delete with its default
  ``tombstones.on.delete=true``) is a :class:`~ferry.model.events.Tombstone`, passed over.
  ``ExtractNewRecordState`` with ``delete.tombstone.handling.mode=delete-to-tombstone`` writes a
  delete as a tombstone alone: a tombstone is a delete by its key when the decoder is told so
  (``tombstone_deletes``, the job's ``debezium-json.delete.tombstone.handling.mode``), or when the
  partition's last record was a flattened row; never when it follows the delete of its key (the
  connector's own tombstone after a delete, also of ``rewrite-with-tombstone``).
* A null row (``{"schema": ..., "payload": null}``, or ``null`` without the envelope) is
  ``ExtractNewRecordState``'s delete with its default ``delete.tombstone.handling.mode=tombstone``:
  a delete by the record key.
* A flattened record (Debezium's ``ExtractNewRecordState`` transform), with or without the
  envelope, is the row itself: no ``op``, ``before``, ``after`` or ``source``. Fields named with
  the transform's default prefix ``__`` are its metadata and never columns: ``__op``
  (``add.fields=op``), ``__deleted`` (``delete.handling.mode=rewrite``,
  ``delete.tombstone.handling.mode=rewrite``), ``__db``/``__schema``/``__table`` (the table id,
  else the topic's), ``__source_ts_ms`` or ``__ts_ms`` (the change's time). The op is ``__op``'s;
  without it a row is an upsert (an update by key) and a delete when ``__deleted`` is true, whose
  before-image is the row (or the key when the row has no columns).
* With :class:`~ferry.connectors.formats.definitions.TableDefinitions` (the tables the
  schema-change topic described), a table's columns have the DDL's types where the record's own
  say less, and payload-only rows decode to what the envelope would have given (see
  :mod:`~ferry.connectors.formats.debezium_columns`). Without a definition the envelope's types
  are used. Payload-only rows without a definition are typed by inference from their values only
  when the decoder is told to (``infer_types``, the job's ``debezium-json.infer-types``): otherwise
  the first stops the pipeline (:class:`~ferry.connectors.exceptions.UntypedRecordsError`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import msgspec
import orjson

from ferry.connectors.exceptions import DecodeError, UntypedRecordsError
from ferry.connectors.formats import (
    InferredTable,
    bad_record,
    internal_error,
    json_error,
    key_mismatch,
)
from ferry.connectors.formats.connect_types import ConversionError, RowConverter
from ferry.connectors.formats.debezium_columns import EnvelopeRefinement, PayloadRows
from ferry.connectors.formats.debezium_typed import MAX_MISSES, TypedPayloads
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.formats.placeholders import Markers, Placeholders, mark
from ferry.connectors.formats.source_order import source_order
from ferry.connectors.record import RecordLike
from ferry.model.events import (
    DataChange,
    Event,
    Op,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    Tombstone,
    TruncateTable,
)
from ferry.model.raw_values import RawValues
from ferry.model.schema import Schema, TableId
from ferry.model.unavailable import DEFAULT_PLACEHOLDER
from ferry.pipeline.collector import collection_paused

_OPS = {"c": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE, "r": Op.READ}
_ENVELOPE = b'{"schema":'
_PAYLOAD_KEY = b'"payload"'
_MAX_CACHED_SCHEMAS = 1024
#: The prefix of the fields ``ExtractNewRecordState`` adds (``add.fields.prefix``'s default).
_METADATA = "__"
#: Fields a flattened row does not have (a change event's, a schema-change event's).
_ENVELOPE_FIELDS = ("op", "before", "after", "source", "tableChanges")
_TRUE = ("true", True)
#: Builds a NamedTuple without its Python-level ``__new__`` (the hot path makes two per record).
_new = tuple.__new__
_asdict = msgspec.structs.asdict
_encode = msgspec.json.encode
Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class _Plan:
    """What one envelope schema says about rows: their converter and their table schema."""

    row: RowConverter | None
    error: str | None = None
    schemas: dict[tuple[str, ...], Schema] = field(default_factory=dict)
    connect_schema: Any = None
    """The record's Connect schema, for :meth:`flattened`."""
    flat: _Plan | None = None
    typed: TypedPayloads | None = None
    """The typed decoder of the payloads of this schema, when its columns' types allow one."""
    unavailable: Markers | None = None
    """Per column, the value Debezium's unavailable-value placeholder is read as (None: not
    found yet)."""

    def flattened(self) -> _Plan:
        """The plan of the same schema read as a flattened row (``ExtractNewRecordState``)."""
        if self.flat is None:
            schema = self.connect_schema
            fields = schema.get("fields") if type(schema) is dict else None
            if type(fields) is not list:
                self.flat = _Plan(None, "the record's schema is not a Kafka Connect struct")
            else:
                columns = [f for f in fields if not (type(f) is dict and _is_metadata(f.get("field")))]
                try:
                    self.flat = _Plan(RowConverter({**schema, "fields": columns}))
                except DecodeError as e:
                    self.flat = _Plan(None, f"the record's schema is invalid: {e.reason}")
        return self.flat

    def schema(self, keys: tuple[str, ...]) -> Schema:
        schema = self.schemas.get(keys)
        if schema is None:
            assert self.row is not None
            names = self.row.names
            schema = Schema(self.row.columns, tuple(k for k in keys if k in names))
            self.schemas[keys] = schema
        return schema


_INFER = _Plan(None)
#: Rows of a typed decoder whose columnar columns are converted together: enough to convert each
#: column in one call, few enough that the rows are still in the CPU's caches.
_COLUMN_CHUNK = 64
#: Times a partition's typed decoder of inferred rows is made again before it is given up (a
#: table whose values keep changing type).
_MAX_REBUILDS = 32


@dataclass(slots=True, eq=False)
class _InferredShape:
    """A partition's typed decoder of rows without the envelope, for one table."""

    table: _Table
    typed: TypedPayloads | None = None
    kinds: dict[str, type] = field(default_factory=dict)
    schema: Schema | None = None
    rebuilt: int = 0


def _key_payload(key: bytes, prefix: bytes) -> Any:
    """The JSON of a key's payload: after ``prefix`` (its schema's bytes, up to ``"payload":``),
    or the whole key when ``prefix`` is empty. Raises ``orjson.JSONDecodeError``."""
    return orjson.loads(key[len(prefix) : key.rfind(b"}")] if prefix else key)


def _key_is_rows(values: Row, row: Any) -> bool:
    """Whether a key's JSON values are those of its row struct, both as read (before any
    conversion); a key column the row does not have is not compared."""
    return all(
        type(in_row := getattr(row, column, value)) is type(value) and in_row == value
        for column, value in values.items()
    )


def _parsed_key_matches(key: bytes, prefix: bytes, names: tuple[str, ...], row: Any) -> bool:
    """Whether a key's JSON values are its row struct's, as :meth:`DebeziumJsonDecoder._typed_key`
    and :meth:`~DebeziumJsonDecoder._typed_change` read them: the key after ``prefix`` (``b""``:
    the whole key, whose columns must be ``names``)."""
    if prefix and not key.startswith(prefix):
        return False
    try:
        document = _key_payload(key, prefix)
    except orjson.JSONDecodeError:
        return False
    if type(document) is not dict or (not prefix and tuple(document) != names):
        return False
    return not names or _key_is_rows(document, row)


@dataclass(slots=True, eq=False)
class _Run:
    """What a partition's records have been, as long as they keep to it: the record schema (its
    bytes before the payload), the typed decoder of its payloads, the table and its schema, and
    the key's schema and columns. The records of a partition that match its run are decoded by
    :meth:`DebeziumJsonDecoder._decode_runs` with a few comparisons each; the first that does not
    match takes the per-record path, which makes the partition's run again.

    A run only ever accepts what :meth:`DebeziumJsonDecoder._typed_change` would accept, and gives
    the same events."""

    topic: str
    partition: int
    prefix: bytes
    """The bytes before the payload (``b""`` for records without the envelope)."""
    typed: TypedPayloads
    plan: _Plan | None
    """The envelope's plan (None for rows whose types are inferred)."""
    table: _Table
    source: tuple[str | None, str | None, str]
    """The ``source`` block's database, schema and table."""
    key_prefix: bytes | None
    """The key's bytes before its payload (``b""`` for a key without the envelope, None for
    records without a key)."""
    key_names: tuple[str, ...]
    schema: Schema
    key_column: str | None = None
    """The key's one column, when its keys are written as ``key_head``, the column's value as
    msgspec writes it, and ``key_tail`` (compact JSON, such as Kafka Connect's): such a key is
    compared with its row's value by its bytes, without parsing it."""
    key_head: bytes = b""
    key_tail: bytes = b""
    key_format: bytes = b""
    """``key_head``, ``%d`` and ``key_tail`` (their ``%`` doubled): an integer key's bytes are
    ``key_format % value``, one comparison."""


@dataclass(slots=True, eq=False)
class _Table:
    """Per (table, partition) state."""

    table_id: TableId
    connector: str | None = None
    """The ``source.connector`` of the table's change events (``mysql``, ``postgresql``, ...)."""
    inferred: InferredTable = field(default_factory=InferredTable.empty)
    emitted: Schema | None = None
    """The schema last emitted for the table in this partition."""
    version: int = -1
    """The version of the definitions that ``refined`` and ``shapes`` were matched against."""
    refined_plan: _Plan | None = None
    refined: _Refined | None = None
    """The DDL's refinement of ``refined_plan``'s rows, when a definition matched them."""
    shapes: dict[tuple[str, ...], _Defined | None] = field(default_factory=dict)
    """Payload-only rows by their column names: the definition that matched them, if any."""
    converter: RowConverter | PayloadRows | None = None
    """What converted the last flattened row: a delete by key converts its key the same way."""


@dataclass(slots=True, eq=False)
class _Refined:
    refinement: EnvelopeRefinement
    schemas: dict[tuple[str, ...], Schema] = field(default_factory=dict)

    def schema(self, keys: tuple[str, ...]) -> Schema:
        schema = self.schemas.get(keys)
        if schema is None:
            schema = self.schemas[keys] = self.refinement.schema(keys)
        return schema


@dataclass(slots=True, eq=False)
class _Defined:
    rows: PayloadRows
    schemas: dict[tuple[str, ...], Schema] = field(default_factory=dict)

    def schema(self, keys: tuple[str, ...]) -> Schema:
        schema = self.schemas.get(keys)
        if schema is None:
            schema = self.schemas[keys] = self.rows.schema(keys)
        return schema


_State = TypeVar("_State")


class DebeziumChangeDecoder(Generic[_State]):
    """What the Debezium change-event decoders (JSON, Avro) share: the state of each table, by the
    ``source`` block's database, schema, table and the topic and partition (a record naming a table
    on another table's topic has a state of its own: it is refused, see
    :class:`~ferry.pipeline.route.TableSelection`), or by the topic and partition
    when the event has no ``source`` table; and the event of an envelope without a row."""

    #: The envelope's field holding a schema change, and the format that reads it.
    ddl_field: ClassVar[str]
    ddl_format: ClassVar[str]

    _tables: dict[tuple[Any, ...], _State]

    def _table_state(self, table_id: TableId, connector: str | None) -> _State:
        """The state of a table first seen (``connector``: the ``source`` block's, when it has one)."""
        raise NotImplementedError

    def _new_table(self, source: Row, topic: str, partition: int) -> _State:
        table = self._tables[(source.get("db"), source.get("schema"), source["table"], topic, partition)] = (
            self._table_state(source_table_id(source), _connector(source))
        )
        return table

    def _topic_table(self, topic: str, partition: int) -> _State:
        state_key = ("topic", topic, partition)
        table = self._tables.get(state_key)
        if table is None:
            table = self._tables[state_key] = self._table_state(topic_table_id(topic), None)
        return table

    def _no_row_op(
        self, envelope: Row, table_id: TableId, record: RecordLike, position: SourcePosition, out: list[Event]
    ) -> None:
        out.append(
            no_row_event(
                envelope, table_id, record, position, ddl_field=self.ddl_field, ddl_format=self.ddl_format
            )
        )


class DebeziumJsonDecoder(DebeziumChangeDecoder[_Table]):
    """Decodes ``debezium-json`` records (see the module documentation)."""

    ddl_field = "ddl"
    ddl_format = "debezium-schema-change"

    def __init__(
        self,
        definitions: TableDefinitions | None = None,
        raw_values: bool = False,
        unavailable_value_placeholder: str = DEFAULT_PLACEHOLDER,
        infer_types: bool = False,
        tombstone_deletes: bool = False,
    ) -> None:
        self._definitions = definitions
        self._placeholders = Placeholders(unavailable_value_placeholder)
        """Debezium's ``unavailable.value.placeholder``: an update's column holding it is
        :data:`~ferry.model.unavailable.UNAVAILABLE` (:mod:`placeholders`)."""
        self._infer_types = infer_types
        """Whether payload-only rows without a definition take types inferred from their values."""
        self._tombstone_deletes = tombstone_deletes
        """Whether a tombstone is a delete by its key (``delete-to-tombstone``) in every partition."""
        self._raw_values = raw_values
        """Whether typed rows keep their epoch and decimal columns raw (:mod:`ferry.model.raw_values`)."""
        #: Rows of a typed decoder converted together (chunk by chunk), unless they stay raw.
        self._column_chunk = sys.maxsize if raw_values else _COLUMN_CHUNK
        self._tables: dict[tuple[Any, ...], _Table] = {}
        self._plans: dict[bytes, _Plan] = {}
        self._last_plan: dict[tuple[str, int], tuple[bytes, _Plan]] = {}
        self._last_key: dict[tuple[str, int], tuple[bytes, tuple[str, ...]]] = {}
        self._typed_rows = definitions is None
        """Whether records are decoded by typed decoders first (not where the DDL refines rows)."""
        self._inferred: dict[tuple[str, int], _InferredShape] = {}
        """Per partition without the envelope: the typed decoder of its last table's rows."""
        self._keys_seen: dict[bytes, tuple[tuple[str, ...], Row]] = {}
        """The keys of the batch being decoded that the typed path parsed, by their bytes."""
        self._columnar: dict[tuple[TypedPayloads, TableId], list[Row]] = {}
        """The rows of the batch being decoded whose columnar columns are still to convert, by
        typed decoder and table."""
        self._columnar_tables: dict[tuple[TypedPayloads, TableId], _Table] = {}
        """The table state (of one of its partitions) of each entry of :attr:`_columnar`."""
        self._runs: dict[tuple[str, int], _Run] = {}
        """Per partition: the shape its last record had, when the typed decoder read it."""
        self._deletes: dict[tuple[str, int], tuple[int, bytes | None]] = {}
        """Per partition: the offset and key of its last delete (a tombstone after it is its own)."""
        self._flat_tables: dict[tuple[str, int], _Table] = {}
        """Per partition whose last record was a flattened row: its table (a delete by key is of
        that table)."""
        self._key_converters: dict[bytes, RowConverter | None] = {}
        """Converters of keys by their schema's bytes, for deletes by key of a table without rows yet."""

    def decode(self, records: Sequence[RecordLike]) -> list[Event]:
        with collection_paused():
            return self._decode(records)

    def _decode(self, records: Sequence[RecordLike]) -> list[Event]:
        out: list[Event] = []
        self._keys_seen.clear()
        index, count = 0, len(records)
        record_path = self._decode_record
        while index < count:
            if self._runs:
                index = self._decode_runs(records, index, out)
                if index == count:
                    break
            record_path(records[index], out)
            index += 1
        if self._columnar:
            if self._raw_values:
                out[:0] = self._raw_rows()
            else:
                for (typed, _), rows in self._columnar.items():
                    typed.convert_columns(rows)
            self._columnar.clear()
            self._columnar_tables.clear()
        return out

    def _raw_rows(self) -> list[Event]:
        """The batch's typed rows with their epoch and decimal columns raw, one event per typed
        decoder (their key columns converted: rows are matched by them)."""
        events: list[Event] = []
        for entry, rows in self._columnar.items():
            if not rows:
                continue
            typed, table = entry[0], self._columnar_tables[entry]
            keys = set(table.emitted.primary_keys) if table.emitted is not None else set()
            raw = tuple(c for c in typed.columnar if c[0] not in keys)
            if len(raw) < len(typed.columnar):
                typed.convert_columns(rows, tuple(c for c in typed.columnar if c[0] in keys))
            if raw:
                events.append(RawValues(table.table_id, raw, rows))
        return events

    def _decode_runs(self, records: Sequence[RecordLike], index: int, out: list[Event]) -> int:
        """Decode the records from ``index`` on as long as each matches its partition's run (see
        :class:`_Run`): the index of the first that does not (or of the end)."""
        append, runs, columnar, encode, count = out.append, self._runs, self._columnar, _encode, len(records)
        deletes = self._deletes
        chunk = self._column_chunk
        new, position_type, data_change, ops, delete, update, envelope = (
            _new,
            SourcePosition,
            DataChange,
            _OPS,
            Op.DELETE,
            Op.UPDATE,
            _ENVELOPE,
        )
        decode_errors = (msgspec.ValidationError, msgspec.DecodeError)
        run: _Run | None = None
        entered = index
        while index < count:
            record = records[index]
            topic = record.topic()
            partition = record.partition()
            if run is None or partition != run.partition or topic != run.topic:
                if run is not None and index > entered:
                    run.typed.misses = 0
                run = runs.get((topic, partition))
                if run is None or (run.plan is not None and run.plan.typed is not run.typed):
                    return index
                entered = index
                typed, prefix, table, schema = run.typed, run.prefix, run.table, run.schema
                decode, plain, row_of, rows = typed.decode, typed.plain, typed.row, None
                unavailable = typed.unavailable
                start = len(prefix)
                db, schema_name, name = run.source
                key_prefix, key_names, key_column = run.key_prefix, run.key_names, run.key_column
                key_head, key_tail, key_format = run.key_head, run.key_tail, run.key_format
                head_end, tail_start = len(key_head), -len(key_tail)
                table_id = table.table_id
                if typed.columnar:
                    rows = columnar.get((typed, table_id))
                    if rows is None:
                        rows = columnar[(typed, table_id)] = []
                        self._columnar_tables[(typed, table_id)] = table
            value = record.value()
            if value is None:
                break
            try:
                if start:
                    if not value.startswith(prefix) or not value.endswith(b"}"):
                        break
                    payload = decode(value[start:-1])
                else:
                    if value.startswith(envelope):
                        break
                    payload = decode(value)
            except decode_errors:
                break
            op = ops.get(payload.op)
            source = payload.source
            if (
                op is None
                or source is None
                or source.table != name
                or source.db != db
                or source.schema != schema_name
            ):
                break
            after_struct, before_struct = payload.after, payload.before
            row_struct = before_struct if op is delete else after_struct
            if row_struct is None:
                break
            key = record.key()
            if key_prefix is None:
                if key is not None:
                    break
            elif key is None:
                break
            else:
                row_struct = after_struct if after_struct is not None else before_struct
                if not (
                    key_column is not None
                    and (
                        key == key_format % key_value
                        if type(key_value := getattr(row_struct, key_column)) is int
                        else type(key_value) is str
                        and key.startswith(key_head)
                        and key.endswith(key_tail)
                        and key[head_end:tail_start] == encode(key_value)
                    )
                ) and not _parsed_key_matches(key, key_prefix, key_names, row_struct):
                    break
            if plain:
                after = None if after_struct is None else _asdict(after_struct)
                before = None if before_struct is None else _asdict(before_struct)
            else:
                after = before = None
                if after_struct is not None and (after := row_of(after_struct)) is None:
                    break
                if before_struct is not None and (before := row_of(before_struct)) is None:
                    break
            if table.emitted is not schema:
                break
            if op is update and unavailable and after is not None:
                after = mark(after, unavailable)
            if rows is not None:  # as _typed_change keeps them, written out here: no call per record
                if after is not None:
                    rows.append(after)
                if before is not None:
                    rows.append(before)
                if len(rows) >= chunk:
                    typed.convert_columns(rows)
                    rows.clear()
            offset = record.offset()
            append(
                new(
                    data_change,
                    (
                        table_id,
                        op,
                        before,
                        after,
                        new(position_type, (topic, partition, offset)),
                        source.ts_ms or payload.ts_ms,
                    ),
                )
            )
            if op is delete:
                deletes[(topic, partition)] = (offset, key)
            index += 1
        if run is not None and index > entered:
            run.typed.misses = 0
        return index

    def _decode_record(self, record: RecordLike, out: list[Event]) -> None:
        """Decode one record the general way (and make its partition's run when it has one)."""
        try:
            value = record.value()
            topic = record.topic()
            partition = record.partition()
            position = _new(SourcePosition, (topic, partition, record.offset()))
            if self._runs:
                self._runs.pop((topic, partition), None)
            if value is None:
                self._tombstone(record, position, out)
                return
            plan = _INFER
            payload: Any = None
            if value.startswith(_ENVELOPE):
                cached = self._last_plan.get((topic, partition))
                if cached is not None and value.startswith(cached[0]):
                    end = value.rfind(b"}")
                    if end == len(value) - 1 or not value[end + 1 :].strip():
                        typed = cached[1].typed
                        if typed is not None and self._typed_rows:
                            data = value[len(cached[0]) : end]
                            if self._typed_change(
                                typed, data, record, position, out, plan=cached[1], prefix=cached[0]
                            ):
                                return
                        try:
                            payload = orjson.loads(value[len(cached[0]) : end])
                            plan = cached[1]
                        except orjson.JSONDecodeError:
                            plan = _INFER
                if plan is _INFER:
                    payload, plan = self._envelope(_parse(value), value, topic, partition)
            else:
                shape = self._inferred.get((topic, partition)) if self._typed_rows else None
                if (
                    shape is not None
                    and shape.typed is not None
                    and self._typed_change(
                        shape.typed, value, record, position, out, expected=shape.table, prefix=b""
                    )
                ):
                    return
                try:
                    payload = orjson.loads(value)
                except orjson.JSONDecodeError as e:
                    raise DecodeError(json_error(e)) from None
                if type(payload) is dict and "payload" in payload and "schema" in payload:
                    payload, plan = self._envelope(payload, value, topic, partition)
            if payload is None:
                self._key_delete(record, plan, position, out)
                return
            if type(payload) is not dict:
                raise DecodeError("not a Debezium change event: the payload is not a JSON object")
            code = payload.get("op")
            op = _OPS.get(code)  # type: ignore[arg-type]
            source = payload.get("source")
            if op is None and code is None and not any(f in payload for f in _ENVELOPE_FIELDS):
                self._flattened(payload, plan, record, position, out)
                return
            if self._flat_tables:
                self._flat_tables.pop((topic, partition), None)  # the partition's rows have the envelope
            if type(source) is dict and (name := source.get("table")):
                table = self._tables.get((source.get("db"), source.get("schema"), name, topic, partition))
                if table is None:
                    table = self._new_table(source, topic, partition)
            else:
                table = self._topic_table(topic, partition)
            if op is None:
                self._no_row_op(payload, table.table_id, record, position, out)
                return
            if plan.error is not None:
                raise DecodeError(plan.error)
            before: Row | None = payload.get("before")
            after: Row | None = payload.get("after")
            if (before is not None and type(before) is not dict) or (
                after is not None and type(after) is not dict
            ):
                raise DecodeError("'before' and 'after' must be JSON objects or null")
            key = record.key()
            keys, key_row = ((), None) if key is None else self._key_names(key, topic, partition)
            inferred = plan.row is None and self._definitions is None
            if keys and inferred:  # before the row's values reach the table's inferred schema
                self._check_key(key, after if after is not None else before, topic, partition, key_row)
            converter, schema = self._convert(table, plan, keys, after, before, position=position)
            if keys and not inferred:
                self._check_key(
                    key,
                    after if after is not None else before,
                    topic,
                    partition,
                    key_row,
                    converter=converter,
                    table=table,
                )
            if op is Op.DELETE:
                self._deletes[(topic, partition)] = (position.offset, key)
                if before is None:
                    before = self._key_row(key, converter, table)
            elif after is None:
                raise DecodeError(f"op {payload['op']!r} without an 'after' row")
            elif op is Op.UPDATE:
                after = self._mark_unavailable(after, plan)
            if table.emitted is not schema:
                if schema.columns and (table.emitted is None or table.emitted != schema):
                    order = source_order(source)
                    out.append(
                        SchemaObserved(
                            table.table_id, schema, position, connector=table.connector, source_order=order
                        )
                    )
                table.emitted = schema
            ts = source.get("ts_ms") if type(source) is dict else None
            out.append(
                _new(DataChange, (table.table_id, op, before, after, position, ts or payload.get("ts_ms")))
            )
            if plan is _INFER and self._typed_rows:
                self._learned(topic, partition, table)
        except DecodeError as e:
            out.append(bad_record(record, e.reason))
        except UntypedRecordsError:
            raise  # the job, not the record, is wrong
        except Exception as e:  # a record must never stop the batch
            out.append(bad_record(record, internal_error(e)))

    # ------------------------------------------------------------------------------- rows

    def _convert(
        self,
        table: _Table,
        plan: _Plan,
        keys: tuple[str, ...],
        after: Row | None,
        before: Row | None,
        *,
        position: SourcePosition,
    ) -> tuple[RowConverter | PayloadRows | None, Schema]:
        """Convert a change's rows in place: their converter and their table's schema. A
        payload-only row without a definition raises :class:`UntypedRecordsError` unless types
        inferred from its values are accepted."""
        row = plan.row
        definitions = self._definitions
        if row is not None:
            try:
                if after is not None:
                    row.convert(after)
                if before is not None:
                    row.convert(before)
                if definitions is None:
                    return row, plan.schema(keys)
                refined = self._refined(table, plan, row, definitions)
                if refined is None:
                    return row, plan.schema(keys)
                if after is not None:
                    refined.refinement.apply(after)
                if before is not None:
                    refined.refinement.apply(before)
            except ConversionError as e:
                raise DecodeError(e.reason) from None
            return row, refined.schema(keys)
        if definitions is not None:
            defined = self._defined(table, after if after is not None else before, definitions)
            if defined is not None:
                try:
                    if after is not None:
                        defined.rows.convert(after)
                    if before is not None:
                        defined.rows.convert(before)
                except ConversionError as e:
                    raise DecodeError(e.reason) from None
                return defined.rows, defined.schema(keys)
        if not self._infer_types and (after is not None or before is not None):
            raise UntypedRecordsError(_untyped(table.table_id, definitions is not None), **position._asdict())
        inferred = table.inferred
        changed = inferred.with_keys(keys) if keys != inferred.keys else False
        if after is not None and inferred.observe(after):
            changed = True
        if before is not None and inferred.observe(before):
            changed = True
        return None, inferred.rebuild() if changed else inferred.schema

    def _refined(
        self, table: _Table, plan: _Plan, row: RowConverter, definitions: TableDefinitions
    ) -> _Refined | None:
        """The DDL's refinement of an envelope's rows, matched once per schema, table and version."""
        if table.refined_plan is plan and table.version == definitions.version:
            return table.refined
        definition = definitions.match(table.table_id, row.names)
        table.refined_plan, table.version = plan, definitions.version
        table.shapes.clear()
        table.refined = (
            None if definition is None else _Refined(EnvelopeRefinement.of(row.fields, definition))
        )
        return table.refined

    def _defined(self, table: _Table, row: Row | None, definitions: TableDefinitions) -> _Defined | None:
        """The definition of payload-only rows with ``row``'s columns, matched once per shape."""
        if row is None:
            return None
        if table.version != definitions.version:
            table.shapes.clear()
            table.refined_plan = table.refined = None
            table.version = definitions.version
        shape = tuple(row)
        if shape in table.shapes:
            return table.shapes[shape]
        version = definitions.version
        definition = definitions.match(table.table_id, frozenset(shape))
        if definitions.version != version:  # a refresh added definitions: match the others again
            table.shapes.clear()
            table.refined_plan = table.refined = None
            table.version = definitions.version
        defined = None if definition is None else _Defined(PayloadRows(definition))
        table.shapes[shape] = defined
        return defined

    # ------------------------------------------------------------------------------ typed rows

    def _typed_change(
        self,
        typed: TypedPayloads,
        data: bytes,
        record: RecordLike,
        position: SourcePosition,
        out: list[Event],
        *,
        plan: _Plan | None = None,
        expected: _Table | None = None,
        prefix: bytes | None = None,
    ) -> bool:
        """Decode one change event with a typed decoder (see :mod:`debezium_typed`): True when its
        events are appended, False, with nothing appended, when the generic path must decode it.
        ``plan`` is the envelope's, None for rows whose types are inferred for ``expected``. With
        ``prefix`` (the record's bytes before ``data``), a change appended makes the run of its
        partition (:class:`_Run`)."""
        try:
            payload = typed.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError):
            typed.misses += 1
            if typed.misses > MAX_MISSES:
                self._give_up(typed, plan, position)
            return False
        op = _OPS.get(payload.op)
        source = payload.source
        if op is None or source is None or not source.table:
            return False
        after_struct, before_struct = payload.after, payload.before
        if (before_struct if op is Op.DELETE else after_struct) is None:
            return False  # the generic path takes a delete's before-image from its key, or refuses
        table = self._tables.get((source.db, source.schema, source.table, position.topic, position.partition))
        if table is None or (expected is not None and table is not expected):
            return False
        key = record.key()
        if key is None:
            names: tuple[str, ...] = ()
        else:
            found = self._keys_seen.get(key)
            if found is None:
                found = self._typed_key(key, position.topic, position.partition)
                if found is None:
                    return False
                self._keys_seen[key] = found
            names, key_values = found
            if names and not _key_is_rows(
                key_values, after_struct if after_struct is not None else before_struct
            ):
                return False
        after = before = None
        if typed.plain:
            if after_struct is not None:
                after = _asdict(after_struct)
            if before_struct is not None:
                before = _asdict(before_struct)
        else:
            if after_struct is not None and (after := typed.row(after_struct)) is None:
                return False
            if before_struct is not None and (before := typed.row(before_struct)) is None:
                return False
        if op is Op.UPDATE and typed.unavailable and after is not None:
            after = mark(after, typed.unavailable)
        if plan is not None:
            schema = plan.schemas.get(names)
            if schema is None:
                schema = plan.schema(names)
        else:
            inferred = table.inferred
            if names != inferred.keys or inferred.schema is not typed.schema:
                return False
            schema = inferred.schema
        if table.emitted is not schema:
            if schema.columns and (table.emitted is None or table.emitted != schema):
                order = source.order()
                out.append(
                    SchemaObserved(
                        table.table_id, schema, position, connector=table.connector, source_order=order
                    )
                )
            table.emitted = schema
        typed.misses = 0
        if typed.columnar:
            entry = (typed, table.table_id)
            rows = self._columnar.get(entry)
            if rows is None:
                rows = self._columnar[entry] = []
                self._columnar_tables[entry] = table
            if after is not None:
                rows.append(after)
            if before is not None:
                rows.append(before)
            if len(rows) >= self._column_chunk:
                typed.convert_columns(rows)
                rows.clear()
        out.append(
            _new(DataChange, (table.table_id, op, before, after, position, source.ts_ms or payload.ts_ms))
        )
        if op is Op.DELETE:
            self._deletes[(position.topic, position.partition)] = (position.offset, key)
        if self._flat_tables:
            self._flat_tables.pop((position.topic, position.partition), None)
        if prefix is not None:
            run = self._runs[(position.topic, position.partition)] = _Run(
                position.topic,
                position.partition,
                prefix,
                typed,
                plan,
                table,
                (source.db, source.schema, source.table),
                None if key is None else self._key_prefix(key, position.topic, position.partition),
                names,
                schema,
            )
            if key is not None and len(names) == 1:
                self._key_form(run, key, after_struct if after_struct is not None else before_struct)
        return True

    def _key_prefix(self, key: bytes, topic: str, partition: int) -> bytes:
        """The bytes before a key's payload that :meth:`_typed_key` found (``b""``: none)."""
        schema = self._key_schema(key, topic, partition)
        return b"" if schema is None else schema[0]

    def _key_schema(self, key: bytes, topic: str, partition: int) -> tuple[bytes, tuple[str, ...]] | None:
        """The partition's last key schema (its bytes up to ``"payload":``, its columns), when
        ``key`` has it."""
        cached = self._last_key.get((topic, partition))
        return cached if cached is not None and key.startswith(cached[0]) else None

    @staticmethod
    def _key_form(run: _Run, key: bytes, row: Any) -> None:
        """The bytes around the value of a one-column key (see :attr:`_Run.key_column`), when the
        run's first key is written that way."""
        assert run.key_prefix is not None
        column = run.key_names[0]
        value = getattr(row, column, None)
        if type(value) is not int and type(value) is not str:
            return
        head = run.key_prefix + b"{" + _encode(column) + b":"
        tail = b"}}" if run.key_prefix else b"}"
        if key == head + _encode(value) + tail:
            run.key_column, run.key_head, run.key_tail = column, head, tail
            run.key_format = head.replace(b"%", b"%%") + b"%d" + tail.replace(b"%", b"%%")

    def _typed_key(self, key: bytes, topic: str, partition: int) -> tuple[tuple[str, ...], Row] | None:
        """A key's column names and JSON values, or None when the generic path must read it."""
        schema = self._key_schema(key, topic, partition)
        try:
            document = _key_payload(key, b"" if schema is None else schema[0])
        except orjson.JSONDecodeError:
            return None
        if type(document) is not dict:
            return None
        if schema is not None:
            return schema[1], document
        if "schema" in document and "payload" in document:
            return None
        return tuple(document), document

    def _learned(self, topic: str, partition: int, table: _Table) -> None:
        """After the generic path read a row without the envelope: the partition's typed decoder
        of rows of the types inferred so far, made again when they changed."""
        inferred = table.inferred
        shape = self._inferred.get((topic, partition))
        if shape is None or shape.table is not table:
            if shape is not None:
                shape.rebuilt = _MAX_REBUILDS  # several tables in one partition: untyped from now on
                return
            shape = self._inferred[(topic, partition)] = _InferredShape(table)
        elif shape.kinds == inferred.kinds and shape.schema is inferred.schema:
            return
        if shape.rebuilt >= _MAX_REBUILDS:
            shape.typed = None
            return
        shape.rebuilt += 1
        shape.kinds, shape.schema = dict(inferred.kinds), inferred.schema
        shape.typed = TypedPayloads.of_inferred(inferred)
        if shape.typed is not None:
            shape.typed.unavailable = self._placeholders.inferred_markers(
                name for name, kind in inferred.kinds.items() if kind is str
            )

    def _mark_unavailable(self, after: Row, plan: _Plan) -> Row:
        """An update's new row with the columns that hold Debezium's placeholder unavailable
        (:func:`~ferry.connectors.formats.placeholders.mark`)."""
        if plan.row is None:
            return self._placeholders.mark_inferred(after)
        markers = plan.unavailable
        if markers is None:
            markers = plan.unavailable = self._placeholders.markers(plan.row.fields)
        return mark(after, markers) if markers else after

    def _give_up(self, typed: TypedPayloads, plan: _Plan | None, position: SourcePosition) -> None:
        """A typed decoder that keeps failing (records of another shape) is not tried any more."""
        if plan is not None:
            plan.typed = None
            return
        shape = self._inferred.get((position.topic, position.partition))
        if shape is not None and shape.typed is typed:
            shape.typed, shape.rebuilt = None, _MAX_REBUILDS

    # -------------------------------------------------------------------------- flattened rows

    def _flattened(
        self, payload: Row, plan: _Plan, record: RecordLike, position: SourcePosition, out: list[Event]
    ) -> None:
        """A record of ``ExtractNewRecordState``'s output: the row, with its metadata fields."""
        metadata = {name: payload.pop(name) for name in [n for n in payload if _is_metadata(n)]}
        table = self._flat_table(metadata, position.topic, position.partition)
        code, deleted = metadata.get("__op"), metadata.get("__deleted")
        if deleted not in (None, "true", "false", True, False):
            raise DecodeError(f'\'__deleted\' must be "true" or "false", got {deleted!r}')
        if code is not None:
            op = _OPS.get(code)
            if op is None:
                raise DecodeError(f"unknown op {code!r} in '__op'")
        else:
            op = Op.DELETE if deleted in _TRUE else Op.UPDATE
        if op is not Op.DELETE and deleted in _TRUE:
            raise DecodeError(f"'__deleted' is true but '__op' is {code!r}")
        if plan.row is not None or plan.error is not None:
            plan = plan.flattened()
            if plan.error is not None:
                raise DecodeError(plan.error)
        key = record.key()
        keys, key_row = (
            ((), None) if key is None else self._key_names(key, position.topic, position.partition)
        )
        row: Row | None = payload if payload else None
        inferred = plan.row is None and self._definitions is None
        if keys and row is not None and inferred:  # before the row reaches the inferred schema
            self._check_key(key, row, position.topic, position.partition, key_row)
        if op is Op.DELETE:
            converter, schema = self._convert(table, plan, keys, None, row, position=position)
            before, after = row if row is not None else self._key_row(key, converter, table), None
            self._deletes[(position.topic, position.partition)] = (position.offset, key)
        else:
            if row is None:
                raise DecodeError("a flattened record without columns")
            converter, schema = self._convert(table, plan, keys, row, None, position=position)
            before, after = None, row
            if op is Op.UPDATE:
                after = self._mark_unavailable(row, plan)
        table.converter = converter
        self._flat_tables[(position.topic, position.partition)] = table
        if keys and row is not None and not inferred:
            self._check_key(
                key, row, position.topic, position.partition, key_row, converter=converter, table=table
            )
        if table.emitted is not schema:
            if schema.columns and (table.emitted is None or table.emitted != schema):
                out.append(SchemaObserved(table.table_id, schema, position, connector=table.connector))
            table.emitted = schema
        ts = metadata.get("__source_ts_ms") or metadata.get("__ts_ms")
        out.append(
            _new(DataChange, (table.table_id, op, before, after, position, ts if type(ts) is int else None))
        )

    def _tombstone(self, record: RecordLike, position: SourcePosition, out: list[Event]) -> None:
        """A key without a value: a delete by the key (``ExtractNewRecordState``'s
        ``delete-to-tombstone``) when tombstones are deletes or the partition's rows are flattened,
        unless it follows the delete of its key; else passed over."""
        key = record.key()
        partition = (position.topic, position.partition)
        last = self._deletes.get(partition)
        if (
            key is None
            or (last is not None and last == (position.offset - 1, key))
            or not (self._tombstone_deletes or partition in self._flat_tables)
        ):
            out.append(Tombstone(position, key))
        else:
            self._key_delete(record, _INFER, position, out)

    def _key_delete(
        self, record: RecordLike, plan: _Plan, position: SourcePosition, out: list[Event]
    ) -> None:
        """A delete by the record key: of the partition's table (its last flattened row's, else
        the topic's), the key converted as its rows are (by ``plan``, the schema of a null row;
        else as the table's last row, the key's own schema, or the table's definition)."""
        topic, partition = position.topic, position.partition
        key = record.key()
        if key is None:
            raise DecodeError("a delete without a key (a null row, or a tombstone): nothing names its row")
        table = self._flat_tables.get((topic, partition)) or self._topic_table(topic, partition)
        keys, _ = self._key_names(key, topic, partition)
        if not keys:
            raise DecodeError("a delete by key whose key names no columns (it is not a JSON object)")
        schema: Schema | None = None
        converter: RowConverter | PayloadRows | None
        if plan is not _INFER:
            plan = plan.flattened()
            if plan.error is not None or plan.row is None:
                raise DecodeError(plan.error or "the record's schema has no columns")
            converter = plan.row
            refined = (
                None if self._definitions is None else self._refined(table, plan, plan.row, self._definitions)
            )
            schema = plan.schema(keys) if refined is None else refined.schema(keys)
        else:
            converter = table.converter or self._key_converter(key)
        before = self._key_row(key, converter, table)
        if schema is not None and table.emitted is not schema:
            if schema.columns and (table.emitted is None or table.emitted != schema):
                out.append(SchemaObserved(table.table_id, schema, position, connector=table.connector))
            table.emitted = schema
        self._deletes[(topic, partition)] = (position.offset, key)
        out.append(_new(DataChange, (table.table_id, Op.DELETE, before, None, position, None)))

    def _key_converter(self, key: bytes) -> RowConverter | None:
        """The converter of a key with its schema (the key converter's ``schemas.enable=true``)."""
        try:
            document = orjson.loads(key)
        except orjson.JSONDecodeError:
            return None
        if (
            type(document) is not dict
            or type(document.get("schema")) is not dict
            or "payload" not in document
        ):
            return None
        schema = document["schema"]
        prefix = _schema_prefix(key, schema) or orjson.dumps(schema)
        if prefix not in self._key_converters:
            if len(self._key_converters) >= _MAX_CACHED_SCHEMAS:
                self._key_converters.clear()
            try:
                self._key_converters[prefix] = RowConverter(schema)
            except DecodeError:
                self._key_converters[prefix] = None
        return self._key_converters[prefix]

    def _flat_table(self, metadata: Row, topic: str, partition: int) -> _Table:
        name = metadata.get("__table")
        if type(name) is not str or not name:
            return self._topic_table(topic, partition)
        db, schema = metadata.get("__db"), metadata.get("__schema")
        if not db and not schema:
            parts = topic.split(".")
            db = parts[-2] if len(parts) >= 2 else None
        table = self._tables.get((db, schema, name, topic, partition))
        if table is None:
            table = self._new_table({"db": db, "schema": schema, "table": name}, topic, partition)
        return table

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
            if plan.row is not None:
                plan.unavailable = self._placeholders.markers(plan.row.fields)
                if plan.typed is not None:
                    plan.typed.unavailable = plan.unavailable
        if prefix is not None:
            self._last_plan[(topic, partition)] = (prefix, plan)
        return plan

    def _key_names(self, key: bytes, topic: str, partition: int) -> tuple[tuple[str, ...], Row | None]:
        """The key's column names, and its values when finding the names parsed them (a key
        without the envelope): :meth:`_check_key` then does not parse the key again."""
        schema = self._key_schema(key, topic, partition)
        if schema is not None:
            return schema[1], None
        try:
            document = orjson.loads(key)
        except orjson.JSONDecodeError:
            return (), None  # a key that is not JSON names no columns
        if type(document) is not dict:
            return (), None
        if "schema" in document and "payload" in document:
            schema = document["schema"]
            payload = document["payload"]
            fields = schema.get("fields") if type(schema) is dict else None
            if type(fields) is list:
                names = tuple(f["field"] for f in fields if type(f) is dict and type(f.get("field")) is str)
            else:
                names = tuple(payload) if type(payload) is dict else ()
            prefix = _schema_prefix(key, schema)
            if prefix is not None:
                self._last_key[(topic, partition)] = (prefix, names)
            return names, payload if type(payload) is dict else None
        return tuple(document), document

    def _check_key(
        self,
        key: bytes | None,
        row: Row | None,
        topic: str,
        partition: int,
        document: Row | None = None,
        *,
        converter: RowConverter | PayloadRows | None = None,
        table: _Table | None = None,
    ) -> None:
        """A record whose key names other values than its row would be written under the row's key:
        it is a bad record (with both, as read). ``document`` is the key's values when already parsed;
        ``converter`` converted the row (of ``table``)."""
        if key is None or row is None:
            return
        if document is None:
            schema = self._key_schema(key, topic, partition)
            try:
                document = _key_payload(key, b"" if schema is None else schema[0])
                if (
                    schema is None
                    and type(document) is dict
                    and "schema" in document
                    and "payload" in document
                ):
                    document = document["payload"]
            except orjson.JSONDecodeError:
                return  # a key that is not JSON names no columns
            if type(document) is not dict:
                return
        reason = key_mismatch(document, row, columns=True)
        if reason is not None and converter is not None:
            # the row's values are converted (days to dates, base64 to decimals): so is the key then
            with contextlib.suppress(DecodeError):
                converted = self._converted_key(dict(document), converter, table)
                reason = key_mismatch(converted, row, columns=True)
        if reason is not None:
            raise DecodeError(reason)

    def _key_row(self, key: bytes | None, converter: RowConverter | PayloadRows | None, table: _Table) -> Row:
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
        if converter is None and self._definitions is not None:
            latest = self._definitions.latest(table.table_id)
            if latest is not None and all(name in latest for name in document):
                converter = PayloadRows(latest)
        return document if converter is None else self._converted_key(document, converter, table)

    @staticmethod
    def _converted_key(document: Row, converter: RowConverter | PayloadRows, table: _Table | None) -> Row:
        """The key's values converted in place as its row's are."""
        try:
            converter.convert_present(document)
            if type(converter) is RowConverter and table is not None and table.refined is not None:
                table.refined.refinement.apply(document)
        except ConversionError as e:
            raise DecodeError(f"key {e.reason}") from None
        return document

    # --------------------------------------------------------------------------------- tables

    def _table_state(self, table_id: TableId, connector: str | None) -> _Table:
        return _Table(table_id, connector)


def source_table_id(source: Row) -> TableId:
    """MySQL ``db``/``table``; connectors whose source block has a ``schema``: ``schema``/``table``."""
    db, schema, name = source.get("db"), source.get("schema"), source["table"]
    return TableId(None, str(schema) if schema else (str(db) if db else None), str(name))


def _connector(source: Row) -> str | None:
    connector = source.get("connector")
    return connector if isinstance(connector, str) else None


def topic_table_id(topic: str) -> TableId:
    """The last two parts of a topic name (``server.db.table``)."""
    parts = topic.split(".")
    return TableId(None, parts[-2], parts[-1]) if len(parts) >= 2 else TableId(None, None, topic)


def no_row_event(
    envelope: Row,
    table_id: TableId,
    record: RecordLike,
    position: SourcePosition,
    *,
    ddl_field: str,
    ddl_format: str,
) -> Event:
    """The event of a change event without a row: a truncate (in order with its partition's rows),
    or a bad record that says what it is."""
    code = envelope.get("op")
    if code == "t":
        order = source_order(envelope.get("source"))
        return SchemaHint(table_id, (TruncateTable(table_id),), "TRUNCATE", True, position, order)
    if code == "m":
        return bad_record(record, "unsupported op 'm' (a logical decoding message)", position)
    if code is None:
        hint = f" (a schema-change event: use the {ddl_format} format)" if ddl_field in envelope else ""
        return bad_record(record, f"not a Debezium change event: no 'op' field{hint}", position)
    return bad_record(record, f"unknown op {code!r}", position)


def _untyped(table_id: TableId, defined: bool) -> str:
    """Why a payload-only row of ``table_id`` cannot be typed, and what to change."""
    missing = (
        f"the schema-change topic has no definition of {table_id} with the row's columns"
        if defined
        else "the job names no source of table definitions"
    )
    return (
        f"a record of {table_id} without its schema (the payload alone), and {missing}: its decimals, "
        "dates, times and bytes cannot be typed. Turn the converter's schemas on "
        "(value.converter.schemas.enable=true), or name a source of table definitions "
        "(source.schema-change.topic, the MySQL connector's topic.prefix; or value.format: "
        "debezium-avro with a schema registry), or accept types inferred from the values "
        "(source.debezium-json.infer-types: true)"
    )


def _is_metadata(name: Any) -> bool:
    return type(name) is str and name.startswith(_METADATA)


def _parse(value: bytes) -> Any:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as e:
        raise DecodeError(json_error(e)) from None


def _build_plan(schema: Any) -> _Plan:
    if type(schema) is not dict or schema.get("type") != "struct" or type(schema.get("fields")) is not list:
        return _Plan(None, "the record's schema is not a Kafka Connect struct", connect_schema=schema)
    fields = {f.get("field"): f for f in schema["fields"] if type(f) is dict}
    row_schema = fields.get("after") or fields.get("before")
    if row_schema is None:
        return _Plan(
            None,
            "the record's schema does not describe a change event: it has no 'after' or 'before'",
            connect_schema=schema,
        )
    try:
        row = RowConverter(row_schema)
    except DecodeError as e:
        return _Plan(None, f"the record's schema is invalid: {e.reason}", connect_schema=schema)
    return _Plan(row, connect_schema=schema, typed=TypedPayloads.of_connect(row))


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
