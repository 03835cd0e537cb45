"""What a sink is: a writer and a schema applier, with its capabilities declared as data.

This package is the base every sink builds on, not a sink: besides this interface it holds the
sinks' errors (:mod:`.exceptions`), how a sink declares itself (:mod:`.declaration`) and the
registry of them (:mod:`.registry`), the schema-change support matrix (:mod:`.matrix`), and the
writers sinks share: rows (:mod:`.rows`), Arrow (:mod:`.arrow`), the table formats
(:mod:`.table_format`, Iceberg and Paimon) and SQL warehouses (:mod:`.sql`).

A sink has two small roles (as Flink CDC's ``DataSink`` and ``MetadataApplier``):

- the **writer** buffers rows (:meth:`Sink.write`) and makes them durable (:meth:`Sink.flush`);
- the **schema applier** reports a table's current schema (:meth:`Sink.table_schema`) and applies
  a schema change (:meth:`Sink.apply_schema_change`).

What a sink can do with each kind of schema change is :class:`SinkCapabilities`, a piece of data
that the router reads; no sink decides LENIENT or EVOLVE for itself. Rows reach :meth:`Sink.write`
already shaped to the sink table's schema.

Optional abilities are small protocols: :class:`OffsetCommitting` for sinks whose commits also
record the source offsets they contain (exactly-once restarts), :class:`TableFlushing` for sinks
that can commit some tables' rows alone (the barrier before a schema change then commits only the
tables it concerns). :class:`RowRefusing` for sinks that set aside a row their destination refuses
and write the others.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from ferry.model.events import DataChange, SchemaChange, SchemaChangeType
from ferry.model.raw_values import RawForms
from ferry.model.schema import Schema, TableId
from ferry.model.types import DataType
from ferry.offsets import Offsets


class ChangeKind(StrEnum):
    """The kinds of schema change a sink's support is declared for: the rows of the schema-change
    matrix.

    A kind is a :class:`~ferry.model.events.SchemaChangeType`, by the same name, except for the
    two types whose cases sinks support differently, each named as a case: an added column
    appended last or placed (FIRST, BEFORE, AFTER), and a column whose type changes or whose
    nullability alone is relaxed. ``add.column.default`` is an ability of an added column's: the
    rows the table held read the column's default (declared ``apply``); a sink without it adds the
    column without its default, those rows reading NULL (``not-synced``).
    """

    CREATE_TABLE = SchemaChangeType.CREATE_TABLE.value
    ADD_COLUMN_LAST = "add.column.last"
    ADD_COLUMN_POSITIONED = "add.column.positioned"
    ADD_COLUMN_DEFAULT = "add.column.default"
    DROP_COLUMN = SchemaChangeType.DROP_COLUMN.value
    RENAME_COLUMN = SchemaChangeType.RENAME_COLUMN.value
    ALTER_COLUMN_TYPE = SchemaChangeType.ALTER_COLUMN_TYPE.value
    RELAX_NULLABILITY = "relax.nullability"
    DROP_TABLE = SchemaChangeType.DROP_TABLE.value
    TRUNCATE_TABLE = SchemaChangeType.TRUNCATE_TABLE.value
    ALTER_COLUMN_COMMENT = SchemaChangeType.ALTER_COLUMN_COMMENT.value
    ALTER_TABLE_COMMENT = SchemaChangeType.ALTER_TABLE_COMMENT.value
    #: Never an event (the tracker keeps a column nullable): no sink declares it; the matrix lists it.
    TIGHTEN_NULLABILITY = "tighten.nullability"


class Support(StrEnum):
    """What a sink does with one kind of schema change."""

    APPLY = "apply"
    APPLY_AT_END = "apply-at-end"  # a positioned add column is appended last
    UNSUPPORTED = "unsupported"  # skipped under LENIENT, fails the pipeline under EVOLVE
    NOT_SYNCED = "not-synced"  # never applied, never an error (comments on most sinks)
    IGNORED = "ignored"  # nothing to change: the schema travels with each row (Kafka)


@dataclass(frozen=True, slots=True)
class SinkCapabilities:
    changes: Mapping[ChangeKind, Support]
    #: Under LENIENT, a rename the sink cannot do is applied as a new column (Hologres).
    lenient_rename_as_new_column: bool = False
    #: The sink accepts TRY_EVOLVE (Hologres does not).
    try_evolve: bool = True
    #: Column names are matched ignoring case, and a change is retried with the sink's spelling.
    case_insensitive_columns: bool = False
    #: A column added NOT NULL is added nullable (rows written before it have no value: Hologres).
    nullable_added_columns: bool = False
    notes: Mapping[ChangeKind, str] = field(default_factory=dict)

    def support(self, kind: ChangeKind) -> Support:
        return self.changes.get(kind, Support.UNSUPPORTED)


#: Comments are never synced (most sinks).
COMMENTS_NOT_SYNCED: Mapping[ChangeKind, Support] = {
    ChangeKind.ALTER_COLUMN_COMMENT: Support.NOT_SYNCED,
    ChangeKind.ALTER_TABLE_COMMENT: Support.NOT_SYNCED,
}

#: A table format with schema evolution (Iceberg, Paimon): every column change, no table drop or
#: truncate.
TABLE_FORMAT_CHANGES: Mapping[ChangeKind, Support] = {
    ChangeKind.CREATE_TABLE: Support.APPLY,
    ChangeKind.ADD_COLUMN_LAST: Support.APPLY,
    ChangeKind.ADD_COLUMN_POSITIONED: Support.APPLY,
    ChangeKind.ADD_COLUMN_DEFAULT: Support.APPLY,
    ChangeKind.DROP_COLUMN: Support.APPLY,
    ChangeKind.RENAME_COLUMN: Support.APPLY,
    ChangeKind.ALTER_COLUMN_TYPE: Support.APPLY,
    ChangeKind.RELAX_NULLABILITY: Support.APPLY,
    ChangeKind.DROP_TABLE: Support.UNSUPPORTED,
    ChangeKind.TRUNCATE_TABLE: Support.UNSUPPORTED,
    **COMMENTS_NOT_SYNCED,
}


class Sink(ABC):
    """A destination of change events. Subclasses set :attr:`capabilities` and :attr:`type`."""

    #: The sink type, as job files name it (a test double may stand in for another per instance).
    type: str
    #: Declared per sink class; a test double may set its own per instance.
    capabilities: SinkCapabilities

    @abstractmethod
    def table_schema(self, table_id: TableId) -> Schema | None:
        """The table's current schema at the sink, or ``None`` when it does not exist."""

    @abstractmethod
    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        """Apply one schema change; ``schema_after`` is the table's schema once it is applied."""

    @abstractmethod
    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        """Buffer row changes for a table; their rows already have the sink table's columns."""

    @abstractmethod
    def flush(self, offsets: Offsets) -> None:
        """Make every buffered row durable; ``offsets`` are the source positions they reach."""

    def sink_type(self, source_type: DataType) -> DataType:
        """The type this sink stores for a source type (its type mapping, read back as ferry types).

        Two source types with the same sink type need no change at the sink (an Iceberg table has
        no SMALLINT: a SMALLINT → INT change is already in place). The default keeps every type.
        """
        return source_type

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""


@runtime_checkable
class OffsetCommitting(Protocol):
    """A sink whose commits carry the source offsets they contain (Iceberg, Paimon)."""

    def committed_offsets(self, table_id: TableId) -> dict[tuple[str, int], int]:
        """Per (topic, partition), the next offset not yet committed to this table."""
        ...


@runtime_checkable
class TableFlushing(Protocol):
    """A sink that commits the rows of some of its tables alone, each commit carrying the offsets
    (Iceberg, Paimon; with :class:`OffsetCommitting`, the barrier before a schema change that
    needs one commits only the tables the change concerns)."""

    def flush_tables(self, table_ids: Collection[TableId], offsets: Offsets) -> None:
        """Make the buffered rows of these tables durable (the others stay buffered); ``offsets``
        are the source positions their rows reach, recorded with each table's commit."""
        ...


@dataclass(frozen=True, slots=True)
class RefusedRow:
    """A row the destination refused, and why (naming the sink table and, where the destination
    does, the column)."""

    change: DataChange
    reason: str


#: Where a sink hands the rows it set aside (the pipeline sends them to the dead-letter topic
#: and stores them there before it returns).
RefusedRows = Callable[[Sequence[RefusedRow]], None]


@runtime_checkable
class RowRefusing(Protocol):
    """A sink that sets aside a row its destination refuses for its data, and writes the others:
    when a write fails for a row, it writes the rows one by one, hands those refused to the
    handler given here (before it commits what it wrote, where it can), and goes on. Without a
    handler the write fails as it did."""

    def on_refused(self, handler: RefusedRows) -> None:
        """From now on, refused rows go to ``handler``."""
        ...


@runtime_checkable
class TableDropping(Protocol):
    """A sink that can drop a table for a replay to rebuild it (Iceberg, Paimon)."""

    def drop_table(self, table_id: TableId) -> bool:
        """Drop the table; False when it did not exist."""
        ...


@runtime_checkable
class SchemaCaching(Protocol):
    """A sink that keeps the schemas it read: told to read a table's again when another worker of
    the pipeline may have changed it."""

    def forget_schema(self, table_id: TableId) -> None:
        """The next :meth:`Sink.table_schema` of this table reads it from the sink."""
        ...


@runtime_checkable
class AsyncSchemaChanges(Protocol):
    """A sink whose ALTERs finish in the background (StarRocks, SelectDB in batch mode): rows are
    written only once the change is done, and the wait is bounded by the pipeline."""

    def schema_change_pending(self, table_id: TableId) -> bool:
        """True while a schema change the sink accepted for this table is still running."""
        ...


@runtime_checkable
class RawValuesWriting(Protocol):
    """A sink that takes rows whose epoch and decimal columns are as the source wrote them (see
    :mod:`ferry.model.raw_values`) and converts them itself, a column at a time."""

    def write_raw(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], forms: RawForms
    ) -> None:
        """:meth:`Sink.write`, the values of the columns of ``forms`` raw (in that form) in some
        rows (those of another type are converted already)."""
        ...


@runtime_checkable
class PartialRowsWriting(Protocol):
    """A sink that writes partial rows exactly: an update whose new row lacks some values
    (:data:`~ferry.model.unavailable.UNAVAILABLE`: an unchanged TOASTed value Debezium did not
    get) keeps, in those columns, the values the sink's table holds. Without it, such a row goes
    to the dead-letter destination."""

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """Before :meth:`Sink.write` of ``changes``, of which those at the indexes ``partial`` are
        partial: fill their values in place where the sink must (a sink that leaves the columns
        out of its writes fills none), and return the indexes it cannot write exactly, each with
        the reason (they are sent to the dead-letter destination, not written)."""
        ...


@runtime_checkable
class PlaceholderWriting(Protocol):
    """A sink that writes a value the source did not send as the source wrote it: its
    placeholder (the Kafka sink: the record as Debezium wrote it)."""

    #: The source's placeholder (Debezium's ``unavailable.value.placeholder``); set by the worker.
    unavailable_value_placeholder: str


__all__ = [
    "COMMENTS_NOT_SYNCED",
    "TABLE_FORMAT_CHANGES",
    "AsyncSchemaChanges",
    "ChangeKind",
    "OffsetCommitting",
    "PartialRowsWriting",
    "PlaceholderWriting",
    "RawValuesWriting",
    "RefusedRow",
    "RefusedRows",
    "RowRefusing",
    "SchemaCaching",
    "Sink",
    "SinkCapabilities",
    "Support",
    "TableDropping",
    "TableFlushing",
]
