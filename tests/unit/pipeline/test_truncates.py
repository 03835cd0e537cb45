"""Where the partitions of a table's topic stand to a truncate read in one of them."""

from __future__ import annotations

from ferry.connectors.record import Record
from ferry.pipeline.truncates import SourceOrder, plan_truncate


def partition(name: str, positions: list[int], gaps: frozenset[int] = frozenset()) -> list[Record]:
    """Records at offsets 0.. (skipping ``gaps``), each carrying its binlog position as its value."""
    offsets = [o for o in range(len(positions) + len(gaps)) if o not in gaps]
    return [
        Record(name, 0, o, key=None, value=str(p).encode()) for o, p in zip(offsets, positions, strict=True)
    ]


def reader(records: dict[tuple[str, int], list[Record]]):  # type: ignore[no-untyped-def]
    def read_from(tp: tuple[str, int], offset: int, count: int) -> list[Record]:
        return [r for r in records[tp] if r.offset() >= offset][:count]

    return read_from


def order_of(value: bytes | None) -> SourceOrder | None:
    return None if value is None or value == b"?" else ("mysql-bin.000001", int(value), 0)


def test_a_partition_read_past_the_truncate_is_read_again_from_its_first_later_row() -> None:
    records = {("t", 1): partition("t", [10, 20, 40, 50, 60])}
    plan = plan_truncate(reader(records), order_of, ("mysql-bin.000001", 30, 0), {("t", 1): 5}, {("t", 1): 5})
    assert plan is not None and plan.read_again == {("t", 1): (2, 5)} and plan.skip_before == {}


def test_a_partition_behind_the_truncate_skips_its_older_rows() -> None:
    records = {("t", 1): partition("t", [10, 20, 25, 40, 50], gaps=frozenset({3}))}
    plan = plan_truncate(reader(records), order_of, ("mysql-bin.000001", 30, 0), {("t", 1): 1}, {("t", 1): 6})
    # offsets 0, 1, 2, 4, 5: the rows skipped are those at 1 and 2, not the one at 4
    assert plan is not None and plan.read_again == {}
    mark = plan.skip_before[("t", 1)]
    assert [r.offset() for r in records[("t", 1)] if 1 <= r.offset() < mark] == [1, 2]


def test_a_partition_read_exactly_to_the_truncate_needs_nothing() -> None:
    records = {("t", 1): partition("t", [10, 20, 40])}
    plan = plan_truncate(reader(records), order_of, ("mysql-bin.000001", 30, 0), {("t", 1): 2}, {("t", 1): 3})
    assert plan is not None and plan.read_again == {} and plan.skip_before == {}


def test_a_later_binlog_file_orders_after_an_earlier_one() -> None:
    records = {("t", 1): [Record("t", 1, 0, key=None, value=b"5")]}

    def later_file(value: bytes | None) -> SourceOrder | None:
        return ("mysql-bin.000002", int(value or b"0"), 0)

    plan = plan_truncate(
        reader(records), later_file, ("mysql-bin.000001", 900, 0), {("t", 1): 1}, {("t", 1): 1}
    )
    assert plan is not None and plan.read_again == {("t", 1): (0, 1)}


def test_records_without_a_source_position_cannot_be_ordered() -> None:
    records = {("t", 1): [Record("t", 1, 0, key=None, value=b"?")]}
    assert (
        plan_truncate(reader(records), order_of, ("mysql-bin.000001", 1, 0), {("t", 1): 1}, {("t", 1): 1})
        is None
    )


def test_tombstones_are_passed_over_they_follow_their_delete() -> None:
    # Debezium's tombstone after each delete has no value, so no source position
    tombstone = [Record("t", 1, o, key=b"k", value=None) for o in (1, 3, 4)]
    rows = [
        Record("t", 1, o, key=None, value=str(p).encode()) for o, p in ((0, 10), (2, 20), (5, 40), (6, 50))
    ]
    records = {("t", 1): sorted([*tombstone, *rows], key=lambda r: r.offset())}
    plan = plan_truncate(reader(records), order_of, ("mysql-bin.000001", 30, 0), {("t", 1): 7}, {("t", 1): 7})
    assert plan is not None and plan.skip_before == {}
    start, end = plan.read_again[("t", 1)]
    assert end == 7 and [r.offset() for r in records[("t", 1)] if r.offset() >= start and r.value()] == [5, 6]
    assert all(r.value() is None for r in records[("t", 1)] if 2 < r.offset() < start)
