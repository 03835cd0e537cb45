"""Helpers shared by the integration tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ferry.local import debezium as dbz
from ferry.model.events import CreateTable, DataChange, Op, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DECIMAL, INT, STRING
from ferry.sinks.base import Sink
from tests.support.sinks import catalog_not_ready, reading_catalog
from tests.support.waiting import Deadline


def job_yaml(
    bootstrap: str,
    topic: str,
    tmp_path: Path,
    name: str,
    *,
    sink: str = "type: memory",
    source_extra: str = "",
    pipeline_extra: str = "",
    startup: str = "earliest-offset",
    bounded: str = "latest-offset",
    top_extra: str = "",
) -> str:
    sink_lines = "\n".join("  " + line for line in sink.splitlines())
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  topic: {topic}
  value.format: debezium-json
  scan.startup.mode: {startup}
  scan.bounded.mode: {bounded}
{source_extra}
sink:
{sink_lines}
pipeline:
  name: {name}
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 200ms
{pipeline_extra}
{top_extra}"""


def run_ferry(*args: str | Path, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``ferry <args>`` in a subprocess, as a user runs it; the test fails with its error output
    when it exits otherwise than with 0."""
    result = subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", *(str(a) for a in args)],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def orders_table(server: str = "shop") -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        server,
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 120.0) -> list[Any]:
    """Every record of ``topic`` (waits until ``expected`` are there or the timeout)."""

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    metadata = consumer.list_topics(topic, timeout=10)
    partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
    consumer.assign(partitions)
    out: list[Any] = []
    deadline = Deadline(timeout)
    while len(out) < expected and not deadline.expired():
        out += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    consumer.close()
    return out


def read_to_end(bootstrap: str, topic: str, timeout: float = 120.0) -> list[Any]:
    """Every record of ``topic`` up to the end each partition has now (its high watermark)."""

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        ends = {}
        for p in metadata.topics[topic].partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[Any] = []
        read = dict.fromkeys(ends, 0)
        deadline = Deadline(timeout)
        while any(read[p] < end for p, end in ends.items()):
            assert not deadline.expired(), f"{topic}: read {read} of {ends} within {timeout:.0f} s"
            out += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
            # the consumer's position, past transaction markers too (no record reaches them)
            for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                read[tp.partition] = max(read[tp.partition], tp.offset)
        return out
    finally:
        consumer.close()


#: The topic the sink tests' changes claim to come from.
SINK_TEST_TOPIC = "dbserver.shop.orders"


class Feed:
    """Builds data changes for one table with increasing offsets on one partition."""

    def __init__(self, table_id: TableId, partition: int = 0) -> None:
        self.table_id = table_id
        self.partition = partition
        self.offset = 0

    def _position(self) -> SourcePosition:
        self.offset += 1
        return SourcePosition(SINK_TEST_TOPIC, self.partition, self.offset - 1)

    def insert(self, row: dict[str, Any]) -> DataChange:
        return DataChange(self.table_id, Op.INSERT, None, row, self._position())

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> DataChange:
        return DataChange(self.table_id, Op.UPDATE, old, new, self._position())

    def delete(self, row: dict[str, Any]) -> DataChange:
        return DataChange(self.table_id, Op.DELETE, row, None, self._position())

    def offsets(self) -> dict[tuple[str, int], int]:
        return {(SINK_TEST_TOPIC, self.partition): self.offset}


class Gate(Executor):
    """Runs the work handed to it when :meth:`open` is called, in the order it came."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.waiting.append((future, fn, args, kwargs))
        return future

    def open(self) -> int:
        """Run what waits; how many there were."""
        waiting, self.waiting = self.waiting, []
        for future, fn, args, kwargs in waiting:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as e:  # handed to the future, as an executor does
                    future.set_exception(e)
        return len(waiting)


#: The table of the table-format sinks' tests, and its schema.
ORDERS_TABLE = TableId(None, "shop", "orders")
ORDERS = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("customer", STRING(), comment="who ordered"),
        Column("qty", INT()),
        Column("price", DECIMAL(10, 2)),
    ],
    ["id"],
    comment="orders of the shop",
)


def create(sink: Sink, schema: Schema, table_id: TableId = ORDERS_TABLE) -> None:
    """The table created at the sink, as the pipeline creates it."""
    sink.apply_schema_change(CreateTable(table_id, schema), schema)


def write(sink: Sink, schema: Schema, feed: Feed, *changes: DataChange) -> None:
    """The changes written and flushed with the feed's offsets (one commit)."""
    sink.write(feed.table_id, schema, list(changes))
    sink.flush(feed.offsets())


def start_run(job: Path, cwd: Path, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """``ferry run [options] job`` in a subprocess, its log (WARNING and up) appended to ``log``."""
    with log.open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "ferry.cli.main", "--log-level", "WARNING", "run", *options, str(job)],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def iceberg_rows(warehouse: Path, name: str) -> list[dict[str, Any]]:
    """The rows of an Iceberg table of the warehouse's SQL catalog; none while it does not exist."""
    from pyiceberg.exceptions import NoSuchTableError

    if not (warehouse / "catalog.db").exists():
        return []
    catalog = reading_catalog(warehouse)
    try:
        rows: list[dict[str, Any]] = catalog.load_table(name).scan().to_arrow().to_pylist()
    except NoSuchTableError:
        return []
    except Exception as error:
        if catalog_not_ready(error):
            return []
        raise
    finally:
        catalog.engine.dispose()
    return rows
