"""State handed over between the workers of one pipeline: partitions that move, schema changes
both workers see. In-package doubles (memory source and sink); the real thing, with Kafka and
Iceberg, is in tests/integration/test_workers.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ferry.connectors.base import RebalanceListener
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.offsets import Offsets
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("db.t")
#: no primary key: rows are appended, so a row written twice shows
SCHEMA = Schema.of([Column("id", T.INT().not_null())], [])
P0, P1 = ("t", 0), ("t", 1)


class SharedSource(MemorySource):
    """A memory source whose partitions move the way a consumer group moves them: the rebalance
    callbacks run inside :meth:`poll`, and only owned partitions are read."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        super().__init__(records)
        self.listener: RebalanceListener | None = None
        self.owned: set[tuple[str, int]] = set()
        self.rebalances: list[Callable[[], None]] = []
        self.commits: list[dict[tuple[str, int], int]] = []

    def set_rebalance_listener(self, listener: RebalanceListener | None) -> None:
        self.listener = listener

    def assign(self, starts: Offsets) -> None:
        def run() -> None:
            assert self.listener is not None
            self.listener.checkpointed_offsets()
            self.owned |= set(starts)
            self.start_offsets.update(starts)
            self.listener.partitions_assigned(starts)

        self.rebalances.append(run)

    def revoke(self, partitions: Sequence[tuple[str, int]], *, lost: bool = False) -> None:
        def run() -> None:
            assert self.listener is not None
            if lost:
                self.listener.partitions_lost(partitions)
            else:
                self.listener.partitions_revoked(partitions)
            self.owned -= set(partitions)

        self.rebalances.append(run)

    def poll(self, max_records: int, timeout: float) -> Sequence[Record]:
        while self.rebalances:
            self.rebalances.pop(0)()
        return [r for r in super().poll(max_records, timeout) if (r.topic(), r.partition()) in self.owned]

    def commit(self, offsets: Offsets) -> None:
        self.commits.append({tp: o for tp, o in offsets.items() if tp in self.owned})
        super().commit(offsets)


class CommittingSink(MemorySink):
    """A memory sink standing in for a transactional one: it says which offsets it committed."""

    def __init__(self) -> None:
        super().__init__()
        self.committed: dict[tuple[str, int], int] = {}

    def committed_offsets(self, table_id: TableId) -> dict[tuple[str, int], int]:
        return dict(self.committed)


def decode(records: Sequence[Any]) -> list[E.Event]:
    return [
        E.DataChange(
            TID,
            E.Op.INSERT,
            None,
            {"id": r.partition() * 100 + r.offset()},
            E.SourcePosition(r.topic(), r.partition(), r.offset()),
        )
        for r in records
    ]


def records(partition: int, offsets: range) -> list[Record]:
    return [Record("t", partition, o) for o in offsets]


def runner_for(source: MemorySource, sink: MemorySink, tmp_path: Path) -> PipelineRunner:
    runner = PipelineRunner(
        settings=RunnerSettings(name="shared", tune_gc=False, checkpoint_interval_s=3600),
        source=source,
        decode=decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    runner.process([E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True)], [])
    return runner


def ids(sink: MemorySink) -> list[int]:
    return sorted(r["id"] for r in sink.rows(TID))


def test_revoked_partitions_are_checkpointed_before_they_go_and_then_left_alone(tmp_path: Path) -> None:
    source = SharedSource(records(0, range(3)) + records(1, range(3)))
    sink = MemorySink()
    runner = runner_for(source, sink, tmp_path)
    source.assign({P0: 0, P1: 0})
    assert runner.step() == 6
    assert ids(sink) == []  # buffered, not checkpointed yet
    source.revoke([P1])
    runner.step()
    # everything read was written and checkpointed, and committed while the partition was owned
    assert ids(sink) == [0, 1, 2, 100, 101, 102]
    assert runner.state.latest_checkpoint("shared").offsets == {P0: 3, P1: 3}  # type: ignore[union-attr]
    assert source.commits[-1] == {P0: 3, P1: 3}
    assert runner.metrics.assigned == {"t": [0]}
    # the worker that has partition 1 now moves it on; this one's checkpoints leave it alone
    runner.state.save_checkpoint("shared", {P1: 50}, {"tables": {}})
    runner.checkpoint()
    assert runner.state.latest_checkpoint("shared").offsets == {P0: 3, P1: 50}  # type: ignore[union-attr]
    assert P1 not in source.commits[-1]
    runner.close()


def test_rows_of_lost_partitions_are_dropped_unwritten_and_their_offsets_never_saved(tmp_path: Path) -> None:
    source = SharedSource(records(0, range(3)) + records(1, range(3)))
    sink = MemorySink()
    runner = runner_for(source, sink, tmp_path)
    source.assign({P0: 0, P1: 0})
    runner.step()
    source.revoke([P1], lost=True)
    runner.step()
    assert runner.metrics.checkpoints == 0  # none to create the table, none for the loss
    runner.checkpoint()
    assert ids(sink) == [0, 1, 2]
    assert runner.state.latest_checkpoint("shared").offsets == {P0: 3}  # type: ignore[union-attr]
    runner.close()


def test_an_assigned_partition_skips_the_rows_another_worker_committed_after_its_checkpoint(
    tmp_path: Path,
) -> None:
    source = SharedSource(records(1, range(2)))
    sink = CommittingSink()
    runner = runner_for(source, sink, tmp_path)
    source.assign({P1: 0})
    runner.step()  # the table is read (and its committed offsets looked at) before partition 0 comes
    # the worker that read partition 0 committed rows 1 and 2 to the sink, then died before its
    # checkpoint: partition 0 is assigned here from the checkpoint's offset, 1
    sink.committed = {P0: 3}
    source.add(records(0, range(1, 5)))
    source.assign({P0: 1})
    runner.step()
    runner.checkpoint()
    assert ids(sink) == [3, 4, 100, 101]
    assert runner.metrics.rows_skipped_committed == 2
    runner.close()


def test_a_schema_change_both_workers_see_is_applied_once_and_recorded_once_as_applied(
    tmp_path: Path,
) -> None:
    class SlowSink(MemorySink):
        """Applies a change slowly and notes when two are applied at once."""

        def __init__(self) -> None:
            super().__init__()
            self.applying = 0
            self.overlapped = False

        def apply_schema_change(self, change: E.SchemaChange, schema_after: Schema | None) -> None:
            self.applying += 1
            self.overlapped |= self.applying > 1
            time.sleep(0.2)
            super().apply_schema_change(change, schema_after)
            self.applying -= 1

    sink = SlowSink()
    workers = [runner_for(SharedSource(), sink, tmp_path) for _ in range(2)]
    for worker in workers:
        worker.schemas.sink_schema(TID)  # each has the schema from before the change in its cache
    add = E.AddColumn(TID, Column("extra", T.INT()))
    threads = [
        threading.Thread(target=w.process, args=([E.SchemaHint(TID, (add,), "ALTER", True)], []))
        for w in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not sink.overlapped
    assert [c.tag for c in sink.applied] == ["create.table", "add.column"]
    history = [(h.change, h.outcome, h.reason) for h in workers[0].state.schema_history("shared")]
    assert [h for h in history if h[0].startswith("add.column")] == [
        ("add.column db.t `extra` INT LAST", "apply", "supported"),
        ("add.column db.t `extra` INT LAST", "skip", "already applied at the sink"),
    ]
    for worker in workers:
        worker.close()
