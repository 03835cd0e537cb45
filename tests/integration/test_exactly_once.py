"""A pipeline killed with SIGKILL mid-stream and restarted writes every row exactly once into Iceberg."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.state import StateStore
from tests.integration.helpers import iceberg_rows, start_run
from tests.support.stall import StalledError, wait_unless_stalled
from tests.support.waiting import Deadline

pytestmark = pytest.mark.integration

EVENTS_PER_PARTITION = 15000


def progress(state: StateStore, pipeline: str) -> int:
    """Records checkpointed so far (a checkpoint taken when partitions are assigned adds none)."""
    checkpoint = state.latest_checkpoint(pipeline)
    return 0 if checkpoint is None else sum(checkpoint.offsets.values())


def app_table(name: str, column: dbz.ConnectColumn, *, key: tuple[str, ...]) -> dbz.DebeziumTable:
    """A source table ``app.<name>`` of an ``id`` column and ``column``, as Debezium writes it."""
    return dbz.DebeziumTable(
        "s", "app", name, [dbz.ConnectColumn("id", dbz.INT64, optional=False), column], key=key
    )


def run_killed_four_times(
    tmp_path: Path, bootstrap: str, topic: str, name: str, *, sink: dict[str, str], pipeline: dict[str, str]
) -> Path:
    """Write the job file of these tests (the topic read from its start to its end into an Iceberg
    warehouse in ``tmp_path``, with ``sink`` and ``pipeline`` keys added), run it as
    :func:`kill_four_times_then_finish` does, and return the warehouse."""
    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  topic: {topic}
  properties.group.instance.id: worker-1
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
{"".join(f"  {key}: {value}{chr(10)}" for key, value in sink.items())}pipeline:
  name: {name}
  state.url: sqlite:///{tmp_path}/state.db
{"".join(f"  {key}: {value}{chr(10)}" for key, value in pipeline.items())}""")
    kill_four_times_then_finish(job, tmp_path, name)
    return warehouse


def kill_four_times_then_finish(job: Path, tmp_path: Path, pipeline: str) -> None:
    """``ferry run job`` killed with SIGKILL four times, each once it made progress (more records
    checkpointed) and at a varying moment after, then run to its end."""
    log = tmp_path / "ferry.log"
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    kills = 0
    for pause in (0.0, 0.05, 0.13, 0.21):
        seen = progress(state, pipeline)
        process = start_run(job, tmp_path, log, "--no-worker")
        deadline = Deadline(60)
        while progress(state, pipeline) == seen and process.poll() is None and not deadline.expired():
            time.sleep(0.02)
        time.sleep(pause)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait(timeout=30)
    started = time.monotonic()
    final = start_run(job, tmp_path, log, "--no-worker")
    try:
        wait_unless_stalled(final, cpu_s=200, wall_s=900)
    except StalledError as stalled:
        raise AssertionError(f"the final run stalled: it {stalled}: {log.read_text()[-5000:]}") from None
    assert final.returncode == 0, log.read_text()[-3000:]
    print(f"final run: {time.monotonic() - started:.1f} s")
    assert kills == 4, "the pipeline finished before it could be killed four times: produce more events"


def test_sigkill_at_any_point_neither_loses_nor_duplicates_rows(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(2)
    # no primary key: rows are appended, so a row written twice would show as a duplicate
    events = app_table("events", dbz.ConnectColumn("payload", dbz.STRING), key=())
    for partition in (0, 1):
        values = []
        for i in range(EVENTS_PER_PARTITION):
            if i == EVENTS_PER_PARTITION // 2 and partition == 0:
                events.add_column("extra", dbz.INT32)
            row = {"id": partition * 1_000_000 + i, "payload": f"p{i}"}
            if "extra" in [c.name for c in events.columns]:
                row["extra"] = i
            values.append(events.insert(row)[1])
        produce(kafka_bootstrap, topic, values, partition=partition)
    warehouse = run_killed_four_times(
        tmp_path,
        kafka_bootstrap,
        topic,
        group_id,
        sink={},
        # the commit on its own thread: a kill can land while it is in flight
        pipeline={"checkpoint.interval": "100ms", "checkpoint.concurrent": "true", "batch.size": "400"},
    )

    rows = iceberg_rows(warehouse, "app.events")
    ids = [r["id"] for r in rows]
    assert len(ids) == 2 * EVENTS_PER_PARTITION
    assert len(set(ids)) == len(ids), "a row was written twice"
    assert set(ids) == {p * 1_000_000 + i for p in (0, 1) for i in range(EVENTS_PER_PARTITION)}
    extra = {r["id"]: r["extra"] for r in rows}
    assert extra[EVENTS_PER_PARTITION - 1] == EVENTS_PER_PARTITION - 1
    assert extra[0] is None


def test_sigkill_with_upserts_and_compactions_in_the_background_ends_with_the_source_rows(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(2)
    # a primary key: upserts and deletes are position deletes, and compactions written in the
    # background are committed with the rows deleted from their inputs meanwhile
    orders = app_table("orders", dbz.ConnectColumn("qty", dbz.INT32), key=("id",))
    expected: dict[int, int] = {}
    for partition in (0, 1):
        keyed: list[tuple[bytes | None, bytes]] = []
        live: dict[int, int] = {}
        for i in range(EVENTS_PER_PARTITION):
            key = partition * 1_000_000 + (i * 7919) % 1_500  # keys come back: updates and deletes
            old = live.get(key)
            if old is None:
                keyed.append(orders.insert({"id": key, "qty": i}))
                live[key] = i
            elif i % 5 == 0:
                keyed.append(orders.delete({"id": key, "qty": old}))
                del live[key]
            else:
                keyed.append(orders.update({"id": key, "qty": old}, {"id": key, "qty": i}))
                live[key] = i
        produce(
            kafka_bootstrap, topic, [v for _, v in keyed], keys=[k for k, _ in keyed], partition=partition
        )
        expected |= live
    warehouse = run_killed_four_times(
        tmp_path,
        kafka_bootstrap,
        topic,
        group_id,
        # a compaction looked for at every commit (the count does not survive a kill), of two files
        sink={"sink.compaction.commit-interval": "1", "sink.compaction.min-input-files": "2"},
        # many small commits, each within the reading (the other test has them on their own
        # thread): the compactions' files are written while the next commits delete rows
        pipeline={"checkpoint.interval": "20ms", "batch.size": "100"},
    )

    rows = iceberg_rows(warehouse, "app.orders")
    assert len(rows) == len({r["id"] for r in rows}), "a key has two rows"
    assert {r["id"]: r["qty"] for r in rows} == expected
