"""Maxwell JSON (``maxwell-json``).

Row messages: ``type`` ``insert``/``update``/``delete`` (and ``bootstrap-insert`` for the rows of a
bootstrap, read as snapshot rows), the row in ``data``, the previous values of the changed columns
in ``old``, ``database``/``table``, and ``primary_key_columns`` when Maxwell is configured to send
them. Values are native JSON, so the schema is inferred from them. ``ts`` is in seconds.

With ``--output_ddl`` Maxwell also sends ``table-create``, ``table-alter`` and ``table-drop``
messages; each becomes a :class:`~ferry.model.events.SchemaHint` (ordered: Maxwell writes DDL in
the table's partition) read from the ``sql`` text, or from the ``def`` (and ``old``) table
definitions when there is no usable text. Bootstrap markers and database-level DDL carry no row
and no table change, and give no event.

A record whose key (Maxwell's ``hash`` or ``array`` key format) names another table or other
primary key values than its row is a bad record with both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats import (
    InferredTable,
    JsonMessageDecoder,
    check_key,
    check_key_values,
    hints,
    json_key,
)
from ferry.connectors.formats.ddl import parse_ddl
from ferry.connectors.formats.mysql_types import mysql_type
from ferry.connectors.record import RecordLike
from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnType,
    CreateTable,
    DataChange,
    DropColumn,
    DropTable,
    Event,
    Op,
    SchemaChange,
    SchemaObserved,
    after,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DataType

_OPS = {"insert": Op.INSERT, "update": Op.UPDATE, "delete": Op.DELETE, "bootstrap-insert": Op.READ}
_DDL = frozenset({"table-create", "table-alter", "table-drop"})
_NO_EVENT = frozenset(
    {"bootstrap-start", "bootstrap-complete", "database-create", "database-alter", "database-drop"}
)
_new = tuple.__new__
Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class _Table:
    table_id: TableId
    inferred: InferredTable = field(default_factory=InferredTable.empty)
    emitted: Schema | None = None


class MaxwellJsonDecoder(JsonMessageDecoder):
    """Decodes ``maxwell-json`` records (see the module documentation)."""

    message_kind = "a Maxwell message"

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str, int], _Table] = {}

    def decode_record(self, record: RecordLike, out: list[Event]) -> None:
        position, message = self.parse(record)
        kind = message.get("type")
        op = _OPS.get(kind)  # type: ignore[arg-type]
        if op is None:
            if kind in _DDL:
                out.extend(
                    hints(_ddl(kind, message), _text(message.get("sql")), ordered=True, position=position)
                )
                return
            if kind in _NO_EVENT:
                return
            raise self.unknown_type(kind)
        database, name = self.message_table(message)
        data = message.get("data")
        if type(data) is not dict:
            raise DecodeError("'data' must be a JSON object")
        old = message.get("old")
        if old is not None and type(old) is not dict:
            raise DecodeError("'old' must be a JSON object")
        keys = message.get("primary_key_columns") or []
        if type(keys) is not list or any(type(k) is not str for k in keys):
            raise DecodeError("'primary_key_columns' must be a list of column names")
        before: Row | None
        row: Row | None
        if op is Op.DELETE:
            before, row = data, None
        elif op is Op.UPDATE:
            # ``old`` holds the changed columns only: the before-image is the row overlaid with it.
            before, row = ({**data, **old} if old else None), data
        else:
            before, row = None, data
        check_key_values(keys, data)
        _check_key(record.key(), database, name, data)
        table = self._table(database, name, position.partition)
        inferred = table.inferred
        changed = inferred.with_keys(tuple(keys))
        if row is not None and inferred.observe(row):
            changed = True
        if before is not None and inferred.observe(before):
            changed = True
        schema = inferred.rebuild() if changed else inferred.schema
        if table.emitted is not schema:
            if table.emitted is None or table.emitted != schema:
                out.append(SchemaObserved(table.table_id, schema, position))
            table.emitted = schema
        ts = message.get("ts")
        ts_ms = message.get("ts_ms") or (ts * 1000 if type(ts) is int else None)
        out.append(_new(DataChange, (table.table_id, op, before, row, position, ts_ms)))

    def _table(self, database: str, name: str, partition: int) -> _Table:
        key = (database, name, partition)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table(TableId(None, database, name))
        return table


def _check_key(key: bytes | None, database: str, table: str, row: Row) -> None:
    """A record whose key (Maxwell's ``kafka_key_format``: ``hash``,
    ``{"database":"shop","table":"orders","pk.id":42}``, or ``array``,
    ``["shop","orders",[{"id":42}]]``) names another table or other key values than its row is a bad
    record with both. A key of a table without a primary key (``_uuid``), or of another shape, names
    no values."""
    document = json_key(key)
    if type(document) is dict:
        named = (document.get("database"), document.get("table"))
        values = {n[3:]: v for n, v in document.items() if n.startswith("pk.")}
    elif type(document) is list and len(document) == 3 and type(document[2]) is list:
        named = (document[0], document[1])
        values = {n: v for pair in document[2] if type(pair) is dict for n, v in pair.items()}
    else:
        return
    if named not in ((None, None), (database, table)):
        raise DecodeError(
            f"the record key names table {named[0]}.{named[1]}, its row is of {database}.{table}"
        )
    check_key(values, row, columns=True)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _ddl(kind: str, message: Row) -> list[SchemaChange]:
    database = message.get("database")
    default = database if isinstance(database, str) and database else None
    sql = _text(message.get("sql"))
    error: DecodeError | None = None
    if sql.strip():
        try:
            changes = parse_ddl(sql, default_database=default)
        except DecodeError as e:
            error = e
        else:
            if changes:
                return changes
    definition = message.get("def")
    table_id = _table_id(message, definition, default)
    if kind == "table-drop":
        if table_id is None:
            raise error or DecodeError("a table-drop message names no table")
        return [DropTable(table_id)]
    if type(definition) is not dict or table_id is None:
        raise error or DecodeError(f"a {kind} message without 'sql' or 'def'")
    schema = schema_of(definition)
    if kind == "table-create":
        return [CreateTable(table_id, schema)]
    previous = message.get("old")
    if type(previous) is not dict:
        raise error or DecodeError("a table-alter message without 'sql' or 'old'")
    return _diff(table_id, schema_of(previous), schema)


def _table_id(message: Row, definition: Any, default: str | None) -> TableId | None:
    source = definition if type(definition) is dict else message
    name = source.get("table") or message.get("table")
    database = source.get("database") or default
    return TableId(None, str(database) if database else None, str(name)) if name else None


def schema_of(definition: Row) -> Schema:
    """The schema in a Maxwell table definition (``def``: ``columns`` and ``primary-key``)."""
    keys = [k for k in definition.get("primary-key") or [] if isinstance(k, str)]
    columns: list[Column] = []
    for column in definition.get("columns") or []:
        if type(column) is not dict or not isinstance(column.get("name"), str):
            raise DecodeError(f"a column definition needs a name: {column!r}")
        name = column["name"]
        columns.append(Column(name, _column_type(column).with_nullable(name not in keys)))
    names = {c.name for c in columns}
    return Schema(tuple(columns), tuple(k for k in keys if k in names))


def _column_type(column: Row) -> DataType:
    kind = str(column.get("type", "")).upper()
    numbers: list[int] = []
    if kind in ("DECIMAL", "NUMERIC") and column.get("precision") is not None:
        numbers = [int(column["precision"]), int(column.get("scale") or 0)]
    elif column.get("column-length") is not None:
        numbers = [int(column["column-length"])]
    values = column.get("enum-values") or column.get("set-values") or ()
    try:
        return mysql_type(kind, numbers, unsigned=column.get("signed") is False, values=values).data_type
    except DecodeError as e:
        raise DecodeError(f"column {column['name']!r}: {e.reason}") from None


def _diff(table_id: TableId, old: Schema, new: Schema) -> list[SchemaChange]:
    """The changes from ``old`` to ``new`` column by column (renames show as a drop and an add)."""
    changes: list[SchemaChange] = [DropColumn(table_id, c.name) for c in old.columns if c.name not in new]
    previous: str | None = None
    for column in new.columns:
        existing = old.find(column.name)
        if existing is None:
            changes.append(AddColumn(table_id, column, after(previous) if previous else FIRST))
        elif existing.type != column.type:
            changes.append(AlterColumnType(table_id, column.name, column.type, existing.type))
        previous = column.name
    return changes
