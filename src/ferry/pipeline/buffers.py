"""The rows a runner has read and not written yet: per source table, in order, with the raw values
among them (:mod:`ferry.model.raw_values`) and its runs of column changes in their places
(:mod:`ferry.model.columns`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from ferry.model.columns import all_changes, changes_of
from ferry.model.events import ColumnChanges, DataChange, Event, SchemaHint, SchemaObserved
from ferry.model.raw_values import BufferedRawValues, RawValues
from ferry.model.schema import Schema, TableId
from ferry.offsets import Partition
from ferry.pipeline.adapt import adapt_to_schema, casts_values
from ferry.pipeline.partitions import without_partitions
from ferry.pipeline.route import TableSelection

#: Writes a source table's runs of column changes as they are: the rows written per sink table, or
#: None when they must be written as rows.
WriteColumns = Callable[[TableId, list[DataChange | ColumnChanges]], Mapping[str, int] | None]


class RowBuffers:
    """Buffered row changes per source table (the runner's hot loop appends to :attr:`tables`
    directly and adds to :attr:`count`), and the raw values of their rows (:attr:`raw`)."""

    def __init__(self) -> None:
        self.tables: dict[TableId, list[DataChange]] = {}
        self.count = 0
        self.raw = BufferedRawValues()
        #: Per source table: its runs of column changes, each with the length its row list had when
        #: it came (it goes before the rows appended since)
        self.columns: dict[TableId, list[tuple[int, ColumnChanges]]] = {}

    def arrange(self, events: Sequence[Event], direct: bool, selection: TableSelection | None) -> list[Event]:
        """A decoded batch's events but its runs of column changes: buffered here, in their place
        among their table's rows, where they may be as they are (``direct``: the runner only appends
        rows, neither skipping nor renaming them; the run's table is buffered and selected, and has
        no row change in this batch; no schema event in the batch), else turned into their row
        changes, in their place."""
        if not any(type(e) is ColumnChanges for e in events):
            return events if isinstance(events, list) else list(events)
        row_tables = {e.table_id for e in events if type(e) is DataChange}
        keep = direct and not any(isinstance(e, SchemaObserved | SchemaHint) for e in events)
        tables = self.tables
        out: list[Event] = []
        for event in events:
            if type(event) is not ColumnChanges:
                out.append(event)
            elif (
                keep
                and event.table_id not in row_tables
                and (rows := tables.get(event.table_id)) is not None
                and (selection is None or selection.refusal(event.position.topic, event.table_id) is None)
            ):
                self.columns.setdefault(event.table_id, []).append((len(rows), event))
                self.count += len(event.ops)
            else:
                out.extend(changes_of(event))
        return out

    def changes(self, table_id: TableId) -> list[DataChange | ColumnChanges]:
        """A table's row changes and runs of column changes, in the order they were read."""
        rows = self.tables.get(table_id, [])
        out: list[DataChange | ColumnChanges] = []
        done = 0
        for index, run in self.columns.get(table_id, ()):
            out.extend(rows[done:index])
            out.append(run)
            done = index
        out.extend(rows[done:])
        return out

    def materialize(self, table_id: TableId) -> None:
        """A table's runs of column changes turned into row changes, in their places."""
        if table_id in self.columns:
            changes = self.changes(table_id)
            del self.columns[table_id]
            self.tables[table_id] = all_changes(changes)

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
            done = None
            if write_columns is not None and not self.raw.tables.get(table_id):
                done = write_columns(table_id, self.changes(table_id))
            if done is None:
                self.materialize(table_id)
                continue
            del self.columns[table_id]
            self.tables[table_id] = []
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
            len(run.ops) for runs in self.columns.values() for _, run in runs
        )
        for sink_table, count in result.items():
            written[sink_table] = written.get(sink_table, 0) + count
        return written
