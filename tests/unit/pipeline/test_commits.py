"""A checkpoint's commit beside the reading: offsets saved only after the sink's commit, reading on
meanwhile, schema changes waiting for it, and its error failing the run as an inline one does."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ferry.config.loader import load_job_text
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.offsets import Offsets
from ferry.pipeline.commits import Background, SteppedCommits
from ferry.pipeline.exceptions import CheckpointError
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner

TID = TableId.parse("db.t")
SCHEMA = Schema.of([Column("id", T.INT().not_null()), Column("y", T.INT())], ["id"])
P = ("t", 0)
#: Bounds a wait for another thread that only a broken runner would reach.
BOUND_S = 60.0


class Journal:
    """What the sink and the state store did, in order."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []


class JournalSink(MemorySink):
    """A memory sink that notes its flushes and schema changes; its flushes can be held."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.hold = False
        self.flushing = threading.Event()
        self.release = threading.Event()
        self.fail_with: list[Exception] = []
        self.stepped: SteppedCommits | None = None

    def flush(self, offsets: Offsets) -> None:
        if self.hold:
            self.flushing.set()
            assert self.release.wait(BOUND_S), "the flush was never released"
        if self.fail_with:
            raise self.fail_with.pop(0)
        super().flush(offsets)
        self.journal.entries.append(("flush", dict(offsets)))

    def apply_schema_change(self, change: E.SchemaChange, schema_after: Schema | None) -> None:
        in_flight = self.stepped is not None and self.stepped.in_flight
        self.journal.entries.append(("apply", (change.tag, in_flight)))
        super().apply_schema_change(change, schema_after)


class JournalState(StateStore):
    def __init__(self, url: str, journal: Journal) -> None:
        super().__init__(url)
        self.journal = journal

    def save_checkpoint(
        self, pipeline: str, offsets: Mapping[tuple[str, int], int], schemas: Mapping[str, Any], **kw: Any
    ) -> int:
        self.journal.entries.append(("save", dict(offsets)))
        return super().save_checkpoint(pipeline, offsets, schemas, **kw)


def records(offsets: Sequence[int]) -> list[Record]:
    return [Record("t", 0, o, key=None, value=str(o).encode()) for o in offsets]


def decode(batch: Sequence[Any]) -> list[E.Event]:
    return [
        E.DataChange(TID, E.Op.INSERT, None, {"id": r.offset(), "y": 1}, E.SourcePosition(*P, r.offset()))
        for r in batch
    ]


def decode_creating(batch: Sequence[Any]) -> list[E.Event]:
    """``decode``, the table created by the first record's batch."""
    first = any(r.offset() == 0 for r in batch)
    create = [E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, None)] if first else []
    return [*create, *decode(batch)]


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
def sink(journal: Journal) -> JournalSink:
    return JournalSink(journal)


def make_runner(
    sink: JournalSink,
    journal: Journal,
    tmp_path: Path,
    source: MemorySource,
    *,
    background: Background | None = None,
    opened: bool = True,
    **settings: Any,
) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False, **{"concurrent_checkpoints": True, **settings}),
        source=source,
        decode=decode if opened else decode_creating,
        sink=sink,
        state=JournalState(f"sqlite:///{tmp_path}/state.db", journal),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
        background=background,
    )
    if not opened:
        return runner
    runner.open()
    runner.process([E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, None)], [])
    return runner


@pytest.fixture
def stepped_runner(sink: JournalSink, journal: Journal, tmp_path: Path) -> Iterator[PipelineRunner]:
    sink.stepped = stepped = SteppedCommits()
    runner = make_runner(sink, journal, tmp_path, MemorySource(), background=stepped)
    yield runner
    runner.close()


def saved_offsets(runner: PipelineRunner) -> Offsets:
    checkpoint = runner.state.latest_checkpoint("unit")
    return {} if checkpoint is None else checkpoint.offsets


def test_the_next_batches_are_read_while_the_sink_commits_and_offsets_are_saved_after_it(
    sink: JournalSink, journal: Journal, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ferry.pipeline.commits")
    source = MemorySource(records(range(6)))
    runner = make_runner(sink, journal, tmp_path, source, batch_size=3, checkpoint_interval_s=0.0)
    try:
        sink.hold = True
        assert runner.step() == 3  # read, then a checkpoint begun: its flush is held
        assert sink.flushing.wait(BOUND_S)
        assert runner.checkpoints.commits.in_flight is not None
        assert saved_offsets(runner) == {} and source.committed == {}
        assert runner.step() == 3  # read and buffered beside the commit: no second one begins
        assert runner.metrics.records_read == 6 and runner.metrics.checkpoints == 0
        assert sink.rows(TID) == []
        sink.release.set()
        runner.checkpoints.wait()
        assert sorted(r["id"] for r in sink.rows(TID)) == [0, 1, 2]
        assert saved_offsets(runner) == {P: 3} and source.committed == {P: 3}
        assert runner.metrics.rows_written == {str(TID): 3} and runner.metrics.checkpoints == 1
        runner.checkpoint()
        assert sorted(r["id"] for r in sink.rows(TID)) == list(range(6))
        assert saved_offsets(runner) == {P: 6}
        # each save of offsets follows the flush that committed them
        assert [(kind, offsets) for kind, offsets in journal.entries if kind != "apply"] == [
            ("flush", {P: 3}),
            ("save", {P: 3}),
            ("flush", {P: 6}),
            ("save", {P: 6}),
        ]
        # each checkpoint's steps are timed in the log, in their order
        timed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("checkpoint ")]
        assert len(timed) == 2
        assert re.fullmatch(
            r"checkpoint 1: [\d.]+ s \(sink flush [\d.]+ s, dead letters [\d.]+ s, state store [\d.]+ s\)",
            timed[0],
        )
    finally:
        sink.release.set()
        runner.close()


@pytest.mark.parametrize(
    "change",
    [
        E.DropColumn(TID, "y"),  # a barrier: the rows before it are checkpointed first
        E.AddColumn(TID, Column("z", T.INT())),  # applied in place, without a barrier
    ],
    ids=["barrier", "in-place"],
)
def test_a_schema_change_waits_for_the_commit_in_flight(
    stepped_runner: PipelineRunner, sink: JournalSink, journal: Journal, change: E.SchemaChange
) -> None:
    runner, stepped = stepped_runner, sink.stepped
    assert stepped is not None
    batch = records([0, 1])
    runner.process(decode(batch), batch)
    runner.begin_checkpoint()
    assert stepped.step()  # the sink's flush; the dead letters and the save are still to come
    assert stepped.in_flight and saved_offsets(runner) == {}
    journal.entries.clear()
    runner.process([E.SchemaHint(TID, (change,), "ALTER", True, E.SourcePosition(*P, 2))], [])
    assert not stepped.in_flight
    applied = [entry for entry in journal.entries if entry[0] == "apply"]
    assert applied == [("apply", (change.tag, False))]
    assert journal.entries.index(("save", {P: 2})) < journal.entries.index(applied[0])
    assert runner.metrics.checkpoints >= 1 and saved_offsets(runner)[P] >= 2


def test_a_new_table_waits_for_the_commit_in_flight(
    stepped_runner: PipelineRunner, sink: JournalSink, journal: Journal
) -> None:
    runner, stepped = stepped_runner, sink.stepped
    assert stepped is not None
    batch = records([0])
    runner.process(decode(batch), batch)
    runner.begin_checkpoint()
    other = TableId.parse("db.u")
    runner.process([E.SchemaHint(other, (E.CreateTable(other, SCHEMA),), "CREATE", True, None)], [])
    assert journal.entries[-1] == ("apply", ("create.table", False))
    assert saved_offsets(runner) == {P: 1}


def test_rows_of_a_lost_partition_are_dropped_after_the_commit_in_flight(
    stepped_runner: PipelineRunner, sink: JournalSink
) -> None:
    runner, stepped = stepped_runner, sink.stepped
    assert stepped is not None
    batch = records([0, 1])
    runner.process(decode(batch), batch)
    runner.begin_checkpoint()
    later = records([2])
    runner.process(decode(later), later)
    runner.drop_rows([P])
    assert not stepped.in_flight and saved_offsets(runner) == {P: 2}
    assert sorted(r["id"] for r in sink.rows(TID)) == [0, 1]
    runner.checkpoint()
    assert sorted(r["id"] for r in sink.rows(TID)) == [0, 1]


@pytest.mark.parametrize("concurrent", [True, False], ids=["concurrent", "inline"])
@pytest.mark.parametrize(
    ("error", "raised", "message"),
    [
        (SinkTerminalError("permission denied", sink="memory", table="db.t"), SinkTerminalError, None),
        (RuntimeError("disk on fire"), CheckpointError, "checkpoint failed: RuntimeError: disk on fire"),
    ],
    ids=["ferry-error", "other-error"],
)
def test_a_failed_commit_fails_the_run_with_the_message_of_an_inline_checkpoint(
    sink: JournalSink,
    journal: Journal,
    tmp_path: Path,
    concurrent: bool,
    error: Exception,
    raised: type[Exception],
    message: str | None,
) -> None:
    source = MemorySource(records(range(9)))
    runner = make_runner(
        sink,
        journal,
        tmp_path,
        source,
        batch_size=3,
        opened=False,
        checkpoint_interval_s=0.0,
        concurrent_checkpoints=concurrent,
    )
    sink.fail_with = [error]
    with pytest.raises(raised) as failed:
        runner.run()
    expected = message if message is not None else str(error)
    assert str(failed.value) == expected
    assert runner.status.phase is Phase.FAILED and runner.status.detail == expected
    assert saved_offsets(runner) == {}  # nothing saved past a failed flush
    assert isinstance(runner.state, StateStore)
    stored = runner.state.get_status("unit")
    assert stored is not None and stored["phase"] == "FAILED" and stored["detail"] == expected


JOB = """
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: shop.inventory.orders
sink:
  type: memory
pipeline:
  name: orders
  state.url: {state}
{extra}"""


@pytest.mark.parametrize(
    ("state", "extra", "concurrent"),
    [
        ("sqlite:///{tmp}/state.db", "", False),
        ("sqlite:///{tmp}/state.db", "  checkpoint.concurrent: true\n", True),
        # SQLAlchemy gives each thread its own database in memory: the commit stays where it is read
        ("sqlite://", "  checkpoint.concurrent: true\n", False),
    ],
    ids=["default", "switched-on", "state-in-memory"],
)
def test_commits_run_beside_the_reading_when_switched_on_unless_the_state_is_in_memory(
    tmp_path: Path, state: str, extra: str, concurrent: bool
) -> None:
    text = JOB.format(state=state.format(tmp=tmp_path), extra=extra)
    runner = build_runner(load_job_text(text), sink=MemorySink())
    try:
        assert runner.checkpoints.commits.background.concurrent is concurrent
    finally:
        runner.close()
