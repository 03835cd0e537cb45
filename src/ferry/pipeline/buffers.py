"""The rows a runner has read and not written yet: per source table, in order, with the raw values
among them (:mod:`ferry.pipeline.raw_values`); a table's runs of column changes
(:mod:`ferry.pipeline.columns`) where nothing else of it is buffered."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from ferry.offsets import Partition
from ferry.pipeline.adapt import adapt_to_schema, casts_values
from ferry.pipeline.columns import all_changes, changes_of
from ferry.pipeline.events import ColumnChanges, DataChange, Event, SchemaHint, SchemaObserved
from ferry.pipeline.partitions import without_partitions
from ferry.pipeline.raw_values import BufferedRawValues, RawValues
from ferry.pipeline.route import TableSelection
from ferry.pipeline.schema import Schema, TableId

#: Writes a source table's runs of column changes as they are: the rows written per sink table, or
#: None when they must be written as rows.
WriteColumns = Callable[[TableId, list[ColumnChanges]], Mapping[str, int] | None]


class RowBuffers:
    """Buffered row changes per source table (the runner's hot loop appends to :attr:`tables`
    directly and adds to :attr:`count`), and the raw values of their rows (:attr:`raw`)."""

    def __init__(self) -> None:
        self.tables: dict[TableId, list[DataChange]] = {}
        self.count = 0
        self.raw = BufferedRawValues()
        #: Per source table whose row list is empty: its runs of column changes, in order
        self.columns: dict[TableId, list[ColumnChanges]] = {}

    def arrange(self, events: Sequence[Event], direct: bool, selection: TableSelection | None) -> list[Event]:
        """A decoded batch's events but its runs of column changes: buffered here where they may be
        as they are (``direct``: the runner only appends rows, neither skipping nor renaming them;
        the run's table is buffered, selected, and has no rows buffered the row way, in this batch
        or before it; no schema event in the batch), else turned into their row changes, in their
        place. A table with runs buffered that has row changes in this batch has its runs turned
        into rows first (they came before)."""
        columns = self.columns
        if not columns and not any(type(e) is ColumnChanges for e in events):
            return events if isinstance(events, list) else list(events)
        row_tables = {e.table_id for e in events if type(e) is DataChange}
        for table_id in row_tables.intersection(columns):
            self.materialize(table_id)
        keep = direct and not any(isinstance(e, SchemaObserved | SchemaHint) for e in events)
        tables = self.tables
        out: list[Event] = []
        for event in events:
            if type(event) is ColumnChanges and not (
                keep
                and event.table_id not in row_tables
                and tables.get(event.table_id) == []
                and (selection is None or selection.refusal(event.position.topic, event.table_id) is None)
            ):
                out.extend(changes_of(event))
            elif type(event) is ColumnChanges:
                self.add_columns(event)
                self.count += len(event.ops)
            else:
                out.append(event)
        return out

    def add_columns(self, run: ColumnChanges) -> None:
        runs = self.columns.get(run.table_id)
        if runs is None:
            self.columns[run.table_id] = [run]
        else:
            runs.append(run)

    def materialize(self, table_id: TableId) -> None:
        """A table's runs of column changes turned into row changes, ahead of its rows."""
        runs = self.columns.pop(table_id, None)
        if runs:
            self.tables[table_id] = [*all_changes(runs), *self.tables.get(table_id, ())]

    def drop_partitions(self, partitions: Collection[Partition]) -> None:
        """Forget the rows of ``partitions`` (they went to another worker)."""
        for table_id in list(self.columns):
            self.materialize(table_id)
        self.tables = without_partitions(self.tables, partitions)
        self.count = sum(len(changes) for changes in self.tables.values())

    def adapt(
        self, table_id: TableId, old: Schema, new: Schema, bad_row: Callable[[str, DataChange], None]
    ) -> None:
        """A table's schema changed from ``old`` to ``new`` without a barrier: its rows follow."""
        if table_id in self.columns and casts_values(old, new):
            self.materialize(table_id)
        if (buffer := self.tables.get(table_id)) and casts_values(old, new):
            self.raw.materialize(table_id)  # the rows are copied
            self.tables[table_id] = adapted = adapt_to_schema(buffer, old, new, bad_row)
            self.count -= len(buffer) - len(adapted)

    def forget(self, table_id: TableId) -> None:
        """A table gone (dropped): its rows are not written."""
        self.tables.pop(table_id, None)
        self.columns.pop(table_id, None)
        self.raw.forget(table_id)

    def write(
        self,
        write: Callable[[dict[TableId, list[DataChange]], dict[TableId, list[RawValues]]], dict[str, int]],
        keep: Callable[[TableId], bool],
        within_batch: bool,
        source_tables: Collection[TableId] | None = None,
        write_columns: WriteColumns | None = None,
    ) -> dict[str, int]:
        """``write(rows, their raw values)`` for every table (or those of ``source_tables``; see
        :meth:`BufferedRawValues.written`: ``within_batch`` says the rest of a batch is left for
        later), after ``write_columns`` for each table's runs of column changes (turned into rows
        where it does not write them); then their buffers are empty (gone for a table ``keep`` does
        not keep). Returns the rows written per sink table."""
        written: dict[str, int] = {}
        for table_id in [t for t in self.columns if source_tables is None or t in source_tables]:
            done = None if write_columns is None else write_columns(table_id, self.columns[table_id])
            if done is None:
                self.materialize(table_id)
                continue
            del self.columns[table_id]
            for sink_table, count in done.items():
                written[sink_table] = written.get(sink_table, 0) + count
        tables = (
            self.tables
            if source_tables is None
            else {t: self.tables[t] for t in source_tables if t in self.tables}
        )
        result = write(tables, self.raw.written(list(tables), within_batch=within_batch))
        for table_id in list(tables):
            self.raw.forget(table_id)
            if keep(table_id):
                self.tables[table_id] = []
            else:
                del self.tables[table_id]
        self.count = sum(len(changes) for changes in self.tables.values()) + sum(
            len(run.ops) for runs in self.columns.values() for run in runs
        )
        for sink_table, count in result.items():
            written[sink_table] = written.get(sink_table, 0) + count
        return written
