"""The broker stopped and started again on the same port during a run: the pipeline waits for it,
a schema change and the checkpoint after it included, and ends with every row once and every bad
record once."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import KafkaBroker, TopicFactory, create_topic, produce
from ferry.model.schema import Schema, TableId
from ferry.pipeline.phase import Phase
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import job_yaml, orders_table, read_all
from tests.integration.outages import RETRIES, hold_outage, running

pytestmark = pytest.mark.integration

ORDERS = TableId.parse("inventory.orders")
#: A bound on schema changes far shorter than the outage (the broker's restart alone takes longer):
#: a barrier's waiting for the broker is not bounded by it.
RPC_TIMEOUT_S = 1.0


def test_a_broker_stopped_during_a_schema_change_is_waited_for(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = topic_factory(1)
    table = orders_table()
    first = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 11)]
    produce(bootstrap, topic, [v for _, v in first], keys=[k for k, _ in first])
    create_topic(bootstrap, f"{group_id}.dlq")
    text = job_yaml(
        bootstrap,
        topic,
        tmp_path,
        group_id,
        bounded="unbounded",
        pipeline_extra=RETRIES + f"  schema.operator.rpc-timeout: {RPC_TIMEOUT_S:g}s\n",
    )
    sink = MemorySink()
    runner = build_runner(load_job_text(text), sink=sink)
    store = StateStore(f"sqlite:///{tmp_path}/state.db")

    # the batch with the bad record and the schema change is decoded once the broker is down: the
    # column added reaches the sink at once (it needs no barrier), but the dead letter is stored,
    # and the checkpoint after it done, only once the broker is back
    in_batch, broker_down = threading.Event(), threading.Event()
    batches: list[list[int]] = []
    decode = runner.decode

    def decode_when_down(records: Sequence[Any]) -> Any:
        offsets = [r.offset() for r in records]
        if 10 in offsets:
            batches.append(offsets)
            in_batch.set()
            broker_down.wait(60)
        return decode(records)

    runner.decode = decode_when_down

    def checkpointed() -> dict[tuple[str, int], int] | None:
        checkpoint = store.latest_checkpoint(group_id)
        return None if checkpoint is None else checkpoint.offsets

    table.add_column("note", dbz.STRING)
    second = [table.insert({"id": i, "item": f"i{i}", "qty": i, "note": f"n{i}"}) for i in range(11, 15)]
    last = [table.insert({"id": i, "item": f"i{i}", "qty": i, "note": f"n{i}"}) for i in range(15, 21)]
    try:
        with running(runner) as errors:
            wait_for(
                lambda: checkpointed() == {(topic, 0): 10}, 30, lambda: f"the first checkpoint, {errors}"
            )
            produce(
                bootstrap,
                topic,
                [b"{not json", *(v for _, v in second)],
                keys=[None, *(k for k, _ in second)],
            )
            wait_for(in_batch.is_set, 30, lambda: f"the batch after the first checkpoint, {errors}")
            began = time.monotonic()
            with kafka_broker.stopped():
                broker_down.set()
                wait_for(
                    lambda: "note" in (sink.table_schema(ORDERS) or Schema(())).names,
                    30,
                    lambda: f"the added column (detail {runner.status.detail!r}, {errors})",
                )
                hold_outage(runner, errors, began)
            produce(bootstrap, topic, [v for _, v in last], keys=[k for k, _ in last])
            wait_for(lambda: checkpointed() == {(topic, 0): 21}, 60, lambda: f"the last checkpoint, {errors}")
            assert not errors
        assert not errors and runner.status.phase is Phase.STOPPED, (runner.status.detail, errors)
    finally:
        broker_down.set()
        store.close()
    assert batches[0] == list(range(10, 15)), "the bad record and the schema change in one batch"
    rows = sorted(sink.rows(ORDERS), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(1, 21))
    assert [r["note"] for r in rows] == [None] * 10 + [f"n{i}" for i in range(11, 21)]
    [dead] = read_all(bootstrap, f"{group_id}.dlq", expected=1)
    assert dict(dead.headers())["ferry.offset"] == b"10"
    assert end_of(bootstrap, f"{group_id}.dlq") == 1, "the bad record stored once"


def end_of(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-of-{topic}"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()
