"""The runner with in-package doubles: barriers, bounded waits, checkpoints."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.schema_operator import SchemaChangeTimeoutError
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("db.t")
SCHEMA = Schema.of([Column("id", T.INT().not_null())], ["id"])


def runner_for(sink: MemorySink, tmp_path: Path, **settings: float) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False, **settings),  # type: ignore[arg-type]
        source=MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    return runner


def at(offset: int) -> E.SourcePosition:
    return E.SourcePosition("t", 0, offset)


def test_a_background_schema_change_that_never_finishes_times_out_naming_it(tmp_path: Path) -> None:
    sink = MemorySink(type="selectdb", pending_polls=10**9)
    runner = runner_for(sink, tmp_path, schema_change_timeout_s=0.3, schema_change_poll_s=0.01)
    with pytest.raises(SchemaChangeTimeoutError, match=r"selectdb did not finish create.table db.t .* 0.3 s"):
        runner.process([E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0))], [])


def test_rows_before_a_drop_are_flushed_with_the_old_schema_first(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    with_y = Schema.of([Column("id", T.INT().not_null()), Column("y", T.INT())], ["id"])
    drop = E.DropColumn(TID, "y")
    runner.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, with_y),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1, "y": 7}, at(1)),
            E.SchemaHint(TID, (drop,), "ALTER", True, at(2)),
        ],
        [],
    )
    # the barrier flushed row 1 (with y) and recorded offsets up to (not including) the change
    assert sink.flush_count == 1 and sink.flushed_offsets == {("t", 0): 2}
    assert sink.applied[-1] == drop and sink.rows(TID) == [{"id": 1}]
    checkpoint = runner.state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {("t", 0): 2}
    # once the sink has the change, the schemas after it are saved beside those offsets
    assert checkpoint.schemas["tables"]["db.t"]["schema"]["columns"] == [
        {"name": "id", "type": "INT NOT NULL"}
    ]


def test_a_column_added_needs_no_flush_the_rows_before_it_take_null(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    add = E.AddColumn(TID, Column("x", T.INT()))
    runner.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, at(1)),
            E.SchemaHint(TID, (add,), "ALTER", True, at(2)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 2, "x": 5}, at(3)),
        ],
        [],
    )
    assert sink.applied[-1] == add
    assert sink.flush_count == 0 and runner.metrics.checkpoints == 0
    # the sink's schema is saved beside the offsets of the last checkpoint (none yet)
    checkpoint = runner.state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {}
    assert [c["name"] for c in checkpoint.schemas["tables"]["db.t"]["schema"]["columns"]] == ["id", "x"]
    assert checkpoint.schemas["tables"]["db.t"]["partitions"] == {}  # what no partition showed yet
    runner.checkpoint()
    assert sorted(sink.rows(TID), key=lambda r: r["id"]) == [{"id": 1, "x": None}, {"id": 2, "x": 5}]


def test_a_widened_type_needs_no_flush_the_rows_before_it_are_cast(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    dated = Schema.of([Column("id", T.INT().not_null()), Column("d", T.DATE())], ["id"])
    widen = E.AlterColumnType(TID, "d", T.TIMESTAMP(6), T.DATE())
    runner.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, dated),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1, "d": dt.date(2024, 5, 6)}, at(1)),
            E.SchemaHint(TID, (widen,), "ALTER", True, at(2)),
        ],
        [],
    )
    assert sink.applied[-1] == widen and sink.flush_count == 0
    runner.checkpoint()
    assert sink.rows(TID) == [{"id": 1, "d": dt.datetime(2024, 5, 6)}]


def test_a_new_table_checkpoints_no_other_table(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    other = TableId.parse("db.u")
    runner.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, at(1)),
            E.SchemaHint(other, (E.CreateTable(other, SCHEMA),), "CREATE", True, at(2)),
            E.DataChange(other, E.Op.INSERT, None, {"id": 9}, at(3)),
        ],
        [],
    )
    assert other in sink.tables and sink.flush_count == 0 and runner.metrics.checkpoints == 0
    runner.checkpoint()
    assert sink.rows(TID) == [{"id": 1}] and sink.rows(other) == [{"id": 9}]


def test_a_new_tables_schema_event_copies_no_other_tables_schemas(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    tables = [TableId.parse(f"db.t{i}") for i in range(20)]
    runner.process([E.SchemaObserved(t, SCHEMA, E.SourcePosition(str(t), 0, 0)) for t in tables], [])
    tracked = dict(runner.schemas.tracker.tables)
    new = TableId.parse("db.new")
    runner.process(
        [
            E.SchemaObserved(new, SCHEMA, E.SourcePosition("new", 0, 0)),
            E.DataChange(new, E.Op.INSERT, None, {"id": 1}, E.SourcePosition("new", 0, 0)),
            # a table's second partition: that table's entry changes, and only it
            E.SchemaObserved(tables[0], SCHEMA, E.SourcePosition(str(tables[0]), 1, 0)),
        ],
        [],
    )
    now = runner.schemas.tracker.tables
    assert [t for t in tables if now[t] is not tracked[t]] == [tables[0]]
    assert sorted(now[tables[0]].partitions) == [0, 1] and sorted(tracked[tables[0]].partitions) == [0]
    assert new in now and [c.table_id for c in sink.applied][-1] == new
    runner.checkpoint()
    assert sink.rows(new) == [{"id": 1}]


def test_a_partition_reaching_a_schema_the_sink_has_costs_no_checkpoint(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    wider = Schema.of([Column("id", T.INT().not_null()), Column("x", T.INT())], ["id"])

    def on(partition: int, offset: int) -> E.SourcePosition:
        return E.SourcePosition("t", partition, offset)

    runner.process(
        [
            E.SchemaObserved(TID, SCHEMA, on(0, 0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 2}, on(0, 0)),
            E.SchemaObserved(TID, SCHEMA, on(1, 0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, on(1, 0)),
            E.SchemaObserved(TID, wider, on(0, 1)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 4, "x": 4}, on(0, 1)),
            E.SchemaObserved(TID, wider, on(1, 1)),  # the sink has it already
            E.DataChange(TID, E.Op.INSERT, None, {"id": 3, "x": 3}, on(1, 1)),
        ],
        [],
    )
    assert [c.tag for c in sink.applied] == ["create.table", "add.column"]
    assert sink.flush_count == 0 and runner.metrics.checkpoints == 0
    runner.checkpoint()
    assert sorted(sink.rows(TID), key=lambda r: r["id"]) == [
        {"id": 1, "x": None},
        {"id": 2, "x": None},
        {"id": 3, "x": 3},
        {"id": 4, "x": 4},
    ]


def test_a_restart_in_the_middle_of_a_schema_change_applies_it_once(tmp_path: Path) -> None:
    sink = MemorySink()
    first = runner_for(sink, tmp_path)
    first.schemas.on_applied = lambda schemas: None  # dies before the schemas after it are saved
    change = E.AddColumn(TID, Column("x", T.INT()), E.FIRST)
    events = [
        E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0)),
        E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, at(1)),
        E.SchemaHint(TID, (change,), "ALTER", True, at(2)),
    ]
    first.process(events, [])
    # the sink applied the change; the process dies before a checkpoint records anything
    assert sink.applied[-1] == change
    assert first.state.latest_checkpoint("unit") is None
    second = runner_for(sink, tmp_path)  # restarts from the same state store: from the beginning
    second.process([*events, E.DataChange(TID, E.Op.INSERT, None, {"x": 5, "id": 2}, at(3))], [])
    second.checkpoint()
    assert sink.applied.count(change) == 1
    assert sorted(sink.rows(TID), key=lambda r: r["id"]) == [{"x": None, "id": 1}, {"x": 5, "id": 2}]
    history = second.state.schema_history("unit")
    assert [h.outcome for h in history if h.change.startswith("add.column")] == ["apply", "skip"]


def test_hologres_refuses_try_evolve_before_start() -> None:
    from ferry.worker import behavior_refusal

    assert "does not take TRY_EVOLVE" in (behavior_refusal("hologres", SchemaChangeBehavior.TRY_EVOLVE) or "")
    assert behavior_refusal("hologres", SchemaChangeBehavior.LENIENT) is None
    assert behavior_refusal("iceberg", SchemaChangeBehavior.TRY_EVOLVE) is None
