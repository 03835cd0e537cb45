"""Sinks that keep everything in memory: for tests, the benchmark and dry runs.

:class:`MemorySink` behaves like a primary-key table store that enforces the capabilities it is
given (so the router's decisions can be checked against any sink's declaration) and can be told
to fail (fault injection). :class:`NullSink` counts rows and keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ferry.offsets import Offsets
from ferry.options import SinkConfigBase
from ferry.pipeline.apply import apply_schema_change
from ferry.pipeline.events import DataChange, Op, RenameColumn, SchemaChange
from ferry.pipeline.raw_values import RawForms
from ferry.pipeline.router import change_kind
from ferry.pipeline.schema import Schema, TableId
from ferry.pipeline.types import DataType
from ferry.sinks.base import ChangeKind, Sink, SinkCapabilities, Support
from ferry.sinks.declaration import SinkDeclaration
from ferry.sinks.exceptions import SinkTerminalError, SinkTransientError

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
            renames = _renamed(change)
            if renames:
                old, new = renames
                table.rows = {k: _rename_key(r, old, new) for k, r in table.rows.items()}
                table.appended = [_rename_key(r, old, new) for r in table.appended]
        self.applied.append(change)

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self.pending.setdefault(table_id, []).extend(changes)

    def flush(self, offsets: Offsets) -> None:
        if self.fail_next_flush is not None:
            error, self.fail_next_flush = self.fail_next_flush, None
            raise error
        for table_id, changes in self.pending.items():
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
                if change.op is Op.DELETE:
                    table.rows.pop(key, None)
                else:
                    table.rows[key] = dict(row)
        self.pending.clear()
        self.flushed_offsets = dict(offsets)
        self.flush_count += 1

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
        """Rows with raw columns (:mod:`ferry.pipeline.raw_values`): discarded unconverted."""
        self.rows_written += len(changes)

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
