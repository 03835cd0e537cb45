"""A truncate put in order with the partitions it was not written to.

Debezium writes a truncate event (it has no key) to one partition of the table's topic, so rows of
the other partitions may be read before it although they were written after it, or after it
although they were written before it. Each change event carries its position in the source's
log (binlog file and position, or LSN; :data:`SourceOrder`), which orders them across partitions.
For each other partition this finds the first record written after the truncate (a binary search
over the partition, reading records again), and the runner then

- reads again, once the sink table is truncated, the rows of a partition read past that record
  (they came after the truncate), its checkpoint keeping the partition's offset at that record
  until they are written again;
- skips the rows of a partition not read that far yet, up to that record (the truncate removed
  them), the skip kept in the checkpoint until the partition passes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import RecordReading, Source, Watermarking
from ferry.connectors.formats.source_order import record_columns
from ferry.model.defaults import default_value
from ferry.model.events import Event, SchemaHint, TruncateTable
from ferry.offsets import Partition
from ferry.pipeline.partitions import offsets_past, read_before
from ferry.pipeline.positions import shows_move

if TYPE_CHECKING:
    from ferry.model.schema import Schema, TableId
    from ferry.pipeline.barriers import Barrier
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator
    from ferry.pipeline.tracker import Readded

log = logging.getLogger(__name__)

#: (binlog file, position, row), or ("", LSN, 0): where a change stands in the source's log.
SourceOrder = tuple[str, int, int]
#: The source position of a raw record's value; None when it has none.
OrderOf = Callable[[bytes | None], SourceOrder | None]
#: Up to ``count`` records of a partition from an offset on (``RecordReading.read_from``).
ReadFrom = Callable[[tuple[str, int], int, int], Sequence[Any]]


@dataclass
class TruncatePlan:
    #: Partitions read past the truncate: (first record after it, offset read to).
    read_again: dict[Partition, tuple[int, int]] = field(default_factory=dict)
    #: Partitions not read up to the truncate yet: the offset of their first record after it.
    skip_before: dict[Partition, int] = field(default_factory=dict)

    @property
    def starts(self) -> dict[Partition, int]:
        """Where the partitions read again are read from once the truncate is applied."""
        return {partition: start for partition, (start, _) in self.read_again.items()}


class TruncateOrder:
    """Puts a truncate read in one partition in order with the other partitions of its topic (see
    the module documentation). The partitions read again and the rows skipped are the schema
    operator's (:attr:`SchemaOperator.read_again`, :attr:`SchemaOperator.truncated`), kept in the
    checkpoint with the schemas."""

    def __init__(
        self, source: Source, order_of: OrderOf | None, schemas: SchemaOperator, partitions: PartitionOffsets
    ) -> None:
        self.source = source
        self.order_of = order_of
        self.schemas = schemas
        self.partitions = partitions
        #: Partitions to read again after a column dropped and added again (:meth:`cut_column`).
        self.column_plans: list[TruncatePlan] = []

    def restored(self) -> None:
        """After a restart: the rows the checkpoint says a truncate removed are skipped."""
        for table_id, marks in self.schemas.truncated.items():
            self.partitions.skip.setdefault(table_id, {}).update(marks)

    def plan(self, event: SchemaHint, before: Sequence[Event]) -> TruncatePlan | None:
        """Where the table's other partitions stand to a truncate read after ``before`` in its
        batch; rows they hold that it removed are skipped from now on. None when nothing is put in
        order: no truncate the sink applies, no source position, or no other partition."""
        order, position, source = event.source_order, event.position, self.source
        if (
            order is None
            or position is None
            or self.order_of is None
            or not isinstance(source, RecordReading)
            or not any(isinstance(c, TruncateTable) and self.schemas.applies(c) for c in event.changes)
        ):
            return None  # (a truncate the sink skips leaves every row: nothing to put in order)
        ends = source.high_watermarks([position.topic]) if isinstance(source, Watermarking) else {}
        # the other partitions of the table's topic read here, up to where they are read (or not yet)
        past = offsets_past(self.partitions.offsets, read_before(before))
        here = (position.topic, position.partition)
        read_to = {tp: past.get(tp, 0) for tp in {*ends, *past} if tp[0] == position.topic and tp != here}
        if not read_to:
            return None
        plan = plan_truncate(source.read_from, self.order_of, order, read_to, ends)
        if plan is None:
            log.warning("%s: records without a source position: the truncate is applied where read", position)
            return None
        for partition, (_, end) in plan.read_again.items():
            self.schemas.read_again[partition] = end
        if plan.skip_before:
            self.schemas.truncated.setdefault(event.table_id, {}).update(plan.skip_before)
            self.partitions.skip.setdefault(event.table_id, {}).update(plan.skip_before)
        return plan

    def plan_column(
        self,
        topics: Collection[str],
        order: SourceOrder,
        before: Sequence[Event],
        order_of: OrderOf | None = None,
    ) -> TruncatePlan | None:
        """Where each partition of a table's ``topics`` stands to the drop of a column added again
        (``order``: the drop's position in the source's log, as ``order_of`` reads records: the
        source's position unless given), read up to the events ``before`` the barrier. None when
        nothing is put in order (no source position, no partition)."""
        source = self.source
        if self.order_of is None or not isinstance(source, RecordReading):
            return None
        order_of = order_of or self.order_of
        topics = sorted(topics)
        ends = source.high_watermarks(topics) if isinstance(source, Watermarking) else {}
        past = offsets_past(self.partitions.offsets, read_before(before))
        read_to = {tp: past.get(tp, 0) for tp in {*ends, *past} if tp[0] in topics}
        if not read_to:
            return None
        plan = plan_truncate(source.read_from, order_of, order, read_to, ends)
        if plan is not None:
            for partition, (_, end) in plan.read_again.items():
                self.schemas.read_again[partition] = end
        return plan

    def cut_column(self, readded: Readded, topics: list[str], barrier: Barrier) -> None:
        """A column dropped and added again, before the barrier of its changes: the rows of the
        table's partitions older than the drop (before it in the source's log, or, told by column
        positions, not showing the move that proved it) and not read yet lose its values; those
        newer and read already are read again once the new column is at the sink (the barrier's
        checkpoint keeps their partitions' offsets before them)."""
        table_id, columns = readded.table_id, readded.columns
        plan = None
        if readded.move is not None and self.order_of is not None:
            order_of = moved(readded.move, readded.order, self.order_of)
            plan = self.plan_column(topics, BEFORE_MOVE, barrier.before, order_of)
        elif readded.move is None and readded.order is not None:
            plan = self.plan_column(topics, readded.order, barrier.before)
        if plan is None:
            log.warning(
                "%s: %s dropped and added again, but records without a source position: the rows "
                "read from now on keep the values they carry in it",
                table_id,
                columns[-1],
            )
            return
        barrier.read_again = {**barrier.read_again, **plan.starts}
        for column in columns:
            self.schemas.clear_before(table_id, column, plan.skip_before)
        self.column_plans.append(plan)

    def read_again_after_columns(
        self, process: Callable[[Sequence[Any]], None], then: Callable[[], None]
    ) -> None:
        """The rows read before a column was dropped and added again, but written after it, to
        ``process``; ``then`` after each plan."""
        while self.column_plans:
            self.read_again(self.column_plans.pop(0), process)
            then()

    def read_again(self, plan: TruncatePlan, process: Callable[[Sequence[Any]], None]) -> None:
        """The rows written after the truncate but read before it, once it is applied: each
        partition's records from its first one after the truncate to where it was read, to ``process``."""
        source = self.source
        assert isinstance(source, RecordReading)
        for partition, (start, end) in plan.read_again.items():
            offset = start
            while offset < end:
                records = [r for r in source.read_from(partition, offset, end - offset) if r.offset() < end]
                if not records:
                    break
                process(records)
                offset = records[-1].offset() + 1


#: The order :func:`moved` gives a record that does not show a column move (one showing it is later).
BEFORE_MOVE: SourceOrder = ("", 0, 0)


def moved(move: tuple[str, str], shown_at: SourceOrder | None, source_order: OrderOf) -> OrderOf:
    """Orders Debezium JSON records (those that have a source position, :class:`TruncateOrder`) by
    whether they show a column move (:func:`~ferry.pipeline.positions.shows_move`): :data:`BEFORE_MOVE`
    when not, later when they do. A record that lacks one of the two columns (older than it, or
    newer than its drop) is later when it stands at or after ``shown_at`` in the source's log (the
    record that first showed the move). None for a record without its columns' names."""

    def order_of(value: bytes | None) -> SourceOrder | None:
        names = record_columns(value)
        if names is None:
            return None
        shows = shows_move(names, move)
        if shows is None:
            order = source_order(value)
            if order is None or shown_at is None:
                return None
            shows = order >= shown_at
        return ("", 1, 0) if shows else BEFORE_MOVE

    return order_of


def plan_truncate(
    read_from: ReadFrom,
    order_of: OrderOf,
    truncate: SourceOrder,
    read_to: Mapping[Partition, int],
    ends: Mapping[Partition, int],
) -> TruncatePlan | None:
    """Where each other partition (``read_to``: the offset read to) stands to the truncate; None
    when a record has no source position (its partitions cannot be ordered with the truncate)."""
    plan = TruncatePlan()
    for partition, offset in read_to.items():
        end = max(ends.get(partition, offset), offset)
        first = _first_after(read_from, order_of, partition, truncate, end)
        if first is None:
            return None
        if first < offset:
            plan.read_again[partition] = (first, offset)
        elif first > offset:
            plan.skip_before[partition] = first
    return plan


def _first_after(
    read_from: ReadFrom, order_of: OrderOf, partition: Partition, truncate: SourceOrder, end: int
) -> int | None:
    """The offset of the partition's first record written after the truncate (``end`` if none):
    the records of a partition are in the source's order."""
    low, high = 0, end
    while low < high:
        middle = (low + high) // 2
        found = _order_from(read_from, order_of, partition, middle, high)
        if found is None:
            return None
        offset, order = found
        if offset >= high or order > truncate:
            high = middle  # no record between the middle and this one is older
        else:
            low = offset + 1
    return low


def _order_from(
    read_from: ReadFrom, order_of: OrderOf, partition: Partition, offset: int, high: int
) -> tuple[int, SourceOrder] | None:
    """The first record at or after ``offset`` that has a source position (tombstones have none:
    they follow their delete), as (offset, position); (``high``, _) when there is none below
    ``high``; None when a record has a value but no position."""
    while offset < high:
        records = read_from(partition, offset, 16)
        if not records:
            break
        for record in records:
            if record.offset() >= high:
                return (high, ("", 0, 0))
            value = record.value()
            if value is None:
                continue
            order = order_of(value)
            return None if order is None else (record.offset(), order)
        offset = records[-1].offset() + 1
    return (high, ("", 0, 0))


def new_column_values(
    schema: Schema | None, older: Mapping[str, str], names: Sequence[str]
) -> dict[str, tuple[str, Any]]:
    """For each name (``names``: those a row older than a column's drop may carry it under) the
    name of the column added again in the table's ``schema`` (``older``: a name renamed since → the
    table's) and the value such a row has in it: its default (the source filled the rows it held
    with it when the column was added again), or None."""
    if schema is None:
        return {name: (name, None) for name in names}
    found = {name: schema.find(name) or schema.find(older.get(name, name)) for name in names}
    return {name: (name, None) if c is None else (c.name, default_value(c)) for name, c in found.items()}


def forget_passed_cuts(
    cleared: dict[TableId, dict[str, dict[Partition, int]]], offsets: Mapping[Partition, int]
) -> None:
    """Forget a column's cuts (per table and column added again, each partition's first offset
    after the drop) once every partition is read past its own: until then a partition may be read
    again from behind its cut (a truncate older than the drop, read later)."""
    for table_id, columns in list(cleared.items()):
        for column, cuts in list(columns.items()):
            if all(offsets.get(tp, 0) >= cut for tp, cut in cuts.items()):
                del columns[column]
        if not columns:
            del cleared[table_id]
