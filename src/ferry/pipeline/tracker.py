"""Schema tracking: a versioned schema per source table, learnt from records and DDL.

The schema a record carries is the trigger: when it differs from what ferry knows, the tracker
diffs the two and emits schema changes. DDL is a hint: it names renames (which records cannot
show) and table drops. DDL that travels in order with the rows (Canal, Maxwell) is applied where
it stands; Debezium's schema-change topic is not ordered with the data, so its column changes only
explain the next drift seen in records, and its table schemas only ever widen what is known.

With several partitions per table, the tracker keeps one schema per (table, partition) and merges
them so that the table's schema only widens: a column goes away only when no partition has it any
more, and a type never narrows (a narrower source type still fits the wider column).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ferry.pipeline.apply import apply_schema_change, is_applied
from ferry.pipeline.events import (
    FIRST,
    LAST,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    SchemaChange,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    after,
)
from ferry.pipeline.exceptions import SchemaError
from ferry.pipeline.schema import Column, Schema, TableId, schema_from_dict, schema_to_dict
from ferry.pipeline.types import widen


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One entry of a table's schema history."""

    version: int
    change: str
    at_ms: int
    position: str | None = None


@dataclass
class TrackedTable:
    schema: Schema
    version: int = 1
    partitions: dict[int, Schema] = field(default_factory=dict)
    history: list[SchemaVersion] = field(default_factory=list)


class SchemaTracker:
    """Keeps the schema of every source table and turns what it observes into schema changes."""

    def __init__(self) -> None:
        self.tables: dict[TableId, TrackedTable] = {}
        #: Renames named by unordered DDL, waiting for a record to show them.
        self.pending_renames: dict[TableId, list[RenameColumn]] = {}

    def schema(self, table_id: TableId) -> Schema | None:
        tracked = self.tables.get(table_id)
        return None if tracked is None else tracked.schema

    def version(self, table_id: TableId) -> int:
        tracked = self.tables.get(table_id)
        return 0 if tracked is None else tracked.version

    # ------------------------------------------------------------------------------ observations

    def observe(self, event: SchemaObserved) -> list[SchemaChange]:
        """A record (or a whole-table DDL event) shows a table's schema: the changes it implies."""
        table_id, new = event.table_id, event.schema
        if event.ddl is not None:
            # a whole-table schema from DDL (Debezium's tableChanges) describes the table after
            # a change whose rows may still be on their way: records decide, the DDL text only
            # names renames (which the decoder sends as hints)
            return []
        partition = event.position.partition if event.position is not None else -1
        tracked = self.tables.get(table_id)
        if tracked is None:
            change = CreateTable(table_id, new)
            tracked = self.tables[table_id] = TrackedTable(new, 0)
            tracked.partitions[partition] = new
            self._record(tracked, [change], event.position)
            return [change]
        changes = self._confirm_renames(table_id, tracked, new)
        tracked.partitions[partition] = new
        target = self._merge(tracked.schema, tracked.partitions.values(), new)
        drift = diff_schemas(table_id, tracked.schema, target)
        if drift:
            tracked.schema = self._replay(tracked.schema, drift)
        changes += drift
        self._record(tracked, changes, event.position)
        return changes

    def hint(self, event: SchemaHint) -> list[SchemaChange]:
        """DDL names changes: apply them where ordered, else keep renames to explain later drift."""
        emitted: list[SchemaChange] = []
        for change in event.changes:
            tracked = self.tables.get(change.table_id)
            if isinstance(change, CreateTable):
                if tracked is None:
                    self.tables[change.table_id] = tracked = TrackedTable(change.schema, 0)
                    self._record(tracked, [change], event.position)
                    emitted.append(change)
                continue
            if tracked is None and isinstance(change, RenameColumn) and not event.ordered:
                self.pending_renames.setdefault(change.table_id, []).append(change)
                continue
            if tracked is None:
                if event.ordered and not isinstance(change, DropTable):
                    raise SchemaError(
                        f"DDL for unknown table {change.table_id}: {event.ddl}",
                        table=str(change.table_id),
                        change=change.tag,
                    )
                continue  # Debezium's schema-change topic covers tables this pipeline may not read
            if isinstance(change, DropTable):
                del self.tables[change.table_id]
                emitted.append(change)
                continue
            if not event.ordered:
                if isinstance(change, RenameColumn):
                    self.pending_renames.setdefault(change.table_id, []).append(change)
                continue
            if is_applied(tracked.schema, change) or _tightens(tracked.schema, change):
                continue
            after_change = apply_schema_change(tracked.schema, change)
            assert after_change is not None
            tracked.schema = after_change
            tracked.partitions = {
                p: s
                for p, s in ((p, _apply_loosely(s, change)) for p, s in tracked.partitions.items())
                if s is not None
            }
            self._record(tracked, [change], event.position)
            emitted.append(change)
        return emitted

    def apply(self, change: SchemaChange, position: SourcePosition | None = None) -> None:
        """Record a change that came as an event of its own (a truncate in the data stream)."""
        tracked = self.tables.get(change.table_id)
        if tracked is not None:
            after_change = apply_schema_change(tracked.schema, change)
            if after_change is None:
                del self.tables[change.table_id]
            else:
                tracked.schema = after_change
                self._record(tracked, [change], position)

    # ------------------------------------------------------------------------------ internals

    def _confirm_renames(self, table_id: TableId, tracked: TrackedTable, new: Schema) -> list[SchemaChange]:
        confirmed: list[SchemaChange] = []
        pending = self.pending_renames.get(table_id, [])
        for rename in list(pending):
            if (
                rename.old_name in tracked.schema
                and rename.new_name not in tracked.schema
                and rename.new_name in new
                and rename.old_name not in new
            ):
                after_change = apply_schema_change(tracked.schema, rename)
                assert after_change is not None
                tracked.schema = after_change
                tracked.partitions = {
                    p: s if rename.old_name not in s else _renamed(s, rename)
                    for p, s in tracked.partitions.items()
                }
                confirmed.append(rename)
                pending.remove(rename)
        return confirmed

    @staticmethod
    def _merge(current: Schema, partitions: Iterable[Schema], latest: Schema) -> Schema:
        """Columns any partition has (current order, new ones after their predecessor in ``latest``)."""
        seen: dict[str, Column] = {}
        for schema in partitions:
            for col in schema.columns:
                known = seen.get(col.name)
                seen[col.name] = col if known is None else replace(known, type=widen(known.type, col.type))
        columns: list[Column] = []
        for col in current.columns:
            merged = seen.pop(col.name, None)
            if merged is not None:
                # widening with the current type: a type never narrows, and tightening a
                # column to NOT NULL never reaches the sink
                columns.append(replace(merged, type=widen(col.type, merged.type)))
        for name in latest.names:
            if name in seen:
                index = latest.position(name)
                pred = latest.columns[index - 1].name if index else None
                at = (
                    0
                    if pred is None
                    else next((i + 1 for i, c in enumerate(columns) if c.name == pred), len(columns))
                )
                columns.insert(at, seen.pop(name))
        columns += seen.values()
        keys = latest.primary_keys or current.primary_keys
        return Schema(
            tuple(columns),
            tuple(k for k in keys if any(c.name == k for c in columns)),
            current.partition_keys,
            latest.comment or current.comment,
        )

    @staticmethod
    def _replay(schema: Schema, changes: list[SchemaChange]) -> Schema:
        result: Schema | None = schema
        for change in changes:
            result = apply_schema_change(result, change)
        assert result is not None
        return result

    @staticmethod
    def _record(tracked: TrackedTable, changes: list[SchemaChange], position: SourcePosition | None) -> None:
        now = int(time.time() * 1000)
        for change in changes:
            tracked.version += 1
            tracked.history.append(
                SchemaVersion(tracked.version, str(change), now, None if position is None else str(position))
            )

    # ------------------------------------------------------------------------------ persistence

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able form of everything tracked, saved with each checkpoint."""
        return {
            "tables": {
                str(tid): {
                    "version": t.version,
                    "schema": schema_to_dict(t.schema),
                    "partitions": {str(p): schema_to_dict(s) for p, s in t.partitions.items()},
                    "history": [[h.version, h.change, h.at_ms, h.position] for h in t.history[-100:]],
                }
                for tid, t in self.tables.items()
            },
            "pending_renames": {
                str(tid): [[r.old_name, r.new_name] for r in renames]
                for tid, renames in self.pending_renames.items()
                if renames
            },
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> SchemaTracker:
        tracker = cls()
        for tid, t in data.get("tables", {}).items():
            tracker.tables[TableId.parse(tid)] = TrackedTable(
                schema_from_dict(t["schema"]),
                t["version"],
                {int(p): schema_from_dict(s) for p, s in t["partitions"].items()},
                [SchemaVersion(*h) for h in t.get("history", [])],
            )
        for tid, renames in data.get("pending_renames", {}).items():
            table_id = TableId.parse(tid)
            tracker.pending_renames[table_id] = [RenameColumn(table_id, old, new) for old, new in renames]
        return tracker


def diff_schemas(table_id: TableId, old: Schema, new: Schema) -> list[SchemaChange]:
    """The changes that turn ``old`` into ``new``: drops, then adds (positioned), then type changes.

    A column that is gone and a column that appeared are a drop and an add: only DDL can say that
    they are a rename. Nullability tightening is not a change (it never reaches the sink).
    """
    changes: list[SchemaChange] = [DropColumn(table_id, c.name) for c in old.columns if c.name not in new]
    names = [c.name for c in old.columns if c.name in new]
    for index, col in enumerate(new.columns):
        if col.name in old:
            continue
        if index == len(new.columns) - 1 or all(c.name not in old for c in new.columns[index:]):
            position = LAST
        elif index == 0:
            position = FIRST
        else:
            position = after(new.columns[index - 1].name)
        changes.append(AddColumn(table_id, col, position))
        names.insert(index, col.name)
    for col in old.columns:
        new_col = new.find(col.name)
        if new_col is None:
            continue
        if new_col.type != col.type and not (
            new_col.type.same_ignoring_nullability(col.type) and not new_col.type.nullable
        ):
            changes.append(AlterColumnType(table_id, col.name, new_col.type, col.type))
        if new_col.comment != col.comment and new_col.comment is not None:
            changes.append(AlterColumnComment(table_id, col.name, new_col.comment))
    if new.comment != old.comment and new.comment is not None:
        changes.append(AlterTableComment(table_id, new.comment))
    return changes


def _tightens(schema: Schema, change: SchemaChange) -> bool:
    """A change that only makes a column NOT NULL: never an event, the sink stays nullable."""
    if not isinstance(change, AlterColumnType):
        return False
    column = schema.find(change.column_name)
    return (
        column is not None
        and column.type.nullable
        and not change.new_type.nullable
        and column.type.same_ignoring_nullability(change.new_type)
    )


def _apply_loosely(schema: Schema, change: SchemaChange) -> Schema | None:
    """Apply a DDL change to a partition's last-seen schema, ignoring what does not fit it."""
    try:
        return apply_schema_change(schema, change) if not is_applied(schema, change) else schema
    except Exception:
        return schema


def _renamed(schema: Schema, rename: RenameColumn) -> Schema:
    result = apply_schema_change(schema, rename)
    assert result is not None
    return result
