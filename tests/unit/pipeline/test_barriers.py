"""The barrier before a drop or a rename: one table's commit on a sink that records offsets per
table, a whole checkpoint on any other."""

from __future__ import annotations

from pathlib import Path

from ferry.connectors.base import RebalanceListener
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.barriers import fed_together
from ferry.pipeline.route import Route, TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.schema_operator import KNOWN_TO
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink, OffsetCommittingMemorySink
from ferry.state import StateStore

T_ID, U_ID, V_ID = TableId.parse("db.t"), TableId.parse("db.u"), TableId.parse("db.v")
WITH_Y = Schema.of([Column("id", T.INT().not_null()), Column("y", T.INT())], ["id"])
WITHOUT_Y = Schema.of([Column("id", T.INT().not_null())], ["id"])


class SharedSource(MemorySource):
    """A source whose partitions are shared with other workers; whether this one reads them all
    is the test's to say."""

    def __init__(self, alone: bool) -> None:
        super().__init__()
        self.alone = alone
        self.listener: RebalanceListener | None = None

    def set_rebalance_listener(self, listener: RebalanceListener | None) -> None:
        self.listener = listener

    def reads_alone(self) -> bool:
        return self.alone


def runner_for(
    sink: MemorySink, state: StateStore, tables: TableRouter | None = None, source: MemorySource | None = None
) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False),
        source=source or MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=state,
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=tables or TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    return runner


def at(table: TableId, offset: int) -> E.SourcePosition:
    return E.SourcePosition(table.table_name, 0, offset)


def three_tables_then_a_drop_on_t() -> list[E.Event]:
    """Tables t, u and v created and given rows, then y dropped from t, then a row of t without y."""
    events: list[E.Event] = []
    for table in (T_ID, U_ID, V_ID):
        events.append(E.SchemaHint(table, (E.CreateTable(table, WITH_Y),), "CREATE", True, at(table, 0)))
        events += [E.DataChange(table, E.Op.INSERT, None, {"id": i, "y": i}, at(table, i)) for i in (1, 2)]
    # t's topic has a second partition, read up to offset 2 when the drop comes
    second = [E.SourcePosition("t", 1, offset) for offset in range(3)]
    events += [E.DataChange(T_ID, E.Op.INSERT, None, {"id": i, "y": i}, second[i - 5]) for i in (5, 6)]
    events.append(E.SchemaHint(T_ID, (E.DropColumn(T_ID, "y"),), "ALTER", True, at(T_ID, 3)))
    events.append(E.DataChange(T_ID, E.Op.INSERT, None, {"id": 3}, at(T_ID, 4)))
    events.append(E.DataChange(T_ID, E.Op.INSERT, None, {"id": 7}, second[2]))
    return events


def test_a_drop_on_a_sink_recording_offsets_per_table_commits_that_table_alone(tmp_path: Path) -> None:
    sink = OffsetCommittingMemorySink()
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(sink, state)
    runner.process(three_tables_then_a_drop_on_t(), [])

    # t's rows read before the drop were committed alone, with the offsets read so far
    assert sink.flushed_tables == [[T_ID]] and sink.flush_count == 0
    assert sink.rows(T_ID) == [{"id": 1}, {"id": 2}, {"id": 5}, {"id": 6}]
    assert sink.committed_offsets(T_ID) == {("t", 0): 3, ("t", 1): 2, ("u", 0): 3, ("v", 0): 3}
    assert sink.applied[-1] == E.DropColumn(T_ID, "y")
    # the other tables' rows wait for the next checkpoint; nothing of theirs was committed
    assert sink.rows(U_ID) == [] and sink.rows(V_ID) == [] and sink.committed_offsets(U_ID) == {}
    assert [len(runner.rows.tables[t]) for t in (T_ID, U_ID, V_ID)] == [2, 2, 2]
    # no checkpoint: the state store keeps its offsets, beside the schemas after the drop
    checkpoint = state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {} and runner.metrics.checkpoints == 0
    assert checkpoint.schemas["tables"]["db.t"]["schema"]["columns"] == [
        {"name": "id", "type": "INT NOT NULL"}
    ]
    assert sorted(checkpoint.schemas[KNOWN_TO]) == [["t", 0, 4], ["t", 1, 2], ["u", 0, 3], ["v", 0, 3]]

    runner.checkpoint()
    assert sink.flush_count == 1
    assert sink.rows(T_ID) == [{"id": i} for i in (1, 2, 5, 6, 3, 7)]
    assert sink.rows(U_ID) == sink.rows(V_ID) == [{"id": 1, "y": 1}, {"id": 2, "y": 2}]


def test_a_restart_after_a_table_barrier_skips_the_rows_committed_and_applies_nothing_again(
    tmp_path: Path,
) -> None:
    sink = OffsetCommittingMemorySink(config=None)
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(sink, state)
    events = three_tables_then_a_drop_on_t()
    runner.process(events, [])
    applied = len(sink.applied)
    runner.close()  # killed: u's and v's rows, and t's last one, were never committed
    sink.pending.clear()

    again = runner_for(sink, StateStore(f"sqlite:///{tmp_path}/state.db"))
    again.process(events, [])  # read again from the checkpoint (none: from the beginning)
    again.checkpoint()
    assert len(sink.applied) == applied and again.partitions.rows_skipped == 4
    assert sink.rows(T_ID) == [{"id": i} for i in (1, 2, 5, 6, 3, 7)]
    assert sink.rows(U_ID) == sink.rows(V_ID) == [{"id": 1, "y": 1}, {"id": 2, "y": 2}]


def test_a_drop_on_a_sink_without_offsets_per_table_is_a_whole_checkpoint(tmp_path: Path) -> None:
    sink = MemorySink()
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(sink, state)
    runner.process(three_tables_then_a_drop_on_t(), [])

    assert sink.flush_count == 1 and runner.metrics.checkpoints == 1
    assert sink.rows(U_ID) == sink.rows(V_ID) == [{"id": 1, "y": 1}, {"id": 2, "y": 2}]
    checkpoint = state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets == {
        ("t", 0): 3,
        ("t", 1): 2,
        ("u", 0): 3,
        ("v", 0): 3,
    }
    assert KNOWN_TO not in checkpoint.schemas
    # the status's checkpoint history tells the barrier's checkpoint from the next one
    runner.checkpoint()
    runner.checkpoint()  # nothing read since: empty checkpoints in a row are one entry
    runner.checkpoint()
    history = runner.metrics.recent_checkpoints
    assert [(c["rows"], c["barrier"], c["count"]) for c in history] == [
        (8, True, 1),
        (2, False, 1),
        (0, False, 2),
    ], history
    assert all(c["duration_ms"] >= 0 and c["at_ms"] > 0 for c in history)


def test_a_truncate_is_a_whole_checkpoint_on_any_sink(tmp_path: Path) -> None:
    sink = OffsetCommittingMemorySink()
    runner = runner_for(sink, StateStore(f"sqlite:///{tmp_path}/state.db"))
    events = three_tables_then_a_drop_on_t()
    events = events[
        : next(i for i, e in enumerate(events) if isinstance(e, E.SchemaHint) and e.ddl == "ALTER")
    ]
    events.append(E.SchemaHint(T_ID, (E.TruncateTable(T_ID),), "TRUNCATE", True, at(T_ID, 3)))
    runner.process(events, [])
    assert sink.flushed_tables == [] and sink.flush_count == 1 and runner.metrics.checkpoints == 1
    assert sink.rows(T_ID) == [] and len(sink.rows(U_ID)) == 2 and len(sink.rows(V_ID)) == 2


def test_tables_routed_together_are_committed_together(tmp_path: Path) -> None:
    # t and u both feed all.tu; u also feeds its own copy: a commit of all.tu with offsets past
    # u's rows must leave no sink table of u without them
    routes = TableRouter([Route("db\\.(t|u)", "all.tu"), Route("db\\.u", "copy.u"), Route("db\\.v", "all.v")])
    for table in (T_ID, U_ID, V_ID):
        routes.sink_tables(table)
    sources, sinks = fed_together([T_ID], routes)
    assert sources == [T_ID, U_ID]
    assert sorted(map(str, sinks)) == ["all.tu", "copy.u"]

    sink = OffsetCommittingMemorySink()
    runner = runner_for(sink, StateStore(f"sqlite:///{tmp_path}/state.db"), routes)
    runner.process(three_tables_then_a_drop_on_t(), [])
    assert sorted(map(str, sink.flushed_tables[0])) == ["all.tu", "copy.u"]
    assert len(sink.rows("copy.u")) == 2 and sink.rows("all.v") == []


def test_a_drop_while_another_worker_reads_partitions_of_the_pipeline_is_a_whole_checkpoint(
    tmp_path: Path,
) -> None:
    # the marks a table barrier saves are this worker's: a worker taking a partition it loses would
    # read it again from behind the drop without them, so the checkpoint moves past the drop
    sink = OffsetCommittingMemorySink()
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    runner = runner_for(sink, state, source=SharedSource(alone=False))
    runner.process(three_tables_then_a_drop_on_t(), [])

    assert sink.flushed_tables == [] and sink.flush_count == 1 and runner.metrics.checkpoints == 1
    assert sink.rows(U_ID) == sink.rows(V_ID) == [{"id": 1, "y": 1}, {"id": 2, "y": 2}]
    checkpoint = state.latest_checkpoint("unit")
    assert checkpoint is not None and checkpoint.offsets[("t", 0)] == 3
    assert KNOWN_TO not in checkpoint.schemas


def test_a_drop_on_a_shared_source_this_worker_reads_alone_commits_its_table_alone(tmp_path: Path) -> None:
    sink = OffsetCommittingMemorySink()
    runner = runner_for(sink, StateStore(f"sqlite:///{tmp_path}/state.db"), source=SharedSource(alone=True))
    runner.process(three_tables_then_a_drop_on_t(), [])
    assert sink.flushed_tables == [[T_ID]] and sink.flush_count == 0 and runner.metrics.checkpoints == 0
