"""The Kafka sink: every change becomes one Kafka record, as Flink CDC's Kafka pipeline sink writes it.

Formats (``value.format``):

- ``debezium-json``: ``{"before", "after", "op", "source": {"db", "table"}, "ts_ms"}``, ``op`` one of
  ``c``/``u``/``d``/``r``. With ``debezium-json.include-schema.enabled`` the record is the Kafka
  Connect envelope ``{"schema", "payload"}`` that Debezium's ``JsonConverter`` writes, its schema
  built from the table's ferry schema: a schema change shows in the next record's schema.
- ``canal-json``: ``{"old", "data", "type", "database", "table", "pkNames", "es"}``, one row per
  record, ``old`` the whole previous row of an update.

Values. With the Connect envelope, values are encoded as Debezium's ``JsonConverter`` does, so
that the schema declares exactly how to read them: DECIMAL as base64 of the unscaled two's
complement integer (``org.apache.kafka.connect.data.Decimal``), DATE as days since the epoch,
TIME and TIMESTAMP as an integer count of milli-, micro- or nanoseconds by precision
(``io.debezium.time.Time``/``MicroTime``/``NanoTime``, ``Timestamp``/``MicroTimestamp``/
``NanoTimestamp``), TIMESTAMP_LTZ as ISO-8601 text in UTC (``io.debezium.time.ZonedTimestamp``),
bytes as base64. Without a schema, values are written as Flink's JSON format writes them (what
Flink CDC's sink produces): DECIMAL as a plain JSON number with every digit, DATE ``2024-01-31``,
TIME ``12:30:00.123456``, TIMESTAMP ``2024-01-31 12:30:00.123456`` (SQL spelling), TIMESTAMP_LTZ
the same in UTC with a ``Z``, bytes as base64.

Keys and partitions. A record's key is its primary key as a JSON object (``{"id": 42}``; in the
Connect envelope with ``include-schema``), or with ``key.format: csv`` one CSV line of the table id
and the key's values (``app.orders,42``, Flink CDC's csv key), so the changes of one row stay in one
partition, in order; a table without a primary key gets records without a key. The producer uses
the Java client's partitioner (``murmur2_random``) unless ``properties.partitioner`` says otherwise;
``partition.strategy: all-to-zero`` sends every record to partition 0.

Topics. ``topic`` names one topic for every table; else ``sink.tableId-to-topic.mapping`` names the
topic of the tables its patterns match; else each table has a topic named after its id.

Delivery is at least once: :meth:`KafkaSink.flush` produces the buffered changes and returns only
when the broker acknowledged every one (idempotent producer, ``acks=all``); a failure raises
:class:`~ferry.sinks.base.exceptions.SinkTransientError` and keeps the changes buffered, so the next
flush writes them again.
"""

from __future__ import annotations

import base64
import csv
import io
import logging
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from time import monotonic as time_now
from time import sleep
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.logs import kafka_logger
from ferry.model.events import CreateTable, DataChange, DropTable, Op, Row, SchemaChange
from ferry.model.schema import Schema, TableId
from ferry.model.types import STRING, DataType, TypeRoot
from ferry.model.unavailable import DEFAULT_PLACEHOLDER, UNAVAILABLE, is_partial, placeholder_value
from ferry.offsets import Offsets
from ferry.sinks.base import Sink, SinkCapabilities
from ferry.sinks.base.exceptions import SinkError, SinkTerminalError, SinkTransientError
from ferry.sinks.kafka import KAFKA
from ferry.sinks.kafka.config import KafkaSinkConfig

log = logging.getLogger(__name__)

_IGNORED_NOTE = "Kafka keeps no schema; the change travels in the message payload"

CAPABILITIES = KAFKA.capabilities

#: Record headers naming the table (``sink.add-tableId-to-header-enabled``), as Flink CDC names them.
NAMESPACE_HEADER = "namespace"
SCHEMA_NAME_HEADER = "schemaName"
TABLE_NAME_HEADER = "tableName"

_DEBEZIUM_OPS = {Op.INSERT: "c", Op.UPDATE: "u", Op.DELETE: "d", Op.READ: "r"}
_CANAL_TYPES = {Op.INSERT: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE", Op.READ: "INSERT"}
_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_MAX_TOPIC_LENGTH = 249
_MAX_CACHED_FORMATS = 1024
_EPOCH = datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_MICROSECOND = timedelta(microseconds=1)
_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS
#: Errors a value raises when it does not fit its column's type.
_VALUE_ERRORS = (TypeError, ValueError, ArithmeticError, AttributeError, orjson.JSONEncodeError)

Encode = Callable[[Any], Any]
KafkaRecord = tuple[bytes | None, bytes | None]


def topic_name(table_id: TableId) -> str:
    """The topic of a table when ``topic`` is not set: its id, with characters Kafka refuses as ``_``."""
    return _TOPIC_CHARS.sub("_", str(table_id))[:_MAX_TOPIC_LENGTH]


def table_headers(table_id: TableId) -> list[tuple[str, bytes]]:
    """The headers naming a table: ``namespace``, ``schemaName`` (when set) and ``tableName``."""
    headers = []
    if table_id.namespace is not None:
        headers.append((NAMESPACE_HEADER, table_id.namespace.encode()))
    if table_id.schema_name is not None:
        headers.append((SCHEMA_NAME_HEADER, table_id.schema_name.encode()))
    headers.append((TABLE_NAME_HEADER, table_id.table_name.encode()))
    return headers


# ------------------------------------------------------------------------- values: Flink JSON format


def _base64(value: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


def _as_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _plain_number(value: Any) -> Any:
    number = _as_decimal(value)
    if not number.is_finite():
        raise ValueError(f"{number} is not a finite number")
    return orjson.Fragment(format(number, "f"))


def _naive_utc(value: datetime) -> datetime:
    """A naive datetime in UTC (a naive one is taken to be UTC already)."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _naive(value: datetime) -> datetime:
    """A local date-time without its zone (a TIMESTAMP column holds wall-clock time)."""
    return value.replace(tzinfo=None) if value.tzinfo is not None else value


def _time_micros(value: time | timedelta) -> int:
    if isinstance(value, timedelta):
        return value // _MICROSECOND
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _json_time(value: time | timedelta) -> str:
    if isinstance(value, timedelta):
        micros = _time_micros(value)
        seconds, micro = divmod(micros, 1_000_000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        value = time(hour % 24, minute, second, micro)
    return value.replace(tzinfo=None).isoformat()


def _json_timestamp(value: datetime) -> str:
    return _naive(value).isoformat(sep=" ")


def _json_timestamp_ltz(value: datetime) -> str:
    return _naive_utc(value).isoformat(sep=" ") + "Z"


def _json_date(value: date) -> str:
    return value.date().isoformat() if isinstance(value, datetime) else value.isoformat()


def json_encoder(data_type: DataType) -> Encode | None:
    """How a value of ``data_type`` is written in Flink's JSON format; ``None``: as it is."""
    root = data_type.root
    if root is TypeRoot.DECIMAL:
        return _plain_number
    if root is TypeRoot.DATE:
        return _json_date
    if root is TypeRoot.TIME:
        return _json_time
    if root is TypeRoot.TIMESTAMP:
        return _json_timestamp
    if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        return _json_timestamp_ltz
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES):
        return _base64
    return _nested_encoder(data_type, json_encoder, pairs=False)


# ------------------------------------------------------------------- values: Kafka Connect (Debezium)


def _decimal_bytes(scale: int) -> Encode:
    def encode(value: Any) -> str:
        number = _as_decimal(value)
        if not number.is_finite():
            raise ValueError(f"{number} is not a finite number")
        unscaled = int(number.scaleb(scale).to_integral_value())
        width = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8) + 1
        return _base64(unscaled.to_bytes(width, "big", signed=True))

    return encode


def _epoch_days(value: date) -> int:
    return value.toordinal() - _EPOCH_ORDINAL


def _time_in(unit_micros: int, nanos: bool) -> Encode:
    def encode(value: time | timedelta) -> int:
        micros = _time_micros(value)
        return micros * 1000 if nanos else micros // unit_micros

    return encode


def _timestamp_in(unit_micros: int, nanos: bool) -> Encode:
    def encode(value: datetime) -> int:
        micros = (_naive(value) - _EPOCH) // _MICROSECOND
        return micros * 1000 if nanos else micros // unit_micros

    return encode


def _zoned_timestamp(value: datetime) -> str:
    return _naive_utc(value).isoformat() + "Z"


def connect_encoder(data_type: DataType) -> Encode | None:
    """How a value of ``data_type`` is written as Debezium's ``JsonConverter`` writes it."""
    root = data_type.root
    precision = data_type.precision or 0
    if root is TypeRoot.DECIMAL:
        return _decimal_bytes(data_type.scale or 0)
    if root is TypeRoot.DATE:
        return _epoch_days
    if root is TypeRoot.TIME:
        return _time_in(1000, False) if precision <= 3 else _time_in(1, precision > 6)
    if root is TypeRoot.TIMESTAMP:
        return _timestamp_in(1000, False) if precision <= 3 else _timestamp_in(1, precision > 6)
    if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        return _zoned_timestamp
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES):
        return _base64
    return _nested_encoder(data_type, connect_encoder, pairs=True)


def _nested_encoder(
    data_type: DataType, encoder: Callable[[DataType], Encode | None], *, pairs: bool
) -> Encode | None:
    """Encoders of ARRAY, MAP and ROW values whose parts need encoding. ``pairs``: a map whose keys
    are not text is written as ``[[key, value], ...]`` (``JsonConverter``'s form)."""
    root = data_type.root
    if root is TypeRoot.ARRAY:
        assert data_type.element is not None
        element = encoder(data_type.element)
        if element is None:
            return None
        return lambda value: [None if v is None else element(v) for v in value]
    if root is TypeRoot.MAP:
        assert data_type.key is not None and data_type.element is not None
        key = encoder(data_type.key) or _identity
        item = encoder(data_type.element) or _identity
        text_keys = data_type.key.root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING)
        if pairs and not text_keys:
            return lambda value: [[key(k), None if v is None else item(v)] for k, v in value.items()]
        if key is _identity and item is _identity:
            return None
        return lambda value: {key(k): None if v is None else item(v) for k, v in value.items()}
    if root is TypeRoot.ROW:
        fields = tuple((f.name, enc) for f in data_type.fields if (enc := encoder(f.type)) is not None)
        if not fields:
            return None
        return lambda value: _encode_fields(dict(value), fields)
    return None


def _identity(value: Any) -> Any:
    return value


def _encode_fields(row: Row, encoders: tuple[tuple[str, Encode], ...]) -> Row:
    for name, encode in encoders:
        value = row.get(name)
        if value is not None:
            row[name] = encode(value)
    return row


# ------------------------------------------------------------------------ Kafka Connect schemas

_CONNECT_PHYSICAL = {
    TypeRoot.BOOLEAN: "boolean",
    TypeRoot.TINYINT: "int8",
    TypeRoot.SMALLINT: "int16",
    TypeRoot.INT: "int32",
    TypeRoot.BIGINT: "int64",
    TypeRoot.FLOAT: "float",
    TypeRoot.DOUBLE: "double",
    TypeRoot.CHAR: "string",
    TypeRoot.VARCHAR: "string",
    TypeRoot.STRING: "string",
    TypeRoot.BINARY: "bytes",
    TypeRoot.VARBINARY: "bytes",
    TypeRoot.BYTES: "bytes",
}


def _logical(physical: str, name: str) -> dict[str, Any]:
    return {"type": physical, "name": name, "version": 1}


def connect_schema(data_type: DataType) -> dict[str, Any]:
    """The Kafka Connect schema of a type, as Debezium declares its columns (without ``field``)."""
    root = data_type.root
    precision = data_type.precision or 0
    schema: dict[str, Any]
    if root in _CONNECT_PHYSICAL:
        schema = {"type": _CONNECT_PHYSICAL[root]}
    elif root is TypeRoot.DECIMAL:
        schema = _logical("bytes", "org.apache.kafka.connect.data.Decimal")
        schema["parameters"] = {
            "scale": str(data_type.scale or 0),
            "connect.decimal.precision": str(data_type.precision),
        }
    elif root is TypeRoot.DATE:
        schema = _logical("int32", "io.debezium.time.Date")
    elif root is TypeRoot.TIME:
        if precision <= 3:
            schema = _logical("int32", "io.debezium.time.Time")
        else:
            schema = _logical(
                "int64", "io.debezium.time.MicroTime" if precision <= 6 else "io.debezium.time.NanoTime"
            )
    elif root is TypeRoot.TIMESTAMP:
        name = "Timestamp" if precision <= 3 else "MicroTimestamp" if precision <= 6 else "NanoTimestamp"
        schema = _logical("int64", f"io.debezium.time.{name}")
    elif root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        schema = _logical("string", "io.debezium.time.ZonedTimestamp")
    elif root is TypeRoot.VARIANT:
        schema = _logical("string", "io.debezium.data.Json")
    elif root is TypeRoot.ARRAY:
        assert data_type.element is not None
        schema = {"type": "array", "items": connect_schema(data_type.element)}
    elif root is TypeRoot.MAP:
        assert data_type.key is not None and data_type.element is not None
        schema = {
            "type": "map",
            "keys": connect_schema(data_type.key),
            "values": connect_schema(data_type.element),
        }
    else:  # ROW
        schema = {"type": "struct", "fields": [_connect_field(f.name, f.type) for f in data_type.fields]}
    schema["optional"] = data_type.nullable
    return schema


def _connect_field(name: str, data_type: DataType, comment: str | None = None) -> dict[str, Any]:
    field = connect_schema(data_type)
    field["field"] = name
    if comment:
        field["doc"] = comment
    return field


def _struct(schema: Schema, name: str, *, optional: bool, field: str | None = None) -> dict[str, Any]:
    struct: dict[str, Any] = {
        "type": "struct",
        "fields": [_connect_field(c.name, c.type, c.comment) for c in schema.columns],
        "optional": optional,
        "name": name,
    }
    if field is not None:
        struct["field"] = field
    return struct


def envelope_schema(schema: Schema, record_name: str) -> dict[str, Any]:
    """The Connect schema of a Debezium change event of a table (``<record_name>.Envelope``)."""
    value = f"{record_name}.Value"
    return {
        "type": "struct",
        "fields": [
            _struct(schema, value, optional=True, field="before"),
            _struct(schema, value, optional=True, field="after"),
            {"type": "string", "optional": False, "field": "op"},
            {
                "type": "struct",
                "fields": [
                    {"type": "string", "optional": True, "field": "db"},
                    {"type": "string", "optional": True, "field": "table"},
                ],
                "optional": False,
                "name": "io.debezium.connector.ferry.Source",
                "field": "source",
            },
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": f"{record_name}.Envelope",
    }


# ----------------------------------------------------------------------------- records of a table


class TableFormat:
    """Turns the changes of one table, with one schema, into Kafka records (key, value)."""

    def __init__(
        self,
        config: KafkaSinkConfig,
        table_id: TableId,
        schema: Schema,
        topic: str,
        placeholder: str = DEFAULT_PLACEHOLDER,
    ) -> None:
        self.table_id = table_id
        self.schema = schema
        self.topic = topic
        self.canal = config.value_format == "canal-json"
        self.upsert = config.upsert
        connect = config.include_schema
        encoder = connect_encoder if connect else json_encoder
        self._encoders = tuple((c.name, e) for c in schema.columns if (e := encoder(c.type)) is not None)
        self.keys = schema.primary_keys
        #: Per column, the source's placeholder of a value it did not send (see :meth:`_partial_row`).
        self._placeholders = {c.name: placeholder_value(c.type, placeholder) for c in schema.columns}
        self._text_placeholder = placeholder_value(STRING(), placeholder)
        self._key_encoders = tuple((n, e) for n, e in self._encoders if n in self.keys)
        self._csv_key = config.key_format == "csv"
        self._table = str(table_id)
        self._source = {"db": table_id.schema_name, "table": table_id.table_name}
        self._value_prefix = self._key_prefix = b""
        self._suffix = b""
        if connect:
            name = topic
            self._value_prefix = b'{"schema":' + orjson.dumps(envelope_schema(schema, name)) + b',"payload":'
            key_schema = _struct(
                schema.with_columns(schema.column(k) for k in self.keys), f"{name}.Key", optional=False
            )
            self._key_prefix = b'{"schema":' + orjson.dumps(key_schema) + b',"payload":'
            self._suffix = b"}"

    def records(self, change: DataChange) -> list[KafkaRecord]:
        """The records of one change: the event (and, in upsert mode, tombstones)."""
        op, before, after = change.op, change.before, change.after
        if not self.upsert or not self.keys:
            return [
                (self._key(after if op is not Op.DELETE else before), self._value(change, op, before, after))
            ]
        if op is Op.DELETE:
            key = self._key(before)
            return [(key, self._value(change, op, before, None)), (key, None)]
        if op is Op.UPDATE and before is not None and after is not None:
            old_key, new_key = self._key(before), self._key(after)
            if old_key != new_key:
                # the row moved to another key: the old key is deleted, as Debezium does
                return [
                    (old_key, self._value(change, Op.DELETE, before, None)),
                    (old_key, None),
                    (new_key, self._value(change, Op.INSERT, None, after)),
                ]
            return [(new_key, self._value(change, op, before, after))]
        return [(self._key(after), self._value(change, op, before, after))]

    def _row(self, row: Row | None) -> Row | None:
        if row is None or not self._encoders:
            return row
        return _encode_fields(dict(row), self._encoders)

    def _new_row(self, op: Op, row: Row | None) -> Row | None:
        """An update's new row: a value the source did not send is its placeholder again."""
        if op is Op.UPDATE and is_partial(row):
            assert row is not None
            row = self._partial_row(row)
        return self._row(row)

    def _partial_row(self, row: Row) -> Row:
        """The row as Debezium wrote it: each unavailable value its placeholder."""
        placeholders, text = self._placeholders, self._text_placeholder
        out = dict(row)
        for name, value in row.items():
            if value is UNAVAILABLE:
                held = placeholders.get(name, text)
                out[name] = text if held is UNAVAILABLE else held
        return out

    def _key(self, row: Row | None) -> bytes | None:
        if not self.keys or row is None:
            return None
        key = _encode_fields({k: row.get(k) for k in self.keys}, self._key_encoders)
        if self._csv_key:
            return _csv_line([self._table, *key.values()])
        body = orjson.dumps(key, option=_DUMPS_OPTIONS)
        return self._key_prefix + body + self._suffix if self._key_prefix else body

    def _value(self, change: DataChange, op: Op, before: Row | None, after: Row | None) -> bytes:
        message: dict[str, Any]
        if self.canal:
            message = {
                "old": [self._row(before)] if op is Op.UPDATE and before is not None else None,
                "data": [self._row(before) if op is Op.DELETE else self._new_row(op, after)],
                "type": _CANAL_TYPES[op],
                "database": self.table_id.schema_name,
                "table": self.table_id.table_name,
                "pkNames": list(self.keys),
            }
            if change.ts_ms is not None:
                message["es"] = change.ts_ms
        else:
            message = {
                "before": self._row(before),
                "after": self._new_row(op, after),
                "op": _DEBEZIUM_OPS[op],
                "source": self._source,
            }
            if change.ts_ms is not None:
                message["ts_ms"] = change.ts_ms
        body = orjson.dumps(message, option=_DUMPS_OPTIONS)
        return self._value_prefix + body + self._suffix if self._value_prefix else body


def _csv_line(values: list[Any]) -> bytes:
    """One CSV line without its line end (Flink's csv format): fields quoted only where needed,
    a null as an empty field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="")
    writer.writerow(["" if v is None else _csv_field(v) for v in values])
    return out.getvalue().encode()


def _csv_field(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=_DUMPS_OPTIONS).decode()
    return value


# ----------------------------------------------------------------------------------------- sink


class KafkaSink(Sink):
    """Writes change events to Kafka topics (see the module documentation)."""

    type: str = KAFKA.type
    capabilities: SinkCapabilities = CAPABILITIES

    def __init__(self, config: KafkaSinkConfig, *, pipeline: str) -> None:
        self.config = config
        self.pipeline = pipeline
        #: The source's placeholder of a value it did not send (Debezium's
        #: ``unavailable.value.placeholder``): an update's row is written with it, as Debezium wrote it.
        self.unavailable_value_placeholder = DEFAULT_PLACEHOLDER
        self._schemas: dict[TableId, Schema] = {}
        self._buffer: list[tuple[TableId, Schema, Sequence[DataChange]]] = []
        self._formats: dict[tuple[TableId, Schema], TableFormat] = {}
        self._topics: set[str] = set()
        self._failures: list[str] = []
        self._custom_headers = [(k, v.encode()) for k, v in config.custom_headers]
        #: ``partition.strategy: all-to-zero`` → partition 0; else the partitioner chooses (-1)
        self._partition = 0 if config.partition_strategy == "all-to-zero" else -1
        self._delivered = 0
        self._fatal: KafkaError | None = None
        try:
            self.producer = Producer(
                {
                    **config.producer_properties(),
                    "error_cb": self._on_error,
                },
                logger=kafka_logger(),
            )
            self.admin = AdminClient(config.admin_properties(), logger=kafka_logger())
        except KafkaException as e:
            raise SinkTerminalError(f"cannot create the Kafka client: {e}", sink=self.type) from e

    # ------------------------------------------------------------------------------- topics

    def topic(self, table_id: TableId) -> str:
        """The topic a table's records go to."""
        return self.config.topic or self.config.mapped_topic(table_id) or topic_name(table_id)

    def _ensure_topic(self, table_id: TableId) -> None:
        name = self.topic(table_id)
        if name in self._topics:
            return
        config = {"cleanup.policy": "compact"} if self.config.upsert else {}
        new = NewTopic(
            name,
            num_partitions=self.config.partitions or -1,
            replication_factor=self.config.replication_factor or -1,
            config=config,
        )
        timeout = self.config.flush_timeout_s
        futures = self.admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)
        try:
            futures[name].result(timeout=timeout)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                log.debug("topic %s exists", name)
                self._topics.add(name)
                return
            transient = isinstance(error, KafkaError) and error.retriable()
            cls = SinkTransientError if transient else SinkTerminalError
            raise cls(f"cannot create topic {name!r}: {e}", sink=self.type, table=str(table_id)) from e
        self._wait_for_leaders(table_id, name, timeout)
        log.info("created topic %s%s", name, " (compacted)" if config else "")
        self._topics.add(name)

    def _wait_for_leaders(self, table_id: TableId, name: str, timeout: float) -> None:
        """Wait until the new topic has a leader for every partition, so its first records go at once."""
        deadline = time_now() + timeout
        while True:
            try:
                described = self.admin.list_topics(topic=name, timeout=5.0).topics.get(name)
            except KafkaException:
                described = None
            if (
                described is not None
                and described.error is None
                and described.partitions
                and all(p.leader >= 0 for p in described.partitions.values())
            ):
                return
            if time_now() > deadline:
                raise SinkTransientError(
                    f"topic {name!r} has no leader for every partition after {timeout:g} s",
                    sink=self.type,
                    table=str(table_id),
                )
            sleep(0.05)

    # ------------------------------------------------------------------------------- schemas

    def table_schema(self, table_id: TableId) -> Schema | None:
        return self._schemas.get(table_id)

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        table_id = change.table_id
        if isinstance(change, CreateTable):
            if self.config.upsert and not change.schema.primary_keys:
                raise SinkTerminalError(
                    "sink.upsert needs a primary key: a compacted topic refuses records without a key",
                    sink=self.type,
                    table=str(table_id),
                )
            self._ensure_topic(table_id)
            self._schemas[table_id] = schema_after or change.schema
        elif isinstance(change, DropTable):
            # the topic and its records stay; the table is gone from the sink's view
            self._schemas.pop(table_id, None)
        elif schema_after is not None:
            # nothing to change in Kafka: the next records carry the new schema
            self._schemas[table_id] = schema_after

    # ------------------------------------------------------------------------------- rows

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """Partial rows are written with the source's placeholder, as Debezium wrote them."""
        return []

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        if changes:
            self._buffer.append((table_id, schema, list(changes)))

    def flush(self, offsets: Offsets) -> None:
        if not self._buffer:
            return
        self._failures.clear()
        count = 0
        for table_id, schema, changes in self._buffer:
            table_format = self._format(table_id, schema)
            headers = (
                table_headers(table_id) if self.config.add_table_id_header else []
            ) + self._custom_headers
            for change in changes:
                try:
                    records = table_format.records(change)
                except SinkError:
                    raise
                except _VALUE_ERRORS as e:
                    raise SinkTerminalError(
                        f"cannot encode a row at {change.position or 'an unknown position'}: "
                        f"{type(e).__name__}: {e}",
                        sink=self.type,
                        table=str(table_id),
                    ) from e
                for key, value in records:
                    self._produce(table_format.topic, key, value, headers)
                    count += 1
        remaining = self.producer.flush(self.config.flush_timeout_s)
        if self._fatal is not None:
            raise SinkTerminalError(f"the producer failed: {self._fatal.str()}", sink=self.type)
        if remaining or self._failures:
            problems = list(self._failures[:3])
            if remaining:
                problems.append(f"{remaining} not acknowledged within {self.config.flush_timeout_s:g} s")
            raise SinkTransientError(
                f"{len(self._failures) + remaining} of {count} records not delivered: " + "; ".join(problems),
                sink=self.type,
            )
        self._delivered += count
        self._buffer.clear()

    def _format(self, table_id: TableId, schema: Schema) -> TableFormat:
        cache_key = (table_id, schema)
        table_format = self._formats.get(cache_key)
        if table_format is None:
            if len(self._formats) >= _MAX_CACHED_FORMATS:
                self._formats.clear()
            table_format = TableFormat(
                self.config, table_id, schema, self.topic(table_id), self.unavailable_value_placeholder
            )
            self._formats[cache_key] = table_format
        return table_format

    def _produce(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
    ) -> None:
        while True:
            try:
                self.producer.produce(
                    topic,
                    value,
                    key,
                    partition=self._partition,
                    headers=headers or None,
                    on_delivery=self._on_delivery,
                )
                break
            except BufferError:
                self.producer.poll(0.1)
            except KafkaException as e:
                raise SinkTransientError(f"cannot produce to {topic!r}: {e}", sink=self.type) from e
        self.producer.poll(0)

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self._failures.append(f"topic {message.topic()}: {error.str()}")

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error
        log.warning("kafka producer: %s", error.str())

    @property
    def delivered(self) -> int:
        """Records acknowledged by the broker since the sink started."""
        return self._delivered

    # ------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if self._buffer:
            log.warning(
                "closing with unflushed rows for %s", ", ".join(sorted({str(t) for t, _, _ in self._buffer}))
            )
        self.producer.flush(min(self.config.flush_timeout_s, 10.0))
