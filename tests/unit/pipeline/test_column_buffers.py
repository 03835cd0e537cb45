"""A runner's buffers keep runs of column changes as they are, in their places among their table's
rows, only where nothing else is done with their rows (:meth:`ferry.pipeline.buffers.RowBuffers.arrange`):
otherwise the runs are their row changes, in their place, so that a table's rows stay in the
order they were read."""

from __future__ import annotations

import msgspec

from ferry.model.columns import changes_of
from ferry.model.events import ColumnChanges, DataChange, Event, Op, SchemaObserved, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import parse
from ferry.pipeline.buffers import RowBuffers

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
    assert buffers.changes(T) == [runs[0], runs[2]]
    assert buffers.changes(U) == [runs[1]]
    assert buffers.count == 7
    assert buffers.tables == {T: [], U: []}


def test_runs_are_rows_where_the_runner_does_more_than_append_them() -> None:
    """Not direct (rows skipped or renamed), a table not opened yet, a row change of the table in
    the batch, a schema event in the batch: rows, in their place."""
    schema_event = SchemaObserved(T, Schema((Column("id", parse("INT")),)), SourcePosition("topic", 0, 9))
    cases: list[tuple[RowBuffers, list[Event], bool]] = [
        (_buffers(T), [_run(T, 0, 2)], False),
        (_buffers(U), [_run(T, 0, 2)], True),
        (_buffers(T), [_run(T, 0, 2), schema_event], True),
        (_buffers(T), [_row(T, 0), _run(T, 1, 2)], True),
        (_buffers(T), [_run(T, 0, 2), _row(T, 2)], True),
    ]
    for buffers, events, direct in cases:
        expected = [c for e in events for c in (changes_of(e) if isinstance(e, ColumnChanges) else [e])]
        assert buffers.arrange(events, direct, None) == expected
        assert buffers.columns == {}


def test_runs_keep_their_places_among_rows_read_in_other_batches() -> None:
    """Rows buffered, a batch of runs, a batch of rows, a batch of runs: the table's changes in
    the order they were read; turned into rows, the same."""
    buffers = _buffers(T)
    buffers.tables[T].append(_row(T, 0))
    first = _run(T, 1, 2)
    assert buffers.arrange([first], True, None) == []
    buffers.tables[T].append(_row(T, 3))  # as the runner's loop appends a batch's row change
    second = _run(T, 4, 3)
    assert buffers.arrange([second], True, None) == []
    assert buffers.changes(T) == [_row(T, 0), first, _row(T, 3), second]
    buffers.materialize(T)
    assert buffers.tables[T] == [_row(T, 0), *changes_of(first), _row(T, 3), *changes_of(second)]
    assert buffers.columns == {}


def test_written_runs_leave_the_buffers_and_runs_a_sink_does_not_take_are_written_as_rows() -> None:
    buffers = _buffers(T, U)
    buffers.tables[T].append(_row(T, 100))
    runs = [_run(T, 0, 2), _run(U, 0, 3)]
    buffers.arrange(runs, True, None)
    seen: dict[TableId, list[DataChange]] = {}
    given: dict[TableId, list[DataChange | ColumnChanges]] = {}

    def write(tables: dict[TableId, list[DataChange]], raw: object) -> dict[str, int]:
        seen.update({t: list(c) for t, c in tables.items() if c})
        return {str(t): len(c) for t, c in tables.items() if c}

    def write_columns(table: TableId, changes: list[DataChange | ColumnChanges]) -> dict[str, int] | None:
        given[table] = changes
        return {"sink.t": 3} if table == T else None

    written = buffers.write(write, lambda t: True, False, None, write_columns)
    assert written == {"sink.t": 3, str(U): 3}
    assert given == {T: [_row(T, 100), runs[0]], U: [runs[1]]}
    assert seen == {U: changes_of(runs[1])}
    assert buffers.columns == {}
    assert buffers.count == 0
    assert buffers.tables == {T: [], U: []}
