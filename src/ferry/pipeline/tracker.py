"""Schema tracking: a versioned schema per source table, learnt from records and DDL.

The schema a record carries is the trigger: when it differs from what ferry knows, the tracker
diffs the two and emits schema changes. DDL is a hint: it names renames (which records cannot
show) and table drops. DDL that travels in order with the rows (Canal, Maxwell) is applied where
it stands; Debezium's schema-change topic is not ordered with the data, so its renames only
explain the next drift seen in records, and its table drops wait for the rows written before them.

Several partitions per table. The tracker keeps the last schema each (table, partition) showed,
and the table's schema is their union, so rows read with any of them fit it:

- an added column or a wider type is part of the table as soon as one partition shows it;
- a column that a partition no longer has (dropped, or renamed by DDL) stays in the table until
  every partition that holds the table has *passed* the change: it showed a schema without the
  column, or it was read up to the high watermark it had when the change was first seen (Debezium
  writes each change before the rows that follow it, so every row older than the change lies
  below that watermark). Only then is the drop or rename emitted. Until then a renamed column's
  rows are read under its old name (see :meth:`SchemaTracker.aliases`), so values written with
  either schema land in the same column;
- a table dropped by unordered DDL is dropped once every partition passed the drop.

A column keeps its identity across a rename: each partition maps the names its records carry to
the table's names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ferry.model.apply import apply_schema_change, diff_schemas, is_applied
from ferry.model.defaults import initial_defaults
from ferry.model.events import (
    LAST,
    AddColumn,
    AlterColumnType,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    SchemaChange,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    TruncateTable,
)
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId, schema_from_dict, schema_to_dict
from ferry.model.types import widen
from ferry.offsets import Partition
from ferry.pipeline.positions import (
    POSITIONAL_CONNECTORS,
    chained_by_order,
    position_note,
    readded_by_position,
    renames_by_position,
    shows_move,
)
from ferry.pipeline.rename_chains import (
    chain_of,
    names_renamed_into,
    placed_as,
    position_in,
    rename_aliases,
    renamed_columns,
)

#: (binlog file, position, row), or ("", LSN, 0): where a change stands in the source's log.
SourceOrder = tuple[str, int, int]
#: The high watermarks, now, of the partitions of some topics that this pipeline reads.
Watermarks = Callable[[Collection[str]], Mapping[Partition, int]]


@dataclass(frozen=True, slots=True)
class Readded:
    """Columns dropped and added again (see :attr:`SchemaTracker.readded`): the rows older than the
    drop are told by where they stand in the source's log (``order``: where DDL said the drop), or
    by their columns (``move``: a record that does not show this column move is older; one that
    lacks either column is older than the record that first showed the move, at ``order``)."""

    table_id: TableId
    columns: tuple[str, ...]
    order: SourceOrder | None = None
    move: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One entry of a table's schema history."""

    version: int
    change: str
    at_ms: int
    position: str | None = None


@dataclass
class PendingRemoval:
    """A drop or rename of a column, or a table drop, waiting for every partition to pass it.

    ``holders`` are the partitions that may still hold rows written before the change, each with
    the high watermark it had when the change was first seen (``None``: unknown, the partition
    must show the change itself).
    """

    change: DropColumn | RenameColumn | DropTable
    holders: dict[Partition, int | None] = field(default_factory=dict)


@dataclass
class TrackedTable:
    schema: Schema
    version: int = 1
    #: The last schema each partition showed, in the names its records carry.
    partitions: dict[int, Schema] = field(default_factory=dict)
    history: list[SchemaVersion] = field(default_factory=list)
    #: Per partition: a name its records carry → the table's name for that column (renames not final).
    aliases: dict[int, dict[str, str]] = field(default_factory=dict)
    pending: list[PendingRemoval] = field(default_factory=list)
    #: The topics the table's records came from.
    topics: set[str] = field(default_factory=set)
    #: Renames that are final: a name older records carry → the column's name now (for records
    #: read again after a truncate, older than the rename).
    renamed: dict[str, str] = field(default_factory=dict)
    #: Renames proved by column positions (no DDL: :mod:`ferry.pipeline.positions`), old → new name.
    by_position: dict[str, str] = field(default_factory=dict)
    #: Columns gone or new in a schema step whose positions proved no rename (a drop and an add).
    unproved: set[str] = field(default_factory=set)
    #: Columns dropped and added again that column positions proved (no DDL: a column moved after
    #: one it stood before), by the move that proved them (:func:`readded_by_position`): a partition
    #: showing the same move later shows the same change, and a record not showing it yet is older
    #: than the drop (its values of those columns are the old ones').
    moves: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    #: The columns the last schema step proved dropped and added again (for the history's note).
    readded: set[str] = field(default_factory=set)

    def copy(self) -> TrackedTable:
        """A copy that changes apart from this one (schemas are immutable, and shared)."""
        return TrackedTable(
            self.schema,
            self.version,
            dict(self.partitions),
            list(self.history),
            {p: dict(a) for p, a in self.aliases.items()},
            [PendingRemoval(p.change, dict(p.holders)) for p in self.pending],
            set(self.topics),
            dict(self.renamed),
            dict(self.by_position),
            set(self.unproved),
            dict(self.moves),
            set(self.readded),
        )


class SchemaTracker:
    """Keeps the schema of every source table and turns what it observes into schema changes."""

    def __init__(self) -> None:
        self.tables: dict[TableId, TrackedTable] = {}
        #: The entries shared with a fork (see :meth:`fork`): copied before this tracker changes one.
        self._shared: dict[TableId, TrackedTable] = {}
        #: Renames named by unordered DDL, waiting for a record to show them.
        self.pending_renames: dict[TableId, list[RenameColumn]] = {}
        #: The last schema DDL described for each table (applied when its first record comes).
        self.descriptions: dict[TableId, Schema] = {}
        #: Tables DDL dropped before their first record was read (their records are older).
        self.dropped: set[TableId] = set()
        #: Every column name a statement's description of a table had (records may carry any of them).
        self.described_names: dict[TableId, set[str]] = {}
        #: Columns dropped and added again, since the schema operator last took them: (table, every
        #: name rows may carry the dropped column under, where the drop stands in the source's log,
        #: or the column move that proved it where no DDL said it: a record not showing the move is
        #: older than the drop). Rows older than the drop carry its values, which the new column
        #: must not take.
        self.readded: list[Readded] = []
        #: Per table, the columns the last statements describing it dropped: where the drop stands in
        #: the source's log (a later statement may add the column again).
        self.dropped_at: dict[TableId, dict[str, SourceOrder]] = {}
        #: Per table not read yet, the columns DDL dropped and added again: where the drop stands.
        self.readded_unread: dict[TableId, dict[str, SourceOrder]] = {}
        #: Per table, where the last DDL statement read of it stands in the source's log: every
        #: statement before it is read (the schema-change topic keeps the log's order).
        self.ddl_order: dict[TableId, SourceOrder] = {}
        #: Per table, the names renames proved by column positions gave, with where the first record
        #: showing each stands in the source's log (they order a chain of renames).
        self.named_at: dict[TableId, dict[str, SourceOrder]] = {}

    def fork(self) -> SchemaTracker:
        """A tracker that starts as this one and then changes apart from it: the schema operator
        tracks an event on a fork, so that the rows read before it keep the schemas before it.

        Copy on write, table by table: the two share every table's entry until one of them
        changes it, and then copies that entry alone. So tracking a table's event costs what that
        table holds, not what every table holds."""
        fork = SchemaTracker()
        fork.tables = dict(self.tables)
        fork.pending_renames = {t: list(renames) for t, renames in self.pending_renames.items()}
        fork.descriptions = dict(self.descriptions)
        fork.dropped = set(self.dropped)
        fork.described_names = {t: set(names) for t, names in self.described_names.items()}
        fork.dropped_at = {t: dict(columns) for t, columns in self.dropped_at.items()}
        fork.readded_unread = {t: dict(columns) for t, columns in self.readded_unread.items()}
        fork.ddl_order = dict(self.ddl_order)
        fork.named_at = {t: dict(names) for t, names in self.named_at.items()}
        self._shared = dict(self.tables)
        fork._shared = dict(self.tables)
        return fork

    def _own(self, table_id: TableId) -> TrackedTable | None:
        """A table's entry, to change: copied first while it is shared with a fork."""
        tracked = self.tables.get(table_id)
        if tracked is not None and self._shared.pop(table_id, None) is tracked:
            tracked = self.tables[table_id] = tracked.copy()
        return tracked

    def schema(self, table_id: TableId) -> Schema | None:
        tracked = self.tables.get(table_id)
        return None if tracked is None else tracked.schema

    def version(self, table_id: TableId) -> int:
        tracked = self.tables.get(table_id)
        return 0 if tracked is None else tracked.version

    def aliases(self, table_id: TableId, partition: int) -> dict[str, str]:
        """The names a partition's records carry that the table knows by another (renames not yet
        final): rename these keys of a row to read it with the table's schema."""
        tracked = self.tables.get(table_id)
        return {} if tracked is None else tracked.aliases.get(partition, {})

    def all_aliases(self) -> dict[tuple[TableId, int], dict[str, str]]:
        """:meth:`aliases` of every (table, partition) that has some."""
        return {(tid, p): a for tid, t in self.tables.items() for p, a in t.aliases.items() if a}

    def renames(self, table_id: TableId) -> dict[str, str]:
        """Every rename DDL named for the table, old name → new name (a sink another worker already
        renamed the column at takes this table's old name under the new one)."""
        out = {r.old_name: r.new_name for r in self.pending_renames.get(table_id, [])}
        tracked = self.tables.get(table_id)
        if tracked is not None:
            for pending in tracked.pending:
                if isinstance(pending.change, RenameColumn):
                    out[pending.change.old_name] = pending.change.new_name
        return out

    def older_names(self, table_id: TableId) -> dict[str, str]:
        """Every name the table's records may have carried for a column (renames final or not) →
        the table's name for it now: for records read again, older than some of the renames."""
        tracked = self.tables.get(table_id)
        if tracked is None:
            return {}
        table = tracked.schema
        out = {o: n for o, n in tracked.renamed.items() if n in table}
        renames = self.pending_renames.get(table_id, [])
        for rename in renames:
            names = chain_of(renames, rename.old_name)
            current = next((n for n in names if n in table), None)
            if current is not None:
                out.update((n, current) for n in names if n not in table)
        return out

    def unknown_names(self, table_id: TableId, schema: Schema) -> set[str]:
        """The columns of a record's ``schema`` that neither the table nor the DDL read so far
        name: the table's columns, those of the last statement that described it, every name a
        rename named (final or not, in any partition)."""
        tracked = self.tables.get(table_id)
        known = set() if tracked is None else set(tracked.schema.names)
        known.update(self.described_names.get(table_id, ()))
        for rename in self.pending_renames.get(table_id, []):
            known.update((rename.old_name, rename.new_name))
        if tracked is not None:
            known.update(tracked.renamed)
            for aliases in tracked.aliases.values():
                known.update(aliases)
            for pending in tracked.pending:
                if isinstance(pending.change, RenameColumn):
                    known.add(pending.change.new_name)
        return {name for name in schema.names if name not in known}

    def lacks_ddl(self, event: SchemaObserved) -> bool:
        """Whether a record's schema may come after DDL not read yet: it has a column that neither
        the table nor the DDL read so far names, and it stands after the last statement read in the
        source's log (without a place there: it also lacks a column of the table, a step a rename
        could make). A record older than DDL read (read again after a restart) needs none."""
        if not self.unknown_names(event.table_id, event.schema):
            return False
        order, read = event.source_order, self.ddl_order.get(event.table_id)
        if order is not None:
            return read is None or order > read
        tracked = self.tables.get(event.table_id)
        return tracked is not None and any(
            c.name not in event.schema and c.name not in tracked.schema.primary_keys
            for c in tracked.schema.columns
        )

    def has_pending(self) -> bool:
        return any(t.pending for t in self.tables.values())

    # ------------------------------------------------------------------------------ observations

    def observe(self, event: SchemaObserved, watermarks: Watermarks | None = None) -> list[SchemaChange]:
        """A record (or a whole-table DDL event) shows a table's schema: the changes it implies.

        ``watermarks`` gives the high watermarks of the partitions of the table's topics: a column
        the record lacks is removed once every one of them passed that point (without it, once
        every partition seen so far showed the removal).
        """
        table_id, new = event.table_id, event.schema
        if event.ddl is not None:
            # a whole-table schema from DDL (Debezium's tableChanges) describes the table after
            # a change whose rows may still be on their way: records decide, the DDL text only
            # names renames (which the decoder sends as hints)
            return []
        partition = event.position.partition if event.position is not None else -1
        tracked = self._own(table_id)
        if tracked is None:
            readded = self.readded_unread.pop(table_id, {})
            described = self.descriptions.get(table_id)
            renames = self.pending_renames.get(table_id, [])
            # a column added again (the record may be older than its drop, and than renames before
            # it) is where DDL added it
            created = new
            if described is not None:
                # each column added again, by the name the record has for it → the statement's name
                placing = {
                    n: at
                    for name in readded
                    for at in [next((x for x in reversed(chain_of(renames, name)) if x in described), name)]
                    for n in names_renamed_into(renames, {name})
                    if n in new
                }
                created = placed_as(new, described, placing, renames)
            change = CreateTable(table_id, created)
            tracked = self.tables[table_id] = TrackedTable(created, 0)
            tracked.partitions[partition] = new
            self._seen(tracked, event.position)
            self._record(tracked, [change], event.position)
            for name, at in readded.items():
                if name not in new.primary_keys:
                    self.readded.append(Readded(table_id, names_renamed_into(renames, {name}), at))
            if table_id in self.dropped:
                self._pend(tracked, DropTable(table_id), watermarks)
                return [change, *self._settle(table_id, tracked, {})]
            if described is None or described == new:
                return [change]
            return [change, *self.described(SchemaObserved(table_id, described, None, "DDL"), watermarks)]
        self._seen(tracked, event.position)
        previous = tracked.partitions.get(partition)
        moved_again: list[SchemaChange] = []
        if previous is not None and event.connector in POSITIONAL_CONNECTORS:
            moved_again, moved = self._readded_by_position(
                tracked, table_id, partition, previous, new, order=event.source_order
            )
            self._renamed_by_position(
                tracked, table_id, _without(previous, moved), _without(new, moved), event.source_order
            )
        # the columns of a record older than their drop and add (by the move): the new ones' are not
        stale = _stale(tracked, new)
        had = (
            set()
            if previous is None
            else set(renamed_columns(previous, tracked.aliases.get(partition, {})).names) - stale
        )
        known_aliases = tracked.aliases.get(partition, {})
        aliases = self._aliases_for(table_id, tracked, partition, new)
        tracked.partitions[partition] = new
        if aliases:
            tracked.aliases[partition] = aliases
        else:
            tracked.aliases.pop(partition, None)
        mapped = renamed_columns(_without(new, stale), aliases)
        described = self.descriptions.get(table_id)
        if described is not None:
            # a column the DDL no longer has (read to its end before this) is not added: the rows
            # that carry it are older than its drop
            gone = {
                c.name for c in mapped.columns if c.name not in tracked.schema and c.name not in described
            }
            if gone:
                mapped = mapped.with_columns(c for c in mapped.columns if c.name not in gone)
        target = self._merge(tracked.schema, self._mapped_partitions(tracked, described), mapped)
        changes = diff_schemas(table_id, tracked.schema, target)
        if changes:
            tracked.schema = self._replay(tracked.schema, changes)
        changes = moved_again + changes
        renames = self.pending_renames.get(table_id, [])
        for name, table_name in aliases.items():
            if known_aliases.get(name) != table_name and name in chain_of(renames, table_name):
                # the table still knows the column by its old name: renamed once all passed it
                self._pend(tracked, RenameColumn(table_id, table_name, name), watermarks)
        for col in tracked.schema.columns:
            # only a column this partition had is removed by its absence: a partition seen for
            # the first time may be older than a column another partition added
            if col.name in had and col.name not in mapped and col.name not in tracked.schema.primary_keys:
                self._pend(tracked, DropColumn(table_id, col.name), watermarks)
        changes += self._settle(table_id, tracked, {})
        self._record(tracked, changes, event.position)
        return changes

    def resume(
        self, event: SchemaObserved, existing: Schema, *, own: bool, watermarks: Watermarks | None = None
    ) -> list[SchemaChange] | None:
        """A table not tracked yet whose sink table has other columns (``existing``) starts with
        those, as a checkpoint would have kept it, not with those of ``event``, its first record
        read here, which may be past a rename or a drop the sink table does not show: observed
        next, the record makes such a change a removal waiting for every partition to pass it.

        ``own``: this pipeline created the sink table, so each of its columns is the source's (one
        the record lacks was dropped since). Otherwise only the columns the record has are taken,
        under the sink's name (an older one DDL renamed), and only when DDL names such a rename
        (else None: nothing is tracked). The record's types (and spelling, for a name spelt in
        another case) are taken; what DDL read so far says of the table applies then."""
        table_id, record = event.table_id, event.schema
        # a name of the record → the sink table's name of that column, where DDL renamed it
        renamed = rename_aliases(self.pending_renames.get(table_id, []), existing, record, {})
        if not own and not renamed:
            return None
        record_names = {sink_name: name for name, sink_name in renamed.items()}
        unmatched = {
            c.name.lower(): c for c in record.columns if c.name not in renamed and c.name not in existing
        }
        columns = []
        for column in existing.columns:
            if column.name in record_names:
                columns.append(replace(record.column(record_names[column.name]), name=column.name))
            elif column.name in record:
                columns.append(record.column(column.name))
            elif column.name.lower() in unmatched:  # spelt otherwise at the sink
                columns.append(unmatched.pop(column.name.lower()))
            elif own:  # a column the source dropped since
                columns.append(column)
        names = {c.name.lower(): c.name for c in columns}
        schema = Schema(
            tuple(columns),
            tuple(names[k.lower()] for k in record.primary_keys if k.lower() in names),
            tuple(names[k.lower()] for k in record.partition_keys if k.lower() in names),
            record.comment,
        )
        tracked = self.tables[table_id] = TrackedTable(schema, 0)
        self._seen(tracked, event.position)
        self._record(tracked, [CreateTable(table_id, schema)], event.position)
        described = self.descriptions.get(table_id)
        changes = self._readded_at_resume(table_id, tracked, described)
        if described is None:
            return changes
        return changes + self.described(SchemaObserved(table_id, described, None, "DDL"), watermarks)

    def _readded_at_resume(
        self, table_id: TableId, tracked: TrackedTable, described: Schema | None
    ) -> list[SchemaChange]:
        """The columns DDL read before the table's first record here dropped and added again, the
        table tracked from its sink table's columns: the rows older than the drop read again lose
        the old column's values. A sink column where the old one stood (the sink table was created
        before the statement was read, with the old column's values) is dropped and added again
        where the statement put it; one already there is the new column (a table created after the
        statement was read has it so) and keeps the values of the rows newer than the drop."""
        changes: list[SchemaChange] = []
        renames = self.pending_renames.get(table_id, [])
        if described is not None:  # under the sink's names: DDL may have renamed the column since
            described = renamed_columns(described, rename_aliases(renames, tracked.schema, described, {}))
        for name, at in self.readded_unread.pop(table_id, {}).items():
            table = tracked.schema
            if name not in table or name in table.primary_keys:
                continue
            self.readded.append(Readded(table_id, names_renamed_into(renames, {name}), at))
            if described is None or name not in described:
                continue
            index = described.position(name)
            without = table.with_columns(c for c in table.columns if c.name != name)
            position = LAST if index == len(described.columns) - 1 else position_in(described, index, without)
            column = replace(table.column(name), default=described.column(name).default)  # the new one's
            moved: list[SchemaChange] = [DropColumn(table_id, name), AddColumn(table_id, column, position)]
            placed = self._replay(table, moved)
            if placed.names != table.names:
                changes += moved
                tracked.schema = placed
            else:
                tracked.schema = table.with_columns(column if c.name == name else c for c in table.columns)
        return changes

    def described(self, event: SchemaObserved, watermarks: Watermarks | None = None) -> list[SchemaChange]:
        """A table as a DDL statement left it (Debezium's ``tableChanges``), in statement order but
        not in order with the rows: a column it adds is added now (rows without it fit); a column
        it no longer has (dropped, or renamed as its DDL says) goes once every partition passed the
        statement; types are left to the records (a record shows the type its values have)."""
        table_id, new = event.table_id, event.schema
        self._statement_read(table_id, event.source_order)
        readded = self._dropped_and_added(table_id, new)
        renamed = {r.new_name: r.old_name for r in self.pending_renames.get(table_id, [])}
        new = initial_defaults(new, self.descriptions.get(table_id), readded, renamed)
        self.descriptions[table_id] = new
        self.described_names.setdefault(table_id, set()).update(new.names)
        self.dropped.discard(table_id)
        tracked = self._own(table_id)
        if tracked is None:
            if readded:  # the rows read first are told apart when the table's first one comes
                self.readded_unread.setdefault(table_id, {}).update(readded)
            return []  # the table's records create it, with the types they carry, then this applies
        table = tracked.schema
        aliases = rename_aliases(self.pending_renames.get(table_id, []), table, new, {})
        mapped = renamed_columns(new, aliases)
        # a later statement has the column again: a drop waiting for it was not the last word. When
        # DDL said the drop (where it stands in the log is known), it is a new column under the old
        # name: the old one is dropped and the new one added now, and the rows older than the drop
        # lose the old column's values (the schema operator tells them by their place in the log)
        again = [
            (p, p.change.column_name)
            for p in tracked.pending
            if isinstance(p.change, DropColumn) and p.change.column_name in mapped
        ]
        tracked.pending = [p for p in tracked.pending if all(p is not q for q, _ in again)]
        changes: list[SchemaChange] = []
        renames = self.pending_renames.get(table_id, [])
        # a described name added again → the table's name of the column dropped under it
        by_table_name = {aliases.get(n, n): (n, at) for n, at in readded.items()}
        # one statement dropped and added it (``DROP COLUMN a, ADD COLUMN a``): no drop waits for it
        at_once = [n for n in by_table_name if n in table and all(n != name for _, name in again)]
        handled: set[str] = set()
        for name in [*(name for _, name in again), *at_once]:
            entry = by_table_name.get(name)
            if entry is None or name in table.primary_keys:
                continue
            new_name, order = entry
            handled.add(new_name)
            index = new.position(new_name)
            position = LAST if index == len(new.columns) - 1 else position_in(new, index, tracked.schema)
            changes += [DropColumn(table_id, name), AddColumn(table_id, new.column(new_name), position)]
            tracked.schema = self._replay(tracked.schema, changes[-2:])
            self.readded.append(Readded(table_id, names_renamed_into(renames, {name, new_name}), order))
        for new_name, order in readded.items():
            # its drop reached the sink already (no partition had shown it, or all had passed the
            # drop): an add, and the rows older than the drop not read yet lose the old values
            if new_name in handled or new_name in tracked.schema or new_name in new.primary_keys:
                continue
            self.readded.append(Readded(table_id, names_renamed_into(renames, {new_name}), order))
        if changes:  # the names of ``new`` as the table knows them now
            aliases = rename_aliases(renames, tracked.schema, new, {})
            mapped = renamed_columns(new, aliases)
        table = tracked.schema
        additions = tuple(c for c in mapped.columns if c.name not in table)
        if additions:
            target = self._merge(table, [Schema(additions)], mapped)
            changes = [c for c in diff_schemas(table_id, table, target) if isinstance(c, AddColumn)]
            tracked.schema = self._replay(table, changes)
        for name, table_name in aliases.items():
            self._pend(tracked, RenameColumn(table_id, table_name, name), watermarks)
        for col in tracked.schema.columns:
            if col.name not in mapped and col.name not in tracked.schema.primary_keys:
                self._pend(tracked, DropColumn(table_id, col.name), watermarks)
        changes += self._settle(table_id, tracked, {})
        self._record(tracked, changes, event.position)
        return changes

    def _statement_read(self, table_id: TableId, order: SourceOrder | None) -> None:
        if order is not None and order > self.ddl_order.get(table_id, ("", -1, 0)):
            self.ddl_order[table_id] = order

    def _dropped_and_added(self, table_id: TableId, new: Schema) -> dict[str, SourceOrder]:
        """Columns a statement's description ``new`` has that DDL dropped (see :meth:`hint`), with
        where that drop stands in the log; the drops of the others are kept."""
        dropped = self.dropped_at.get(table_id, {})
        readded = {name: at for name, at in dropped.items() if name in new}
        kept = {name: at for name, at in dropped.items() if name not in new}
        if kept:
            self.dropped_at[table_id] = kept
        else:
            self.dropped_at.pop(table_id, None)
        return readded

    def hint(self, event: SchemaHint, watermarks: Watermarks | None = None) -> list[SchemaChange]:
        """DDL names changes: apply them where ordered, else keep renames to explain later drift
        and let table drops wait for the rows written before them."""
        if not event.ordered:
            self._statement_read(event.table_id, event.source_order)
        emitted: list[SchemaChange] = []
        for change in event.changes:
            tracked = self.tables.get(change.table_id)
            if isinstance(change, CreateTable):
                if tracked is None:
                    self.tables[change.table_id] = tracked = TrackedTable(change.schema, 0)
                    self._record(tracked, [change], event.position)
                    emitted.append(change)
                continue
            if not event.ordered and isinstance(change, RenameColumn):
                renames = self.pending_renames.setdefault(change.table_id, [])
                if change not in renames:
                    renames.append(change)
                continue
            if not event.ordered and isinstance(change, DropColumn):
                # the statement's description drops it (once the rows pass it); noted where it
                # stands in the log, for a later statement adding a column of that name again
                if event.source_order is not None:
                    self.dropped_at.setdefault(change.table_id, {})[change.column_name] = event.source_order
                continue
            if tracked is None:
                if event.ordered and not isinstance(change, DropTable | TruncateTable):
                    raise SchemaError(
                        f"DDL for unknown table {change.table_id}: {event.ddl}",
                        table=str(change.table_id),
                        change=change.tag,
                    )
                if isinstance(change, DropTable) and not event.ordered:
                    self.dropped.add(change.table_id)
                    self.descriptions.pop(change.table_id, None)
                # Debezium's schema-change topic covers tables this pipeline may not read; a table
                # truncated before its first row is read here has nothing of it at the sink yet
                continue
            if not event.ordered and not isinstance(change, DropTable):
                continue
            tracked = self._own(change.table_id)
            assert tracked is not None
            if isinstance(change, DropTable):
                if event.ordered:
                    del self.tables[change.table_id]
                    emitted.append(change)
                else:
                    self._pend(tracked, change, watermarks)
                    settled = self._settle(change.table_id, tracked, {})
                    if change.table_id in self.tables:
                        self._record(tracked, settled, event.position)
                    emitted += settled
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

    def settle(self, positions: Mapping[Partition, int]) -> list[SchemaChange]:
        """The removals that every holding partition has now passed (``positions``: the next
        offset to read of each partition this pipeline reads)."""
        emitted: list[SchemaChange] = []
        for table_id in [t for t, tracked in self.tables.items() if tracked.pending]:
            tracked = self._own(table_id)
            assert tracked is not None
            changes = self._settle(table_id, tracked, positions)
            if table_id in self.tables:
                self._record(tracked, [c for c in changes if not isinstance(c, DropTable)], None)
            emitted += changes
        return emitted

    def forget_partitions(self, partitions: Collection[Partition]) -> None:
        """Partitions another worker reads from now on: their rows are no longer waited for here."""
        for table_id in [t for t, tracked in self.tables.items() if tracked.pending]:
            tracked = self._own(table_id)
            assert tracked is not None
            for pending in tracked.pending:
                for tp in partitions:
                    pending.holders.pop(tp, None)

    def apply(self, change: SchemaChange, position: SourcePosition | None = None) -> None:
        """Record a change that came as an event of its own (a truncate in the data stream)."""
        tracked = self._own(change.table_id)
        if tracked is not None:
            after_change = apply_schema_change(tracked.schema, change)
            if after_change is None:
                del self.tables[change.table_id]
            else:
                tracked.schema = after_change
                self._record(tracked, [change], position)

    # ------------------------------------------------------------------------------ internals

    @staticmethod
    def _seen(tracked: TrackedTable, position: SourcePosition | None) -> None:
        if position is not None:
            tracked.topics.add(position.topic)

    def _renamed_by_position(
        self,
        tracked: TrackedTable,
        table_id: TableId,
        previous: Schema,
        new: Schema,
        order: SourceOrder | None,
    ) -> None:
        """A schema step of a partition whose connector orders columns as the source numbers them:
        the renames its positions prove join those DDL would have named (and so go as they do);
        the columns gone or new that no position explains are a drop and an add.

        Partitions may show a column's renames in different steps (one goes from ``c`` to ``c_r3``
        at once, another from ``c`` to ``c_r1``): several renames proved from one name are one
        chain, its names in the order of the records that first showed them (``order``: where the
        record stands in the source's log; a name is current while its records are written)."""
        proved = renames_by_position(previous, new)
        renames = self.pending_renames.setdefault(table_id, [])
        # what earlier steps noted is kept while its change has not reached the sink
        tracked.by_position = {
            o: n for o, n in tracked.by_position.items() if RenameColumn(table_id, o, n) in renames
        }
        dropping = {p.change.column_name for p in tracked.pending if isinstance(p.change, DropColumn)}
        tracked.unproved &= dropping
        named = self.named_at.setdefault(table_id, {})
        for old_name, new_name in proved:
            rename = RenameColumn(table_id, old_name, new_name)
            if rename not in renames:
                renames.append(rename)
            tracked.by_position[old_name] = new_name
            if order is not None and (new_name not in named or order < named[new_name]):
                named[new_name] = order
        if not named:
            self.named_at.pop(table_id, None)
        for old_name in dict.fromkeys(o for o, _ in proved):
            chained = chained_by_order(table_id, renames, old_name, named)
            if chained is not None:
                renames[:] = chained
                tracked.by_position.update(
                    (r.old_name, r.new_name) for r in chained if r.old_name != old_name
                )
                tracked.by_position[old_name] = next(r.new_name for r in chained if r.old_name == old_name)
        explained = {n for pair in proved for n in pair}
        gone = {n for n in previous.names if n not in new and n not in explained}
        came = {n for n in new.names if n not in previous and n not in explained}
        if gone and came:  # a step that a rename could have made
            tracked.unproved |= gone | came

    def _readded_by_position(
        self,
        tracked: TrackedTable,
        table_id: TableId,
        partition: int,
        previous: Schema,
        new: Schema,
        *,
        order: SourceOrder | None,
    ) -> tuple[list[SchemaChange], set[str]]:
        """A schema step of a partition whose connector orders columns as the source numbers them,
        in which columns moved after ones they stood before: each was dropped and added again
        (:func:`readded_by_position`). Dropped and added at once (placed where the record has it),
        the rows older than the drop to lose their values (:attr:`readded`), unless another
        partition showed the same move first. The changes, and the columns that moved (the
        renames are told from the other columns)."""
        columns, move = readded_by_position(previous, new)
        tracked.readded = set()
        if move is None:
            return [], set()
        if move in tracked.moves:  # another partition showed it: the change is made
            return [], set(columns)
        aliases = tracked.aliases.get(partition, {})
        changes: list[SchemaChange] = []
        names: list[str] = []
        for name in columns:
            table_name, table = aliases.get(name, name), tracked.schema
            if table_name not in table or table_name in table.primary_keys:
                continue
            without = table.with_columns(c for c in table.columns if c.name != table_name)
            index = new.position(name)
            position = LAST if index == len(new.columns) - 1 else position_in(new, index, without)
            column = replace(new.column(name), name=table_name)
            step: list[SchemaChange] = [
                DropColumn(table_id, table_name),
                AddColumn(table_id, column, position),
            ]
            tracked.schema = self._replay(table, step)
            changes += step
            names.append(table_name)
        # the move the other way (the column passed, dropped and added again since) is history
        tracked.moves = {m: c for m, c in tracked.moves.items() if m != (move[1], move[0])}
        tracked.moves[move] = tuple(columns)
        tracked.readded = set(names)
        if names:
            self.readded.append(Readded(table_id, tuple(names), order, move))
        return changes, set(columns)

    def note(self, table_id: TableId, change: SchemaChange) -> str | None:
        """How a change was told apart where column positions were looked at (see
        :func:`~ferry.pipeline.positions.position_note`)."""
        tracked = self.tables.get(table_id)
        if tracked is None:
            return None
        return position_note(tracked.by_position, tracked.unproved, change, tracked.readded)

    def _aliases_for(
        self, table_id: TableId, tracked: TrackedTable, partition: int, new: Schema
    ) -> dict[str, str]:
        """How the names of ``new`` (a partition's schema) map to the table's: the renames this
        partition already showed, and those DDL named that ``new`` shows for the first time."""
        table = tracked.schema
        aliases = {n: t for n, t in tracked.aliases.get(partition, {}).items() if n in new and t in table}
        return rename_aliases(self.pending_renames.get(table_id, []), table, new, aliases)

    def _mapped_partitions(self, tracked: TrackedTable, described: Schema | None) -> list[Schema]:
        """Every partition's schema in the table's names (without columns the DDL has no more, nor
        the old ones of columns dropped and added again that a partition still shows)."""
        out = []
        for p, schema in tracked.partitions.items():
            mapped = renamed_columns(_without(schema, _stale(tracked, schema)), tracked.aliases.get(p, {}))
            if described is not None:
                mapped = mapped.with_columns(
                    c for c in mapped.columns if c.name in described or c.name in tracked.schema
                )
            out.append(mapped)
        return out

    def _pend(
        self,
        tracked: TrackedTable,
        change: DropColumn | RenameColumn | DropTable,
        watermarks: Watermarks | None,
    ) -> None:
        for pending in tracked.pending:
            if pending.change == change:
                return
            if isinstance(change, DropTable) or isinstance(pending.change, DropTable):
                continue
            # the names the pending change's column has had, through the renames DDL named
            names = chain_of(self.pending_renames.get(change.table_id, []), _column_of(pending.change))
            if isinstance(pending.change, RenameColumn) and pending.change.new_name not in names:
                names.append(pending.change.new_name)
            later: DropColumn | RenameColumn | None = None
            if isinstance(change, DropColumn) and change.column_name in names:
                later = DropColumn(change.table_id, names[0])  # renamed, then dropped: it goes
            elif _column_of(change) != names[0]:
                continue
            elif (
                isinstance(change, RenameColumn)
                and isinstance(pending.change, RenameColumn)
                and change.new_name in names
                and names.index(change.new_name) > names.index(pending.change.new_name)
            ):
                later = change  # renamed again before the first rename was final
            if later is not None:
                # the rows written before the later change are waited for too
                pending.change, pending.holders = later, self._holders(tracked, watermarks)
            return
        tracked.pending.append(PendingRemoval(change, self._holders(tracked, watermarks)))

    @staticmethod
    def _holders(tracked: TrackedTable, watermarks: Watermarks | None) -> dict[Partition, int | None]:
        """The partitions that may hold rows older than a change seen now, with their watermarks."""
        if watermarks is not None and tracked.topics:
            # the partitions this pipeline reads here, seen or not yet: each may hold older rows
            return dict(watermarks(sorted(tracked.topics)))
        return {(topic, p): None for p in tracked.partitions for topic in tracked.topics or {""}}

    def _settle(
        self, table_id: TableId, tracked: TrackedTable, positions: Mapping[Partition, int]
    ) -> list[SchemaChange]:
        emitted: list[SchemaChange] = []
        for pending in list(tracked.pending):
            if not all(
                self._passed(tracked, pending.change, tp, mark, positions)
                for tp, mark in pending.holders.items()
            ):
                continue
            tracked.pending.remove(pending)
            change = pending.change
            if isinstance(change, DropTable):
                del self.tables[table_id]
                self.pending_renames.pop(table_id, None)
                return [*emitted, change]
            if _column_of(change) not in tracked.schema:
                continue
            if isinstance(change, RenameColumn) and change.new_name in tracked.schema:
                change = DropColumn(table_id, change.old_name)  # the new name was added meanwhile
            after_change = apply_schema_change(tracked.schema, change)
            assert after_change is not None
            tracked.schema = after_change
            for p, seen in list(tracked.partitions.items()):
                aliases = tracked.aliases.get(p, {})
                if isinstance(change, RenameColumn):
                    aliases = {
                        n: (change.new_name if t == change.old_name else t) for n, t in aliases.items()
                    }
                # a partition that passed the change by its position shows it from now on
                tracked.partitions[p] = _passed_schema(seen, change)
                aliases = {n: t for n, t in aliases.items() if n != t}
                if aliases:
                    tracked.aliases[p] = aliases
                else:
                    tracked.aliases.pop(p, None)
            if isinstance(change, RenameColumn):
                new_name = change.new_name
                renamed = {o: new_name if n == change.old_name else n for o, n in tracked.renamed.items()}
                renamed[change.old_name] = new_name
                tracked.renamed = {o: n for o, n in renamed.items() if o != n}
                renames = self.pending_renames.get(table_id, [])
                chain = chain_of(renames, change.old_name)
                # the renames up to the name the column has now; those after it are still to come
                done = chain[: chain.index(new_name)] if new_name in chain else chain[:-1]
                self.pending_renames[table_id] = [r for r in renames if r.old_name not in done]
            emitted.append(change)
        return emitted

    @staticmethod
    def _passed(
        tracked: TrackedTable,
        change: DropColumn | RenameColumn | DropTable,
        partition: Partition,
        mark: int | None,
        positions: Mapping[Partition, int],
    ) -> bool:
        if mark is not None and positions.get(partition, 0) >= mark:
            return True
        if isinstance(change, DropTable):
            return mark is None
        schema = tracked.partitions.get(partition[1])
        if schema is None:
            return False
        column = _column_of(change)
        shown = {tracked.aliases.get(partition[1], {}).get(n, n) for n in schema.names}
        if isinstance(change, RenameColumn):
            return column not in schema.names and change.new_name in schema.names
        return column not in shown

    @staticmethod
    def _merge(current: Schema, partitions: Iterable[Schema], latest: Schema) -> Schema:
        """The current columns, widened by every partition's, then the columns a partition has and
        the table not (after their predecessor in ``latest``); no column is removed here."""
        seen: dict[str, Column] = {}
        for schema in partitions:
            for col in schema.columns:
                known = seen.get(col.name)
                seen[col.name] = col if known is None else replace(known, type=widen(known.type, col.type))
        columns: list[Column] = []
        for col in current.columns:
            merged = seen.pop(col.name, None)
            # widening with the current type: a type never narrows, and tightening a
            # column to NOT NULL never reaches the sink
            # and a column keeps the default it was added with (see ferry.model.defaults)
            kept = col if merged is None else replace(merged, type=widen(col.type, merged.type))
            columns.append(replace(kept, default=col.default or kept.default))
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
                    "aliases": {str(p): a for p, a in t.aliases.items()},
                    "pending": [_pending_to_dict(p) for p in t.pending],
                    "topics": sorted(t.topics),
                    **({"renamed": t.renamed} if t.renamed else {}),
                    **({"by_position": t.by_position} if t.by_position else {}),
                    **({"unproved": sorted(t.unproved)} if t.unproved else {}),
                    **({"moves": [[*m, list(c)] for m, c in t.moves.items()]} if t.moves else {}),
                    **({"readded": sorted(t.readded)} if t.readded else {}),
                }
                for tid, t in self.tables.items()
            },
            "pending_renames": {
                str(tid): [[r.old_name, r.new_name] for r in renames]
                for tid, renames in self.pending_renames.items()
                if renames
            },
            "descriptions": {str(tid): schema_to_dict(s) for tid, s in self.descriptions.items()},
            "dropped": sorted(str(tid) for tid in self.dropped),
            "described_names": {str(tid): sorted(names) for tid, names in self.described_names.items()},
            **_orders("dropped_at", self.dropped_at),
            **_orders("readded_unread", self.readded_unread),
            **_orders("ddl_order", {tid: {"": at} for tid, at in self.ddl_order.items()}),
            **_orders("named_at", self.named_at),
        }

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> SchemaTracker:
        tracker = cls()
        for tid, t in data.get("tables", {}).items():
            table_id = TableId.parse(tid)
            tracker.tables[table_id] = TrackedTable(
                schema_from_dict(t["schema"]),
                t["version"],
                {int(p): schema_from_dict(s) for p, s in t["partitions"].items()},
                [SchemaVersion(*h) for h in t.get("history", [])],
                {int(p): dict(a) for p, a in t.get("aliases", {}).items()},
                [_pending_from_dict(table_id, p) for p in t.get("pending", [])],
                set(t.get("topics", [])),
                dict(t.get("renamed", {})),
                dict(t.get("by_position", {})),
                set(t.get("unproved", [])),
                {(column, passed): tuple(columns) for column, passed, columns in t.get("moves", [])},
                set(t.get("readded", [])),
            )
        for tid, renames in data.get("pending_renames", {}).items():
            table_id = TableId.parse(tid)
            tracker.pending_renames[table_id] = [RenameColumn(table_id, old, new) for old, new in renames]
        tracker.dropped = {TableId.parse(tid) for tid in data.get("dropped", [])}
        for tid, described in data.get("descriptions", {}).items():
            schema = tracker.descriptions[TableId.parse(tid)] = schema_from_dict(described)
            tracker.described_names[TableId.parse(tid)] = set(schema.names)
        for tid, names in data.get("described_names", {}).items():
            tracker.described_names.setdefault(TableId.parse(tid), set()).update(names)
        for tid, (file, pos, row) in ((t, at[""]) for t, at in data.get("ddl_order", {}).items()):
            tracker.ddl_order[TableId.parse(tid)] = (str(file), int(pos), int(row))
        kept = (
            ("dropped_at", tracker.dropped_at),
            ("readded_unread", tracker.readded_unread),
            ("named_at", tracker.named_at),
        )
        for key, orders in kept:
            for tid, columns in data.get(key, {}).items():
                orders[TableId.parse(tid)] = {n: (str(f), int(p), int(r)) for n, (f, p, r) in columns.items()}
        return tracker


def _orders(key: str, orders: Mapping[TableId, Mapping[str, SourceOrder]]) -> dict[str, Any]:
    """``{key: {table: {column: [file, position, row]}}}``, or nothing when there is none."""
    if not orders:
        return {}
    return {key: {str(tid): {n: list(at) for n, at in columns.items()} for tid, columns in orders.items()}}


def _pending_to_dict(pending: PendingRemoval) -> dict[str, Any]:
    change = pending.change
    data: dict[str, Any] = {
        "change": change.tag,
        "holders": [[t, p, mark] for (t, p), mark in sorted(pending.holders.items())],
    }

    if isinstance(change, DropColumn):
        data["column"] = change.column_name
    elif isinstance(change, RenameColumn):
        data["column"], data["new_name"] = change.old_name, change.new_name
    return data


def _pending_from_dict(table_id: TableId, data: Mapping[str, Any]) -> PendingRemoval:
    change: DropColumn | RenameColumn | DropTable
    if data["change"] == DropTable.tag:
        change = DropTable(table_id)
    elif data["change"] == RenameColumn.tag:
        change = RenameColumn(table_id, data["column"], data["new_name"])
    else:
        change = DropColumn(table_id, data["column"])
    return PendingRemoval(change, {(t, int(p)): mark for t, p, mark in data.get("holders", [])})


def _without(schema: Schema, names: Collection[str]) -> Schema:
    """``schema`` without the columns ``names`` (its keys stay)."""
    if not names:
        return schema
    keys = schema.primary_keys
    return schema.with_columns(c for c in schema.columns if c.name not in names or c.name in keys)


def _stale(tracked: TrackedTable, schema: Schema) -> set[str]:
    """The columns of a partition's ``schema`` dropped and added again since (by a move it does not
    show): their values are the old columns'."""
    stale: set[str] = set()
    for move, columns in tracked.moves.items():
        if shows_move(schema.names, move) is False:
            stale.update(columns)
    return stale


def _column_of(change: DropColumn | RenameColumn) -> str:
    return change.column_name if isinstance(change, DropColumn) else change.old_name


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


def _passed_schema(schema: Schema, change: DropColumn | RenameColumn) -> Schema:
    """A partition's last schema once the table's rows passed ``change``."""
    if isinstance(change, RenameColumn):
        if change.old_name in schema and change.new_name not in schema:
            return _renamed(schema, change)
        return schema
    if change.column_name in schema and change.column_name not in schema.primary_keys:
        return schema.with_columns(c for c in schema.columns if c.name != change.column_name)
    return schema


def _renamed(schema: Schema, rename: RenameColumn) -> Schema:
    result = apply_schema_change(schema, rename)
    assert result is not None
    return result
