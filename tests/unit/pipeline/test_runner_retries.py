"""A checkpoint under the retry policy: transient errors waited out, with the wait in the status."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.offsets import Offsets
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.retry import RetryPolicy
from ferry.sinks.base.exceptions import SinkTerminalError, SinkTransientError
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("db.t")
SCHEMA = Schema.of([Column("id", T.INT().not_null())], ["id"])
FAST = RetryPolicy(attempts=6, timeout_s=10.0, initial_s=0.001, max_s=0.002)


class FlakySink(MemorySink):
    """A memory sink whose next ``failures`` flushes fail with ``error``."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures, self.error, self.flush_calls = failures, error, 0

    def flush(self, offsets: Offsets) -> None:
        self.flush_calls += 1
        if self.failures:
            self.failures -= 1
            raise self.error
        super().flush(offsets)


class FlakyState(StateStore):
    """A state store whose next ``failures`` checkpoints fail as a database that went away does, and
    that keeps every status detail it was given."""

    failures = 0

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.details: list[str] = []

    def save_checkpoint(
        self,
        pipeline: str,
        offsets: Mapping[tuple[str, int], int],
        schemas: Mapping[str, Any],
        *,
        merge: bool = True,
        partitions: Collection[int] | None = None,
    ) -> int:
        if self.failures:
            self.failures -= 1
            raise OperationalError("INSERT", {}, sqlite3.OperationalError("server closed the connection"))
        return super().save_checkpoint(pipeline, offsets, schemas, merge=merge, partitions=partitions)

    def set_status(self, pipeline: str, phase: str, detail: str, metrics: Any, **kwargs: Any) -> None:
        self.details.append(detail)
        super().set_status(pipeline, phase, detail, metrics, **kwargs)


def runner_for(sink: MemorySink, state: StateStore) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False, retries=FAST),
        source=MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=state,
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    pos = E.SourcePosition("t", 0, 0)
    runner.process([E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, pos)], [])
    runner.process([E.DataChange(TID, E.Op.INSERT, None, {"id": 1}, E.SourcePosition("t", 0, 1))], [])
    return runner


def test_a_sink_that_fails_transiently_is_waited_for_and_the_status_shows_the_attempt(
    tmp_path: Path,
) -> None:
    sink = FlakySink(0, SinkTransientError("connection refused", sink="memory", table="db.t"))
    state = FlakyState(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(sink, state)
    sink.failures = 3
    runner.checkpoint()
    assert sink.rows(TID) == [{"id": 1}]
    waits = [d for d in state.details if d.startswith("flushing the sink: attempt")]
    assert [w.split(" failed")[0] for w in waits] == [
        f"flushing the sink: attempt {n} of 6" for n in (1, 2, 3)
    ]
    assert "connection refused" in waits[0]
    assert runner.status.detail == "reading"
    runner.close()


def test_a_sink_that_refuses_fails_the_checkpoint_at_once(tmp_path: Path) -> None:
    sink = FlakySink(0, SinkTerminalError("permission denied for table t", sink="memory", table="db.t"))
    runner = runner_for(sink, FlakyState(f"sqlite:///{tmp_path}/state.db"))
    sink.failures, sink.flush_calls = 3, 0
    with pytest.raises(SinkTerminalError, match="permission denied"):
        runner.checkpoint()
    assert sink.flush_calls == 1
    runner.close()


def test_a_state_store_that_went_away_is_waited_for(tmp_path: Path) -> None:
    state = FlakyState(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(MemorySink(), state)
    runner.checkpoint()  # creating the table took none
    before = state.latest_checkpoint("unit")
    state.failures = 2
    runner.checkpoint()
    after = state.latest_checkpoint("unit")
    assert before is not None and after is not None and after.id > before.id
    assert sum(d.startswith("saving the checkpoint: attempt") for d in state.details) == 2
    runner.close()
