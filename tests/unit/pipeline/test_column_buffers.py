"""A runner's buffers keep runs of column changes as they are only where nothing else is done with
their rows (:meth:`ferry.pipeline.buffers.RowBuffers.arrange`): otherwise the runs are their row
changes, in their place, so that a table's rows stay in the order they were read."""

from __future__ import annotations

import msgspec

from ferry.pipeline.buffers import RowBuffers
from ferry.pipeline.columns import changes_of
from ferry.pipeline.events import ColumnChanges, DataChange, Event, Op, SchemaObserved, SourcePosition
from ferry.pipeline.schema import Column, Schema, TableId
from ferry.pipeline.types import parse

T = TableId(None, "db", "t")
U = TableId(None, "db", "u")
Row = msgspec.defstruct("Row", [("id", int), ("a", int | None)], gc=False)


def _run(table: TableId, first: int, count: int) -> ColumnChanges:
    offsets = list(range(first, first + count))
    return ColumnChanges(
        table,
        ("id", "a"),
        [Op.INSERT] * count,
        [None] * count,
        [Row(o, o) for o in offsets],
        offsets,
        [None] * count,
        SourcePosition("topic", 0, offsets[-1]),
    )


def _row(table: TableId, offset: int) -> DataChange:
    return DataChange(table, Op.INSERT, None, {"id": offset, "a": offset}, SourcePosition("topic", 0, offset))


def _buffers(*tables: TableId) -> RowBuffers:
    buffers = RowBuffers()
    for table in tables:
        buffers.tables[table] = []
    return buffers


def test_runs_of_buffered_tables_are_kept_as_they_are_and_counted() -> None:
    buffers = _buffers(T, U)
    runs = [_run(T, 0, 3), _run(U, 0, 2), _run(T, 3, 2)]
    assert buffers.arrange(runs, True, None) == []
    assert buffers.columns == {T: [runs[0], runs[2]], U: [runs[1]]}
    assert buffers.count == 7
    assert buffers.tables == {T: [], U: []}


def test_runs_are_rows_where_the_runner_does_more_than_append_them() -> None:
    """Not direct (rows skipped or renamed), a table not opened yet, a table with rows buffered the
    row way, a schema event in the batch, a table the selection refuses: rows, in their place."""
    schema_event = SchemaObserved(T, Schema((Column("id", parse("INT")),)), SourcePosition("topic", 0, 9))
    cases: list[tuple[RowBuffers, list[Event], bool]] = [
        (_buffers(T), [_run(T, 0, 2)], False),
        (_buffers(U), [_run(T, 0, 2)], True),
        (_buffers(T), [_run(T, 0, 2), schema_event], True),
    ]
    with_rows = _buffers(T)
    with_rows.tables[T].append(_row(T, 0))
    cases.append((with_rows, [_run(T, 1, 2)], True))
    for buffers, events, direct in cases:
        expected = [c for e in events for c in (changes_of(e) if isinstance(e, ColumnChanges) else [e])]
        assert buffers.arrange(events, direct, None) == expected
        assert buffers.columns == {}


def test_a_tables_row_change_after_its_runs_turns_them_into_rows_first() -> None:
    """Runs buffered in an earlier batch, then a batch with a row change of the table (and a run
    after it): the table's rows are its runs' rows, then the batch's, in order."""
    buffers = _buffers(T, U)
    first = [_run(T, 0, 2), _run(U, 0, 1)]
    buffers.arrange(first, True, None)
    later = [_row(T, 2), _run(T, 3, 2)]
    events = buffers.arrange(later, True, None)
    assert buffers.tables[T] == changes_of(first[0])
    assert events == [later[0], *changes_of(later[1])]
    assert buffers.columns == {U: [first[1]]}


def test_written_runs_leave_the_buffers_and_runs_a_sink_does_not_take_are_written_as_rows() -> None:
    buffers = _buffers(T, U)
    runs = [_run(T, 0, 2), _run(U, 0, 3)]
    buffers.arrange(runs, True, None)
    seen: dict[TableId, list[DataChange]] = {}

    def write(tables: dict[TableId, list[DataChange]], raw: object) -> dict[str, int]:
        seen.update({t: list(c) for t, c in tables.items() if c})
        return {str(t): len(c) for t, c in tables.items() if c}

    def write_columns(table: TableId, table_runs: list[ColumnChanges]) -> dict[str, int] | None:
        return {"sink.t": sum(len(r.ops) for r in table_runs)} if table == T else None

    written = buffers.write(write, lambda t: True, False, None, write_columns)
    assert written == {"sink.t": 2, str(U): 3}
    assert seen == {U: changes_of(runs[1])}
    assert buffers.columns == {}
    assert buffers.count == 0
    assert buffers.tables == {T: [], U: []}
