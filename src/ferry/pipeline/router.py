"""The schema-change router: what happens to each schema change at a sink, decided in one place.

For every change the router intersects what the job accepts (``include.schema.changes`` /
``exclude.schema.changes``) with what the sink declares it can do (its capabilities), compares the
change with the sink's actual schema (so a replay never applies it twice), and lets the
behaviour decide: apply it (possibly rewritten: a positioned column appended last, a rename added
as a new column), skip it, or fail the pipeline. No sink implements LENIENT or EVOLVE itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from ferry.model.apply import is_applied
from ferry.model.events import (
    LAST,
    AddColumn,
    AlterColumnType,
    ColumnPositionKind,
    CreateTable,
    RenameColumn,
    SchemaChange,
)
from ferry.model.schema import Column, Schema
from ferry.sinks.base import ChangeKind, Sink, Support


class SchemaChangeBehavior(StrEnum):
    EXCEPTION = "EXCEPTION"
    IGNORE = "IGNORE"
    LENIENT = "LENIENT"
    TRY_EVOLVE = "TRY_EVOLVE"
    EVOLVE = "EVOLVE"


class Action(StrEnum):
    APPLY = "apply"
    #: The sink keeps no schema to change (Kafka: the schema travels with each row); it is told
    #: the new schema so that later rows carry it.
    IGNORED = "ignored"
    SKIP = "skip"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    change: SchemaChange
    reason: str
    kind: ChangeKind | None = None

    def __str__(self) -> str:
        return f"{self.action.value} {self.change}: {self.reason}"


def change_kind(change: SchemaChange, sink_schema: Schema | None) -> ChangeKind:
    """The matrix's kind of a change: its type, or for an added column or a type change, which case
    of it (a positioned add, a nullability relaxed)."""
    match change:
        case AddColumn(position=position):
            is_last = position.kind is ColumnPositionKind.LAST or (
                position.kind is ColumnPositionKind.AFTER
                and sink_schema is not None
                and sink_schema.columns
                and sink_schema.columns[-1].name == position.reference
            )
            return ChangeKind.ADD_COLUMN_LAST if is_last else ChangeKind.ADD_COLUMN_POSITIONED
        case AlterColumnType(column_name=name, new_type=new_type, old_type=old_type):
            current = sink_schema.find(name) if sink_schema is not None else None
            base = current.type if current is not None else old_type
            if base is not None and base.same_ignoring_nullability(new_type):
                return ChangeKind.RELAX_NULLABILITY
            return ChangeKind.ALTER_COLUMN_TYPE
    return ChangeKind(change.tag)


def is_applied_at_sink(sink: Sink, sink_schema: Schema | None, change: SchemaChange) -> bool:
    """Whether the sink's schema already shows ``change``, comparing types as the sink stores them."""
    if isinstance(change, AlterColumnType):
        col = sink_schema.find(change.column_name) if sink_schema is not None else None
        if col is None:
            return False
        wanted = sink.sink_type(change.new_type)
        have = col.type
        if wanted == have:
            return True
        # a relaxed column stays relaxed; tightening never reaches the sink
        return wanted.same_ignoring_nullability(have) and have.nullable
    if isinstance(change, AddColumn) and sink_schema is not None:
        return sink_schema.find(change.column.name) is not None
    return is_applied(sink_schema, change)


class SchemaChangeRouter:
    """Decides the fate of each schema change for one sink under one behaviour."""

    def __init__(
        self,
        sink: Sink,
        behavior: SchemaChangeBehavior,
        accepted_tags: Iterable[str],
        *,
        create_tables: bool = True,
    ) -> None:
        self.sink = sink
        self.behavior = behavior
        self.accepted_tags = frozenset(accepted_tags)
        #: ``sink.auto-create-tables``: a sink table that does not exist is created (else its rows
        #: go to the dead-letter destination, as Kafka Connect's ``auto.create: false`` has them fail).
        self.create_tables = create_tables

    def decide(self, change: SchemaChange, sink_schema: Schema | None) -> Decision:
        kind = change_kind(change, sink_schema)
        if isinstance(change, CreateTable):
            # creating the table is what lets rows be written at all: every behaviour does it
            return self._create(change, sink_schema, kind)
        if is_applied_at_sink(self.sink, sink_schema, change):
            return Decision(Action.SKIP, change, "already applied at the sink", kind)
        if sink_schema is None:
            return Decision(Action.SKIP, change, "the sink table does not exist", kind)
        if self.behavior is SchemaChangeBehavior.EXCEPTION:
            return Decision(
                Action.FAIL,
                change,
                f"schema change behavior EXCEPTION refuses every schema change ({kind.value})",
                kind,
            )
        if change.tag not in self.accepted_tags:
            return Decision(
                Action.SKIP, change, f"{change.tag} is not accepted by the job's schema changes", kind
            )
        if self.behavior is SchemaChangeBehavior.IGNORE:
            return Decision(Action.SKIP, change, "schema change behavior IGNORE", kind)
        capabilities = self.sink.capabilities
        if (
            isinstance(change, RenameColumn)
            and self.behavior is SchemaChangeBehavior.LENIENT
            and capabilities.lenient_rename_as_new_column
        ):
            return self._rename_as_new_column(change, sink_schema, kind)
        if (
            isinstance(change, AddColumn)
            and capabilities.nullable_added_columns
            and not change.column.type.nullable
        ):
            column = replace(change.column, type=change.column.type.with_nullable(True))
            change = replace(change, column=column)
        without_default = ""
        if (
            isinstance(change, AddColumn)
            and change.column.default is not None
            and capabilities.support(ChangeKind.ADD_COLUMN_DEFAULT)
            in (Support.UNSUPPORTED, Support.NOT_SYNCED)
        ):
            # the column still comes; the rows the table holds read NULL in it
            change = replace(change, column=replace(change.column, default=None))
            without_default = f" (without its default: {self.sink.type} does not backfill it)"
        support = capabilities.support(kind)
        if support is Support.APPLY:
            return Decision(Action.APPLY, change, "supported" + without_default, kind)
        if support is Support.APPLY_AT_END:
            assert isinstance(change, AddColumn)
            return Decision(
                Action.APPLY,
                replace(change, position=LAST),
                f"{self.sink.type} only appends columns: added last" + without_default,
                kind,
            )
        if support is Support.IGNORED:
            return Decision(
                Action.IGNORED, change, f"{self.sink.type} keeps no schema: it travels with each row", kind
            )
        if support is Support.NOT_SYNCED:
            return Decision(
                Action.SKIP, change, f"{self.sink.type} does not sync {kind.value} ({support.value})", kind
            )
        # unsupported by the sink
        if self.behavior is SchemaChangeBehavior.EVOLVE:
            return Decision(
                Action.FAIL,
                change,
                f"sink {self.sink.type} does not support {kind.value} on table {change.table_id} "
                f"({change}) and schema change behavior is EVOLVE",
                kind,
            )
        return Decision(Action.SKIP, change, f"{self.sink.type} does not support {kind.value}", kind)

    def _rename_as_new_column(self, change: RenameColumn, sink_schema: Schema, kind: ChangeKind) -> Decision:
        old = sink_schema.find(change.old_name)
        if old is None:
            return Decision(Action.SKIP, change, f"{change.old_name} is not a column at the sink", kind)
        if sink_schema.find(change.new_name) is not None:
            # routed again after a restart: the new column came the first time
            return Decision(Action.SKIP, change, "already applied at the sink (as a new column)", kind)
        column = Column(change.new_name, old.type.with_nullable(True), old.comment)
        return Decision(
            Action.APPLY,
            AddColumn(change.table_id, column, LAST),
            f"LENIENT rename at {self.sink.type}: {change.new_name} added as a new column, "
            f"{change.old_name} kept and NULL from now on",
            kind,
        )

    def _create(self, change: CreateTable, sink_schema: Schema | None, kind: ChangeKind) -> Decision:
        if sink_schema is None and not self.create_tables:
            return Decision(
                Action.SKIP,
                change,
                "the sink table does not exist and sink.auto-create-tables is false: "
                "its rows go to the dead-letter destination",
                kind,
            )
        if sink_schema is None:
            return Decision(Action.APPLY, change, "new table", kind)
        wanted = change.schema
        # a sink may have appended its partition keys to the key (Paimon, as Flink CDC creates it)
        keyed = wanted.primary_keys + tuple(
            k for k in sink_schema.partition_keys if k not in wanted.primary_keys
        )
        if (
            wanted.primary_keys
            and sink_schema.primary_keys
            and sink_schema.primary_keys not in (wanted.primary_keys, keyed)
        ):
            return Decision(
                Action.FAIL,
                change,
                f"table {change.table_id} exists at sink {self.sink.type} with an incompatible schema: "
                f"sink has {sink_schema.describe()}, source has {wanted.describe()}",
                kind,
            )
        return Decision(Action.SKIP, change, "the table already exists", kind)

    def on_refused(self, decision: Decision, error: Exception) -> Decision:
        """The sink refused a change while applying it: TRY_EVOLVE and LENIENT go on, EVOLVE fails."""
        if self.behavior is SchemaChangeBehavior.EVOLVE or isinstance(decision.change, CreateTable):
            return Decision(
                Action.FAIL,
                decision.change,
                f"sink {self.sink.type} refused {decision.change}: {error}",
                decision.kind,
            )
        return Decision(
            Action.SKIP, decision.change, f"refused by the sink, rows adapted: {error}", decision.kind
        )
