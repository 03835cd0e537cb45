"""Flink CDC's Kafka sink options (``partition.strategy``, ``key.format``, ``sink.custom-header``,
``sink.tableId-to-topic.mapping``) as the records on the session's real broker show them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ferry.local.kafka_broker import TopicFactory, delete_topic
from ferry.model.events import CreateTable, DataChange, Op, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, STRING
from ferry.sinks.kafka.config import KafkaSinkConfig
from ferry.sinks.kafka.sink import KafkaSink, topic_name
from tests.integration.helpers import read_all

pytestmark = pytest.mark.integration

ITEMS = Schema.of(
    [Column("id", BIGINT().not_null()), Column("sku", STRING().not_null()), Column("name", STRING())],
    ["id", "sku"],
)


def make_sink(bootstrap: str, **options: Any) -> KafkaSink:
    config = KafkaSinkConfig.model_validate({"properties.bootstrap.servers": bootstrap, **options})
    return KafkaSink(config, pipeline="test")


def insert(table: TableId, i: int) -> DataChange:
    row = {"id": i, "sku": f"s,{i}", "name": f"item {i}"}
    return DataChange(table, Op.INSERT, None, row, SourcePosition("source", 0, i), 1_700_000_000_000)


def write(sink: KafkaSink, table: TableId, count: int) -> None:
    sink.apply_schema_change(CreateTable(table, ITEMS), ITEMS)
    sink.write(table, ITEMS, [insert(table, i) for i in range(count)])
    sink.flush({})


@pytest.mark.parametrize(("strategy", "all_in_zero"), [("all-to-zero", True), ("hash-by-key", False)])
def test_partition_strategy(
    kafka_bootstrap: str, topic_factory: TopicFactory, strategy: str, all_in_zero: bool
) -> None:
    topic = topic_factory(partitions=3)
    sink = make_sink(kafka_bootstrap, topic=topic, **{"partition.strategy": strategy})
    try:
        write(sink, TableId(None, "shop", "items"), 30)
    finally:
        sink.close()
    records = read_all(kafka_bootstrap, topic, 30)
    assert len(records) == 30
    partitions = {r.partition() for r in records}
    # 30 keys hashed over 3 partitions by murmur2 do not all land in partition 0
    assert (partitions == {0}) is all_in_zero, partitions


def test_csv_keys_are_the_table_id_and_the_key_values(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory()
    sink = make_sink(kafka_bootstrap, topic=topic, **{"key.format": "csv"})
    try:
        write(sink, TableId(None, "shop", "items"), 2)
    finally:
        sink.close()
    records = read_all(kafka_bootstrap, topic, 2)
    assert [r.key() for r in records] == [b'shop.items,0,"s,0"', b'shop.items,1,"s,1"']
    assert orjson.loads(records[0].value())["after"]["sku"] == "s,0"


def test_json_keys_are_the_primary_key(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    topic = topic_factory()
    sink = make_sink(kafka_bootstrap, topic=topic, **{"key.format": "json"})
    try:
        write(sink, TableId(None, "shop", "items"), 1)
    finally:
        sink.close()
    [record] = read_all(kafka_bootstrap, topic, 1)
    assert orjson.loads(record.key()) == {"id": 0, "sku": "s,0"}


def test_mapped_tables_go_to_their_topic_with_the_custom_headers(
    kafka_bootstrap: str, topic_factory: TopicFactory, group_id: str
) -> None:
    mapped_topic = topic_factory()
    database = f"db_{group_id[-10:]}"
    mapped, other = TableId(None, database, "items_1"), TableId(None, database, "orders")
    # Flink CDC's table pattern: the unescaped dot separates database and table, \. is the regular
    # expression's any character, and names ignore case (Items_2 is matched too)
    also_mapped = TableId(None, database, "Items_2")
    sink = make_sink(
        kafka_bootstrap,
        **{
            "sink.tableId-to-topic.mapping": rf"nowhere.x:elsewhere;{database}.items_\.*:{mapped_topic}",
            "sink.custom-header": "team:sales, env:prod",
            "sink.add-tableId-to-header-enabled": True,
        },
    )
    try:
        write(sink, mapped, 2)
        write(sink, also_mapped, 1)
        write(sink, other, 1)
    finally:
        sink.close()
    records = read_all(kafka_bootstrap, mapped_topic, 3)
    tables = [orjson.loads(r.value())["source"]["table"] for r in records]
    assert tables == ["items_1", "items_1", "Items_2"]
    assert records[0].headers() == [
        ("schemaName", database.encode()),
        ("tableName", b"items_1"),
        ("team", b"sales"),
        ("env", b"prod"),
    ]
    try:
        [unmapped] = read_all(kafka_bootstrap, topic_name(other), 1)
    finally:
        delete_topic(kafka_bootstrap, topic_name(other), timeout=30.0)
    assert orjson.loads(unmapped.value())["source"]["table"] == "orders"
    assert dict(unmapped.headers())["team"] == b"sales"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("sink.tableId-to-topic.mapping", "db.t1", "is not table:topic"),
        ("sink.tableId-to-topic.mapping", "db.t1:bad topic", "is not a Kafka topic name"),
        ("sink.tableId-to-topic.mapping", "db.(t1:topic", "is not a valid regular expression"),
        ("sink.custom-header", "novalue", "is not key:value"),
        ("partition.strategy", "round-robin", "all-to-zero"),
        ("key.format", "avro", "csv"),
    ],
)
def test_bad_values_are_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KafkaSinkConfig.model_validate({"properties.bootstrap.servers": "h:9092", key: value})
