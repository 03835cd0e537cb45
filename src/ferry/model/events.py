"""The events that flow through a pipeline: data changes and schema changes.

Data changes are the hot path: one :class:`DataChange` per source record, an immutable tuple
(cheap to build). Schema changes are rare: one small frozen class per kind (a :class:`TableChange`),
each with its :class:`SchemaChangeType` as its tag, the word users write in YAML (``add.column``,
``drop.table`` ...; the same words as Flink CDC's ``SchemaChangeEventType``), joined in the
:data:`SchemaChange` union.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple, get_args

from ferry.model.raw_values import RawValues
from ferry.model.schema import Column, Schema, TableId, schema_from_dict, schema_to_dict
from ferry.model.types import DataType, parse

Row = dict[str, Any]


class Op(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    READ = "read"  # a snapshot row: an insert that did not come from the log


class SourcePosition(NamedTuple):
    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"topic {self.topic}, partition {self.partition}, offset {self.offset}"


class DataChange(NamedTuple):
    """One row-level change. ``before`` is set for update/delete, ``after`` for insert/update/read."""

    table_id: TableId
    op: Op
    before: Row | None
    after: Row | None
    position: SourcePosition | None = None
    ts_ms: int | None = None

    @property
    def row(self) -> Row:
        """The row the sink keeps afterwards (for a delete: the row that goes)."""
        row = self.after if self.op is not Op.DELETE else self.before
        return row if row is not None else {}


class ColumnPositionKind(StrEnum):
    FIRST = "FIRST"
    LAST = "LAST"
    BEFORE = "BEFORE"
    AFTER = "AFTER"


@dataclass(frozen=True, slots=True)
class ColumnPosition:
    kind: ColumnPositionKind = ColumnPositionKind.LAST
    reference: str | None = None

    def __str__(self) -> str:
        return self.kind.value + (f" {self.reference}" if self.reference else "")


LAST = ColumnPosition()
FIRST = ColumnPosition(ColumnPositionKind.FIRST)


def after(column: str) -> ColumnPosition:
    return ColumnPosition(ColumnPositionKind.AFTER, column)


def before(column: str) -> ColumnPosition:
    return ColumnPosition(ColumnPositionKind.BEFORE, column)


class SchemaChangeType(StrEnum):
    """The types of schema change, by the names users write in YAML (``include.schema.changes``):
    Flink CDC's ``SchemaChangeEventType`` words. Each event class's :attr:`TableChange.tag`."""

    CREATE_TABLE = "create.table"
    ADD_COLUMN = "add.column"
    DROP_COLUMN = "drop.column"
    RENAME_COLUMN = "rename.column"
    ALTER_COLUMN_TYPE = "alter.column.type"
    ALTER_COLUMN_COMMENT = "alter.column.comment"
    ALTER_TABLE_COMMENT = "alter.table.comment"
    DROP_TABLE = "drop.table"
    TRUNCATE_TABLE = "truncate.table"


@dataclass(frozen=True, slots=True)
class TableChange:
    """What every schema change has: its type and the table it changes.

    Written as ``<tag> <table> <details>``; the details are the change's other fields unless a
    change says otherwise (:meth:`details`).
    """

    tag: ClassVar[SchemaChangeType]
    table_id: TableId

    def details(self) -> tuple[str, ...]:
        return tuple(str(getattr(self, f.name)) for f in fields(self)[1:])

    def __str__(self) -> str:
        return " ".join((self.tag, str(self.table_id), *self.details()))


@dataclass(frozen=True, slots=True)
class CreateTable(TableChange):
    tag = SchemaChangeType.CREATE_TABLE
    schema: Schema

    def details(self) -> tuple[str, ...]:
        return (self.schema.describe(),)


@dataclass(frozen=True, slots=True)
class AddColumn(TableChange):
    tag = SchemaChangeType.ADD_COLUMN
    column: Column
    position: ColumnPosition = LAST


@dataclass(frozen=True, slots=True)
class DropColumn(TableChange):
    tag = SchemaChangeType.DROP_COLUMN
    column_name: str


@dataclass(frozen=True, slots=True)
class RenameColumn(TableChange):
    tag = SchemaChangeType.RENAME_COLUMN
    old_name: str
    new_name: str

    def details(self) -> tuple[str, ...]:
        return (self.old_name, "->", self.new_name)


@dataclass(frozen=True, slots=True)
class AlterColumnType(TableChange):
    """A new type for a column; nullability is part of the type (relaxing it is this change too)."""

    tag = SchemaChangeType.ALTER_COLUMN_TYPE
    column_name: str
    new_type: DataType
    old_type: DataType | None = None

    def details(self) -> tuple[str, ...]:
        return (self.column_name, str(self.old_type or "?"), "->", str(self.new_type))


@dataclass(frozen=True, slots=True)
class AlterColumnComment(TableChange):
    tag = SchemaChangeType.ALTER_COLUMN_COMMENT
    column_name: str
    comment: str | None

    def details(self) -> tuple[str, ...]:
        return (self.column_name, repr(self.comment))


@dataclass(frozen=True, slots=True)
class AlterTableComment(TableChange):
    tag = SchemaChangeType.ALTER_TABLE_COMMENT
    comment: str | None

    def details(self) -> tuple[str, ...]:
        return (repr(self.comment),)


@dataclass(frozen=True, slots=True)
class DropTable(TableChange):
    tag = SchemaChangeType.DROP_TABLE


@dataclass(frozen=True, slots=True)
class TruncateTable(TableChange):
    tag = SchemaChangeType.TRUNCATE_TABLE


SchemaChange = (
    CreateTable
    | AddColumn
    | DropColumn
    | RenameColumn
    | AlterColumnType
    | AlterColumnComment
    | AlterTableComment
    | DropTable
    | TruncateTable
)

#: Every schema-change class, in the order of :class:`SchemaChangeType`.
SCHEMA_CHANGE_TYPES: tuple[type[SchemaChange], ...] = get_args(SchemaChange)
#: Tag → class, for config (``include.schema.changes``) and golden specs.
SCHEMA_CHANGE_TAGS: dict[SchemaChangeType, type[SchemaChange]] = {t.tag: t for t in SCHEMA_CHANGE_TYPES}


def is_schema_change(event: object) -> bool:
    return isinstance(event, SCHEMA_CHANGE_TYPES)


def schema_change_to_dict(change: SchemaChange) -> dict[str, Any]:
    """A JSON-able form of a schema change, for the state store (:func:`schema_change_from_dict`)."""
    data: dict[str, Any] = {"change": change.tag.value, "table": str(change.table_id)}
    match change:
        case CreateTable(schema=schema):
            data["schema"] = schema_to_dict(schema)
        case AddColumn(column=column, position=position):
            data["column"] = schema_to_dict(Schema((column,)))["columns"]
            data["position"] = [position.kind.value, position.reference]
        case DropColumn(column_name=name):
            data["column"] = name
        case RenameColumn(old_name=old, new_name=new):
            data["column"], data["new_name"] = old, new
        case AlterColumnType(column_name=name, new_type=new_type, old_type=old_type):
            data["column"], data["type"] = name, str(new_type)
            data["old_type"] = None if old_type is None else str(old_type)
        case AlterColumnComment(column_name=name, comment=comment):
            data["column"], data["comment"] = name, comment
        case AlterTableComment(comment=comment):
            data["comment"] = comment
    return data


def schema_change_from_dict(data: dict[str, Any]) -> SchemaChange:
    """The schema change :func:`schema_change_to_dict` wrote."""
    table_id, tag = TableId.parse(data["table"]), SchemaChangeType(data["change"])
    if tag is SchemaChangeType.CREATE_TABLE:
        return CreateTable(table_id, schema_from_dict(data["schema"]))
    if tag is SchemaChangeType.ADD_COLUMN:
        kind, reference = data["position"]
        column = schema_from_dict({"columns": data["column"]}).columns[0]
        return AddColumn(table_id, column, ColumnPosition(ColumnPositionKind(kind), reference))
    if tag is SchemaChangeType.DROP_COLUMN:
        return DropColumn(table_id, data["column"])
    if tag is SchemaChangeType.RENAME_COLUMN:
        return RenameColumn(table_id, data["column"], data["new_name"])
    if tag is SchemaChangeType.ALTER_COLUMN_TYPE:
        old_type = data.get("old_type")
        return AlterColumnType(
            table_id, data["column"], parse(data["type"]), None if old_type is None else parse(old_type)
        )
    if tag is SchemaChangeType.ALTER_COLUMN_COMMENT:
        return AlterColumnComment(table_id, data["column"], data["comment"])
    if tag is SchemaChangeType.ALTER_TABLE_COMMENT:
        return AlterTableComment(table_id, data["comment"])
    return SCHEMA_CHANGE_TAGS[tag](table_id)  # type: ignore[call-arg]


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that cannot be turned into events; it goes to the dead-letter destination."""

    position: SourcePosition
    reason: str
    key: bytes | None
    value: bytes | None

    def __str__(self) -> str:
        return f"bad record at {self.position}: {self.reason}"


@dataclass(frozen=True, slots=True)
class SchemaObserved:
    """The whole schema a source says one of its tables has now.

    Emitted by a decoder when the schema a record carries (Debezium's envelope, Canal's
    ``mysqlType``, an Avro writer schema) differs from the last one it saw for that table and
    partition, and for each table in a DDL event that lists whole tables (Debezium's
    ``tableChanges``). The schema tracker diffs it against what it knows; ``ddl`` (when the source
    gave one) tells a rename from a drop plus an add.
    """

    table_id: TableId
    schema: Schema
    position: SourcePosition | None = None
    ddl: str | None = None
    #: The source connector that wrote the record (Debezium's ``source.connector``): ``postgresql``
    #: orders its columns by ``attnum``, which proves some renames (:mod:`ferry.pipeline.positions`).
    connector: str | None = None
    #: Where the DDL statement stands in the source's log (Debezium's schema-change topic): a column
    #: dropped and added again is told apart in the rows by it (:mod:`ferry.pipeline.truncates`).
    source_order: tuple[str, int, int] | None = None


@dataclass(frozen=True, slots=True)
class SchemaHint:
    """Schema changes named by DDL text (Canal ``isDdl``, Maxwell ``table-alter``, Debezium ``ddl``).

    ``ordered`` says whether the DDL travels in the same partition as the table's rows (Canal,
    Maxwell): then it is applied where it stands. Debezium's schema-change topic is not ordered
    with the data topics, so its column changes only explain the next drift seen in records.
    """

    table_id: TableId
    changes: tuple[SchemaChange, ...]
    ddl: str
    ordered: bool
    position: SourcePosition | None = None
    #: Where the DDL stands in the source's log (a truncate put in order with other partitions).
    source_order: tuple[str, int, int] | None = None


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A record with a key and no value: Debezium writes one after each delete
    (``tombstones.on.delete``) so that log compaction can remove the key. Nothing to write: the
    runner counts it and moves past it."""

    position: SourcePosition
    key: bytes | None


#: Everything a decoder gives (RawValues: see :mod:`ferry.model.raw_values`).
Event = DataChange | BadRecord | SchemaObserved | SchemaHint | Tombstone | RawValues
