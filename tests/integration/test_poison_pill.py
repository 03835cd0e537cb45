"""Records too large for the dead-letter topic do not stop the pipeline; large valid rows are written."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory
from ferry.model.schema import TableId
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table, read_all

pytestmark = pytest.mark.integration

FIVE_MB = 5 * 1024 * 1024


def produce_large(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2 * FIVE_MB})
    errors: list[str] = []
    for key, value in records:
        producer.produce(
            topic, key=key, value=value, on_delivery=lambda e, _m: errors.append(str(e)) if e else None
        )
    assert producer.flush(30) == 0 and not errors, errors


def test_a_five_megabyte_bad_record_is_dead_lettered_truncated_and_a_five_megabyte_row_is_written(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1, {"max.message.bytes": str(2 * FIVE_MB)})
    table = orders_table()
    large_item = "x" * FIVE_MB
    poison = b'{"payload": {"op": "c", "after": {"id": 2, "item": "' + b"y" * FIVE_MB + b'"'  # cut short
    records = [
        table.insert({"id": 1, "item": "small", "qty": 1}),
        (b'{"id":2}', poison),
        table.insert({"id": 3, "item": large_item, "qty": 3}),
    ]
    produce_large(kafka_bootstrap, topic, records)
    sink = MemorySink()
    runner = build_runner(load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id)), sink=sink)
    runner.run()

    rows = {r["id"]: r for r in sink.rows(TableId.parse("inventory.orders"))}
    assert sorted(rows) == [1, 3] and rows[3]["item"] == large_item
    [dead] = read_all(kafka_bootstrap, f"{group_id}.dlq", expected=1)
    headers = {name: value.decode() for name, value in dead.headers()}
    assert headers["ferry.truncated"] == "true"
    assert headers["ferry.original-value-size"] == str(len(poison))
    assert headers["ferry.original-key-size"] == "8"
    assert (headers["ferry.topic"], headers["ferry.partition"], headers["ferry.offset"]) == (topic, "0", "1")
    assert "malformed JSON" in headers["ferry.reason"]
    assert dead.key() == b'{"id":2}'
    assert 0 < len(dead.value()) < 1_000_000 and poison.startswith(dead.value())
    assert runner.metrics.bad_records == 1
