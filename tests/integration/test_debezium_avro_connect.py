"""A real Debezium MySQL connector (Kafka Connect, MariaDB's binary log) writing through Apicurio's
Avro converter in the Confluent wire format: ``debezium-avro`` reads its records, and
``debezium-avro-schema-change`` its schema-change topic, into the table the database holds."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from ferry.connectors.formats.debezium_avro import DebeziumAvroDecoder, DebeziumAvroSchemaChangeDecoder
from ferry.connectors.record import Record
from ferry.local.kafka_broker import KafkaBroker
from ferry.model import types as t
from ferry.model.events import BadRecord, DataChange, Op, SchemaObserved, Tombstone
from ferry.model.schema import TableId
from tests.support.connect import KafkaConnect, wait_until
from tests.support.mariadb import MariaDbServer
from tests.support.registry import SchemaRegistry, converter_plugin_path

pytestmark = pytest.mark.integration


class AvroConnect(KafkaConnect):
    """The harness's worker with Apicurio's converter folder on its plugin path."""

    def worker_properties(self, plugins: Path) -> dict[str, str]:
        props = super().worker_properties(plugins)
        props["plugin.path"] = f"{props['plugin.path']},{converter_plugin_path()}"
        return props


def read_topic(
    bootstrap: str, topic: str, done: Callable[[list[Record]], bool], what: str, timeout: float = 120.0
) -> list[Record]:
    """The records of ``topic`` (single partition) from its start, read until ``done(records)``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def finished() -> bool | None:
            for m in consumer.consume(100, timeout=0.5):
                if m.error() is None:
                    records.append(Record(m.topic(), m.partition(), m.offset(), key=m.key(), value=m.value()))
            return True if done(records) else None

        wait_until(finished, timeout, lambda: f"{what} on {topic} (got {len(records)} records)")
    finally:
        consumer.close()
    return records


def at_least(count: int) -> Callable[[list[Record]], bool]:
    return lambda records: len(records) >= count


def test_a_real_debezium_connector_writing_avro_is_read_as_the_database_holds_it(
    kafka_broker: KafkaBroker, schema_registry: SchemaRegistry, binlog_mariadb_server: MariaDbServer
) -> None:
    import pymysql

    db = binlog_mariadb_server  # the session's MariaDB with a binary log (tests/support/fixtures.py)
    database = f"shop_{uuid.uuid4().hex[:8]}"
    prefix = f"dbz{uuid.uuid4().hex[:8]}"
    connection = pymysql.connect(
        host=db.host, port=db.port, user=db.user, password=db.password, autocommit=True
    )
    cursor = connection.cursor()
    cursor.execute(f"CREATE DATABASE {database}")
    cursor.execute(
        f"CREATE TABLE {database}.orders (id INT PRIMARY KEY, item VARCHAR(50), qty INT DEFAULT 1, "
        "price DECIMAL(10,2), day DATE, made DATETIME(6), note TEXT)"
    )
    cursor.execute(
        f"INSERT INTO {database}.orders VALUES (1, 'pen', 2, 1.50, '2024-03-18', '2024-03-18 10:11:12.123456', 'a'),"
        " (2, 'ink', 3, 2.25, NULL, NULL, NULL)"
    )
    connector = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "tasks.max": "1",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.server.id": "5490",  # apart from the session's other connectors (5401 on)
        "topic.prefix": prefix,
        "database.include.list": database,
        "schema.history.internal.kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
        "schema.history.internal.kafka.topic": f"{prefix}-history",
        "include.schema.changes": "true",
        **schema_registry.converter_settings("key"),
        **schema_registry.converter_settings("value"),
    }
    topic = f"{prefix}.{database}.orders"
    decoder = DebeziumAvroDecoder(schema_registry.url)
    schema_changes = DebeziumAvroSchemaChangeDecoder(schema_registry.url)
    try:
        with AvroConnect(kafka_broker.bootstrap_servers) as connect:
            connect.create_connector(prefix, connector)
            connect.wait_running(prefix)
            read_topic(kafka_broker.bootstrap_servers, topic, at_least(2), "the snapshot")
            cursor.execute(f"ALTER TABLE {database}.orders ADD COLUMN tag VARCHAR(10)")
            cursor.execute(f"ALTER TABLE {database}.orders MODIFY COLUMN qty BIGINT")
            cursor.execute(
                f"INSERT INTO {database}.orders (id, item, qty, price, tag) VALUES (3, 'cap', 5000000000, 9.99, 'x')"
            )
            cursor.execute(f"UPDATE {database}.orders SET qty = 7, note = NULL WHERE id = 1")
            cursor.execute(f"DELETE FROM {database}.orders WHERE id = 2")
            # 2 snapshot reads, an insert, an update, a delete and its tombstone
            records = read_topic(kafka_broker.bootstrap_servers, topic, at_least(6), "6 changes")

            def altered(ddl: list[Record]) -> bool:
                return any(b"MODIFY COLUMN qty BIGINT" in (r.value() or b"") for r in ddl)

            ddl = read_topic(kafka_broker.bootstrap_servers, prefix, altered, "the ALTER TABLE statements")
            connect.fail_if_failed(prefix)
        cursor.execute(
            f"SELECT id, item, qty, price, day, made, note, tag FROM {database}.orders ORDER BY id"
        )
        names = [d[0] for d in cursor.description]
        expected = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        assert all(r.value() is None or r.value()[:1] == b"\x00" for r in records), (
            "the Confluent wire format"
        )
        events = decoder.decode(records)
        assert not [e for e in events if isinstance(e, BadRecord)], events
        observed = [e for e in events if isinstance(e, SchemaObserved)]
        assert observed[0].schema.column("qty").type == t.INT()
        assert observed[-1].schema.column("qty").type == t.BIGINT()
        assert observed[-1].schema.column("price").type == t.DECIMAL(10, 2)
        assert observed[-1].schema.column("day").type == t.DATE()
        assert observed[-1].schema.column("made").type == t.TIMESTAMP(6)
        assert observed[-1].schema.column("tag").type == t.STRING()
        assert observed[-1].schema.primary_keys == ("id",)
        assert observed[-1].table_id == TableId(None, database, "orders")
        changes = [e for e in events if isinstance(e, DataChange)]
        assert [c.op for c in changes] == [Op.READ, Op.READ, Op.INSERT, Op.UPDATE, Op.DELETE]
        assert isinstance(events[-1], Tombstone)
        table: dict[int, dict[str, Any]] = {}
        for change in changes:
            if change.op is Op.DELETE:
                assert change.before is not None
                del table[change.before["id"]]
            else:
                assert change.after is not None
                table[change.after["id"]] = change.after
        assert [table[k] for k in sorted(table)] == expected

        hints = schema_changes.decode(ddl)
        assert not [e for e in hints if isinstance(e, BadRecord)], hints
        orders = TableId(None, database, "orders")
        last = [e for e in hints if isinstance(e, SchemaObserved) and e.table_id == orders][-1]
        assert [c.name for c in last.schema.columns] == [
            "id",
            "item",
            "qty",
            "price",
            "day",
            "made",
            "note",
            "tag",
        ]
        assert last.schema.column("qty").type == t.BIGINT() and last.schema.column("tag").type == t.VARCHAR(
            10
        )
    finally:
        decoder.close()
        schema_changes.close()
        connection.close()
