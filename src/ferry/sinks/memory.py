"""Sinks that keep everything in memory: for tests, the benchmark and dry runs.

:class:`MemorySink` behaves like a primary-key table store that enforces the capabilities it is
given (so the router's decisions can be checked against any sink's declaration) and can be told
to fail (fault injection); :class:`OffsetCommittingMemorySink` also records the offsets of each
table's commits, as Iceberg and Paimon do. :class:`NullSink` counts rows and keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ferry.model.apply import apply_schema_change
from ferry.model.defaults import default_value
from ferry.model.events import (
    AddColumn,
    DataChange,
    DropColumn,
    DropTable,
    Op,
    RenameColumn,
    SchemaChange,
    TruncateTable,
)
from ferry.model.raw_values import RawForms
from ferry.model.schema import Schema, TableId
from ferry.model.types import DataType
from ferry.model.unavailable import fill, unavailable_reason
from ferry.offsets import Offsets
from ferry.options import SinkConfigBase
from ferry.pipeline.router import change_kind
from ferry.sinks.base import ChangeKind, Sink, SinkCapabilities, Support
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.base.exceptions import SinkTerminalError, SinkTransientError
from ferry.sinks.base.rows import complete_before_reading

#: Everything supported: the default for a memory sink.
ALL_SUPPORTED = SinkCapabilities(changes={kind: Support.APPLY for kind in ChangeKind})


class MemorySinkConfig(SinkConfigBase):
    type: Literal["memory"] = "memory"


class NullSinkConfig(SinkConfigBase):
    type: Literal["null"] = "null"


@dataclass
class MemoryTable:
    schema: Schema
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    appended: list[dict[str, Any]] = field(default_factory=list)

    def all_rows(self) -> list[dict[str, Any]]:
        """Every row as the table shows it now: added columns NULL, dropped ones gone."""
        names = self.schema.names
        return [{n: row.get(n) for n in names} for row in (*self.rows.values(), *self.appended)]


class MemorySink(Sink):
    """Tables in memory, upserted by primary key (appended when a table has none)."""

    type: str = "memory"
    capabilities: SinkCapabilities = ALL_SUPPORTED

    def __init__(
        self,
        config: MemorySinkConfig | None = None,
        *,
        pipeline: str = "ferry",
        capabilities: SinkCapabilities | None = None,
        type: str | None = None,
        type_mapping: Callable[[DataType], DataType] | None = None,
        pending_polls: int = 0,
    ) -> None:
        self.config = config or MemorySinkConfig()
        self.pipeline = pipeline
        if capabilities is not None:
            self.capabilities = capabilities
        if type is not None:
            self.type = type  # stands in for that sink: errors and history name it
        #: Standing in for a sink with its own types: what it stores for each source type.
        self.type_mapping = type_mapping
        #: Standing in for a sink whose ALTERs run asynchronously: polls before one is done.
        self.pending_polls = pending_polls
        self.altering: dict[TableId, int] = {}
        self.polls = 0
        self.tables: dict[TableId, MemoryTable] = {}
        self.pending: dict[TableId, list[DataChange]] = {}
        self.applied: list[SchemaChange] = []
        self.flushed_offsets: Offsets = {}
        self.flush_count = 0
        #: Fault injection: the next flush raises this error once.
        self.fail_next_flush: Exception | None = None
        #: Fault injection: applying a change of one of these tags raises a terminal error.
        self.refuse_tags: set[str] = set()

    def table_schema(self, table_id: TableId) -> Schema | None:
        table = self.tables.get(table_id)
        return None if table is None else table.schema

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        if change.tag in self.refuse_tags:
            raise SinkTerminalError(f"refuses {change}", sink=self.type, table=str(change.table_id))
        current = self.table_schema(change.table_id)
        after = apply_schema_change(current, change)
        if after is not None and self.type_mapping is not None:
            after = after.with_columns(replace(c, type=self.type_mapping(c.type)) for c in after.columns)
        if self.pending_polls:
            self.altering[change.table_id] = self.pending_polls
        # standing in for a sink that keeps no schema (Kafka), rows stay as they were written
        keeps_rows = self.capabilities.support(change_kind(change, current)) is Support.IGNORED
        if after is None:
            self.tables.pop(change.table_id, None)
        elif current is None:
            self.tables[change.table_id] = MemoryTable(after)
        elif keeps_rows:
            self.tables[change.table_id].schema = after
        else:
            table = self.tables[change.table_id]
            table.schema = after
            if change.tag == "truncate.table":
                table.rows.clear()
                table.appended.clear()
            if isinstance(change, DropColumn):
                # its values go with it: a column added again under its name starts empty
                name = change.column_name
                table.rows = {k: {n: v for n, v in r.items() if n != name} for k, r in table.rows.items()}
                table.appended = [{n: v for n, v in r.items() if n != name} for r in table.appended]
            if isinstance(change, AddColumn) and (default := default_value(change.column)) is not None:
                # the rows it holds read the column's default, as a sink that backfills it shows them
                name = change.column.name
                table.rows = {k: {**r, name: default} for k, r in table.rows.items()}
                table.appended = [{**r, name: default} for r in table.appended]
            renames = _renamed(change)
            if renames:
                old, new = renames
                table.rows = {k: _rename_key(r, old, new) for k, r in table.rows.items()}
                table.appended = [_rename_key(r, old, new) for r in table.appended]
        self.applied.append(change)

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self.pending.setdefault(table_id, []).extend(changes)

    def flush(self, offsets: Offsets) -> None:
        self._commit(list(self.pending), offsets)
        self.pending.clear()
        self.flushed_offsets = dict(offsets)
        self.flush_count += 1

    def _commit(self, table_ids: Collection[TableId], offsets: Offsets) -> None:
        """The rows written to these tables, applied (the fault injected first)."""
        if self.fail_next_flush is not None:
            error, self.fail_next_flush = self.fail_next_flush, None
            raise error
        for table_id in table_ids:
            changes = self.pending.get(table_id)
            if not changes:
                continue
            table = self.tables.get(table_id)
            if table is None:
                raise SinkTransientError(
                    "rows for a table that does not exist", sink=self.type, table=str(table_id)
                )
            keys = table.schema.primary_keys
            for change in changes:
                row = change.row
                if not keys:
                    if change.op is not Op.DELETE:
                        table.appended.append(dict(row))
                    continue
                key = tuple(row.get(k) for k in keys)
                if None in key:  # as the sinks that write by key refuse it (ferry.sinks.base.rows)
                    missing = keys[key.index(None)]
                    raise SinkTerminalError(
                        f"a row has no value for primary key column {missing!r}", sink=self.type
                    )
                if change.op is Op.DELETE:
                    table.rows.pop(key, None)
                else:
                    table.rows[key] = dict(row)
            self.committed_with(table_id, offsets)
            del self.pending[table_id]

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """A partial row takes its missing values from its key's last version: among the rows
        not committed yet, else in the table; a key the table does not hold has none."""
        keys = schema.primary_keys
        buffered = self.pending.get(table_id, ())
        still, rejected = complete_before_reading(changes, partial, keys, buffered, self.type)
        table = self.tables.get(table_id)
        for index in still:
            after = changes[index].after
            assert after is not None
            held = None if table is None else table.rows.get(tuple(after.get(k) for k in keys))
            if held is None or not fill(after, held):
                rejected.append(
                    (index, f"{unavailable_reason(changes[index])}; the table has no row of its key")
                )
        return rejected

    def committed_with(self, table_id: TableId, offsets: Offsets) -> None:
        """A table's rows were committed with these offsets (kept by a sink that records them)."""

    def sink_type(self, source_type: DataType) -> DataType:
        return source_type if self.type_mapping is None else self.type_mapping(source_type)

    def schema_change_pending(self, table_id: TableId) -> bool:
        """Standing in for an asynchronous ALTER: pending for ``pending_polls`` polls after each change."""
        self.polls += 1
        left = self.altering.get(table_id, 0)
        if left:
            self.altering[table_id] = left - 1
        return left > 0

    def rows(self, table_id: TableId | str) -> list[dict[str, Any]]:
        tid = TableId.parse(table_id) if isinstance(table_id, str) else table_id
        table = self.tables.get(tid)
        return [] if table is None else table.all_rows()


class OffsetCommittingMemorySink(MemorySink):
    """The memory sink standing in for a sink whose commits carry the source offsets per table
    (Iceberg, Paimon): each table's commit records the offsets merged into its own (per partition,
    the highest), reported by :meth:`committed_offsets`, and a table's rows can be committed alone
    (:meth:`flush_tables`). A table dropped or truncated starts its offsets anew."""

    def __init__(self, config: MemorySinkConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        #: Per table, the offsets its commits carry.
        self.table_offsets: dict[TableId, Offsets] = {}
        #: The tables of each :meth:`flush_tables` call, in order.
        self.flushed_tables: list[list[TableId]] = []

    def flush_tables(self, table_ids: Collection[TableId], offsets: Offsets) -> None:
        self._commit(table_ids, offsets)
        self.flushed_tables.append(list(table_ids))

    def committed_with(self, table_id: TableId, offsets: Offsets) -> None:
        merged = dict(self.table_offsets.get(table_id, {}))
        for tp, offset in offsets.items():
            merged[tp] = max(offset, merged.get(tp, offset))
        self.table_offsets[table_id] = merged

    def committed_offsets(self, table_id: TableId) -> dict[tuple[str, int], int]:
        return dict(self.table_offsets.get(table_id, {}))

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        super().apply_schema_change(change, schema_after)
        if isinstance(change, DropTable | TruncateTable):
            self.table_offsets.pop(change.table_id, None)


class NullSink(Sink):
    """Accepts everything and keeps nothing but counts; the benchmark's floor."""

    type: str = "null"
    capabilities: SinkCapabilities = ALL_SUPPORTED

    def __init__(self, config: NullSinkConfig | None = None, *, pipeline: str = "ferry") -> None:
        self.schemas: dict[TableId, Schema] = {}
        self.rows_written = 0
        self.flushes = 0

    def table_schema(self, table_id: TableId) -> Schema | None:
        return self.schemas.get(table_id)

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        if schema_after is None:
            self.schemas.pop(change.table_id, None)
        else:
            self.schemas[change.table_id] = schema_after

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self.rows_written += len(changes)

    def write_raw(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], forms: RawForms
    ) -> None:
        """Rows with raw columns (:mod:`ferry.model.raw_values`): discarded unconverted."""
        self.rows_written += len(changes)

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """Counted as written, as every row."""
        return []

    def flush(self, offsets: Offsets) -> None:
        self.flushes += 1


MEMORY = SinkDeclaration(
    type="memory",
    config=MemorySinkConfig,
    capabilities=ALL_SUPPORTED,
    sink_class="ferry.sinks.memory:MemorySink",
    test_double=True,
)
NULL = SinkDeclaration(
    type="null",
    config=NullSinkConfig,
    capabilities=ALL_SUPPORTED,
    sink_class="ferry.sinks.memory:NullSink",
    test_double=True,
)


def _renamed(change: SchemaChange) -> tuple[str, str] | None:
    if isinstance(change, RenameColumn):
        return change.old_name, change.new_name
    return None


def _rename_key(row: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {new if k == old else k: v for k, v in row.items()}
