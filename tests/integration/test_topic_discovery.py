"""A table created while the pipeline runs: its topic, new under ``topic-pattern``, is found at
``scan.topic-partition-discovery.interval`` (librdkafka's metadata refresh) and read, on the real
broker."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import create_topic, delete_topic, produce
from ferry.model.schema import TableId
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.support.waiting import Deadline

pytestmark = pytest.mark.integration


def table(server: str, name: str) -> dbz.DebeziumTable:
    columns = [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("item", dbz.STRING)]
    return dbz.DebeziumTable(server, "inventory", name, columns)


def fill(bootstrap: str, source: dbz.DebeziumTable, ids: range) -> None:
    records = [source.insert({"id": i, "item": f"i{i}"}) for i in ids]
    produce(bootstrap, source.topic, [v for _, v in records], keys=[k for k, _ in records])


def wait_for(condition: object, what: str, runner_error: list[BaseException], seconds: float = 120) -> None:
    deadline = Deadline(seconds)
    while not condition():  # type: ignore[operator]
        assert not runner_error, f"the pipeline failed: {runner_error[0]!r}"
        assert not deadline.expired(), f"{what} within {deadline}"
        time.sleep(0.05)


def test_a_topic_created_after_the_start_is_read(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = f"s{uuid.uuid4().hex[:12]}"
    orders, customers = table(server, "orders"), table(server, "customers")
    create_topic(kafka_bootstrap, orders.topic)
    job = f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic-pattern: '{re.escape(server)}\\.inventory\\..*'
  value.format: debezium-json
  scan.startup.mode: earliest-offset
  scan.topic-partition-discovery.interval: 1s
sink:
  type: memory
pipeline:
  name: {server}
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 200ms
"""
    sink = MemorySink()
    runner = build_runner(load_job_text(job), sink=sink)
    stop, failed = threading.Event(), []

    def run() -> None:
        try:
            runner.run(stop)
        except BaseException as error:
            failed.append(error)

    thread = threading.Thread(target=run, name="pipeline", daemon=True)
    thread.start()
    try:
        fill(kafka_bootstrap, orders, range(1, 4))
        wait_for(lambda: len(sink.rows(TableId(None, "inventory", "orders"))) == 3, "orders read", failed)
        create_topic(kafka_bootstrap, customers.topic)  # the table created mid-stream
        fill(kafka_bootstrap, customers, range(1, 6))
        wait_for(
            lambda: (
                sorted(r["id"] for r in sink.rows(TableId(None, "inventory", "customers"))) == [1, 2, 3, 4, 5]
            ),
            "the new topic's rows read",
            failed,
        )
    finally:
        stop.set()
        thread.join(timeout=120)
        for topic in (orders.topic, customers.topic):
            delete_topic(kafka_bootstrap, topic)
    assert not thread.is_alive() and not failed
