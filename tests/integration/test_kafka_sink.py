"""The Kafka sink against the session's real broker; what it writes is read back with ferry's own decoders."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from ferry.connectors.formats import decoder_for
from ferry.local.kafka_broker import KafkaBrokerError, TopicFactory, delete_topic
from ferry.model.events import (
    AddColumn,
    CreateTable,
    DataChange,
    DropColumn,
    Op,
    SchemaObserved,
    SourcePosition,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    MAP,
    ROW,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    Field,
)
from ferry.sinks.base import ChangeKind, Support
from ferry.sinks.base.exceptions import SinkTerminalError, SinkTransientError
from ferry.sinks.base.registry import SINKS, sink_class
from ferry.sinks.kafka.config import KafkaSinkConfig
from ferry.sinks.kafka.sink import KafkaSink, topic_name
from tests.integration.helpers import read_all

pytestmark = pytest.mark.integration

CUSTOMERS = Schema.of(
    [
        Column("id", INT().not_null()),
        Column("name", STRING()),
        Column("score", DOUBLE()),
        Column("active", BOOLEAN()),
        Column("visits", BIGINT()),
    ],
    ["id"],
)


@pytest.fixture
def database(kafka_bootstrap: str) -> Iterator[str]:
    """A database name no other test uses; the topics of its tables are deleted afterwards."""
    name = f"db_{uuid.uuid4().hex[:12]}"
    yield name
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for topic in admin.list_topics(timeout=10).topics:
        if topic.startswith(name + "."):
            with contextlib.suppress(KafkaBrokerError):
                delete_topic(kafka_bootstrap, topic, timeout=10.0)


def make_sink(bootstrap: str, **options: Any) -> KafkaSink:
    config = KafkaSinkConfig.model_validate({"properties.bootstrap.servers": bootstrap, **options})
    return KafkaSink(config, pipeline="test")


def change(table: TableId, op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> DataChange:
    return DataChange(table, op, before, after, SourcePosition("source", 0, 0), 1_700_000_000_000)


def customer(i: int, **overrides: Any) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"user_{i}",
        "score": i / 4,
        "active": i % 2 == 0,
        "visits": 10**12 + i,
    } | overrides


def decoded(events: list[Any]) -> tuple[list[SchemaObserved], list[DataChange]]:
    schemas = [e for e in events if isinstance(e, SchemaObserved)]
    rows = [e for e in events if isinstance(e, DataChange)]
    assert len(schemas) + len(rows) == len(events), events
    return schemas, rows


def same_rows(got: list[DataChange], sent: list[DataChange]) -> None:
    assert [(c.table_id, c.op, c.before, c.after, c.ts_ms) for c in got] == [
        (c.table_id, c.op, c.before, c.after, c.ts_ms) for c in sent
    ]


def test_capabilities_create_table_applied_everything_else_ignored() -> None:
    assert sink_class("kafka") is KafkaSink
    assert SINKS["kafka"].config is KafkaSinkConfig
    for kind in ChangeKind:
        expected = Support.APPLY if kind is ChangeKind.CREATE_TABLE else Support.IGNORED
        assert KafkaSink.capabilities.support(kind) is expected


def test_config_spelling_and_refusals() -> None:
    config = KafkaSinkConfig.model_validate(
        {
            "type": "kafka",
            "properties.bootstrap.servers": "b:9092",
            "properties.compression.type": "zstd",
            "value.format": "canal-json",
            "sink.add-tableId-to-header-enabled": True,
            "partitions": 3,
            "replication.factor": 1,
        }
    )
    assert config.properties == {"bootstrap.servers": "b:9092", "compression.type": "zstd"}
    assert config.producer_properties()["enable.idempotence"] == "true"
    assert config.value_format == "canal-json" and config.add_table_id_header and config.partitions == 3
    assert config.delivery_guarantee == "at-least-once"
    refusals = {
        "properties.bootstrap.servers is required": {},
        "exactly-once is not supported": {"sink.delivery-guarantee": "exactly-once"},
        "sink.upsert needs one topic per table": {"sink.upsert": True, "topic": "all"},
        "applies to value.format debezium-json only": {
            "value.format": "canal-json",
            "debezium-json.include-schema.enabled": True,
        },
    }
    for message, options in refusals.items():
        servers = (
            {} if message.startswith("properties.bootstrap") else {"properties.bootstrap.servers": "b:9092"}
        )
        with pytest.raises(ValueError, match=message):
            KafkaSinkConfig.model_validate({**servers, **options})
    with pytest.raises(ValueError):
        KafkaSinkConfig.model_validate({"properties.bootstrap.servers": "b:9092", "sink.upsertt": True})


def test_create_table_creates_the_topic_once(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap, partitions=3)
    table = TableId(None, database, "customers")
    assert sink.table_schema(table) is None
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    assert sink.table_schema(table) == CUSTOMERS
    topic = topic_name(table)
    assert topic == f"{database}.customers"
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3
    sink.close()

    # after a restart the sink knows no schema; the repeated create finds the topic and is a no-op
    restarted = make_sink(kafka_bootstrap, partitions=3)
    assert restarted.table_schema(table) is None
    restarted.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    assert restarted.table_schema(table) == CUSTOMERS
    restarted.close()


def test_upsert_mode_creates_a_compacted_topic(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap, **{"sink.upsert": True})
    table = TableId(None, database, "customers")
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name(table))
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"

    keyless = TableId(None, database, "events")
    with pytest.raises(SinkTerminalError, match="needs a primary key"):
        sink.apply_schema_change(CreateTable(keyless, Schema.of([Column("v", INT())])), None)
    sink.close()


def test_debezium_json_round_trip(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap)
    table = TableId(None, database, "customers")
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    sent = [
        change(table, Op.READ, None, customer(1)),
        change(table, Op.INSERT, None, customer(2)),
        change(table, Op.UPDATE, customer(2), customer(2, name="renamed", score=None)),
        change(table, Op.DELETE, customer(1), None),
    ]
    sink.write(table, CUSTOMERS, sent[:2])
    sink.write(table, CUSTOMERS, sent[2:])
    sink.flush({("source", 0): 4})
    records = read_all(kafka_bootstrap, topic_name(table), 4)
    assert len(records) == 4

    first = orjson.loads(records[1].value())
    assert list(first) == ["before", "after", "op", "source", "ts_ms"]  # Flink CDC's fields, then ts_ms
    assert first["op"] == "c" and first["source"] == {"db": database, "table": "customers"}
    assert [orjson.loads(r.key()) for r in records] == [{"id": 1}, {"id": 2}, {"id": 2}, {"id": 1}]

    # payload-only records: read back as a job with debezium-json.infer-types reads them
    schemas, rows = decoded(decoder_for("debezium-json", infer_types=True).decode(records))
    same_rows(rows, sent)
    assert schemas[-1].table_id == table and schemas[-1].schema.primary_keys == ("id",)
    assert sink.delivered == 4
    sink.close()


TYPED = Schema.of(
    [
        Column("id", INT().not_null()),
        Column("small", SMALLINT()),
        Column("price", DECIMAL(12, 3)),
        Column("ratio", FLOAT()),
        Column("day", DATE()),
        Column("at", TIME(6)),
        Column("created", TIMESTAMP(6)),
        Column("seen", TIMESTAMP_LTZ(6)),
        Column("blob", BYTES()),
        Column("tags", ARRAY(STRING())),
        Column("counts", MAP(STRING(), INT())),
        Column("address", ROW(Field("city", STRING()), Field("since", DATE()))),
    ],
    ["id"],
)


def typed_row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "small": -i,
        "price": Decimal("-1234.567") * i,
        "ratio": 0.5,
        "day": date(2024, 2, 29),
        "at": time(23, 59, 58, 123456),
        "created": datetime(2024, 2, 29, 12, 30, 0, 654321),
        "seen": datetime(2024, 2, 29, 12, 30, 0, 1, tzinfo=UTC),
        "blob": bytes([0, 255, i]),
        "tags": ["a", None, "c"],
        "counts": {"x": 1, "y": None},
        "address": {"city": "Lyon", "since": date(1999, 12, 31)},
    }


def test_include_schema_round_trips_types_and_shows_an_added_column(
    kafka_bootstrap: str, database: str
) -> None:
    sink = make_sink(kafka_bootstrap, **{"debezium-json.include-schema.enabled": True})
    table = TableId(None, database, "typed")
    sink.apply_schema_change(CreateTable(table, TYPED), TYPED)
    first = [
        change(table, Op.INSERT, None, typed_row(1)),
        change(table, Op.UPDATE, typed_row(1), typed_row(2)),
    ]
    sink.write(table, TYPED, first)
    sink.flush({})

    added = Column("note", STRING())
    wider = TYPED.with_columns([*TYPED.columns, added])
    sink.apply_schema_change(AddColumn(table, added), wider)
    assert sink.table_schema(table) == wider
    second = [change(table, Op.INSERT, None, typed_row(3) | {"note": "new"})]
    sink.write(table, wider, second)
    sink.flush({})

    records = read_all(kafka_bootstrap, topic_name(table), 3)
    envelope = orjson.loads(records[0].value())
    assert set(envelope) == {"schema", "payload"}
    after = envelope["payload"]["after"]
    assert after["day"] == (date(2024, 2, 29) - date(1970, 1, 1)).days  # io.debezium.time.Date
    assert after["price"] == "7Sl5"  # base64 of ED 29 79, the unscaled -1234567 (JsonConverter)
    assert set(orjson.loads(records[0].key())) == {"schema", "payload"}

    schemas, rows = decoded(decoder_for("debezium-json").decode(records))
    same_rows(rows, [*first, *second])
    assert [s.schema for s in schemas] == [TYPED, wider]
    sink.close()


def test_a_dropped_column_leaves_the_embedded_schema(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap, **{"debezium-json.include-schema.enabled": True})
    table = TableId(None, database, "customers")
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    narrower = CUSTOMERS.with_columns(c for c in CUSTOMERS.columns if c.name != "visits")
    sink.apply_schema_change(DropColumn(table, "visits"), narrower)
    row = {k: v for k, v in customer(5).items() if k != "visits"}
    sink.write(table, narrower, [change(table, Op.INSERT, None, row)])
    sink.flush({})
    schemas, rows = decoded(
        decoder_for("debezium-json").decode(read_all(kafka_bootstrap, topic_name(table), 1))
    )
    assert schemas[0].schema == narrower and rows[0].after == row
    sink.close()


def test_canal_json_round_trip(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap, **{"value.format": "canal-json"})
    table = TableId(None, database, "customers")
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    sent = [
        change(table, Op.INSERT, None, customer(1)),
        change(table, Op.UPDATE, customer(1), customer(1, score=9.75)),
        change(table, Op.DELETE, customer(1, score=9.75), None),
    ]
    sink.write(table, CUSTOMERS, sent)
    sink.flush({})
    records = read_all(kafka_bootstrap, topic_name(table), 3)
    messages = [orjson.loads(r.value()) for r in records]
    assert list(messages[0])[:6] == ["old", "data", "type", "database", "table", "pkNames"]
    assert [m["type"] for m in messages] == ["INSERT", "UPDATE", "DELETE"]
    assert messages[1]["old"] == [customer(1)] and messages[2]["old"] is None
    assert messages[0]["pkNames"] == ["id"] and messages[0]["database"] == database

    schemas, rows = decoded(decoder_for("canal-json").decode(records))
    same_rows(rows, sent)
    assert schemas[0].schema.primary_keys == ("id",)
    sink.close()


def test_upsert_mode_follows_a_delete_with_a_tombstone(kafka_bootstrap: str, database: str) -> None:
    sink = make_sink(kafka_bootstrap, **{"sink.upsert": True})
    table = TableId(None, database, "customers")
    sink.apply_schema_change(CreateTable(table, CUSTOMERS), CUSTOMERS)
    sink.write(
        table,
        CUSTOMERS,
        [
            change(table, Op.INSERT, None, customer(1)),
            change(table, Op.DELETE, customer(1), None),
            change(table, Op.INSERT, None, customer(2)),
            change(table, Op.UPDATE, customer(2), customer(3)),  # the key changes: 2 goes, 3 comes
        ],
    )
    sink.flush({})
    records = read_all(kafka_bootstrap, topic_name(table), 7)
    shape = [
        (orjson.loads(r.key()), None if r.value() is None else orjson.loads(r.value())["op"]) for r in records
    ]
    assert shape == [
        ({"id": 1}, "c"),
        ({"id": 1}, "d"),
        ({"id": 1}, None),
        ({"id": 2}, "c"),
        ({"id": 2}, "d"),
        ({"id": 2}, None),
        ({"id": 3}, "c"),
    ]
    sink.close()


def test_one_topic_for_all_tables_with_the_table_id_in_headers(
    kafka_bootstrap: str, topic_factory: TopicFactory, database: str
) -> None:
    topic = topic_factory()
    sink = make_sink(kafka_bootstrap, topic=topic, **{"sink.add-tableId-to-header-enabled": True})
    customers = TableId(None, database, "customers")
    orders = TableId("tenant", database, "orders")
    order_schema = Schema.of(
        [Column("order_id", BIGINT().not_null()), Column("total", DOUBLE())], ["order_id"]
    )
    sink.apply_schema_change(CreateTable(customers, CUSTOMERS), CUSTOMERS)
    sink.apply_schema_change(CreateTable(orders, order_schema), order_schema)
    sink.write(customers, CUSTOMERS, [change(customers, Op.INSERT, None, customer(1))])
    sink.write(orders, order_schema, [change(orders, Op.INSERT, None, {"order_id": 7, "total": 1.5})])
    sink.flush({})
    records = read_all(kafka_bootstrap, topic, 2)
    assert [dict(r.headers()) for r in records] == [
        {"schemaName": database.encode(), "tableName": b"customers"},
        {"namespace": b"tenant", "schemaName": database.encode(), "tableName": b"orders"},
    ]
    assert [orjson.loads(r.value())["source"]["table"] for r in records] == ["customers", "orders"]
    sink.close()


def test_undelivered_records_raise_a_transient_error_and_stay_buffered() -> None:
    sink = make_sink(
        "127.0.0.1:1",
        **{"properties.message.timeout.ms": "500", "sink.flush.timeout-s": 10},
    )
    table = TableId(None, "nowhere", "customers")
    sink.write(table, CUSTOMERS, [change(table, Op.INSERT, None, customer(1))])
    with pytest.raises(SinkTransientError, match="1 of 1 records not delivered"):
        sink.flush({})
    with pytest.raises(SinkTransientError):
        sink.flush({})  # the change is still buffered and tried again
