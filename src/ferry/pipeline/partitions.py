"""The partitions a runner reads: their offsets, and the rows a transactional sink already holds.

Several workers run one pipeline by sharing its partitions (a Kafka consumer group). A runner owns
the offsets of the partitions assigned to it, and only those. A newly assigned partition may hold
rows another worker committed to a transactional sink after its last checkpoint: those rows are
*skipped by offset* — the sink's commits record, per partition, the offset they reached, read
again at each assignment (and for each table when it is first seen).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ferry.model.events import BadRecord, DataChange, Event
from ferry.model.schema import TableId
from ferry.offsets import Offsets, Partition
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import TableRouter
from ferry.sinks.base import OffsetCommitting, Sink

if TYPE_CHECKING:
    from ferry.pipeline.runner import PipelineRunner

log = logging.getLogger(__name__)


class PartitionOffsets:
    """Next offset to read per owned partition, and per table the offsets below which its rows are
    already in the sink."""

    def __init__(self, sink: Sink, tables: TableRouter) -> None:
        self.sink = sink
        self.tables = tables
        #: (topic, partition) → the next offset to read
        self.offsets: dict[Partition, int] = {}
        #: table → (topic, partition) → rows below this offset are already committed at the sink
        self.skip: dict[TableId, dict[Partition, int]] = {}
        #: Tables whose sink commits were read for the partitions owned now.
        self.checked: set[TableId] = set()
        self.rows_skipped = 0
        self._sink_marks: dict[TableId, dict[Partition, int]] = {}

    def assigned(self) -> dict[str, list[int]]:
        """``{topic: [partition, ...]}`` of the partitions owned now."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.offsets):
            out.setdefault(topic, []).append(partition)
        return out

    def advance(self, records: Sequence[Any]) -> None:
        """Past every one of ``records`` (confluent-kafka messages)."""
        offsets = self.offsets
        for record in records:
            offsets[(record.topic(), record.partition())] = record.offset() + 1

    def advance_to(self, events: Sequence[DataChange | BadRecord]) -> None:
        """Past every one of ``events`` (the rows and the bad records read before a barrier)."""
        self.offsets.update(offsets_past(self.offsets, events))

    def take(self, starts: Offsets) -> None:
        """Partitions read here from now on, from these offsets."""
        self.offsets.update(starts)
        self._sink_marks.clear()
        if not isinstance(self.sink, OffsetCommitting):
            return
        committed: dict[TableId, dict[Partition, int]] = {}
        for table_id in self.checked:
            for sink_table in self.tables.sink_tables(table_id):
                if sink_table not in committed:
                    committed[sink_table] = self.sink.committed_offsets(sink_table)
            held = _held_by_all([committed[t] for t in self.tables.sink_tables(table_id)])
            marks = {tp: o for tp, o in held.items() if tp in starts and o > starts[tp]}
            if marks:
                self.skip[table_id] = {**self.skip.get(table_id, {}), **marks}

    def forget(self, partitions: Collection[Partition]) -> None:
        for tp in partitions:
            self.offsets.pop(tp, None)
            for marks in self.skip.values():
                marks.pop(tp, None)
        self.skip = {t: m for t, m in self.skip.items() if m}

    def first_seen(self, table_id: TableId) -> None:
        """A table read for the first time here: the rows its sink table already holds are skipped."""
        if not isinstance(self.sink, OffsetCommitting) or table_id in self.checked:
            return
        self.checked.add(table_id)
        per_sink = []
        for sink_table in self.tables.sink_tables(table_id):
            sink_marks = self._sink_marks.get(sink_table)
            if sink_marks is None:
                committed = self.sink.committed_offsets(sink_table)
                sink_marks = {tp: o for tp, o in committed.items() if o > self.offsets.get(tp, 0)}
                self._sink_marks[sink_table] = sink_marks
            per_sink.append(sink_marks)
        marks = _held_by_all(per_sink)
        if marks:
            self.skip[table_id] = dict(marks)

    def committed(self, change: DataChange) -> bool:
        """True for a row the sink already holds (read again after a restart or a hand-over)."""
        marks = self.skip.get(change.table_id)
        if not marks or change.position is None:
            return False
        topic, partition, offset = change.position
        mark = marks.get((topic, partition))
        if mark is None:
            return False
        if offset < mark:
            self.rows_skipped += 1
            return True
        del marks[(topic, partition)]
        if not marks:
            self.skip = {t: m for t, m in self.skip.items() if m}
        return False


def read_before(events: Sequence[Event]) -> list[DataChange | BadRecord]:
    """The events of a batch whose records count as read once a barrier before them is taken."""
    return [e for e in events if type(e) is DataChange or type(e) is BadRecord]


class PartitionHandOver:
    """A runner's part when partitions move between the workers of its pipeline (the source's
    :class:`~ferry.connectors.base.RebalanceListener`; called from inside the poll): partitions
    that go are checkpointed first, those another worker has already are dropped unwritten, and
    those that come are read from their offsets, the rows their sink tables hold skipped."""

    def __init__(self, runner: PipelineRunner) -> None:
        self.runner = runner

    def checkpointed_offsets(self) -> Offsets:
        runner = self.runner
        checkpoint = runner.state.latest_checkpoint(runner.settings.name)
        return {} if checkpoint is None else checkpoint.offsets

    def partitions_revoked(self, partitions: Sequence[Partition]) -> None:
        """Checkpoint what was read from partitions that go to another worker, then forget them."""
        runner = self.runner
        if runner.status.phase is Phase.RUNNING:
            runner.status.detail = f"handing over {describe(partitions)}: checkpointing"
            runner.checkpoint()
            runner.status.detail = "reading"
        else:
            runner.checkpoints.wait()
        self._forget(partitions)

    def partitions_lost(self, partitions: Sequence[Partition]) -> None:
        """Partitions another worker already reads: their buffered rows are dropped unwritten (the
        other worker reads them again from the last checkpoint) and nothing of them is committed."""
        log.warning(
            "%s went to another worker before a checkpoint: dropping their rows", describe(partitions)
        )
        self.runner.drop_rows(partitions)
        self._forget(partitions)

    def partitions_assigned(self, starts: Offsets) -> None:
        """Partitions read here from now on, from these offsets."""
        runner = self.runner
        runner.checkpoints.wait()  # the sink's tables are read again
        # another worker may have changed the sink tables and committed rows of these partitions
        runner.schemas.forget_sink_schemas(runner.partitions.checked)
        runner.shaper.forget()
        runner.partitions.take(starts)
        runner.status.update(time.monotonic())

    def _forget(self, partitions: Sequence[Partition]) -> None:
        runner = self.runner
        runner.partitions.forget(partitions)
        runner.schemas.forget_partitions(partitions)
        runner.metrics.assigned = runner.partitions.assigned()


def offsets_past(offsets: Offsets, events: Sequence[Event]) -> dict[Partition, int]:
    """``offsets`` moved past every one of ``events`` read from a record (a copy)."""
    out = dict(offsets)
    for event in events:
        position = event.position
        if position is not None:
            key = (position.topic, position.partition)
            out[key] = max(out.get(key, 0), position.offset + 1)
    return out


def partition_of(event: Event) -> tuple[str, int] | None:
    position = event.position  # every event knows where it was read, when it was read
    return None if position is None else (position.topic, position.partition)


def records_before(records: Sequence[Any], event: Event) -> int | None:
    """How many of a batch's records come before the one ``event`` was decoded from."""
    position = event.position  # every event knows where it was read, when it was read
    if position is None:
        return None
    for index, record in enumerate(records):
        if (record.topic(), record.partition(), record.offset()) == tuple(position):
            return index or None
    return None


def without_partitions(
    buffers: Mapping[TableId, list[DataChange]], partitions: Collection[Partition]
) -> dict[TableId, list[DataChange]]:
    """Buffered rows but those of ``partitions`` (gone to another worker before a checkpoint)."""
    gone = set(partitions)
    return {
        table_id: [
            c for c in changes if c.position is None or (c.position.topic, c.position.partition) not in gone
        ]
        for table_id, changes in buffers.items()
    }


def describe(partitions: Collection[Partition]) -> str:
    return ", ".join(f"{topic}[{partition}]" for topic, partition in partitions)


def _held_by_all(marks: Sequence[Mapping[Partition, int]]) -> dict[Partition, int]:
    """Per partition, the offset below which every one of a source table's sink tables holds its
    rows (a table routed to several sink tables: a row is skipped only when none still lacks it)."""
    if not marks:
        return {}
    common = set(marks[0]).intersection(*marks[1:])
    return {tp: min(m[tp] for m in marks) for tp in common}
