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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: (binlog file, position, row), or ("", LSN, 0): where a change stands in the source's log.
SourceOrder = tuple[str, int, int]
#: The source position of a raw record's value; None when it has none.
OrderOf = Callable[[bytes | None], SourceOrder | None]
#: Up to ``count`` records of a partition from an offset on (``RecordReading.read_from``).
ReadFrom = Callable[[tuple[str, int], int, int], Sequence[Any]]
Partition = tuple[str, int]


@dataclass
class TruncatePlan:
    #: Partitions read past the truncate: (first record after it, offset read to).
    read_again: dict[Partition, tuple[int, int]] = field(default_factory=dict)
    #: Partitions not read up to the truncate yet: the offset of their first record after it.
    skip_before: dict[Partition, int] = field(default_factory=dict)


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
