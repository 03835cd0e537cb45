"""The schema operator: what a pipeline knows of its source schemas, and every schema change's way
to the sink.

It holds the :class:`~ferry.pipeline.tracker.SchemaTracker` and the position reached in the
schema-change topic (Debezium's DDL hints), and saves both in each checkpoint, so that a restart
neither reads a hint twice as new nor misses one. For each schema event the runner hands it, it
decides whether the sink must change; only then does it raise a barrier (the runner checkpoints
everything read before the event, with the schemas as they were before it; or, on a sink that
records offsets per table, commits the changed tables alone: :mod:`ferry.pipeline.barriers`),
and then it routes each change: under a lease of the sink table (one worker at a time), against the
sink's actual schema (a replay never applies a change twice), through the router's decision, into
the history.

A partition that only catches up with a schema the table already has costs nothing: no barrier,
no checkpoint. Nor does a change every row read before it fits once adapted (a new table, a
nullable column added, a type widened, a comment): the table's buffered rows are adapted to the
new schema instead (:func:`needs_barrier`), the sink is changed at once, and what the sink now
has is saved beside the last checkpoint's offsets (:meth:`SchemaOperator.ahead_of_checkpoint`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ferry.exceptions import FerryError, TerminalError
from ferry.model.apply import apply_schema_change, diff_schemas
from ferry.model.events import (
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    BadRecord,
    CreateTable,
    DropTable,
    Event,
    SchemaChange,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    schema_change_from_dict,
    schema_change_to_dict,
)
from ferry.model.schema import Schema, TableId, widen_schemas
from ferry.model.types import can_widen
from ferry.offsets import Partition
from ferry.pipeline.barriers import Barrier, allows_table_barrier, known_marks
from ferry.pipeline.checkpoints import CheckpointStore, SchemaHistoryEntry, now_ms
from ferry.pipeline.exceptions import SchemaChangeRefusedError
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import Action, Decision, SchemaChangeRouter
from ferry.pipeline.settings import SchemaSettings
from ferry.pipeline.tracker import Readded, SchemaTracker, Watermarks
from ferry.pipeline.truncates import forget_passed_cuts, new_column_values
from ferry.retry import Operation, RetryWait
from ferry.sinks.base import AsyncSchemaChanges, SchemaCaching, Sink
from ferry.sinks.base.exceptions import SinkTerminalError

if TYPE_CHECKING:
    from ferry.transform.blocks import TableTransforms

T = TypeVar("T")

log = logging.getLogger(__name__)

#: How long a schema-change lease lasts unless renewed (its holder renews it while it works).
SCHEMA_LEASE_TTL_S = 10.0
#: The key of the schema-change topic's offsets in a checkpoint's schemas.
SCHEMA_CHANGE_OFFSETS = "schema_change_offsets"
#: The key of the rows a truncate removed that are not read yet (see ferry.pipeline.truncates).
TRUNCATED = "truncated_before"
#: The key of the partitions read again after a truncate (their records' schemas are not news).
READ_AGAIN = "read_again_to"
#: The key of the offsets, per partition, below which every schema event is in the schemas saved
#: (a table barrier's: the rows read again after a restart are older than the schemas).
KNOWN_TO = "schemas_known_to"
#: The key of the changes on their way to the sink when the schemas were saved (see
#: :meth:`SchemaOperator.finish_applying`).
APPLYING = "applying"
#: The key of the rows written before a column was dropped and added again, not read yet: per
#: table and column, the offset of each partition's first record after the drop.
CLEARED = "cleared_before"


class HintSource(Protocol):
    """DDL hints read beside the data (Debezium's schema-change topic), from a given position."""

    def open(self, start: Mapping[int, int]) -> None:
        """Start reading at these offsets (per partition; the others from the beginning)."""
        ...

    def drain(self) -> list[Event]:
        """The hints read since the last call, without waiting."""
        ...

    def sync(self, timeout: float) -> list[Event]:
        """The hints up to the topic's current end (at once when it is read to its end already)."""
        ...

    def close(self) -> None: ...


class SchemaDefinitions(Protocol):
    """Whole-table schemas the schema-change topic describes (payload-only records are typed by them)."""

    def add(self, table_id: TableId, schema: Schema) -> None: ...


def needs_barrier(change: SchemaChange, schema: Schema | None) -> bool:
    """Whether the rows of ``change``'s table read before it must reach the sink before it is
    applied (``schema``: the source table's schema before it). Not for a new table, a nullable
    column added, a type widened (every value of the old type is one of the new), or a comment:
    the rows read before such a change are adapted to the new schema and written after it. A drop,
    a rename, a truncate, a narrowing or a NOT NULL column added needs the rows written first."""
    if isinstance(change, CreateTable | AlterColumnComment | AlterTableComment):
        return False
    if isinstance(change, AddColumn):
        return not change.column.type.nullable
    if isinstance(change, AlterColumnType):
        column = None if schema is None else schema.find(change.column_name)
        return column is None or not can_widen(column.type, change.new_type)
    return True


def _need_barrier(changes: Sequence[SchemaChange], tracker: SchemaTracker) -> bool:
    """Whether any of ``changes`` (in order, their tables' schemas in ``tracker`` before them)
    needs a barrier. A table ``tracker`` does not know may be one tracked from its sink table's
    columns (:meth:`SchemaOperator._resume`): its changes start from a schema unknown here, and
    only those no row can precede (a nullable column added) go without a barrier."""
    schemas: dict[TableId, Schema | None] = {}
    for change in changes:
        table_id = change.table_id
        schema = schemas[table_id] if table_id in schemas else tracker.schema(table_id)
        if needs_barrier(change, schema):
            return True
        if schema is not None or isinstance(change, CreateTable):
            schemas[table_id] = apply_schema_change(schema, change)
    return False


class SchemaChangeTimeoutError(TerminalError):
    """A schema change's application at the sink took longer than allowed."""


class SchemaOperator:
    """Schema state and schema changes of one pipeline (see the module documentation)."""

    def __init__(
        self,
        *,
        settings: SchemaSettings,
        sink: Sink,
        state: CheckpointStore,
        router: SchemaChangeRouter,
        tables: TableRouter,
        worker: str,
        hints: HintSource | None = None,
        definitions: SchemaDefinitions | None = None,
        transforms: TableTransforms | None = None,
        watermarks: Watermarks | None = None,
    ) -> None:
        self.settings = settings
        self.sink = sink
        self.state = state
        self.router = router
        self.tables = tables
        self.worker = worker
        self.hints = hints
        self.definitions = definitions
        self.transforms = transforms
        self.watermarks = watermarks
        self.tracker = SchemaTracker()
        #: Per partition of the schema-change topic: the next offset whose hints reach the tracker.
        self.hint_offsets: dict[int, int] = {}
        #: Per table, partitions whose rows before an offset a truncate removed (not read yet).
        self.truncated: dict[TableId, dict[Partition, int]] = {}
        #: Partitions read again after a truncate, up to this offset: their schemas are known already.
        self.read_again: dict[Partition, int] = {}
        #: Partitions read again after a table barrier, up to this offset: their schema events are
        #: in the schemas restored already.
        self.known_to: dict[Partition, int] = {}
        #: Per table and column dropped and added again: each partition's first offset after the
        #: drop, below which its rows carry the old column's values (read as NULL).
        self.cleared: dict[TableId, dict[str, dict[Partition, int]]] = {}
        #: Tells the runner, before the barrier of its changes, that a column was dropped and added
        #: again (the table, the column, how its rows older than the drop are told, the table's
        #: topics).
        self.on_readded: Callable[[Readded, list[str], Barrier], None] = lambda readded, topics, barrier: None
        #: The changes the saved schemas show that the sink may not have yet (a restart after a
        #: kill while they were applied): routed again before anything is read.
        self.applying: list[SchemaChange] = []
        self.changes_routed = 0
        #: The sink changes decided, per outcome (the router's action: apply, ignored, skip, fail).
        self.outcomes: dict[str, int] = {}
        self.wait_ms = 0
        #: Tells the runner what it shows: a detail line while a change waits.
        self.on_detail: Callable[[str], None] = lambda detail: None
        #: Tells the runner that a call to the sink or the state store is retried, and when what
        #: was retried succeeded (its status shows the retry meanwhile).
        self.on_wait: Callable[[RetryWait], None] = lambda wait: None
        self.on_waited: Callable[[], None] = lambda: None
        #: Tells the runner which source tables' rows must be shaped anew (their sink table changed).
        self.on_sink_changed: Callable[[Collection[TableId]], None] = lambda tables: None
        #: Saves the schemas once the sink has the changes, beside the barrier's offsets: a restart
        #: replays the rows after the barrier with them (not deriving the changes anew from more DDL).
        self.on_applied: Callable[[Mapping[str, Any]], None] = lambda schemas: None
        #: Tells the runner that a source table's schema changed without a barrier: the rows it
        #: buffered with the old schema (first) are adapted to the new one (second).
        self.on_adapt: Callable[[TableId, Schema, Schema], None] = lambda table, old, new: None
        #: Called before the sink is read or changed: the runner waits there for the checkpoint
        #: commit in flight (:mod:`ferry.pipeline.commits`), so no change meets a flush.
        self.before_sink: Callable[[], None] = lambda: None
        #: The schemas the state store holds now, beside the offsets of the last checkpoint.
        self.saved: Mapping[str, Any] | None = None
        self._sink_schemas: dict[TableId, Schema | None] = {}
        #: When the barrier before the changes being applied began (monotonic seconds), or None.
        self._barrier_started: float | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferry-sink")

    # ------------------------------------------------------------------------------ state

    def restore(self, schemas: Mapping[str, Any] | None) -> None:
        """Schemas and the schema-change topic's position from a checkpoint (None: none yet); the
        changes that were on their way to the sink then go to it again (:meth:`finish_applying`)."""
        if schemas is not None:
            self.tracker = SchemaTracker.restore(schemas)
            offsets = schemas.get(SCHEMA_CHANGE_OFFSETS) or {}
            self.hint_offsets = {int(p): int(o) for p, o in offsets.items()}
            self.truncated = {
                TableId.parse(table): {(t, int(p)): int(o) for t, p, o in marks}
                for table, marks in (schemas.get(TRUNCATED) or {}).items()
            }
            self.read_again = {(t, int(p)): int(o) for t, p, o in schemas.get(READ_AGAIN) or []}
            self.known_to = {(t, int(p)): int(o) for t, p, o in schemas.get(KNOWN_TO) or []}
            self.cleared = {
                TableId.parse(table): {
                    column: {(t, int(p)): int(o) for t, p, o in marks} for column, marks in columns.items()
                }
                for table, columns in (schemas.get(CLEARED) or {}).items()
            }
            self.applying = [schema_change_from_dict(c) for c in schemas.get(APPLYING) or []]
        self.saved = schemas
        if self.hints is not None:
            # definitions describe every table version: they are read again from the beginning
            self.hints.open({} if self.definitions is not None else self.hint_offsets)
        self.finish_applying()

    def snapshot(self, hint_offsets: Mapping[int, int] | None = None) -> dict[str, Any]:
        """What a checkpoint saves: the tracked schemas and the schema-change topic's position
        (``hint_offsets``: the one before the hints being tracked, instead of the one reached)."""
        data = self.tracker.snapshot()
        if hint_offsets is None:
            hint_offsets = self.hint_offsets
        if hint_offsets:
            data[SCHEMA_CHANGE_OFFSETS] = {str(p): o for p, o in sorted(hint_offsets.items())}
        if self.read_again:
            data[READ_AGAIN] = [[t, p, o] for (t, p), o in sorted(self.read_again.items())]
        if self.known_to:
            data[KNOWN_TO] = [[t, p, o] for (t, p), o in sorted(self.known_to.items())]
        if self.truncated:
            data[TRUNCATED] = {
                str(table): [[t, p, o] for (t, p), o in sorted(marks.items())]
                for table, marks in self.truncated.items()
            }
        if self.cleared:
            data[CLEARED] = {
                str(table): {c: [[t, p, o] for (t, p), o in sorted(m.items())] for c, m in columns.items()}
                for table, columns in self.cleared.items()
            }
        return data

    def clear_before(self, table_id: TableId, column: str, cuts: Mapping[Partition, int]) -> None:
        """The rows of each partition below its offset in ``cuts`` were written before ``column``
        was dropped and added again: they are read with NULL in it."""
        if cuts:
            self.cleared.setdefault(table_id, {}).setdefault(column, {}).update(cuts)

    def cleared_columns(self, table_id: TableId, position: SourcePosition) -> dict[str, tuple[str, Any]]:
        """The columns a row read at ``position`` was written before the drop of (each name it may
        carry them under), with the new column's name and value there (:func:`new_column_values`)."""
        columns = self.cleared.get(table_id)
        if not columns:
            return {}
        tp = (position.topic, position.partition)
        names = [c for c, cuts in columns.items() if position.offset < cuts.get(tp, -1)]
        if not names:
            return {}
        return new_column_values(self.tracker.schema(table_id), self.tracker.older_names(table_id), names)

    def passed_cleared(self, offsets: Mapping[Partition, int]) -> None:
        forget_passed_cuts(self.cleared, offsets)

    def ahead_of_checkpoint(self) -> dict[str, Any]:
        """The schemas saved after a change applied without a barrier, beside the last checkpoint's
        offsets: what the tracker knows now (each table's schema as the sink has it, the removals
        waiting, what DDL described and named, the schema-change topic's position reached), with
        what belongs to the data partitions' positions taken from the schemas saved last (the
        schema each partition showed up to its offset there, with its aliases; the removals of a
        truncate pending; the partitions read again; the offsets below which schema events are
        known). A restart reads the rows after the checkpoint again, as rows behind the DDL already
        read: their schemas explain nothing the sink does not show. The DDL read since the
        checkpoint is not read again: it would describe the tables as they were before what the
        sink has now (a column added, then renamed, added anew)."""
        saved = self.saved if self.saved is not None else SchemaTracker().snapshot()
        kept_tables = saved.get("tables") or {}
        now = self.snapshot()
        tables = {}
        for name, table in now["tables"].items():
            kept = kept_tables.get(name) or {}  # none: a table new since, no partition showed it
            tables[name] = {
                **table,
                "partitions": kept.get("partitions", {}),
                "aliases": kept.get("aliases", {}),
            }
        data = {**now, "tables": tables}
        for key in (TRUNCATED, READ_AGAIN, KNOWN_TO, CLEARED):
            data.pop(key, None)
            if key in saved:
                data[key] = saved[key]
        # where a column was dropped and added again is a place in the log, not a position reached:
        # the rows older than a drop read since the checkpoint are read again, and the DDL that
        # said it is not, so its cuts are kept beside those saved last
        cleared = _merged_cuts(saved.get(CLEARED) or {}, now.get(CLEARED) or {})
        if cleared:
            data[CLEARED] = cleared
        return data

    def after_table_barrier(self, known: Mapping[Partition, int]) -> dict[str, Any]:
        """The schemas saved after changes applied behind a table barrier, beside the last
        checkpoint's offsets: the tracker as it is now, and the offsets below which every schema
        event is in it (``known``, merged with those saved since that checkpoint). A restart reads
        again from that checkpoint: the rows the tables committed are skipped by their offsets,
        the other tables' rows are read again into the schemas they have now (as after a change
        applied in place), and their schema events are not news."""
        data = self.snapshot()
        marks = known_marks(self.known_to, (self.saved or {}).get(KNOWN_TO) or [], known)
        if marks:
            data[KNOWN_TO] = marks
        return data

    def finish_applying(self) -> None:
        """After a restart: the changes that were on their way to the sink when the schemas were
        saved go to it again (those it has already are skipped, as a replay skips them), so that
        the sink has what the schemas restored say it has before a row is written.

        A pipeline killed after a barrier, while the sink took the changes (or right after, before
        the schemas were saved once more), would otherwise replay the rows after the barrier with
        the schemas before the changes against a sink table already past them: a partition behind
        a rename showing the old name again, the rename settled anew in another step (a chain of
        renames collapsed, or not) would meet a column the sink no longer has."""
        applying, self.applying = self.applying, []
        for change in applying:
            self.route_change(change.table_id, change, None)

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        if self.hints is not None:
            self.hints.close()

    # ------------------------------------------------------------------------------ events

    def may_change(self, event: Event) -> bool:
        """False for a record schema the tracker already has for that partition (after a restart),
        and for the whole-table schemas of the schema-change topic (they only type records)."""
        position = event.position
        if self.known_to and position is not None:
            until = self.known_to.get((position.topic, position.partition))
            if until is not None and position.offset < until:
                return False  # tracked before a table barrier the restart went back behind
        if not isinstance(event, SchemaObserved):
            return True
        if event.ddl is not None:
            return False
        if self.read_again and position is not None:
            until = self.read_again.get((position.topic, position.partition))
            if until is not None and position.offset < until:
                return False  # read before: an older schema of the partition, not a change
        tracked = self.tracker.tables.get(event.table_id)
        partition = event.position.partition if event.position is not None else -1
        return tracked is None or tracked.partitions.get(partition) != event.schema

    def handle(self, event: SchemaObserved | SchemaHint, barrier: Barrier) -> str | None:
        """Track one schema event; when the sink must change, ``barrier(schemas before it)`` first.
        Returns why the event cannot be tracked (the caller sends it to the dead letter), or None."""
        if not self.may_change(event):
            return None
        hint_offsets = dict(self.hint_offsets)
        sources = self.transforms.sources(self.tracker) if self.transforms is not None else {}
        started = time.monotonic()
        # the event is tracked on a fork: rows read before it are written with the schemas before it
        after = self.tracker.fork()
        # read from the sink and the state store out of the try: their errors are theirs, not the event's
        resume = self._resume_point(event) if isinstance(event, SchemaObserved) else None
        try:
            changes = self._hints_explaining(event, after) if isinstance(event, SchemaObserved) else []
            if isinstance(event, SchemaObserved):
                if resume is not None:
                    changes += self._resume(event, after, *resume)
                changes += after.observe(event, self.watermarks)
            else:
                changes += after.hint(event, self.watermarks)
        except FerryError as e:
            self.hint_offsets = hint_offsets
            return f"schema change cannot be applied to {event.table_id}: {e}"
        self._route(
            changes,
            after=after,
            sources=sources,
            hint_offsets=hint_offsets,
            barrier=barrier,
            position=event.position,
        )
        if changes:
            self.wait_ms += int((time.monotonic() - started) * 1000)
        return None

    def drain_hints(self, barrier: Barrier) -> None:
        """The hints read since the last call; a column the DDL adds reaches the sink at once."""
        if self.hints is not None:
            self._hinted(self.hints.drain(), barrier)

    def sync_hints(self, barrier: Barrier) -> None:
        """Read the schema-change topic to its current end."""
        if self.hints is not None:
            self._hinted(self.hints.sync(self.settings.timeout_s), barrier)

    def _hinted(self, events: Sequence[Event], barrier: Barrier) -> None:
        if not events:
            return
        hint_offsets = dict(self.hint_offsets)
        sources = self.transforms.sources(self.tracker) if self.transforms is not None else {}
        after = self.tracker.fork()
        changes = self._take_hints(events, after)
        self._route(
            changes, after=after, sources=sources, hint_offsets=hint_offsets, barrier=barrier, position=None
        )

    def _take_hints(self, events: Sequence[Event], tracker: SchemaTracker) -> list[SchemaChange]:
        """Hints read from the schema-change topic, tracked by ``tracker``: columns the DDL adds are
        changes now; drops, renames and table drops wait there until every partition passed them."""
        changes: list[SchemaChange] = []
        tracked_to = dict(self.hint_offsets)  # one record may give several events
        for event in events:
            if isinstance(event, BadRecord):
                log.warning("schema-change topic: %s", event)
            position = event.position if isinstance(event, SchemaObserved | SchemaHint | BadRecord) else None
            if position is not None:
                if position.offset < tracked_to.get(position.partition, 0):
                    if self.definitions is not None and isinstance(event, SchemaObserved):
                        self.definitions.add(event.table_id, event.schema)
                    continue  # read before the last checkpoint: already tracked
                self.hint_offsets[position.partition] = position.offset + 1
            if isinstance(event, SchemaObserved) and event.ddl is not None:
                if self.definitions is not None:
                    self.definitions.add(event.table_id, event.schema)
                changes += tracker.described(event, self.watermarks)
            elif isinstance(event, SchemaHint):
                changes += tracker.hint(event, self.watermarks)
        return changes

    def settle(self, positions: Mapping[Partition, int], barrier: Barrier) -> None:
        """Drops and renames every partition has passed by now reach the sink (the DDL read to its
        end first: a later statement may add the column back)."""
        if not self.tracker.has_pending():
            return
        self.sync_hints(barrier)
        sources = self.transforms.sources(self.tracker) if self.transforms is not None else {}
        started = time.monotonic()
        after = self.tracker.fork()
        changes = after.settle(positions)
        self._route(
            changes,
            after=after,
            sources=sources,
            hint_offsets=dict(self.hint_offsets),
            barrier=barrier,
            position=None,
        )
        if changes:
            self.wait_ms += int((time.monotonic() - started) * 1000)

    def forget_partitions(self, partitions: Collection[Partition]) -> None:
        self.tracker.forget_partitions(partitions)
        for tp in partitions:
            self.known_to.pop(tp, None)

    def aliases(self, offsets: Mapping[Partition, int]) -> dict[tuple[TableId, int], dict[str, str]]:
        """(table, partition) → renamed keys, for the partitions whose rows carry a rename not final
        yet, and for those read again after a truncate (their rows may be older than a rename final
        since); ``offsets``: where each partition is read to."""
        tracker = self.tracker
        aliases = tracker.all_aliases()
        for (topic, partition), until in self.read_again.items():
            if offsets.get((topic, partition), 0) >= until:
                continue
            for table_id, tracked in tracker.tables.items():
                older = tracker.older_names(table_id) if topic in tracked.topics else None
                if older:
                    key = (table_id, partition)
                    aliases[key] = {**older, **aliases.get(key, {})}
        return aliases

    @property
    def reading_again(self) -> bool:
        """Whether partitions are read again (after a truncate, or a restart behind a table barrier)."""
        return bool(self.read_again or self.known_to)

    def passed_read_again(self, offsets: Mapping[Partition, int]) -> bool:
        """Forget the partitions read again that are read past it by now; True when one read again
        after a truncate was (the aliases change)."""
        for tp in [tp for tp, until in self.known_to.items() if offsets.get(tp, 0) >= until]:
            del self.known_to[tp]
        passed = [tp for tp, until in self.read_again.items() if offsets.get(tp, 0) >= until]
        for tp in passed:
            del self.read_again[tp]
        return bool(passed)

    def _resume_point(self, event: SchemaObserved) -> tuple[Schema, bool | None] | None:
        """For a record of a table not tracked yet whose sink table exists already: the sink
        table's schema, and whether this pipeline created it (see :meth:`_resume`), None when the
        sink table has the record's columns. None when the table is tracked, or its sink tables
        are missing.

        A source table feeding several sink tables (route-mode ALL_MATCH), each of them alone,
        gave each the same changes in the order of its routes: the last one there is taken, behind
        the others when a kill came in the middle of a change (replayed, the change is redundant
        at those that have it); one missing is created from the tracker's schema when its rows come."""
        table_id = event.table_id
        if event.ddl is not None or table_id in self.tracker.tables or table_id in self.tracker.dropped:
            return None
        if self.transforms is not None and self.transforms.rule_for(table_id) is not None:
            return None
        sink_tables = self.tables.sink_tables(table_id)
        if any(s != table_id for t in sink_tables for s in self.tables.sources_of(t)):
            return None
        existing = [(t, schema) for t in sink_tables if (schema := self.sink_schema(t)) is not None]
        if not existing:
            return None  # no table yet: created from the record
        sink_table, sink_schema = existing[-1]
        if {n.lower() for n in sink_schema.names} == {n.lower() for n in event.schema.names}:
            # the columns the record has: created from the record, unless DDL read with it says
            # that one of them was dropped and added again (see :meth:`_resume`)
            return sink_schema, None
        return sink_schema, self._created_here(table_id, sink_table)

    def _resume(
        self, event: SchemaObserved, tracker: SchemaTracker, sink_schema: Schema, own: bool | None
    ) -> list[SchemaChange]:
        """A record of a table ``tracker`` does not know, whose sink table exists already with
        other columns (``sink_schema``, see :meth:`_resume_point`): the table is tracked from the
        sink table's columns (:meth:`SchemaTracker.resume`), not created anew from this record,
        which may come from a partition ahead of the others (past a rename or a drop the sink
        table does not show yet).

        A sink table this pipeline created (``own``: after its last checkpoint, before a restart)
        is the source table as it was; of one created elsewhere only the columns DDL shows to be
        the source's under an older name are taken. Only where the sink table is this source
        table's alone and untransformed (its columns are then the source's)."""
        if event.table_id in tracker.tables or event.table_id in tracker.dropped:
            return []  # DDL read just now created it
        if own is None:  # the sink table has the record's columns
            if not tracker.readded_unread.get(event.table_id):
                return []  # created from the record
            own = True  # each of its columns is the record's
        changes = tracker.resume(event, sink_schema, own=own, watermarks=self.watermarks)
        if changes is None:
            return []
        log.info("%s: tracked from the columns of its sink table", event.table_id)
        return changes

    def _created_here(self, source_table: TableId, sink_table: TableId) -> bool:
        """Whether the schema history says that this pipeline created ``sink_table`` for
        ``source_table`` (and has not dropped it since), and that no other source table changed it."""
        history = self._retried(
            partial(self.state.schema_history, self.settings.pipeline, str(sink_table)),
            f"reading the schema history of {sink_table}",
            Operation.STATE_STORE,
            transient=self.state.is_transient,
        )
        created = False
        for entry in history:
            if entry.outcome != Action.APPLY.value:
                continue
            tag = entry.change.split(" ", 1)[0]
            if tag == CreateTable.tag:
                created = entry.source_table == str(source_table)
            elif tag == DropTable.tag or entry.source_table != str(source_table):
                created = False
        return created

    def _hints_explaining(self, event: SchemaObserved, tracker: SchemaTracker) -> list[SchemaChange]:
        """:meth:`_hints_for` the record, tracked by ``tracker``; then, while the record may come
        after DDL not read yet (:meth:`SchemaTracker.lacks_ddl`: a column neither the table nor
        the DDL read so far names, in a record newer than the last statement read), the statements
        written since: Debezium writes the DDL before the rows that follow it, but to the
        schema-change topic, which Kafka does not order with the data topics. Read without it, a
        column renamed (once or several times) would be an added column and a dropped one, and the
        rows not written since would lose their values. The topic is read again while statements
        keep coming, and for up to ``ddl_wait_s`` while none comes (after which the record's schema
        is taken as it is)."""
        changes = self._take_hints(self._hints_for(event), tracker)
        if self.hints is None or event.ddl is not None or tracker.schema(event.table_id) is None:
            return changes
        deadline = time.monotonic() + self.settings.ddl_wait_s
        while tracker.lacks_ddl(event):
            events = self.hints.sync(self.settings.timeout_s)
            if events:
                changes += self._take_hints(events, tracker)
            elif time.monotonic() >= deadline:
                unknown = tracker.unknown_names(event.table_id, event.schema)
                log.warning(
                    "%s: no DDL read names column(s) %s of a record at %s within %.0f s: taken as added",
                    event.table_id,
                    ", ".join(sorted(unknown)),
                    event.position,
                    self.settings.ddl_wait_s,
                )
                break
            else:
                time.sleep(self.settings.poll_s)
        return changes

    def _hints_for(self, event: SchemaObserved) -> list[Event]:
        """Every DDL hint written so far (Debezium writes the DDL before the rows that follow it),
        before a record with other columns is diffed: a column gone may be a rename, a column
        new to the table may be one the DDL dropped since."""
        known = self.tracker.schema(event.table_id)
        if self.hints is None or event.ddl is not None:
            return []
        if known is not None and set(known.names) == set(event.schema.names):
            return []  # the same columns (a type changed): the records say it all
        # a table seen for the first time, or other columns: what DDL says of them is read first
        return self.hints.sync(self.settings.timeout_s)

    def _route(
        self,
        changes: list[SchemaChange],
        *,
        after: SchemaTracker,
        sources: Mapping[TableId, Schema],
        hint_offsets: Mapping[int, int],
        barrier: Barrier,
        position: SourcePosition | None,
    ) -> None:
        """Barrier (rows read so far written with the schemas before, and the schema-change topic's
        position before: ``hint_offsets``), then the tracker moves on to ``after`` and each change
        goes to the sink; without a barrier when no change needs one (:func:`needs_barrier`)."""
        readded, after.readded = after.readded, []
        if changes:
            self.before_sink()
        for entry in readded:
            tracked = after.tables.get(entry.table_id)
            topics = sorted(tracked.topics) if tracked is not None else []
            self.on_readded(entry, topics, barrier)
        if not changes:  # a table tracked from its sink table's columns, which have the new column
            self.tracker = after
            return
        refused = self._refused(changes)
        # partitions read again (a column added again: rows newer than its drop) need a full barrier
        if not _need_barrier(changes, self.tracker) and not refused and not barrier.read_again:
            self._route_in_place(changes, after=after, sources=sources, position=position)
            return
        # the table barrier commits only the changes' tables (ferry.pipeline.barriers); the full one
        # is a checkpoint, whose steps wait for the sink, the broker and the state store under the
        # retry policy (pipeline.restart-strategy), not under the bound of one apply
        per_table = not refused and barrier.per_table and all(allows_table_barrier(c) for c in changes)
        tables = list(dict.fromkeys(c.table_id for c in changes))
        waiting = "committing its rows" if per_table else "flushing rows"
        self.on_detail(f"schema change on {tables[0]}: {waiting} read before it")
        self._barrier_started = time.monotonic()
        known: dict[Partition, int] = {}
        try:
            if per_table:
                known = barrier.flush_tables(tables)
            else:
                barrier(self.snapshot(hint_offsets))  # the tracker as it was before the changes
            self.tracker = after
            if self.transforms is not None:  # the router and the sink see the projected schemas
                changes = self.transforms.schema_changes(changes, sources)
            applied = self.after_table_barrier(known) if per_table else self.snapshot()
            # saved before the sink changes, with the changes: a restart killed before the sink had
            # them all (or before the schemas below were saved) routes them again first
            self.on_applied({**applied, APPLYING: [schema_change_to_dict(c) for c in changes]})
            for change in changes:
                self.route_change(change.table_id, change, position)
        finally:
            self._barrier_started = None
        self.on_applied(applied)
        self.on_detail("reading")

    def _refused(self, changes: Sequence[SchemaChange]) -> bool:
        """Whether the router would fail the pipeline on one of ``changes`` (EXCEPTION, or EVOLVE
        on a change the sink cannot take): the rows read before it are then made durable first."""
        for change in changes:
            source_table = change.table_id
            for sink_table in self.tables.sink_tables(source_table):
                sink_schema = self.sink_schema(sink_table)
                for sink_change in self._sink_changes(source_table, sink_table, change, sink_schema):
                    if self.router.decide(sink_change, sink_schema).action is Action.FAIL:
                        return True
        return False

    def _route_in_place(
        self,
        changes: list[SchemaChange],
        *,
        after: SchemaTracker,
        sources: Mapping[TableId, Schema],
        position: SourcePosition | None,
    ) -> None:
        """Changes no row read before them needs to precede: the rows buffered so far are adapted
        to the new schemas, each change goes to the sink, and the sink's schemas are saved."""
        before, self.tracker = self.tracker, after
        for table_id in dict.fromkeys(c.table_id for c in changes):
            old, new = before.schema(table_id), after.schema(table_id)
            if old is not None and new is not None and old != new:
                self.on_adapt(table_id, old, new)
        if self.transforms is not None:  # the router and the sink see the projected schemas
            changes = self.transforms.schema_changes(changes, sources)
        self._barrier_started = time.monotonic()  # reading waits for the sink all the same
        try:
            for change in changes:
                self.route_change(change.table_id, change, position)
        finally:
            self._barrier_started = None
        if not all(isinstance(c, CreateTable) for c in changes):
            # a table created only needs no saving: a replay meets the sink's again (``_resume``)
            self.on_applied(self.ahead_of_checkpoint())
        self.on_detail("reading")

    # ------------------------------------------------------------------------------ the sink

    def source_schema(self, source_table: TableId) -> Schema | None:
        """The schema a source table's rows have when they reach the sink: after its transform."""
        schema = self.tracker.schema(source_table)
        if self.transforms is None or schema is None:
            return schema
        return self.transforms.schema(source_table, schema)

    def _retried(
        self,
        work: Callable[[], T],
        what: str,
        operation: Operation,
        transient: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """``work()`` under the retry policy, its waits shown in the runner's status."""
        extra = {} if transient is None else {"transient": transient}
        result = self.settings.retries.call(work, what, operation=operation, on_wait=self.on_wait, **extra)
        self.on_waited()
        return result

    def sink_schema(self, sink_table: TableId) -> Schema | None:
        self.before_sink()
        if sink_table not in self._sink_schemas:
            self._sink_schemas[sink_table] = self._retried(
                partial(self.sink.table_schema, sink_table),
                f"reading the schema of {sink_table}",
                Operation.SINK_SCHEMA_READ,
            )
        return self._sink_schemas[sink_table]

    def forget_sink_schemas(self, source_tables: Collection[TableId]) -> None:
        """Another worker may have changed the sink tables: read them again."""
        self.before_sink()
        self._sink_schemas.clear()
        if isinstance(self.sink, SchemaCaching):
            for sink_table in {s for t in source_tables for s in self.tables.sink_tables(t)}:
                self.sink.forget_schema(sink_table)

    def ensure_sink_table(self, source_table: TableId, position: SourcePosition | None) -> None:
        """The source's schema is known (from a checkpoint, a savepoint or another table routed
        here) but a sink table it feeds is not there: it is created as a create.table would create it."""
        for sink_table in self.tables.sink_tables(source_table):
            if self.sink_schema(sink_table) is None:
                schema = self.source_schema(source_table)
                assert schema is not None
                self._route_to(source_table, sink_table, CreateTable(source_table, schema), position)

    def route_change(
        self, source_table: TableId, change: SchemaChange, position: SourcePosition | None
    ) -> None:
        """A source table's change, to every sink table it feeds (several under route-mode ALL_MATCH)."""
        for sink_table in self.tables.sink_tables(source_table):
            self._route_to(source_table, sink_table, change, position)

    def applies(self, change: SchemaChange) -> bool:
        """Whether ``change`` would be applied now at every sink table its source table feeds (one
        that does not exist yet is taken as the source table's schema would create it)."""
        source_table = change.table_id
        sink_tables = self.tables.sink_tables(source_table)
        as_created = self.source_schema(source_table) or Schema(())
        for sink_table in sink_tables:
            sink_schema = self.sink_schema(sink_table)
            for sink_change in self._sink_changes(source_table, sink_table, change, sink_schema):
                if self.router.decide(sink_change, sink_schema or as_created).action is not Action.APPLY:
                    return False
        return bool(sink_tables)

    def _route_to(
        self,
        source_table: TableId,
        sink_table: TableId,
        change: SchemaChange,
        position: SourcePosition | None,
    ) -> None:
        self.before_sink()
        with self._schema_lease(sink_table):
            # another worker may have applied the change already: decide on the sink's schema as is
            self._refresh_sink_schema(sink_table)
            sink_schema = self.sink_schema(sink_table)
            for sink_change in self._sink_changes(source_table, sink_table, change, sink_schema):
                decision = self.router.decide(sink_change, sink_schema)
                if decision.action in (Action.APPLY, Action.IGNORED):
                    after = apply_schema_change(sink_schema, decision.change)
                    try:
                        self._retried(
                            partial(
                                self._bounded,
                                partial(self.sink.apply_schema_change, decision.change, after),
                                f"applying {decision.change}",
                            ),
                            f"applying {decision.change}",
                            Operation.SINK_SCHEMA_CHANGE,
                        )
                        self._await_schema_change(sink_table, decision.change)
                    except SinkTerminalError as e:
                        decision = self.router.on_refused(decision, e)
                    self._refresh_sink_schema(sink_table)
                    sink_schema = self.sink_schema(sink_table)
                self._history(
                    source_table, sink_table, decision, position, self.tracker.note(source_table, change)
                )
                if decision.action is Action.FAIL:
                    raise SchemaChangeRefusedError(
                        decision.reason,
                        sink=self.sink.type,
                        table=str(sink_table),
                        change=str(decision.change),
                    )
        self.changes_routed += 1
        self.on_sink_changed([source_table, *self.tables.sources_of(sink_table)])

    @contextmanager
    def _schema_lease(self, sink_table: TableId) -> Iterator[None]:
        """Hold the pipeline's lease on a sink table's schema: one worker at a time changes it.

        The lease is short and renewed by a thread while it is held (an ALTER may take minutes), so
        that a worker that died holding it blocks the others for :data:`SCHEMA_LEASE_TTL_S` at most.
        """

        def waiting(holder: str) -> None:
            self.on_detail(f"waiting for worker {holder} to finish a schema change on {sink_table}")

        name, ttl = f"schema {sink_table}", SCHEMA_LEASE_TTL_S
        held = threading.Event()
        pipeline = self.settings.pipeline

        def renew() -> None:
            while not held.wait(ttl / 3):
                try:
                    self.state.take_lease(pipeline, name, self.worker, ttl)
                except Exception as e:  # the next renewal tries again; the lease lasts ttl
                    log.warning("renewing the lease %r failed: %s", name, e)

        with self.state.lease(pipeline, name, self.worker, ttl_s=ttl, waiting=waiting):
            renewer = threading.Thread(target=renew, name="ferry-schema-lease", daemon=True)
            renewer.start()
            try:
                yield
            finally:
                held.set()
                renewer.join()

    def _refresh_sink_schema(self, sink_table: TableId) -> None:
        self._sink_schemas.pop(sink_table, None)
        if isinstance(self.sink, SchemaCaching):
            self.sink.forget_schema(sink_table)

    def _await_schema_change(self, sink_table: TableId, change: SchemaChange) -> None:
        """Wait until a sink whose ALTERs run in the background has finished this one."""
        if not isinstance(self.sink, AsyncSchemaChanges):
            return
        timeout = self.settings.timeout_s
        started = time.monotonic()
        self.on_detail(f"waiting for {self.sink.type} to finish {change} (since {now_ms()} ms)")
        while self.sink.schema_change_pending(sink_table):
            if time.monotonic() - started > timeout:
                raise SchemaChangeTimeoutError(
                    f"{self.sink.type} did not finish {change} on {sink_table} within {timeout:g} s "
                    "(schema.operator.rpc-timeout)"
                )
            # a poll of a running ALTER, not a retry of an error: bounded by schema.operator.rpc-timeout
            time.sleep(self.settings.poll_s)

    def _sink_changes(
        self, source_table: TableId, sink_table: TableId, change: SchemaChange, sink_schema: Schema | None
    ) -> list[SchemaChange]:
        """The change as the sink table sees it. A table fed by several sources gets their widest
        common schema: only additions and widenings, never a drop."""
        retargeted = replace(change, table_id=sink_table)
        others = [s for s in self.tables.sources_of(sink_table) if s != source_table]
        if not others or sink_schema is None:
            return [retargeted]
        source_schema = self.source_schema(source_table)
        if source_schema is None:
            return []
        wider = widen_schemas(sink_schema, source_schema)
        return [c for c in diff_schemas(sink_table, sink_schema, wider) if c.tag != "drop.column"]

    def _history(
        self,
        source_table: TableId,
        sink_table: TableId,
        decision: Decision,
        position: SourcePosition | None,
        note: str | None = None,
    ) -> None:
        """The change's entry in the schema-change history (and the log); ``note``: how the change
        was told from the records alone (a rename proved by column positions, or not)."""
        started = self._barrier_started
        barrier_ms = 0 if started is None else int((time.monotonic() - started) * 1000)
        reason = decision.reason if note is None else f"{decision.reason}; {note}"
        log.info(
            "schema change %s on %s: %s (%s); barrier %d ms",
            decision.change,
            sink_table,
            decision.action.value,
            reason,
            barrier_ms,
            extra={
                "table": str(sink_table),
                "change": str(decision.change),
                "decision": decision.action.value,
                "barrier_ms": barrier_ms,
            },
        )
        outcome = decision.action.value
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        entry = SchemaHistoryEntry(
            str(source_table),
            str(sink_table),
            str(decision.change),
            decision.action.value,
            reason,
            None if position is None else str(position),
            now_ms(),
            barrier_ms,
        )
        self.state.add_schema_history(self.settings.pipeline, [entry])

    def _bounded(self, work: Callable[[], None], what: str) -> None:
        timeout = self.settings.timeout_s
        future = self._executor.submit(work)
        try:
            future.result(timeout=timeout)
        except FutureTimeout:
            raise SchemaChangeTimeoutError(
                f"{what} did not finish within {timeout:g} s (schema.operator.rpc-timeout)"
            ) from None


def _merged_cuts(
    saved: Mapping[str, Mapping[str, list[list[Any]]]], now: Mapping[str, Mapping[str, list[list[Any]]]]
) -> dict[str, dict[str, list[list[Any]]]]:
    """The cuts of columns dropped and added again (as saved: per table and column, each
    partition's first offset after the drop) of ``saved`` and ``now``: the later cut where both
    have a partition's (rows below it are older than the last drop)."""
    merged: dict[str, dict[str, dict[tuple[str, int], int]]] = {}
    for cuts in (saved, now):
        for table, columns in cuts.items():
            for column, marks in columns.items():
                kept = merged.setdefault(table, {}).setdefault(column, {})
                for topic, partition, offset in marks:
                    kept[(topic, partition)] = max(offset, kept.get((topic, partition), offset))
    return {
        table: {c: [[t, p, o] for (t, p), o in sorted(m.items())] for c, m in columns.items()}
        for table, columns in merged.items()
    }
