"""``ferry run`` reads Debezium's Avro records (Confluent wire format, schemas in a real schema
registry) through the real broker into Iceberg: the rows, the schema changes learnt from the
writer schemas (an added column, a widened type), a rename announced on the Avro schema-change
topic, deletes and their tombstones."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.serialization import MessageField

from ferry.local.kafka_broker import KafkaBrokerError, create_topic, delete_topic, produce
from tests.integration.helpers import iceberg_rows, start_run
from tests.support import debezium_avro as avro
from tests.support.debezium_avro import (
    SCHEMA_CHANGE_VALUE,
    AvroColumn,
    DebeziumAvroTable,
    SchemaRegistryClient,
)
from tests.support.registry import SchemaRegistry

pytestmark = pytest.mark.integration


@pytest.fixture
def registry_client(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        yield client


@pytest.fixture
def topics(kafka_bootstrap: str) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for name in created:
        with contextlib.suppress(KafkaBrokerError):
            delete_topic(kafka_bootstrap, name, timeout=10.0)


def schema_change(writer: DebeziumAvroTable, ddl: str, columns: list[dict[str, Any]]) -> bytes:
    """The Avro record of Debezium's schema-change topic for ``ddl`` (the whole table after it)."""
    value = {
        "source": {
            "version": "3.6.1.Final", "connector": "mysql", "name": writer.server, "ts_ms": writer.ts_ms,
            "snapshot": "false", "db": writer.database, "table": writer.table, "server_id": 1,
            "file": "binlog.000001", "pos": 4,
        },
        "ts_ms": writer.ts_ms,
        "databaseName": writer.database,
        "schemaName": None,
        "ddl": ddl,
        "tableChanges": [
            {
                "type": "ALTER",
                "id": f'"{writer.database}"."{writer.table}"',
                "table": {
                    "defaultCharsetName": "utf8mb4",
                    "primaryKeyColumnNames": ["id"],
                    "columns": [
                        {
                            "name": None, "jdbcType": 4, "nativeType": None, "typeName": "INT",
                            "typeExpression": None, "charsetName": None, "length": None, "scale": None,
                            "position": 1, "optional": True, "autoIncremented": False, "generated": False,
                            "comment": None, "defaultValueExpression": None, "enumValues": None,
                        } | column | {"position": position}
                        for position, column in enumerate(columns, start=1)
                    ],
                    "comment": None,
                },
            }
        ],
    }  # fmt: skip
    return writer.serialize(SCHEMA_CHANGE_VALUE, value, MessageField.VALUE)


def test_debezium_avro_reaches_iceberg_with_its_schema_changes(
    kafka_bootstrap: str,
    schema_registry: SchemaRegistry,
    registry_client: SchemaRegistryClient,
    topics: list[str],
    tmp_path: Path,
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DateType, DecimalType, IntegerType, LongType, StringType, TimestampType

    server = f"s{uuid.uuid4().hex[:10]}"
    orders = DebeziumAvroTable(
        registry_client,
        server,
        "shop",
        "orders",
        [
            AvroColumn("id", "int", optional=False),
            AvroColumn("item", "string"),
            AvroColumn("qty", "int"),
            AvroColumn("ordered", avro.DATE),
        ],
    )
    for topic in (orders.topic, server):
        create_topic(kafka_bootstrap, topic)
        topics.append(topic)
    day = 19_800  # 2024-03-18
    records = [orders.insert({"id": i, "item": f"item-{i}", "qty": i, "ordered": day + i}) for i in (1, 2, 3)]
    records.append(
        orders.update(
            {"id": 2, "item": "item-2", "qty": 2, "ordered": day + 2},
            {"id": 2, "item": "item-2", "qty": 20, "ordered": day + 2},
        )
    )
    orders.add_column(AvroColumn("price", avro.DECIMAL(10, 2)))
    orders.add_column(AvroColumn("paid_at", avro.MICRO_TIMESTAMP))
    records.append(
        orders.insert(
            {"id": 4, "item": "item-4", "qty": 4, "ordered": day + 4, "price": Decimal("4.40"),
             "paid_at": 1_710_000_000_123_456}
        )
    )  # fmt: skip
    orders.change_type("qty", "long")  # INT -> BIGINT
    records.append(
        orders.insert(
            {"id": 5, "item": "item-5", "qty": 5_000_000_000, "ordered": day + 5, "price": Decimal("5.50"),
             "paid_at": None}
        )
    )  # fmt: skip
    rename = "ALTER TABLE `orders` RENAME COLUMN `qty` TO `quantity`"
    for column in orders.columns:
        if column.name == "qty":
            column.name = "quantity"
    records.append(
        orders.insert(
            {"id": 6, "item": "item-6", "quantity": 6, "ordered": day + 6, "price": Decimal("6.60"),
             "paid_at": None}
        )
    )  # fmt: skip
    deleted = {"id": 3, "item": "item-3", "quantity": 3, "ordered": day + 3, "price": None, "paid_at": None}
    key, value = orders.delete(deleted)
    records += [(key, value), (key, None)]  # Debezium's tombstone follows the delete
    columns = [
        {"name": "id", "optional": False},
        {"name": "item", "jdbcType": 12, "typeName": "VARCHAR", "length": 255},
        {"name": "quantity", "jdbcType": -5, "typeName": "BIGINT"},
        {"name": "ordered", "jdbcType": 91, "typeName": "DATE"},
        {"name": "price", "jdbcType": 3, "typeName": "DECIMAL", "length": 10, "scale": 2},
        {"name": "paid_at", "jdbcType": 93, "typeName": "DATETIME", "length": 6},
    ]
    produce(kafka_bootstrap, server, [schema_change(orders, rename, columns)])
    produce(kafka_bootstrap, orders.topic, [v for _, v in records], keys=[k for k, _ in records])

    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {orders.topic}
  value.format: debezium-avro-confluent
  debezium-avro-confluent.url: {schema_registry.url}
  schema-change.topic: {server}
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: avro-{server}
  schema.change.behavior: EVOLVE
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 100ms
""")
    log = tmp_path / "ferry.log"
    run = start_run(job, tmp_path, log)
    try:
        code = run.wait(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert code == 0, log.read_text()[-3000:]

    rows = sorted(iceberg_rows(warehouse, "shop.orders"), key=lambda r: r["id"])
    ordered = [date.fromordinal(date(1970, 1, 1).toordinal() + day + i) for i in range(7)]
    assert rows == [
        {"id": 1, "item": "item-1", "quantity": 1, "ordered": ordered[1], "price": None, "paid_at": None},
        {"id": 2, "item": "item-2", "quantity": 20, "ordered": ordered[2], "price": None, "paid_at": None},
        {"id": 4, "item": "item-4", "quantity": 4, "ordered": ordered[4], "price": Decimal("4.40"),
         "paid_at": datetime(2024, 3, 9, 16, 0, 0, 123456)},
        {"id": 5, "item": "item-5", "quantity": 5_000_000_000, "ordered": ordered[5], "price": Decimal("5.50"),
         "paid_at": None},
        {"id": 6, "item": "item-6", "quantity": 6, "ordered": ordered[6], "price": Decimal("6.60"),
         "paid_at": None},
    ]  # fmt: skip
    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    try:
        schema = catalog.load_table("shop.orders").schema()
    finally:
        catalog.engine.dispose()
    assert [(f.name, f.field_type, f.required) for f in schema.fields] == [
        ("id", IntegerType(), True),
        ("item", StringType(), False),
        ("quantity", LongType(), False),
        ("ordered", DateType(), False),
        ("price", DecimalType(10, 2), False),
        ("paid_at", TimestampType(), False),
    ]
    assert schema.identifier_field_names() == {"id"}
