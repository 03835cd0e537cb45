"""The sink options that take Flink CDC's table patterns read them as Flink CDC's ``Selectors`` do:
the Kafka sink's ``sink.tableId-to-topic.mapping`` and the SelectDB (Doris) sink's
``table.create.auto-partition.properties.include`` / ``.exclude``. The patterns are those of Flink
CDC's documentation (kafka.md, doris.md) and its Kafka sink's own test of the mapping."""

from __future__ import annotations

import pytest

from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, TIMESTAMP
from ferry.sinks.kafka.config import KafkaSinkConfig
from ferry.sinks.selectdb.config import SelectDbSinkConfig


def kafka(mapping: str) -> KafkaSinkConfig:
    return KafkaSinkConfig.model_validate(
        {"properties.bootstrap.servers": "broker:9092", "sink.tableId-to-topic.mapping": mapping}
    )


def test_the_documented_mapping_names_tables_not_regular_expressions_over_their_text() -> None:
    config = kafka("mydb.mytable1:topic1;mydb.mytable2:topic2")  # kafka.md
    assert config.mapped_topic(TableId(None, "mydb", "mytable1")) == "topic1"
    assert config.mapped_topic(TableId(None, "mydb", "mytable2")) == "topic2"
    assert config.mapped_topic(TableId(None, "MyDb", "MyTable2")) == "topic2"  # names ignore case
    # the unescaped dot separates database and table: it is no "any character"
    assert config.mapped_topic(TableId(None, "mydbX", "mytable1")) is None
    assert config.mapped_topic(TableId.parse("mydb_mytable1")) is None
    # a pattern of two parts names ids of two parts
    assert config.mapped_topic(TableId("ns", "mydb", "mytable1")) is None


def test_an_escaped_dot_is_any_character_and_the_first_matching_entry_wins() -> None:
    # the patterns of Flink CDC's KafkaDataSinkITCase.testSinkTableMapping
    config = kafka(
        r"default_namespace.default_schema_copy.\.*:test_topic_mapping_copy;"
        r"default_namespace.default_schema.\.*:test_topic_mapping"
    )
    copy = TableId("default_namespace", "default_schema_copy", "table1")
    assert config.mapped_topic(copy) == "test_topic_mapping_copy"
    assert config.mapped_topic(TableId("default_namespace", "default_schema", "t")) == "test_topic_mapping"
    assert config.mapped_topic(TableId("other_namespace", "default_schema", "t")) is None
    first = kafka(r"mydb.\.*:everything;mydb.orders:orders")
    assert first.mapped_topic(TableId(None, "mydb", "orders")) == "everything"


def test_an_entry_lists_alternatives_separated_by_commas() -> None:
    config = kafka(r"mydb.orders, mydb.items\,refunds:sales")
    for table in ("orders", "items", "refunds"):
        assert config.mapped_topic(TableId(None, "mydb", table)) == "sales"
    assert config.mapped_topic(TableId(None, "mydb", "users")) is None


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ("mydb.mytable1:topic1:topic2", "is not table:topic"),  # Flink CDC: one ':' per entry
        ("a.b.c.d:topic1", "has 4 parts"),
        (r"mydb\.mytable1.*:topic1", "is not a valid regular expression"),
    ],
)
def test_a_mapping_that_is_no_table_pattern_is_refused(mapping: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kafka(mapping)


TIMED = Schema.of([Column("id", BIGINT().not_null()), Column("at", TIMESTAMP(6))], ["id"])


def partitioned(include: str | None, exclude: str | None) -> SelectDbSinkConfig:
    prefix = "table.create.auto-partition.properties."
    options = {"fenodes": "fe:8030", "username": "root", prefix + "default-partition-key": "at"}
    options[prefix + "default-partition-unit"] = "day"
    if include is not None:
        options[prefix + "include"] = include
    if exclude is not None:
        options[prefix + "exclude"] = exclude
    return SelectDbSinkConfig.model_validate(options)


def test_auto_partition_include_and_exclude_are_table_patterns() -> None:
    # doris.md: "a collection of tables after route to include (exclude), separated by commas,
    # supports regular expressions", read by Flink CDC's Selectors
    config = partitioned(r"shop.\.*, archive.orders_\d+", r"shop.skip\.*")
    for included in (TableId(None, "shop", "orders"), TableId(None, "ARCHIVE", "orders_2024")):
        assert config.auto_partition_of(included, TIMED) == ("at", "day")
    for left_out in (
        TableId(None, "shop", "skipped"),  # excluded
        TableId(None, "shopX", "orders"),  # the dot separates database and table
        TableId(None, "archive", "orders_x"),
        TableId("ns", "shop", "orders"),  # a pattern of two parts names ids of two parts
    ):
        assert config.auto_partition_of(left_out, TIMED) is None


def test_auto_partition_exclude_alone_leaves_every_other_table_included() -> None:
    config = partitioned(None, "shop.audit, shop.log")
    assert config.auto_partition_of(TableId(None, "shop", "orders"), TIMED) == ("at", "day")
    assert config.auto_partition_of(TableId(None, "shop", "LOG"), TIMED) is None


def test_an_auto_partition_table_list_that_is_no_table_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="'a.b.c.d' has 4 parts"):
        partitioned("a.b.c.d", None)
