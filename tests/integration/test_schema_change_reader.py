"""The schema-change topic read from the position a checkpoint holds, on the real broker."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ferry.connectors.formats import decoder_for
from ferry.connectors.kafka.schema_changes import SchemaChangeReader
from ferry.local.kafka_broker import TopicFactory, create_topic, produce
from ferry.model.events import SchemaHint, SchemaObserved
from tests.integration.helpers import iceberg_rows, orders_table, start_run

pytestmark = pytest.mark.integration


def reader(bootstrap: str, topic: str) -> SchemaChangeReader:
    return SchemaChangeReader(
        bootstrap_servers=bootstrap, topic=topic, decoder=decoder_for("debezium-schema-change")
    )


def test_sync_reads_to_the_end_and_returns_at_once_when_it_is_there_already(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory()
    table = orders_table("shop")
    ddl = [table.schema_change(table.add_column("note", {"type": "string"}))]
    ddl.append(table.schema_change(table.rename_column("qty", "quantity")))
    produce(kafka_bootstrap, topic, [v for _, v in ddl], keys=[k for k, _ in ddl])
    hints = reader(kafka_bootstrap, topic)
    hints.open({})
    try:
        events = hints.sync(timeout=120)
        assert [type(e) for e in events] == [SchemaObserved, SchemaHint, SchemaObserved]
        assert hints.positions == {0: 2}
        # at the end already: no waiting for a record that is not coming (a thread bounds the test)
        done = threading.Event()
        again: list[object] = []

        def sync_again() -> None:
            again.extend(hints.sync(timeout=3600))
            done.set()

        threading.Thread(target=sync_again, daemon=True).start()
        assert done.wait(60), "sync waited although the topic was read to its end"
        assert again == []
    finally:
        hints.close()


def test_a_reader_opened_at_a_checkpoint_position_reads_only_what_follows(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory()
    table = orders_table("shop")
    ddl = [table.schema_change(table.add_column(f"c{i}", {"type": "int32"})) for i in range(3)]
    produce(kafka_bootstrap, topic, [v for _, v in ddl], keys=[k for k, _ in ddl])
    hints = reader(kafka_bootstrap, topic)
    hints.open({0: 2})
    try:
        [event] = hints.sync(timeout=120)
        assert isinstance(event, SchemaObserved) and event.position is not None
        assert event.position.offset == 2 and "c2" in event.schema
    finally:
        hints.close()


def test_a_restart_after_the_rename_was_read_applies_it_as_a_rename_without_waiting(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    server = topic_factory()
    table = orders_table(server)
    create_topic(kafka_bootstrap, table.topic, partitions=3)
    first = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 7)]
    renamed = table.schema_change(table.rename_column("qty", "quantity"))
    produce(kafka_bootstrap, table.topic, [v for _, v in first], keys=[k for k, _ in first])
    produce(kafka_bootstrap, server, [renamed[1]], keys=[renamed[0]])
    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {table.topic}
  schema-change.topic: {server}
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
  schema.operator.rpc-timeout: 600s
""")
    log = tmp_path / "run.log"
    # the first run reads the rows and the rename's DDL, and stops at the end of what is there
    assert start_run(job, tmp_path, log).wait(timeout=300) == 0, log.read_text()[-3000:]
    later = [table.insert({"id": i, "item": f"i{i}", "quantity": i}) for i in range(7, 13)]
    produce(kafka_bootstrap, table.topic, [v for _, v in later], keys=[k for k, _ in later])
    # the second one starts where the checkpoint is, in the data and in the schema-change topic
    assert start_run(job, tmp_path, log).wait(timeout=300) == 0, log.read_text()[-3000:]
    rows = sorted(iceberg_rows(warehouse, "inventory.orders"), key=lambda r: r["id"])
    assert rows == [{"id": i, "item": f"i{i}", "quantity": i} for i in range(1, 13)]
    assert "not read to its end" not in log.read_text()
