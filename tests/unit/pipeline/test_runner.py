"""The runner with in-package doubles: barriers, bounded waits, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.pipeline import events as E
from ferry.pipeline import types as T
from ferry.pipeline.events import SCHEMA_CHANGE_TAGS
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.schema import Column, Schema, TableId
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


def test_rows_before_a_change_are_flushed_with_the_old_schema_first(tmp_path: Path) -> None:
    sink = MemorySink()
    runner = runner_for(sink, tmp_path)
    runner.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, at(1)),
            E.SchemaHint(TID, (E.AddColumn(TID, Column("x", T.INT())),), "ALTER", True, at(2)),
        ],
        [],
    )
    # the barrier flushed row 1 and recorded offsets up to (not including) the change
    assert sink.flush_count >= 1 and sink.rows(TID) == [{"id": 1, "x": None}]
    checkpoint = runner.state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {("t", 0): 2}
    # once the sink has the change, the schemas after it are saved beside those offsets
    assert checkpoint.schemas["tables"]["db.t"]["schema"]["columns"] == [
        {"name": "id", "type": "INT NOT NULL"},
        {"name": "x", "type": "INT"},
    ]


def test_a_restart_in_the_middle_of_a_schema_change_applies_it_once(tmp_path: Path) -> None:
    sink = MemorySink()
    first = runner_for(sink, tmp_path)
    first.schemas.on_applied = lambda schemas: None  # dies before the schemas after it are saved
    change = E.AddColumn(TID, Column("x", T.INT()), E.FIRST)
    first.process(
        [
            E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(0)),
            E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, at(1)),
            E.SchemaHint(TID, (change,), "ALTER", True, at(2)),
        ],
        [],
    )
    # the sink applied the change; the process dies before the next checkpoint records it
    assert sink.applied[-1] == change
    checkpoint = first.state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {("t", 0): 2}
    second = runner_for(sink, tmp_path)  # restarts from the same state store
    second.process(
        [
            E.SchemaHint(TID, (change,), "ALTER", True, at(2)),
            E.DataChange(TID, E.Op.INSERT, None, {"x": 5, "id": 2}, at(3)),
        ],
        [],
    )
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
