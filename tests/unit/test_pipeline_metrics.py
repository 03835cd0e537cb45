"""The families a pipeline's metrics have: dead letters by a bounded reason kind, retries by the
kind of operation, schema changes by outcome, counters that restart together with ``_created``
telling when, and an exposition ``promtool check metrics`` accepts."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from ferry.api.status import registry_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import TIMESTAMP_CREATE_TIME, Record
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.bad_records import DeadLetterKind
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.retry import Operation, RetryPolicy
from ferry.sinks.base.exceptions import SinkTransientError
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("shop.orders")
SCHEMA = Schema.of([Column("id", T.INT().not_null())], ["id"])
PROMTOOL = shutil.which("promtool")


def decode(records: Sequence[Any]) -> list[E.Event]:
    """``create`` and ``add`` are DDL, ``{"id": n}`` a row; anything else cannot be decoded."""
    events: list[E.Event] = []
    for r in records:
        position = E.SourcePosition(r.topic(), r.partition(), r.offset())
        value = orjson.loads(r.value())
        if value == "create":
            events.append(E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, position))
        elif value == "add":
            change = E.AddColumn(TID, Column("note", T.STRING()))
            events.append(E.SchemaHint(TID, (change,), "ALTER", True, position))
        elif isinstance(value, dict):
            events.append(E.DataChange(TID, E.Op.INSERT, None, {"id": value["id"]}, position, None))
        else:
            reason = f"shop.orders: {value!r} is not a Debezium envelope"
            events.append(E.BadRecord(position, reason, None, r.value()))
    return events


def records(values: list[Any], start: int = 0) -> list[Record]:
    now = int(time.time() * 1000)
    return [
        Record("orders", 0, start + i, value=orjson.dumps(v), timestamp=(TIMESTAMP_CREATE_TIME, now))
        for i, v in enumerate(values)
    ]


def runner_for(state: Path, source: list[Record], sink: MemorySink) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(
            name="orders",
            tune_gc=False,
            batch_size=2,
            status_interval_s=0.0,
            retries=RetryPolicy(initial_s=0.001, max_s=0.001),
        ),
        source=MemorySource(source),
        decode=decode,
        sink=sink,
        state=StateStore(f"sqlite:///{state}"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.decode = runner.metrics.timings.watch(runner.decode)
    runner.open()
    return runner


def run_to_end(runner: PipelineRunner) -> None:
    while not runner.source.finished():
        runner.step()
    runner.checkpoint()
    runner.step()


def samples(runner: PipelineRunner) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of the pipeline's exposition: name → labels (without the pipeline) → value."""
    text = generate_latest(registry_for(runner)).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "pipeline"))
            if s.value or not labels:  # a kind, an operation, an outcome none of happened: at 0
                out.setdefault(s.name, {})[labels] = s.value
    return out


def test_dead_letters_retries_and_schema_changes_are_counted_by_kind_never_by_table(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.fail_next_flush = SinkTransientError("the catalog is busy", sink="memory")
    runner = runner_for(tmp_path / "state.db", records(["create", {"id": 1}, "garbage", {"id": 2}]), sink)
    try:
        run_to_end(runner)
        found = samples(runner)
    finally:
        runner.close()
    assert found["ferry_dead_letters_total"] == {(("reason", DeadLetterKind.UNDECODABLE.value),): 1}
    assert found["ferry_retries_total"] == {(("operation", Operation.SINK_FLUSH.value),): 1}
    assert found["ferry_schema_changes_total"] == {(("outcome", "apply"),): 1}
    assert found["ferry_rows_written_total"] == {(("table", "shop.orders"),): 2}
    kinds = {v for label in found["ferry_dead_letters_total"] for _, v in label}
    operations = {v for label in found["ferry_retries_total"] for _, v in label}
    assert kinds <= {k.value for k in DeadLetterKind} and operations <= {o.value for o in Operation}


def test_every_counter_starts_again_at_a_restart_and_says_when(tmp_path: Path) -> None:
    state, sink = tmp_path / "state.db", MemorySink()
    first = runner_for(state, records(["create", {"id": 1}, {"id": 2}]), sink)
    try:
        run_to_end(first)
        before = samples(first)
        created_before = first.metrics.started_ms / 1000
    finally:
        first.close()
    # the restart reads the records that came after the checkpoint, with a column added by DDL
    later = records(["add", {"id": 3}], start=3)
    second = runner_for(state, [*records(["create", {"id": 1}, {"id": 2}]), *later], sink)
    try:
        run_to_end(second)
        text = generate_openmetrics(registry_for(second)).decode()
        after = samples(second)
    finally:
        second.close()
    assert before["ferry_records_read_total"][()] == 3
    assert before["ferry_schema_changes_total"] == {(("outcome", "apply"),): 1}
    # the second run counts its own records and its own changes: both from 0
    assert after["ferry_records_read_total"][()] == 2
    assert after["ferry_schema_changes_total"] == {(("outcome", "apply"),): 1}
    created = {
        f.name: {s.value for s in f.samples if s.name.endswith("_created")}
        for f in openmetrics_families(text)
        if f.type == "counter" and f.name.startswith("ferry_")
    }
    assert (
        created["ferry_records_read"] == created["ferry_schema_changes"] == {second.metrics.started_ms / 1000}
    )
    assert second.metrics.started_ms / 1000 > created_before


def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.fail_next_flush = SinkTransientError("the catalog is busy", sink="memory")
    runner = runner_for(tmp_path / "state.db", records(["create", {"id": 1}, "garbage"]), sink)
    try:
        run_to_end(runner)
        text = generate_latest(registry_for(runner)).decode()
    finally:
        runner.close()
    assert check_metrics(text) == ""


def check_metrics(text: str) -> str:
    """What ``promtool check metrics`` says of ``text`` (lint included): nothing when it is clean.
    Without promtool on the machine, the exposition is parsed strictly by ``prometheus_client``."""
    if PROMTOOL is None:
        list(text_string_to_metric_families(text))
        return ""
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    return (done.stdout + done.stderr).strip() if done.returncode else ""
