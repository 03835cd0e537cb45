"""The rows a runner has read and not written yet: per source table, in order, with the raw values
among them (:mod:`ferry.model.raw_values`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from ferry.model.events import DataChange
from ferry.model.raw_values import BufferedRawValues, RawValues
from ferry.model.schema import Schema, TableId
from ferry.offsets import Partition
from ferry.pipeline.adapt import adapt_to_schema, casts_values
from ferry.pipeline.partitions import without_partitions

_T = TypeVar("_T")


class RowBuffers:
    """Buffered row changes per source table (the runner's hot loop appends to :attr:`tables`
    directly and adds to :attr:`count`), and the raw values of their rows (:attr:`raw`)."""

    def __init__(self) -> None:
        self.tables: dict[TableId, list[DataChange]] = {}
        self.count = 0
        self.raw = BufferedRawValues()

    def drop_partitions(self, partitions: Collection[Partition]) -> None:
        """Forget the rows of ``partitions`` (they went to another worker)."""
        self.tables = without_partitions(self.tables, partitions)
        self.count = sum(len(changes) for changes in self.tables.values())

    def adapt(
        self, table_id: TableId, old: Schema, new: Schema, bad_row: Callable[[str, DataChange], None]
    ) -> None:
        """A table's schema changed from ``old`` to ``new`` without a barrier: its rows follow."""
        if (buffer := self.tables.get(table_id)) and casts_values(old, new):
            self.raw.materialize(table_id)  # the rows are copied
            self.tables[table_id] = adapted = adapt_to_schema(buffer, old, new, bad_row)
            self.count -= len(buffer) - len(adapted)

    def forget(self, table_id: TableId) -> None:
        """A table gone (dropped): its rows are not written."""
        self.tables.pop(table_id, None)
        self.raw.forget(table_id)

    def write(
        self,
        write: Callable[[dict[TableId, list[DataChange]], dict[TableId, list[RawValues]]], _T],
        keep: Callable[[TableId], bool],
        within_batch: bool,
        source_tables: Collection[TableId] | None = None,
    ) -> _T:
        """``write(rows, their raw values)`` for every table (or those of ``source_tables``; see
        :meth:`BufferedRawValues.written`: ``within_batch`` says the rest of a batch is left for
        later); then their buffers are empty (gone for a table ``keep`` does not keep)."""
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
        self.count = sum(len(changes) for changes in self.tables.values())
        return result
