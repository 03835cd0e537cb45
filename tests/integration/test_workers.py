"""Several workers running one pipeline: they share the partitions of a real Kafka topic, one is
killed with SIGKILL mid-stream, the other takes its partitions over, and the Iceberg table holds
every event exactly once, with a schema change both saw applied once.

Also here: the shared state store on a real PostgreSQL server (merged checkpoints, leases), and
the table-format sinks committing from two processes at once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from ferry.cli.output import render_status
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory
from ferry.model.events import CreateTable, DataChange, Op, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT
from ferry.offsets import decode_offsets
from ferry.sinks.base.table_format import TableFormatSink
from ferry.state import StateStore
from tests.integration.helpers import iceberg_rows, start_run
from tests.support.postgres import PostgresServer
from tests.support.waiting import Deadline

pytestmark = pytest.mark.integration

PARTITIONS = 4
#: Events per partition before the added column and after it; then, around the kill, this many at
#: a time until a second after it.
BEFORE, AFTER, EVENTS_PER_SEND = 300, 300, 10


def wait_for(
    what: str, condition: Callable[[], bool], processes: list[subprocess.Popen[bytes]], timeout: float = 60
) -> None:
    deadline = Deadline(timeout)
    while not condition():
        for process in processes:
            assert process.poll() is None, f"a worker exited ({process.returncode}) while waiting for {what}"
        assert not deadline.expired(), f"timed out waiting for {what}"
        time.sleep(0.05)


class Pipeline:
    """What the test reads of the pipeline's state store."""

    def __init__(self, url: str, name: str) -> None:
        self.state = StateStore(url)
        self.name = name

    def workers(self) -> dict[str, dict[str, Any]]:
        status = self.state.get_status(self.name)
        return {} if status is None else dict(status["metrics"].get("workers", {}))

    def assigned(self) -> dict[str, list[int]]:
        return {w: sorted(p for ps in s["assigned"].values() for p in ps) for w, s in self.workers().items()}

    def offsets(self) -> dict[tuple[str, int], int]:
        checkpoint = self.state.latest_checkpoint(self.name)
        return {} if checkpoint is None else checkpoint.offsets

    def history(self, prefix: str) -> list[tuple[str, str]]:
        return [
            (h.outcome, h.reason) for h in self.state.schema_history(self.name) if h.change.startswith(prefix)
        ]


@pytest.fixture(
    params=[("sqlite", "--no-worker"), ("postgresql", "--worker")],
    ids=["sqlite", "postgresql"],
)
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The state store's URL (a SQLite file, PostgreSQL) and a ``--worker`` flag as scripts pass it
    (both are accepted: a worker is one plain process either way)."""
    state, mode = request.param
    if state == "sqlite":
        return f"sqlite:///{tmp_path}/state.db", mode
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.sqlalchemy_url, mode


def test_two_workers_share_the_partitions_and_one_takes_over_when_the_other_is_killed(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    deployment: tuple[str, str],
) -> None:
    state_url, mode = deployment
    topic = topic_factory(PARTITIONS)
    # no primary key: rows are appended, so a row written twice would show as a duplicate
    events = dbz.DebeziumTable(
        "s", "app", "events", [dbz.ConnectColumn("id", dbz.INT64, optional=False)], key=()
    )
    sent: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failed: list[str] = []

    def send(count: int) -> None:
        for partition in range(PARTITIONS):
            for _ in range(count):
                row: dict[str, Any] = {"id": partition * 1_000_000 + sent[partition]}
                if any(c.name == "extra" for c in events.columns):
                    row["extra"] = sent[partition]
                producer.produce(
                    topic,
                    events.insert(row)[1],
                    partition=partition,
                    on_delivery=lambda error, _message: error is None or failed.append(str(error)),
                )
                sent[partition] += 1
        assert producer.flush(30) == 0 and failed == []

    def everything_checkpointed() -> bool:
        return pipeline.offsets() == {(topic, p): n for p, n in sent.items()}

    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  scan.startup.mode: earliest-offset
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: {group_id}
  state.url: '{state_url}'
  checkpoint.interval: 100ms
  batch.size: 200
  schema.operator.rpc-timeout: 10s
""")
    pipeline = Pipeline(state_url, group_id)
    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    workers = [start_run(job, tmp_path, log, mode) for log in logs]
    try:
        # both join the group and get two partitions each
        wait_for(
            "both workers to have two partitions",
            lambda: sorted(len(p) for p in pipeline.assigned().values() if p) == [2, 2],
            workers,
        )
        send(BEFORE)
        wait_for("the rows before the change", everything_checkpointed, workers)
        # both see the added column, in their own partitions
        events.add_column("extra", dbz.INT32)
        send(AFTER)
        wait_for("the rows after the change", everything_checkpointed, workers)
        wait_for("both workers to see the change", lambda: len(pipeline.history("add.column")) == 2, workers)
        # each worker read its own half (its status is at most a second behind)
        wait_for(
            "each worker to report its half",
            lambda: (
                sorted(s["records_read"] for s in pipeline.workers().values()) == [2 * (BEFORE + AFTER)] * 2
            ),
            workers,
        )
        read = {w: s["records_read"] for w, s in pipeline.workers().items()}

        # worker 2 is killed while events keep arriving in its partitions
        victim, survivor = workers[1], workers[0]
        victim_name = next(w for w in read if w.split(":")[1] == str(victim.pid))
        survivor_name = next(w for w in read if w != victim_name)
        victim_partitions = pipeline.assigned()[victim_name]
        sending = threading.Event()
        sending.set()

        def keep_sending() -> None:
            while sending.is_set():
                send(EVENTS_PER_SEND)
                time.sleep(0.02)

        producing = threading.Thread(target=keep_sending)
        producing.start()
        try:
            wait_for(
                "the victim to read some of the new events",
                lambda: pipeline.workers()[victim_name]["records_read"] > read[victim_name],
                workers,
            )
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            time.sleep(1.0)  # events keep arriving in the dead worker's partitions
        finally:
            sending.clear()
            producing.join(timeout=60)
        # the group notices within the session timeout (10 s); the survivor reads the rest
        wait_for(
            "the survivor to take the dead worker's partitions over",
            lambda: len(pipeline.assigned()[survivor_name]) == PARTITIONS,
            [survivor],
        )
        wait_for("the survivor to read everything", everything_checkpointed, [survivor])
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=300) == 0
    except BaseException:
        for log in logs:
            print(f"--- {log.name}\n{log.read_text()[-4000:]}")
        raise
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)

    rows = iceberg_rows(warehouse, "app.events")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a row was written twice"
    assert set(ids) == {p * 1_000_000 + i for p, n in sent.items() for i in range(n)}, "a row is missing"
    extra = {r["id"]: r["extra"] for r in rows}
    assert all(extra[p * 1_000_000 + i] is None for p in range(PARTITIONS) for i in range(BEFORE))
    assert all(extra[p * 1_000_000 + i] == i for p, n in sent.items() for i in range(BEFORE, n))
    # applied once, by one worker; the other found it applied
    assert pipeline.history("add.column") == [("apply", "supported"), ("skip", "already applied at the sink")]
    assert [outcome for outcome, _ in pipeline.history("create.table")].count("apply") == 1
    # ferry status names each worker with its partitions
    text = render_status(pipeline.state, [group_id], "text")
    assert f"{survivor_name}  STOPPED  {', '.join(f'{topic}[{p}]' for p in range(PARTITIONS))}" in text
    assert f"{victim_name}  RUNNING  {', '.join(f'{topic}[{p}]' for p in victim_partitions)}" in text
    pipeline.state.close()


# ------------------------------------------------------------------------------ the state store on PostgreSQL


@pytest.fixture
def postgres_state(postgres_server: PostgresServer) -> Iterator[str]:
    yield postgres_server.sqlalchemy_url


def in_threads(url: str, writers: int, rounds: int, work: Callable[[StateStore, int, int], None]) -> None:
    """``work(store, writer, round)`` from ``writers`` threads in lockstep, each with its own store."""
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(writer: int) -> None:
        state = StateStore(url)
        try:
            for n in range(1, rounds + 1):
                barrier.wait(timeout=30)
                work(state, writer, n)
        except BaseException as e:
            errors.append(e)
            barrier.abort()
        finally:
            state.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []


def test_postgresql_checkpoints_of_workers_at_the_same_moment_keep_every_partition(
    postgres_state: str, group_id: str
) -> None:
    in_threads(
        postgres_state,
        4,
        30,
        lambda state, writer, n: state.save_checkpoint(group_id, {("t", writer): n}, {"tables": {}}),
    )
    state = StateStore(postgres_state)
    assert state.latest_checkpoint(group_id).offsets == {("t", w): 30 for w in range(4)}  # type: ignore[union-attr]
    state.close()


def test_postgresql_lease_is_held_by_one_worker_at_a_time(postgres_state: str, group_id: str) -> None:
    holding: list[int] = []
    overlaps: list[tuple[int, int]] = []

    def hold(state: StateStore, writer: int, n: int) -> None:
        with state.lease(group_id, "schema db.t", f"w{writer}", ttl_s=30, poll_s=0.005):
            if holding:
                overlaps.append((holding[-1], writer))
            holding.append(writer)
            time.sleep(0.002)
            holding.remove(writer)

    in_threads(postgres_state, 3, 15, hold)
    assert overlaps == []
    state = StateStore(postgres_state)
    assert state.take_lease(group_id, "schema db.t", "w9", ttl_s=30) is None
    assert state.take_lease(group_id, "schema db.t", "w1", ttl_s=30) == "w9"
    # a lease whose holder stopped renewing it is free once it expires (here: at once)
    assert state.take_lease(group_id, "schema db.u", "w9", ttl_s=0) is None
    assert state.take_lease(group_id, "schema db.u", "w1", ttl_s=30) is None
    assert state.take_lease(group_id, "schema db.u", "w9", ttl_s=30) == "w1"
    state.close()


def test_postgresql_status_lists_every_worker(postgres_state: str, group_id: str) -> None:
    def report(state: StateStore, writer: int, n: int) -> None:
        metrics = {"records_read": n, "assigned": {"t": [writer]}}
        state.set_status(group_id, "RUNNING", "reading", metrics, worker=f"w{writer}")

    in_threads(postgres_state, 3, 10, report)
    state = StateStore(postgres_state)
    status = state.get_status(group_id)
    assert status is not None
    assert {w: s["records_read"] for w, s in status["metrics"]["workers"].items()} == {
        "w0": 10,
        "w1": 10,
        "w2": 10,
    }
    state.close()


# ------------------------------------------------------------------------------ two processes commit one table

TABLE = TableId(None, "app", "events")
ROWS = Schema.of([Column("id", BIGINT().not_null()), Column("writer", INT())], [])
COMMITS, ROWS_PER_COMMIT = 12, 5


def make_sink(kind: str, warehouse: str) -> TableFormatSink:
    if kind == "iceberg":
        from ferry.sinks.iceberg.config import IcebergSinkConfig
        from ferry.sinks.iceberg.sink import IcebergSink

        config = IcebergSinkConfig.model_validate(
            {"type": "iceberg", "catalog.properties.warehouse": warehouse}
        )
        return IcebergSink(config, pipeline="shared")
    from ferry.sinks.paimon.config import PaimonSinkConfig
    from ferry.sinks.paimon.sink import PaimonSink

    paimon = PaimonSinkConfig.model_validate({"type": "paimon", "catalog.properties.warehouse": warehouse})
    return PaimonSink(paimon, pipeline="shared")


def commit_from_worker(kind: str, warehouse: str, writer: int, start: Any) -> None:
    """One worker's commits: partition ``writer`` of topic ``t``, its offsets in each commit."""
    sink = make_sink(kind, warehouse)
    start.wait(timeout=240)  # importing the table format in a new process: slow on a loaded machine
    for n in range(COMMITS):
        changes = [
            DataChange(
                TABLE,
                Op.INSERT,
                None,
                {"id": writer * 1000 + n * ROWS_PER_COMMIT + i, "writer": writer},
                SourcePosition("t", writer, n * ROWS_PER_COMMIT + i),
            )
            for i in range(ROWS_PER_COMMIT)
        ]
        sink.write(TABLE, ROWS, changes)
        sink.flush({("t", writer): (n + 1) * ROWS_PER_COMMIT})
    sink.close()


def table_rows(sink: TableFormatSink) -> list[dict[str, Any]]:
    table = sink.load_table(TABLE)
    if hasattr(table, "scan"):
        return list(table.scan().to_arrow().to_pylist())
    builder = table.new_read_builder()
    return list(builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist())


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_commits_from_two_processes_keep_every_row_and_each_others_offsets(kind: str, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "lake")
    sink = make_sink(kind, warehouse)
    sink.apply_schema_change(CreateTable(TABLE, ROWS), ROWS)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)  # both have opened the catalog: they commit at the same moments
    workers = [context.Process(target=commit_from_worker, args=(kind, warehouse, w, start)) for w in (0, 1)]
    for worker in workers:
        worker.start()
    start.wait(timeout=240)
    for worker in workers:
        worker.join(timeout=240)
        assert worker.exitcode == 0
    ids = sorted(r["id"] for r in table_rows(sink))
    assert ids == sorted(w * 1000 + i for w in (0, 1) for i in range(COMMITS * ROWS_PER_COMMIT))
    # the newest snapshot alone carries both workers' offsets
    newest = next(iter(sink.snapshot_properties(sink.load_table(TABLE))))
    final = {("t", w): COMMITS * ROWS_PER_COMMIT for w in (0, 1)}
    assert decode_offsets(json.loads(newest[sink.offsets_property])) == final
    assert sink.committed_offsets(TABLE) == final
    sink.close()


def test_an_iceberg_commit_another_writer_beat_is_not_replayed_with_offsets_merged_before(
    tmp_path: Path,
) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from ferry.offsets import encode_offsets

    warehouse = str(tmp_path / "lake")
    first, second = make_sink("iceberg", warehouse), make_sink("iceberg", warehouse)
    try:
        first.apply_schema_change(CreateTable(TABLE, ROWS), ROWS)

        def row(writer: int) -> DataChange:
            return DataChange(
                TABLE, Op.INSERT, None, {"id": writer, "writer": writer}, SourcePosition("t", writer, 0)
            )

        stale = first.load_table(TABLE)  # the first writer's view, before the second one commits
        second.write(TABLE, ROWS, [row(1)])
        second.flush({("t", 1): 1})
        # the first writer's offsets merged into the table it loaded: the commit must fail (to be
        # built again on the second writer's commit), never land with the second writer's offsets lost
        merged = {first.offsets_property: json.dumps(encode_offsets({("t", 0): 1}))}
        with pytest.raises(CommitFailedException):
            first.commit(TABLE, stale, [row(0)], merged)
        first.write(TABLE, ROWS, [row(0)])
        first.flush({("t", 0): 1})
        assert first.committed_offsets(TABLE) == {("t", 0): 1, ("t", 1): 1}
        assert sorted(r["id"] for r in table_rows(first)) == [0, 1]
    finally:
        first.close()
        second.close()
