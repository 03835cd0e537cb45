"""Throughput of ferry against a bare consumer and a framework peer, in one run, on a real broker.

Produces a Debezium JSON change stream (several tables, the Kafka Connect schema envelope by default,
schema changes interleaved) into a single-node Apache Kafka broker, then lets each contender read
all of it from the beginning to the end, one after the other, each in a fresh process with a fresh
consumer group:

* ``ceiling``: a bare confluent-kafka ``Consumer.consume(num_messages=10000)`` loop with
  ``fetch.queue.backoff.ms=10`` that ``orjson.loads`` every value and keeps nothing;
* ``ferry-null``: a ferry job (``build_runner(load_job_text(...)).run()``) into the null sink;
* ``ferry-iceberg``: the same job into an Iceberg table store (SQLite catalog, local warehouse);
* ``ferry-paimon``: the same job into a Paimon filesystem catalog in a local warehouse;
* ``ferry-kafka``: the same job into the Kafka sink (Debezium JSON, one output topic);
* ``quix``: a Quix Streams application doing the ceiling's consume, decode and discard.

Each contender reports events/s and CPU µs per event over the steady part of the drain (after the
first ``--warmup`` share of the events, until its run is over: for ferry until ``run()`` returned,
every checkpoint written, flushed and committed and the pipeline closed; for the others until
their consumer's ``close()`` returned), the ratios of both to the ceiling, and the peak RSS of its
process. See ``bench/README.md``.

    .venv/bin/python bench/throughput.py                    # 200k events, every contender
    .venv/bin/python bench/throughput.py --events 1000000 --repeat 3 --pin
    .venv/bin/python bench/throughput.py --json > result.json
"""

from __future__ import annotations

import argparse
import contextlib
import decimal
import importlib
import itertools
import json
import multiprocessing
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferry.local.debezium import DebeziumTable

CONTENDERS = ("ceiling", "floor", "ferry-null", "ferry-iceberg", "ferry-paimon", "ferry-kafka", "quix")
LABELS = {
    "ceiling": "ceiling: confluent consume + orjson",
    "floor": "floor: confluent consume + msgspec typed",
    "ferry-null": "ferry → null sink",
    "ferry-iceberg": "ferry → Iceberg",
    "ferry-paimon": "ferry → Paimon",
    "ferry-kafka": "ferry → Kafka",
    "quix": "Quix Streams (consume + json, discard)",
}
#: Share of the ceiling each contender should reach: the ceiling's CPU µs/event ÷ the contender's
#: (per busy core), paired per round, at 1,000,000 events over 4 tables. With 128 tables (200,000
#: events), ferry → Iceberg should reach :data:`MANY_TABLES_TARGET`.
TARGETS = {"ferry-null": 1.00, "ferry-iceberg": 0.80, "ferry-paimon": 0.80}
MANY_TABLES_TARGET = 0.60
#: What the same peer reached on the same machine elsewhere (per busy core, see anchors §7.4).
REFERENCE = {"quix": 0.29}

TABLE_NAMES = ("orders", "customers", "payments", "shipments", "invoices", "refunds", "stock", "carts")
DATABASE = "shop"
BASE_TS_MS = 1_700_000_000_000
BASE_TS_US = BASE_TS_MS * 1000
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
STATUSES = ("new", "paid", "packed", "shipped", "delivered", "returned")
#: int32 columns whose type a schema change widens to int64, in this order.
WIDENABLE = ("account_id", "qty")
#: Columns a schema change drops or renames, in this order (never the key, nor ``note``, which
#: the read-back checks).
DROPPABLE = ("amount", "active", "ship_date")
RENAMABLE = ("status", "created_at", "price")
#: The kinds of schema change the generator makes (``--changes``), as the report names them.
CHANGE_KINDS = {
    "add": "add column",
    "widen": "widen int→bigint",
    "drop": "drop column",
    "rename": "rename column",
}
PROGRESS_EVERY_S = 2.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# The workload
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What is produced: ``events`` change events spread round-robin over ``tables`` tables."""

    events: int = 200_000
    tables: int = 4
    partitions: int = 2
    change_every: int = 50_000
    """Events of one table between two of its schema changes (tables are staggered)."""
    with_schema: bool = True
    seed: int = 7
    server: str = "bench"
    mix: tuple[float, float, float] = (0.70, 0.25, 0.05)
    """Shares of inserts, updates (with the before-image) and deletes."""
    changes: tuple[str, ...] = ("add", "widen")
    """The kinds of schema change each table makes, in turn (see :data:`CHANGE_KINDS`)."""

    def topics(self) -> list[str]:
        return [f"{self.server}.{DATABASE}.{name}" for name in table_names(self.tables)]


@dataclass(frozen=True)
class SchemaChangeNote:
    """One schema change the generator made: where it is in the stream and what it did."""

    table: str
    event: int
    """Index of the first event with the new shape, over the whole stream."""
    table_event: int
    """The same, counted within the table."""
    kind: str
    ddl: str


def table_names(count: int) -> list[str]:
    return [TABLE_NAMES[i] if i < len(TABLE_NAMES) else f"table_{i}" for i in range(count)]


def _base_columns() -> list[Any]:
    from ferry.local import debezium as dbz

    return [
        dbz.ConnectColumn("id", dbz.INT32, optional=False),
        dbz.ConnectColumn("account_id", dbz.INT32),
        dbz.ConnectColumn("qty", dbz.INT32),
        dbz.ConnectColumn("price", dbz.DECIMAL(10, 2)),
        dbz.ConnectColumn("amount", dbz.FLOAT64),
        dbz.ConnectColumn("status", dbz.STRING),
        dbz.ConnectColumn("note", dbz.STRING),
        dbz.ConnectColumn("created_at", dbz.TIMESTAMP_MICROS),
        dbz.ConnectColumn("ship_date", dbz.DATE),
        dbz.ConnectColumn("active", dbz.BOOLEAN),
    ]


def _added_column(index: int) -> tuple[str, dict[str, Any]]:
    from ferry.local import debezium as dbz

    specs = (dbz.STRING, dbz.INT64, dbz.FLOAT64, dbz.BOOLEAN)
    return f"extra_{index}", specs[index % len(specs)]


def _value(name: str, spec: dict[str, Any], key: int, version: int) -> Any:
    """A column's value for row ``key`` at ``version``: deterministic and cheap."""
    seed = key * 2_654_435_761 + version * 40_503
    logical = spec.get("name")
    if logical == "org.apache.kafka.connect.data.Decimal":
        return decimal.Decimal(seed % 10_000_000 + 100).scaleb(-2)
    if logical == "io.debezium.time.MicroTimestamp":
        return BASE_TS_US + key * 1_000_003 + version * 997
    if logical == "io.debezium.time.Date":
        return 19_000 + (key + version) % 1000
    kind = spec["type"]
    if kind == "int32":
        return seed % 1_000_003
    if kind == "int64":
        return seed % 1_000_000_000_039
    if kind == "double":
        return (seed % 1_000_003) / 100.0
    if kind == "boolean":
        return seed % 3 == 0
    if name == "status":
        return STATUSES[seed % len(STATUSES)]
    return f"{WORDS[seed % len(WORDS)]} {name} {key}.{version} {WORDS[(seed >> 7) % len(WORDS)]}"


class EventGenerator:
    """The benchmark's change stream: iterate for ``(topic, key, value)``, deterministic per seed.

    Events go round-robin over the tables; inserts, updates (with the before-image) and deletes in
    the shares of ``workload.mix`` (70 %, 25 %, 5 % by default; an update or delete of a table
    with no live row is an insert). Each table changes its schema every ``change_every`` of its events, the tables
    staggered so that the changes are spread over the stream; the changes alternate between adding
    a nullable column and widening an int32 column to int64 (adding a column once nothing is left
    to widen). After iterating, :attr:`changes` lists them, :attr:`ops` counts the operations and
    :attr:`live_rows` counts the rows left per table.
    """

    def __init__(self, workload: Workload) -> None:
        from ferry.local import debezium as dbz

        self.workload = workload
        self.tables: list[DebeziumTable] = [
            dbz.DebeziumTable(
                workload.server,
                DATABASE,
                name,
                _base_columns(),
                with_schema=workload.with_schema,
                ts_ms=BASE_TS_MS,
            )
            for name in table_names(workload.tables)
        ]
        self.changes: list[SchemaChangeNote] = []
        self.ops: dict[str, int] = {"c": 0, "u": 0, "d": 0}
        self.live_rows: dict[str, int] = {}
        self.live_versions: dict[str, dict[int, int]] = {}
        """Per table, each live key and the version of its last row (what a sink must hold)."""

    def first_change_at(self, table_index: int) -> int:
        return (table_index + 1) * self.workload.change_every // (self.workload.tables + 1)

    def __iter__(self) -> Iterator[tuple[str, bytes | None, bytes]]:
        workload = self.workload
        rng = random.Random(workload.seed)
        count = len(self.tables)
        live: list[list[int]] = [[] for _ in range(count)]
        versions: list[dict[int, int]] = [{} for _ in range(count)]
        next_id = [1] * count
        seen = [0] * count
        next_change = [self.first_change_at(t) for t in range(count)]
        changes_made = [0] * count
        added = [0] * count
        widened = [0] * count
        self.changes.clear()
        self.ops = {"c": 0, "u": 0, "d": 0}
        inserts, updates = workload.mix[0], workload.mix[0] + workload.mix[1]
        for index in range(workload.events):
            t = index % count
            table = self.tables[t]
            if seen[t] == next_change[t] and seen[t] > 0:
                j = changes_made[t]
                kind = workload.changes[(j + t) % len(workload.changes)]
                names = [c.name for c in table.columns]
                droppable = [n for n in DROPPABLE if n in names]
                renamable = [n for n in RENAMABLE if n in names]
                if kind == "widen" and widened[t] < len(WIDENABLE):
                    from ferry.local import debezium as dbz

                    ddl = table.change_type(WIDENABLE[widened[t]], dbz.INT64)
                    widened[t] += 1
                elif kind == "drop" and droppable:
                    ddl = table.drop_column(droppable[0])
                elif kind == "rename" and renamable:
                    ddl = table.rename_column(renamable[0], f"{renamable[0]}_r")
                else:  # an addition, or nothing left to change the other way
                    name, spec = _added_column(added[t])
                    ddl = table.add_column(name, spec)
                    added[t] += 1
                    kind = "add"
                changes_made[t] += 1
                self.changes.append(SchemaChangeNote(table.table, index, seen[t], kind, ddl))
                next_change[t] += workload.change_every
            seen[t] += 1
            rows, row_versions = live[t], versions[t]
            topic_key: bytes | None
            value: bytes
            draw = rng.random()
            if draw < inserts or not rows:
                key = next_id[t]
                next_id[t] += 1
                rows.append(key)
                row_versions[key] = 0
                topic_key, value = table.insert(self._row(table, key, 0))
                self.ops["c"] += 1
            elif draw < updates:
                key = rows[rng.randrange(len(rows))]
                version = row_versions[key]
                row_versions[key] = version + 1
                topic_key, value = table.update(
                    self._row(table, key, version), self._row(table, key, version + 1)
                )
                self.ops["u"] += 1
            else:
                position = rng.randrange(len(rows))
                key = rows[position]
                rows[position] = rows[-1]
                rows.pop()
                topic_key, value = table.delete(self._row(table, key, row_versions.pop(key)))
                self.ops["d"] += 1
            yield table.topic, topic_key, value
        self.live_rows = {table.table: len(rows) for table, rows in zip(self.tables, live, strict=True)}
        self.live_versions = {table.table: v for table, v in zip(self.tables, versions, strict=True)}

    @staticmethod
    def _row(table: DebeziumTable, key: int, version: int) -> dict[str, Any]:
        row = {c.name: _value(c.name, c.spec, key, version) for c in table.columns}
        row["id"] = key
        return row


@dataclass
class Produced:
    events: int
    bytes: int
    seconds: float
    changes: list[SchemaChangeNote]
    ops: dict[str, int]
    live_rows: dict[str, int]
    end_offsets: dict[str, int]
    live_versions: dict[str, dict[int, int]] = field(default_factory=dict)


def produce_workload(bootstrap: str, workload: Workload) -> Produced:
    """Create the topics and produce the workload with one batching producer; checks the counts."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from ferry.local.kafka_broker import create_topic

    for topic in workload.topics():
        create_topic(bootstrap, topic, partitions=workload.partitions)
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None and len(failures) < 10:
            failures.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10_000,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "compression.type": "none",
            "on_delivery": delivered,
        }
    )
    generator = EventGenerator(workload)
    started = time.perf_counter()
    last_report = started
    size = 0
    count = 0
    produce = producer.produce
    for topic, key, value in generator:
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
        size += len(value) + (len(key) if key is not None else 0)
        count += 1
        if count % 2000 == 0:
            producer.poll(0)
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_S:
                last_report = now
                log(f"  producing: {count:,}/{workload.events:,} events, {size / 2**20:,.0f} MiB")
    left = producer.flush(300)
    seconds = time.perf_counter() - started
    if left or failures:
        raise RuntimeError(f"producing failed: {left} not delivered; {'; '.join(failures)}")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-check-{uuid.uuid4().hex}"})
    end_offsets: dict[str, int] = {}
    try:
        for topic in workload.topics():
            total = 0
            for partition in range(workload.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
                total += high - low
            end_offsets[topic] = total
    finally:
        consumer.close()
    if sum(end_offsets.values()) != workload.events:
        raise RuntimeError(f"the topics hold {sum(end_offsets.values())} events, not {workload.events}")
    return Produced(
        count,
        size,
        seconds,
        list(generator.changes),
        dict(generator.ops),
        generator.live_rows,
        end_offsets,
        generator.live_versions,
    )


# --------------------------------------------------------------------------------------------------
# Measuring inside a contender's process
# --------------------------------------------------------------------------------------------------


def rss_mib() -> float:
    """The process's resident set now (``ru_maxrss`` only has its peak)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Clock:
    """Wall and CPU time of the steady drain: from the warm-up mark to the end of the contender's run.

    ``mark(seen)`` is called after each processed batch (or, per record, at a few counts); the
    window opens at the first mark past the warm-up share. :meth:`finish` closes it once the
    contender has finished everything it does for the events: for ferry, when ``run()`` returned
    (every checkpoint written, flushed and committed, however it was started, the garbage
    collection after it, and ``close()``); for the ceiling and the floor, when the consumer's
    ``close()`` returned; for Quix, when ``Application.run()`` returned. Nothing between the last
    event and that point is left out, the time a bounded read takes to notice its end included.
    """

    label: str
    expected: int
    warm_at: int
    started: float = field(default_factory=time.perf_counter)
    t0: float | None = None
    cpu0: float = 0.0
    n0: int = 0
    last_event: float | None = None
    """When the last event was done (processed), before the checkpoints and the close that follow."""
    t1: float | None = None
    cpu1: float = 0.0
    first_record: float | None = None
    last_progress: float = field(default_factory=time.perf_counter)
    segments: int = 5
    boundaries: list[tuple[int, float, float, float]] = field(default_factory=list)
    """``(events, wall, CPU seconds, RSS MiB)`` where the stream crossed each segment's end (the
    last one moved to the end of the run by :meth:`finish`)."""

    def mark(self, seen: int) -> None:
        now = time.perf_counter()
        if self.segments and seen >= self.expected * (len(self.boundaries)) / self.segments:
            self.boundaries.append((seen, now, cpu_seconds(), rss_mib()))
        if self.first_record is None and seen > 0:
            self.first_record = now
        if self.t0 is None and seen >= self.warm_at:
            self.t0, self.cpu0, self.n0 = now, cpu_seconds(), seen
        if self.last_event is None and seen >= self.expected:
            self.last_event = now
        if now - self.last_progress >= PROGRESS_EVERY_S:
            self.last_progress = now
            log(f"  {self.label}: {seen:,}/{self.expected:,} events, {now - self.started:.1f} s")

    @property
    def done(self) -> bool:
        """Whether the window is closed (see :meth:`finish`)."""
        return self.t1 is not None

    def finish(self) -> None:
        """Close the window: the contender's run is over (its last checkpoint and ``close()`` done)."""
        self.t1, self.cpu1 = time.perf_counter(), cpu_seconds()
        if self.segments and self.boundaries and self.boundaries[-1][0] >= self.expected:
            events, _, _, _ = self.boundaries[-1]
            self.boundaries[-1] = (events, self.t1, self.cpu1, rss_mib())

    def result(self, seen: int) -> dict[str, Any]:
        if self.t0 is None or self.last_event is None:
            raise RuntimeError(f"read {seen} of {self.expected} events")
        if self.t1 is None:
            raise RuntimeError("the timed window was never closed (Clock.finish)")
        events = self.expected - self.n0
        wall = self.t1 - self.t0
        cpu = self.cpu1 - self.cpu0
        if events <= 0 or wall <= 0:
            raise RuntimeError("too few events to measure: raise --events or lower --warmup")
        return {
            "events": events,
            "events_read": seen,
            "wall_s": wall,
            "cpu_s": cpu,
            "events_per_s": events / wall,
            "cpu_us_per_event": cpu / events * 1e6,
            "startup_s": (self.first_record or self.t0) - self.started,
            "tail_s": self.t1 - self.last_event,
            "window_cpu_s": (self.cpu0, self.cpu1),
            "window_wall_s": (self.t0, self.t1),
            "segments": self.segment_rates(),
        }

    def segment_rates(self) -> list[dict[str, float]]:
        """Events/s, CPU µs/event and RSS of each segment of the stream (the first one has start-up)."""
        out = []
        for (n0, t0, c0, _), (n1, t1, c1, rss) in itertools.pairwise(self.boundaries):
            if n1 > n0 and t1 > t0:
                out.append(
                    {
                        "events": n1,
                        "events_per_s": (n1 - n0) / (t1 - t0),
                        "cpu_us_per_event": (c1 - c0) / (n1 - n0) * 1e6,
                        "rss_mib": rss,
                    }
                )
        return out


class StalledError(RuntimeError):
    """A contender stopped receiving events before it had read them all."""


class StallGuard:
    """Raises when no event arrived for ``limit`` seconds (a contender that cannot finish)."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.seen = -1
        self.since = time.monotonic()

    def check(self, seen: int) -> None:
        now = time.monotonic()
        if seen != self.seen:
            self.seen, self.since = seen, now
        elif now - self.since > self.limit:
            raise StalledError(f"no event for {self.limit:.0f} s after {seen} events")


# --------------------------------------------------------------------------------------------------
# The contenders (each runs in its own process)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    bootstrap: str
    topics: list[str]
    expected: int
    warmup: float
    batch_size: int
    work_dir: str
    stall_s: float
    cpu: int | None
    profile_dir: str | None
    live_rows: dict[str, int]
    live_versions: dict[str, dict[int, int]] = field(default_factory=dict)

    segments: int = 5
    concurrent: bool = False
    """ferry's lanes with ``checkpoint.concurrent: true`` (a checkpoint's commit on a thread of its own)."""
    checkpoint_interval: str = "5s"
    """ferry's ``checkpoint.interval``."""

    def clock(self, label: str) -> Clock:
        return Clock(label, self.expected, max(1, int(self.expected * self.warmup)), segments=self.segments)


class PayloadBytes:
    """The bytes of a record that ferry's decoder parses: with the envelope, the payload alone.

    ferry's ``debezium-json`` decoder keeps, per partition, the bytes of the last record up to
    ``"payload":``; a record that starts with them has the same schema, and only the text after
    them is parsed. A record with another schema is parsed whole, once, and its prefix kept. The
    ceiling and the floor parse exactly these bytes, so that they do the work ferry must do.
    """

    def __init__(self) -> None:
        self.prefixes: dict[tuple[str, int], bytes] = {}
        self.whole = 0
        """Records parsed whole (the first of each schema in each partition)."""

    def split(self, value: bytes, topic: str, partition: int) -> tuple[bytes, bool]:
        """``(bytes to parse, whether they are the whole record)``."""
        if not value.startswith(b'{"schema":'):
            return value, False
        prefix = self.prefixes.get((topic, partition))
        if prefix is not None and value.startswith(prefix):
            return value[len(prefix) : value.rfind(b"}")], False
        index = value.rfind(b'"payload":')
        if index > 0:
            self.prefixes[(topic, partition)] = value[: index + len(b'"payload":')]
        self.whole += 1
        return value, True


def _consumer(spec: RunSpec, group: str) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": spec.bootstrap,
            "group.id": f"{group}-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.queue.backoff.ms": 10,
            "enable.partition.eof": False,
        }
    )
    consumer.subscribe(spec.topics)
    return consumer


def _drain(
    spec: RunSpec, label: str, parse: Callable[[bytes], Any], parse_whole: Callable[[bytes], Any]
) -> dict[str, Any]:
    """Consume every event and parse the bytes ferry parses (:class:`PayloadBytes`)."""
    consumer = _consumer(spec, f"bench-{label}")
    clock, guard = spec.clock(label), StallGuard(spec.stall_s)
    consume, batch_size, expected = consumer.consume, spec.batch_size, spec.expected
    payloads = PayloadBytes()
    split = payloads.split
    seen = 0
    try:
        while seen < expected:
            batch = consume(num_messages=batch_size, timeout=0.5)
            for message in batch:
                if message.error() is None:
                    data, whole = split(message.value(), message.topic(), message.partition())
                    if whole:
                        parse_whole(data)
                    else:
                        parse(data)
                    seen += 1
            clock.mark(seen)
            guard.check(seen)
    finally:
        consumer.close()
    clock.finish()
    return {
        **clock.result(seen),
        "run_s": time.perf_counter() - clock.started,
        "parsed_whole": payloads.whole,
    }


def run_ceiling(spec: RunSpec) -> dict[str, Any]:
    import orjson

    return _drain(spec, "ceiling", orjson.loads, orjson.loads)


def run_floor(spec: RunSpec) -> dict[str, Any]:
    """msgspec's typed decode of the same bytes: a Debezium payload whose rows are typed structs."""
    import msgspec
    import orjson

    optional = None
    row = msgspec.defstruct(
        "Row",
        [
            ("id", int),
            ("account_id", int | None, optional),
            ("qty", int | None, optional),
            ("price", str | None, optional),
            ("amount", float | None, optional),
            ("status", str | None, optional),
            ("note", str | None, optional),
            ("created_at", int | None, optional),
            ("ship_date", int | None, optional),
            ("active", bool | None, optional),
        ],
    )
    source = msgspec.defstruct("Source", [("db", str), ("table", str), ("ts_ms", int | None, optional)])
    payload_type = msgspec.defstruct(
        "Payload",
        [
            ("op", str),
            ("source", source),
            ("before", row | None, optional),
            ("after", row | None, optional),
            ("ts_ms", int | None, optional),
        ],
    )
    payload = msgspec.json.Decoder(payload_type).decode
    return _drain(spec, "floor", payload, orjson.loads)


def _ferry_job(spec: RunSpec, sink: str, name: str) -> str:
    topics = ";".join(spec.topics)
    sink_lines = "\n".join("  " + line for line in sink.strip().splitlines())
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {spec.bootstrap}
  properties.group.id: {name}
  topic: {topics}
  value.format: debezium-json
  debezium-json.infer-types: true  # payload-only runs (--no-schema): BIGINT and STRING columns
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
{sink_lines}
pipeline:
  name: {name}
  state.url: sqlite:///{spec.work_dir}/{name}-state.db
  checkpoint.interval: {spec.checkpoint_interval}
  checkpoint.concurrent: {str(spec.concurrent).lower()}
  batch.size: {spec.batch_size}
"""


def run_ferry(spec: RunSpec, sink_type: str) -> dict[str, Any]:
    import logging

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="  %(levelname)s %(name)s: %(message)s"
    )
    from ferry.config.loader import load_job_text
    from ferry.worker import build_runner

    name = f"bench-{sink_type}-{uuid.uuid4().hex[:8]}"
    warehouse = Path(spec.work_dir) / f"{name}-warehouse"
    output_topic = f"{name}-out"
    if sink_type == "iceberg":
        warehouse.mkdir(parents=True)
        sink = f"type: iceberg\ncatalog.properties.warehouse: {warehouse.as_uri()}"
    elif sink_type == "paimon":
        warehouse.mkdir(parents=True)
        sink = f"type: paimon\ncatalog.properties.warehouse: {warehouse.as_uri()}"
    elif sink_type == "kafka":
        sink = f"type: kafka\nproperties.bootstrap.servers: {spec.bootstrap}\ntopic: {output_topic}"
    else:
        sink = f'type: "{sink_type}"'
    job = load_job_text(_ferry_job(spec, sink, name), file=f"<{name}>")
    runner = build_runner(job)
    clock, guard = spec.clock(f"ferry → {sink_type}"), StallGuard(spec.stall_s)
    metrics = runner.metrics
    process = runner.process

    def timed_process(events: Any, records: Any) -> None:
        process(events, records)
        if records:
            clock.mark(metrics.records_read)

    # every checkpoint, however it starts: step() begins the periodic and row-count ones, checkpoint()
    # (a barrier's, the last one) begins one and waits for its commit
    checkpoints: list[tuple[int, float]] = []
    begin = runner.begin_checkpoint

    def timed_begin(schemas: Any = None) -> None:
        started = time.perf_counter()
        begin(schemas)
        checkpoints.append((metrics.records_read, time.perf_counter() - started))

    # each schema change's way to the sink: the barrier before it (if any) and its application
    changes_timed: list[tuple[str, float]] = []
    route = runner.schemas._route

    def timed_route(changes: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        route(changes, **kwargs)
        if changes:
            kind = "creation" if all(c.tag == "create.table" for c in changes) else "change"
            changes_timed.append((kind, time.perf_counter() - started))

    runner.schemas._route = timed_route  # type: ignore[method-assign]
    source = runner.source
    lag = source.lag
    lag_waits = {"in_window_s": 0.0, "in_run_s": 0.0}

    def timed_lag() -> Any:
        started = time.perf_counter()
        try:
            return lag()
        finally:
            spent = time.perf_counter() - started
            lag_waits["in_run_s"] += spent
            if clock.t0 is not None and not clock.done:
                lag_waits["in_window_s"] += spent

    runner.process = timed_process  # type: ignore[method-assign]
    runner.begin_checkpoint = timed_begin  # type: ignore[method-assign]
    source.lag = timed_lag  # type: ignore[method-assign]
    stop = _StopOnStall(guard, metrics)
    profiler = _start_profile(spec)
    try:
        runner.run(stop)  # up to close() returning
        clock.finish()
    finally:
        _stop_profile(profiler, spec, f"ferry-{sink_type}")
    run_s = time.perf_counter() - clock.started
    if stop.error is not None:
        raise stop.error
    result = clock.result(metrics.records_read)
    result["run_s"] = run_s
    result["ferry"] = {
        "status_lag_query_s": lag_waits,
        "rows_written": sum(metrics.rows_written.values()),
        "checkpoints": metrics.checkpoints,
        "schema_changes": metrics.schema_changes,
        "bad_records": metrics.bad_records,
        "schema_change_wait_ms": metrics.schema_change_wait_ms,
        "checkpoint_s": _checkpoints_by_segment(checkpoints, spec.expected, spec.segments),
        "schema_change_s": {
            kind: [round(spent, 4) for k, spent in changes_timed if k == kind]
            for kind in ("creation", "change")
        },
    }
    result["verified"] = metrics.bad_records == 0 and result["ferry"]["rows_written"] == spec.expected
    if sink_type in ("iceberg", "paimon"):
        summary = _iceberg_summary if sink_type == "iceberg" else _paimon_summary
        tables = result["ferry"]["tables"] = summary(job.sink, spec.live_versions)
        result["verified"] = (
            metrics.bad_records == 0
            and len(tables) == len(spec.live_versions)
            and all(t["exact"] for t in tables.values())
        )
    elif sink_type == "kafka":
        written = result["ferry"]["kafka_records"] = _topic_records(spec.bootstrap, output_topic)
        result["verified"] = result["verified"] and written == spec.expected
    return result


class _StopOnStall(threading.Event):
    """A stop flag for ``PipelineRunner.run`` that also ends a run that stopped making progress."""

    def __init__(self, guard: StallGuard, metrics: Any) -> None:
        super().__init__()
        self.guard, self.metrics = guard, metrics
        self.error: StalledError | None = None

    def is_set(self) -> bool:
        if super().is_set():
            return True
        try:
            self.guard.check(self.metrics.records_read)
        except StalledError as e:
            self.error = e
            return True
        return False


def _checkpoints_by_segment(
    checkpoints: list[tuple[int, float]], expected: int, segments: int
) -> list[dict[str, float]]:
    """The checkpoints of each segment of the stream: how many, their mean and longest duration."""
    out = []
    for index in range(max(1, segments)):
        low, high = expected * index / segments, expected * (index + 1) / segments
        spans = [s for n, s in checkpoints if low < n <= high or (index == 0 and n == 0)]
        if spans:
            out.append({"count": len(spans), "mean_s": statistics.fmean(spans), "max_s": max(spans)})
        else:
            out.append({"count": 0, "mean_s": 0.0, "max_s": 0.0})
    return out


def expected_note(key: int, version: int) -> str:
    """The ``note`` column the generator writes for row ``key`` at ``version`` (see :func:`_value`)."""
    return str(_value("note", {"type": "string"}, key, version))


def _iceberg_summary(config: Any, live_versions: dict[str, dict[int, int]]) -> dict[str, Any]:
    """Rows, snapshots and data files per table, read back from the sink's catalog after the run,
    and the rows checked against the source: every live key once, with its last row's ``note``."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(config.catalog_name, **config.resolved_catalog_properties())
    out: dict[str, Any] = {}
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            table = catalog.load_table(identifier)
            snapshot = table.current_snapshot()
            properties = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
            rows = table.scan(selected_fields=("id", "note")).to_arrow()
            live = live_versions.get(identifier[-1], {})
            ids, notes = rows["id"].to_pylist(), rows["note"].to_pylist()
            wrong = sum(
                1
                for key, note in zip(ids, notes, strict=True)
                if key not in live or note != expected_note(key, live[key])
            )
            out[".".join(identifier)] = {
                "rows": rows.num_rows,
                "expected_rows": len(live),
                "distinct_keys": len(set(ids)),
                "wrong_rows": wrong,
                "exact": wrong == 0 and len(set(ids)) == len(ids) == len(live),
                "snapshots": len(table.metadata.snapshots),
                "data_files": properties.get("total-data-files"),
                "delete_files": properties.get("total-delete-files"),
                "columns": len(table.schema().fields),
            }
    return out


def _paimon_summary(config: Any, live_versions: dict[str, dict[int, int]]) -> dict[str, Any]:
    """Rows per table read back with pypaimon after the run, checked as :func:`_iceberg_summary`
    checks Iceberg's."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create(config.resolved_catalog_properties())
    out: dict[str, Any] = {}
    for name, live in live_versions.items():
        identifier = f"{DATABASE}.{name}"
        try:
            table = catalog.get_table(identifier)
        except Exception as e:  # a table the sink did not create: reported, and not exact
            out[identifier] = {
                "rows": 0,
                "expected_rows": len(live),
                "wrong_rows": 0,
                "exact": False,
                "error": str(e),
            }
            continue
        builder = table.new_read_builder().with_projection(["id", "note"])
        rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        ids, notes = rows["id"].to_pylist(), rows["note"].to_pylist()
        wrong = sum(
            1
            for key, note in zip(ids, notes, strict=True)
            if key not in live or note != expected_note(key, live[key])
        )
        out[identifier] = {
            "rows": rows.num_rows,
            "expected_rows": len(live),
            "distinct_keys": len(set(ids)),
            "wrong_rows": wrong,
            "exact": wrong == 0 and len(set(ids)) == len(ids) == len(live),
            "columns": len(table.fields),
        }
    return out


def _topic_records(bootstrap: str, topic: str) -> int:
    """The records in every partition of ``topic`` (what the Kafka sink wrote)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-check-{uuid.uuid4().hex}"})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions if topic in metadata.topics else {}
        total = 0
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


def run_quix(spec: RunSpec) -> dict[str, Any]:
    import warnings

    # quixstreams imports authlib, which turns its own deprecation warnings on at import: turn them off
    with contextlib.suppress(ImportError):
        importlib.import_module("authlib.deprecate")
    warnings.filterwarnings("ignore", module="authlib")
    from quixstreams import Application

    app = Application(
        broker_address=spec.bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        consumer_extra_config={"fetch.queue.backoff.ms": 10},
        state_dir=str(Path(spec.work_dir) / "quix-state"),
        use_changelog_topics=False,
        loglevel="WARNING",
    )
    clock = spec.clock("quix")
    expected, warm_at = spec.expected, clock.warm_at
    seen = 0

    def discard(_value: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == warm_at or seen >= expected or seen % 20_000 == 0:
            clock.mark(seen)
            if seen >= expected:
                app.stop()

    for name in spec.topics:
        app.dataframe(app.topic(name, value_deserializer="json", key_deserializer="bytes")).update(discard)
    app.run()  # its consumer closed
    clock.finish()
    return {**clock.result(seen), "run_s": time.perf_counter() - clock.started}


RUNNERS: dict[str, Callable[[RunSpec], dict[str, Any]]] = {
    "ceiling": run_ceiling,
    "floor": run_floor,
    "ferry-null": lambda spec: run_ferry(spec, "null"),
    "ferry-iceberg": lambda spec: run_ferry(spec, "iceberg"),
    "ferry-paimon": lambda spec: run_ferry(spec, "paimon"),
    "ferry-kafka": lambda spec: run_ferry(spec, "kafka"),
    "quix": run_quix,
}


def _start_profile(spec: RunSpec) -> Any:
    if spec.profile_dir is None:
        return None
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def _stop_profile(profiler: Any, spec: RunSpec, name: str) -> None:
    if profiler is None or spec.profile_dir is None:
        return
    import io
    import pstats

    profiler.disable()
    path = Path(spec.profile_dir) / f"{name}.prof"
    profiler.dump_stats(str(path))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    (Path(spec.profile_dir) / f"{name}.txt").write_text(text.getvalue(), encoding="utf-8")
    log(f"  profile of {name}: {path} (top functions in {path.with_suffix('.txt')})")


def contender_main(name: str, spec: RunSpec, conn: Connection) -> None:
    """The body of a contender's process: run it, add its peak RSS, send the result back."""
    if spec.cpu is not None:
        os.sched_setaffinity(0, {spec.cpu})
    try:
        result = RUNNERS[name](spec)
    except BaseException as e:
        result = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send(result)
    conn.close()


def run_contender(name: str, spec: RunSpec, timeout: float) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=contender_main, args=(name, spec, sender), name=f"bench-{name}")
    process.start()
    sender.close()
    result: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if receiver.poll(0.5):
                result = receiver.recv()
                break
            if not process.is_alive():
                break
        else:
            result = {"error": f"did not finish within {timeout:.0f} s"}
    except EOFError:
        result = None
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()
    if result is None:
        result = {"error": f"the process exited with code {process.exitcode} without a result"}
    return result


# --------------------------------------------------------------------------------------------------
# The harness
# --------------------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in (
        "confluent-kafka",
        "orjson",
        "msgspec",
        "quixstreams",
        "pyiceberg",
        "pypaimon",
        "pyarrow",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[package] = metadata.version(package)
    with contextlib.suppress(ImportError):
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    return out


def _kafka_version(cache_dir: Path) -> str | None:
    for jar in sorted((cache_dir / "lib").glob("kafka_2.13-*.jar")):
        return "Apache Kafka " + jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
    return None


def _pin_broker(pid: int, cpu: int) -> None:
    """Pin every thread of the broker's JVM to ``cpu`` (threads started later inherit it)."""
    import subprocess

    subprocess.run(["taskset", "-a", "-cp", str(cpu), str(pid)], check=True, capture_output=True)


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each contender's median run, and its ratios to the ceiling paired per round.

    Round ``i``'s ratio divides contender run ``i`` by ceiling run ``i`` (both ran back to back, under
    the same load on the machine); the median and range of those ratios are reported. A round
    whose ceiling or contender failed has no ratio.
    """
    out: dict[str, dict[str, Any]] = {}
    ceiling_runs = runs.get("ceiling", [])
    for name, results in runs.items():
        good = [r for r in results if "error" not in r]
        if not good:
            out[name] = {"error": results[-1].get("error", "no result"), "runs": len(results)}
            continue
        ordered = sorted(good, key=lambda r: r["cpu_us_per_event"])
        median = dict(ordered[(len(ordered) - 1) // 2])
        median["runs"] = len(good)
        median["events_per_s_median"] = statistics.median(r["events_per_s"] for r in good)
        median["cpu_us_per_event_median"] = statistics.median(r["cpu_us_per_event"] for r in good)
        median["cpu_us_per_event_min"] = ordered[0]["cpu_us_per_event"]
        median["cpu_us_per_event_max"] = ordered[-1]["cpu_us_per_event"]
        median["peak_rss_mib"] = max(r["peak_rss_mib"] for r in good)
        median["verified"] = all(r.get("verified", True) for r in good)
        pairs = [
            (c, r)
            for c, r in zip(ceiling_runs, results, strict=False)
            if "error" not in c and "error" not in r
        ]
        if pairs:
            cpu = sorted(c["cpu_us_per_event"] / r["cpu_us_per_event"] for c, r in pairs)
            eps = sorted(r["events_per_s"] / c["events_per_s"] for c, r in pairs)
            median["paired"] = {
                "rounds": len(pairs),
                "cpu": {"median": statistics.median(cpu), "min": cpu[0], "max": cpu[-1]},
                "events_per_s": {"median": statistics.median(eps), "min": eps[0], "max": eps[-1]},
            }
        out[name] = median
    return out


def _paired(entry: dict[str, Any], key: str) -> str:
    paired = entry.get("paired")
    if paired is None:
        return "–"
    figures = paired[key]
    if paired["rounds"] == 1:
        return f"{figures['median']:.2f}"
    return f"{figures['median']:.2f} ({figures['min']:.2f}–{figures['max']:.2f})"


def targets_for(tables: int) -> dict[str, float]:
    """The targets that apply to a run over ``tables`` tables (see :data:`TARGETS`)."""
    return {"ferry-iceberg": MANY_TABLES_TARGET} if tables >= 128 else TARGETS


def render_table(summary: dict[str, dict[str, Any]], targets: dict[str, float] = TARGETS) -> str:
    header = (
        f"{'contender':<42} {'events/s':>9} {'CPU µs/ev':>9} {'per busy core ÷ ceiling':>24} "
        f"{'events/s ÷ ceiling':>19} {'peak RSS':>8}  verified"
    )
    lines = [header, "-" * len(header)]
    for name, entry in summary.items():
        label = LABELS.get(name, name)
        if "error" in entry:
            lines.append(f"{label:<42} error: {entry['error']}")
            continue
        lines.append(
            f"{label:<42} {entry['events_per_s_median']:>9,.0f} {entry['cpu_us_per_event_median']:>9.2f} "
            f"{_paired(entry, 'cpu'):>24} {_paired(entry, 'events_per_s'):>19} {entry['peak_rss_mib']:>8.0f}"
            f"  {'yes' if entry['verified'] else 'NO'}"
        )
    lines += [
        "",
        "ratios paired per round (contender run i against ceiling run i): median (range);",
        "per busy core = the ceiling's CPU µs/event ÷ the contender's",
        "",
        "targets (per busy core, paired median):",
    ]
    for name, target in targets.items():
        found = summary.get(name)
        if found is None:
            continue
        paired = found.get("paired")
        if paired is None:
            lines.append(f"  {LABELS[name]:<38} ≥ {target:.2f}: not measured")
            continue
        ratio = paired["cpu"]["median"]
        verdict = "met" if ratio >= target else "NOT met"
        lines.append(
            f"  {LABELS[name]:<38} {ratio:.2f} ≥ {target:.2f}: {verdict}  "
            f"(events/s ratio {paired['events_per_s']['median']:.2f})"
        )
    for name, reference in REFERENCE.items():
        found = summary.get(name)
        if found is not None and "paired" in found:
            lines.append(
                f"  {LABELS[name]:<38} {found['paired']['cpu']['median']:.2f} per busy core "
                f"({reference:.2f} measured elsewhere)"
            )
    details = [line for name, entry in summary.items() if (line := _details(name, entry))]
    if details:
        lines += ["", "details (median run by CPU µs/event):", *details]
    return "\n".join(lines)


def _details(name: str, entry: dict[str, Any]) -> str | None:
    if "error" in entry or "run_s" not in entry:
        return None
    parts = [
        f"whole run {entry['run_s']:.1f} s, first event after {entry['startup_s']:.1f} s, "
        f"window {entry.get('tail_s', 0.0):.2f} s past the last event"
    ]
    ferry = entry.get("ferry")
    if ferry is not None:
        parts.append(
            f"{ferry['rows_written']:,} rows written, {ferry['schema_changes']} schema changes applied "
            f"(table creations included), {ferry['checkpoints']} checkpoints, {ferry['bad_records']} bad records"
        )
        for kind, spans in (ferry.get("schema_change_s") or {}).items():
            if spans:
                parts.append(
                    f"{kind}s {len(spans)} × {sum(spans) / len(spans):.3f} s (barrier and applying), "
                    f"max {max(spans):.3f} s"
                )
        waits = ferry["status_lag_query_s"]
        if waits["in_run_s"] >= 0.05:
            parts.append(
                f"blocked {waits['in_window_s']:.1f} s of the timed window and {waits['in_run_s']:.1f} s of the "
                "run in KafkaSource.lag() (status updates)"
            )
    line = f"  {LABELS.get(name, name)}: " + "; ".join(parts)
    if ferry is not None and "kafka_records" in ferry:
        line += f"\n    {ferry['kafka_records']:,} records in the output topic"
    for table, facts in ((ferry or {}).get("tables") or {}).items():
        line += (
            f"\n    {table}: {facts['rows']:,} rows read back ({facts['expected_rows']:,} keys live in the "
            f"source, {facts['wrong_rows']} rows wrong: {'exact' if facts['exact'] else 'NOT EXACT'})"
        )
        if "snapshots" in facts:
            line += (
                f", {facts['snapshots']} snapshots, {facts['data_files']} data files, "
                f"{facts['delete_files']} delete files"
            )
        if "columns" in facts:
            line += f", {facts['columns']} columns"
    segments = entry.get("segments") or []
    if len(segments) > 1:
        line += "\n    per segment of the stream (events/s, CPU µs/event, RSS MiB at its end"
        line += ", checkpoints: count × mean s, max s)" if ferry is not None else ")"
        spans = (ferry or {}).get("checkpoint_s") or []
        for index, segment in enumerate(segments):
            text = (
                f"\n      to {segment['events']:>9,}: {segment['events_per_s']:>9,.0f} {segment['cpu_us_per_event']:>7.1f}"
                f" {segment['rss_mib']:>6.0f}"
            )
            if index < len(spans):
                span = spans[index]
                text += f"   {span['count']} × {span['mean_s']:.2f} s, max {span['max_s']:.2f} s"
            line += text
    return line


def parse_mix(parser: argparse.ArgumentParser, mix: str) -> tuple[float, float, float]:
    """``--mix`` (insert/update/delete shares such as ``70/25/5``) as fractions of one."""
    try:
        shares = [float(part) for part in mix.split("/")]
    except ValueError:
        shares = []
    if len(shares) != 3 or min(shares) < 0 or sum(shares) <= 0 or shares[0] <= 0:
        parser.error(f"--mix takes three shares such as 70/25/5 (inserts first, more than 0), got {mix!r}")
    insert, update, delete = (share / sum(shares) for share in shares)
    return insert, update, delete


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/throughput.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000, help="change events in all (default 200000)")
    parser.add_argument("--tables", type=int, default=4, help="tables, one topic each (default 4)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per topic (default 2)")
    parser.add_argument(
        "--change-every",
        type=int,
        default=50_000,
        help="events of one table between two of its schema changes (default 50000)",
    )
    parser.add_argument(
        "--no-schema", action="store_true", help="payload-only Debezium JSON (schemas.enable=false)"
    )
    parser.add_argument(
        "--mix",
        default="70/25/5",
        help="shares of inserts/updates/deletes, in percent or any proportion (default 70/25/5)",
    )
    parser.add_argument(
        "--changes",
        default="add,widen",
        help=f"the kinds of schema change each table makes in turn, of {', '.join(CHANGE_KINDS)} "
        "(default add,widen)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--segments",
        type=int,
        default=5,
        help="segments of the stream to report throughput, checkpoints and RSS for (default 5)",
    )
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"comma-separated subset of {', '.join(CONTENDERS)} (the ceiling always runs)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per contender; the median is shown")
    parser.add_argument(
        "--warmup", type=float, default=0.05, help="share of events read before timing starts (default 0.05)"
    )
    parser.add_argument("--batch-size", type=int, default=10_000, help="records per consume call")
    parser.add_argument(
        "--concurrent-checkpoints",
        action="store_true",
        help="run ferry's lanes with checkpoint.concurrent: true (commits on a thread of their own)",
    )
    parser.add_argument(
        "--checkpoint-interval",
        default="5s",
        help="ferry's checkpoint.interval (default 5s; a checkpoint also starts at 200,000 buffered rows)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin the broker to CPU 0 and each contender to CPU 1 (needs 2 CPUs; broker started here)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per contender run")
    parser.add_argument(
        "--stall", type=float, default=120.0, help="seconds without an event before giving up"
    )
    parser.add_argument("--profile", metavar="DIR", help="cProfile ferry's runs into DIR (slows them down)")
    parser.add_argument("--work-dir", help="where state, warehouses and profiles go (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = parser.parse_args(argv)
    chosen = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contender {', '.join(unknown)}; known: {', '.join(CONTENDERS)}")
    args.chosen = ["ceiling", *[c for c in CONTENDERS if c in chosen and c != "ceiling"]]
    args.mix_shares = parse_mix(parser, args.mix)
    args.change_kinds = tuple(k.strip() for k in args.changes.split(",") if k.strip())
    unknown = [k for k in args.change_kinds if k not in CHANGE_KINDS]
    if unknown or not args.change_kinds:
        parser.error(f"--changes takes kinds among {', '.join(CHANGE_KINDS)}, got {args.changes!r}")
    if args.events < args.tables:
        parser.error("--events must be at least --tables")
    if args.pin and (os.cpu_count() or 1) < 2:
        parser.error("--pin needs at least 2 CPUs")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work_dir = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    profile_dir = None
    if args.profile:
        profile_dir = str(Path(args.profile).resolve())
        Path(profile_dir).mkdir(parents=True, exist_ok=True)
    workload = Workload(
        events=args.events,
        tables=args.tables,
        partitions=args.partitions,
        change_every=args.change_every,
        with_schema=not args.no_schema,
        seed=args.seed,
        server=f"bench{uuid.uuid4().hex[:6]}",
        mix=args.mix_shares,
        changes=args.change_kinds,
    )
    with contextlib.ExitStack() as stack:
        if args.bootstrap:
            bootstrap, broker_name = args.bootstrap, f"external broker at {args.bootstrap}"
            if args.pin:
                log("--pin pins only the contenders: the broker was not started here")
        else:
            from ferry.local.kafka_broker import KafkaBroker

            log("starting a Kafka broker ...")
            broker = stack.enter_context(
                KafkaBroker(data_root=work_dir / "kafka", properties={"num.partitions": str(args.partitions)})
            )
            bootstrap = broker.bootstrap_servers
            broker_name = f"{_kafka_version(broker.cache_dir) or 'Apache Kafka'} (KRaft, one node, -Xmx1g)"
            if args.pin and broker.pid is not None:
                _pin_broker(broker.pid, 0)
            log(f"broker ready at {bootstrap} in {broker.startup_seconds or 0:.1f} s")
        log(
            f"producing {workload.events:,} events over {workload.tables} tables × {workload.partitions} "
            f"partitions ({'with' if workload.with_schema else 'without'} the schema envelope) ..."
        )
        produced = produce_workload(bootstrap, workload)
        log(
            f"produced {produced.events:,} events ({produced.bytes / 2**20:,.0f} MiB, "
            f"{produced.bytes / produced.events:,.0f} B each) in {produced.seconds:.1f} s, "
            f"{len(produced.changes)} schema changes"
        )
        spec = RunSpec(
            bootstrap=bootstrap,
            topics=workload.topics(),
            expected=workload.events,
            warmup=args.warmup,
            batch_size=args.batch_size,
            work_dir=str(work_dir),
            stall_s=args.stall,
            cpu=1 if args.pin else None,
            profile_dir=profile_dir,
            live_rows=produced.live_rows,
            live_versions=produced.live_versions,
            segments=args.segments,
            concurrent=args.concurrent_checkpoints,
            checkpoint_interval=args.checkpoint_interval,
        )
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.chosen}
        for round_ in range(1, args.repeat + 1):
            for name in args.chosen:
                suffix = f" (run {round_} of {args.repeat})" if args.repeat > 1 else ""
                log(f"running {LABELS[name]}{suffix} ...")
                result = run_contender(name, spec, args.timeout)
                runs[name].append(result)
                if "error" in result:
                    log(f"  {name} failed: {result['error']}")
                    if "traceback" in result:
                        log(result["traceback"])
                else:
                    log(
                        f"  {name}: {result['events_per_s']:,.0f} events/s, "
                        f"{result['cpu_us_per_event']:.2f} CPU µs/event, {result['peak_rss_mib']:.0f} MiB"
                    )
    summary = summarize(runs)
    document = {
        "broker": broker_name,
        "machine": {"cpus": os.cpu_count(), "pinned": bool(args.pin), **_versions()},
        "workload": {
            **asdict(workload),
            "bytes": produced.bytes,
            "mean_event_bytes": produced.bytes / produced.events,
            "produce_s": produced.seconds,
            "ops": produced.ops,
            "schema_changes": [asdict(c) for c in produced.changes],
            "live_rows": produced.live_rows,
        },
        "warmup": args.warmup,
        "batch_size": args.batch_size,
        "summary": summary,
        "runs": runs,
        "targets": targets_for(workload.tables),
    }
    kinds = {k: sum(1 for c in produced.changes if c.kind == k) for k in CHANGE_KINDS}
    made = ", ".join(f"{count} {CHANGE_KINDS[k]}" for k, count in kinds.items() if count)
    report = (
        f"{produced.events:,} Debezium JSON events ({'schema envelope' if workload.with_schema else 'payload only'}, "
        f"{produced.bytes / produced.events:,.0f} B each) over {workload.tables} tables × "
        f"{workload.partitions} partitions; {len(produced.changes)} schema changes "
        f"({made or 'none'}); {produced.ops['c']:,} inserts, "
        f"{produced.ops['u']:,} updates, {produced.ops['d']:,} deletes; {broker_name}; "
        f"{os.cpu_count()} CPUs{', broker on CPU 0 and each contender on CPU 1' if args.pin else ''}; "
        f"timed after the first {args.warmup:.0%} of the events\n\n{render_table(summary, targets_for(workload.tables))}"
    )
    if args.json:
        json.dump(document, sys.stdout, indent=2, default=str)
        print()
        log("\n" + report)  # the table still shows, on stderr
    else:
        print(report)
    if not args.work_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    failed = any("error" in entry or not entry.get("verified", True) for entry in summary.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
