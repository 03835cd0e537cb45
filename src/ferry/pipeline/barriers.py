"""The barrier before a schema change whose table's rows read before it must reach the sink first
(:func:`~ferry.pipeline.schema_operator.needs_barrier`: a column dropped or renamed, a type
narrowed, a NOT NULL column added, a table dropped or truncated).

Two kinds:

- the *full* barrier is a checkpoint of everything read before the change: every table's buffered
  rows written and the sink flushed, the dead letters stored, the offsets and the schemas before
  the change saved in the state store, the offsets committed to the source;
- the *table* barrier commits only the sink tables the change concerns, when the sink records in
  each table's commit the offsets its rows reach (:class:`~ferry.sinks.base.OffsetCommitting`) and
  can commit tables alone (:class:`~ferry.sinks.base.TableFlushing`): Iceberg, Paimon. The rows of
  every source table feeding those sink tables are written (and of every sink table those source
  tables feed, so that no sink table's offsets pass a row it lacks), the dead letters stored, and
  the tables committed with the offsets read so far, exactly as a checkpoint would record them.
  Nothing is saved in the state store but the schemas once the change is applied
  (:meth:`~ferry.pipeline.schema_operator.SchemaOperator.after_table_barrier`): a restart reads
  again from the last checkpoint, skips the rows these tables hold by their offsets
  (:class:`~ferry.pipeline.partitions.PartitionOffsets`), and takes the schema events read before
  the barrier as known (the tracker saved has them), so the change is neither undone nor applied
  twice. The other tables' rows stay buffered until the next checkpoint.

With several workers (a partition of the pipeline's topics assigned to another) every barrier is a
full one (:func:`reads_alone`).

A truncate keeps the full barrier: it reads partitions again from before the position reached
(:mod:`ferry.pipeline.truncates`), which its checkpoint records. So does a table dropped (its sink
table's offsets go with it) and a change the router would fail on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import ReadingAlone, Rebalancing, Source
from ferry.model.events import DropTable, Event, SchemaChange, TruncateTable
from ferry.model.schema import TableId
from ferry.offsets import Partition
from ferry.pipeline.partitions import offsets_past, read_before
from ferry.pipeline.route import TableRouter
from ferry.sinks.base import OffsetCommitting, TableFlushing

if TYPE_CHECKING:
    from ferry.pipeline.runner import PipelineRunner


class Barrier:
    """The barrier a schema event raises, with what was read before it in its batch."""

    def __init__(
        self,
        runner: PipelineRunner,
        before: Sequence[Event],
        read_again: Mapping[Partition, int] | None = None,
        event: Event | None = None,
    ) -> None:
        self.runner = runner
        self.before = before
        self.read_again = read_again or {}
        self.event = event

    def __call__(self, schemas: Mapping[str, Any]) -> None:
        """The full barrier: a checkpoint of everything read before the event, with ``schemas``
        (those before it) and the partitions read again from where they will be."""
        runner = self.runner
        # the bad records' dead letters are stored by this checkpoint too
        runner.partitions.advance_to(read_before(self.before))
        runner.partitions.offsets.update(self.read_again)
        runner.checkpoint(schemas)

    @property
    def per_table(self) -> bool:
        """Whether the table barrier can be taken: the sink records offsets per table and commits
        tables alone, no partition is to be read again, and this worker reads every partition."""
        runner = self.runner
        sink = runner.sink
        return (
            isinstance(sink, TableFlushing)
            and isinstance(sink, OffsetCommitting)
            and not self.read_again
            and reads_alone(runner.source)
        )

    def flush_tables(self, source_tables: Collection[TableId]) -> dict[Partition, int]:
        """The table barrier for changes of ``source_tables``: their rows read so far committed,
        alone. Returns, per partition, the offset below which every schema event is tracked."""
        runner = self.runner
        runner.checkpoints.wait()
        runner.partitions.advance_to(read_before(self.before))
        offsets = dict(runner.partitions.offsets)
        sources, sink_tables = fed_together(source_tables, runner.tables)
        written = runner.write_buffers(sources)
        runner.checkpoints.commit_tables(sink_tables, offsets, written)
        return offsets_past(offsets, [*self.before, *([self.event] if self.event is not None else [])])


def allows_table_barrier(change: SchemaChange) -> bool:
    """Whether the barrier before ``change`` may commit only its tables (sinks that record offsets
    per table): not for a truncate (it reads partitions again from before the position reached,
    which only a checkpoint records), nor for a table dropped (its offsets go with it)."""
    return not isinstance(change, TruncateTable | DropTable)


def known_marks(
    restored: Mapping[Partition, int], saved: Iterable[Sequence[Any]], known: Mapping[Partition, int]
) -> list[list[Any]]:
    """The offsets below which every schema event is in the schemas saved after a table barrier,
    as saved: per partition the highest of those ``restored`` at the start, those ``saved`` by an
    earlier table barrier since the last checkpoint (``[topic, partition, offset]``), and this
    barrier's ``known``."""
    marks = dict(restored)
    for topic, partition, offset in saved:
        tp = (topic, int(partition))
        marks[tp] = max(int(offset), marks.get(tp, 0))
    for tp, offset in known.items():
        marks[tp] = max(offset, marks.get(tp, 0))
    return [[t, p, o] for (t, p), o in sorted(marks.items())]


def reads_alone(source: Source) -> bool:
    """Whether no other worker of the pipeline reads a partition of its topics now.

    The table barrier needs it: its marks (the schemas saved after the change, the offsets below
    which their events are known) are this worker's, and the checkpoint's offsets stay behind the
    change. A worker taking over a partition lost by another (without the checkpoint a hand-over
    takes) would read that partition again from behind the change without those marks, and a
    checkpoint of another worker would save its schemas over them. With several workers every
    barrier is a full one, whose checkpoint moves the offsets past the change."""
    if not isinstance(source, Rebalancing):
        return True  # a source no other worker shares
    return isinstance(source, ReadingAlone) and source.reads_alone()


def fed_together(
    source_tables: Collection[TableId], tables: TableRouter
) -> tuple[list[TableId], list[TableId]]:
    """The source tables and the sink tables to commit together with ``source_tables``' sink tables:
    every source table seen so far that feeds one of them, and every sink table those feed."""
    sources = dict.fromkeys(source_tables)
    sinks: dict[TableId, None] = {}
    todo = list(sources)
    while todo:
        for sink_table in tables.sink_tables(todo.pop()):
            if sink_table in sinks:
                continue
            sinks[sink_table] = None
            for source in tables.sources_of(sink_table):
                if source not in sources:
                    sources[source] = None
                    todo.append(source)
    return list(sources), list(sinks)
