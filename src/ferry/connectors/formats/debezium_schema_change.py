"""Debezium's schema-change topic (``debezium-schema-change``).

Each message (with or without the Kafka Connect envelope) has ``databaseName``, ``schemaName``, the
statement in ``ddl`` and ``tableChanges``: for each table it changed, ``type`` (``CREATE``,
``ALTER``, ``DROP``), its ``id`` (``"db"."table"``) and, except for drops, the whole ``table``
after the change (columns with ``jdbcType``, ``typeName``, ``length``, ``scale``, ``optional``,
``position``, ``comment``; ``primaryKeyColumnNames``).

A ``CREATE`` or ``ALTER`` becomes a :class:`~ferry.model.events.SchemaObserved` carrying the
table's whole schema and the DDL; a ``DROP`` a :class:`~ferry.model.events.SchemaHint` with a
``drop.table``. This topic is not ordered with the data topics, so hints from it are unordered.
Renames cannot be told from a whole-table schema, nor a column dropped and added again under its
name: when the DDL text renames or drops columns (``RENAME COLUMN``, ``CHANGE COLUMN``, ``DROP
COLUMN``), an unordered hint with the ``rename.column`` and ``drop.column`` changes comes first, with
the statement's place in the binlog.

Column types: MySQL and MariaDB columns are read from their MySQL type name (see
:mod:`mysql_types`); other connectors' from the JDBC type code with length and scale.
"""

from __future__ import annotations

import re
from typing import Any

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats import JsonMessageDecoder
from ferry.connectors.formats.ddl import mysql_string, parse_ddl
from ferry.connectors.formats.mysql_types import mysql_type
from ferry.connectors.formats.source_order import source_order
from ferry.connectors.record import RecordLike
from ferry.model import types as t
from ferry.model.defaults import literal_default
from ferry.model.events import (
    DropColumn,
    DropTable,
    Event,
    RenameColumn,
    SchemaChange,
    SchemaHint,
    SchemaObserved,
)
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import CHARACTER, DataType

_ID_PART = re.compile(r'"((?:[^"]|"")*)"|`((?:[^`]|``)*)`|([^.]+)')
_MYSQL_CONNECTORS = frozenset({"mysql", "mariadb"})
Row = dict[str, Any]


class DebeziumSchemaChangeDecoder(JsonMessageDecoder):
    """Decodes records of Debezium's schema-change topic (see the module documentation)."""

    message_kind = "a Debezium schema-change event"

    def decode_record(self, record: RecordLike, out: list[Event]) -> None:
        out += self._events(record)

    def _events(self, record: RecordLike) -> list[Event]:
        position, message = self.parse(record)
        if "payload" in message and "schema" in message:
            message = message["payload"]
        if type(message) is not dict:
            raise DecodeError("not a Debezium schema-change event: expected a JSON object")
        changes = message.get("tableChanges")
        if type(changes) is not list:
            hint = " (a data change event: use the debezium-json format)" if "op" in message else ""
            raise DecodeError(f"not a Debezium schema-change event: no 'tableChanges'{hint}")
        ddl = message.get("ddl")
        ddl = ddl if isinstance(ddl, str) else ""
        source = message.get("source")
        source = source if type(source) is dict else {}
        connector = str(source.get("connector") or "").lower()
        database = message.get("databaseName") or source.get("db")
        database = str(database) if database else None
        renames = _column_hints(ddl, database) if ddl and connector in ("", *_MYSQL_CONNECTORS) else {}
        order = source_order(source)
        events: list[Event] = []
        for change in changes:
            if type(change) is not dict:
                raise DecodeError(f"a table change must be a JSON object, got {change!r}")
            kind = str(change.get("type", "")).upper()
            table_id = _table_id(change.get("id"), database)
            if kind == "DROP":
                events.append(SchemaHint(table_id, (DropTable(table_id),), ddl, False, position))
                continue
            if kind not in ("CREATE", "ALTER"):
                raise DecodeError(f"unknown table change type {change.get('type')!r} for table {table_id}")
            table = change.get("table")
            if type(table) is not dict:
                raise DecodeError(
                    f"DDL for unknown table {table_id}: the {kind} change has no table definition"
                )
            schema = _schema(table, table_id, mysql=connector in _MYSQL_CONNECTORS or not connector)
            renamed = renames.get(table_id) or renames.get(TableId(None, None, table_id.table_name))
            if renamed:
                events.append(SchemaHint(table_id, tuple(renamed), ddl, False, position, order))
            events.append(SchemaObserved(table_id, schema, position, ddl=ddl or None, source_order=order))
        return events


def _column_hints(ddl: str, database: str | None) -> dict[TableId, list[SchemaChange]]:
    """The column renames and drops the DDL text names, by table (the DDL is a hint: if it cannot
    be read, the whole-table schemas still tell everything but renames, and a column dropped and
    added again under its name)."""
    try:
        changes = parse_ddl(ddl, default_database=database)
    except DecodeError:
        return {}
    renames: dict[TableId, list[SchemaChange]] = {}
    for change in changes:
        if isinstance(change, RenameColumn | DropColumn):
            renames.setdefault(change.table_id, []).append(change)
    return renames


def _table_id(text: Any, database: str | None) -> TableId:
    if not isinstance(text, str) or not text:
        raise DecodeError(f"a table change needs an 'id', got {text!r}")
    parts = [
        (
            m[1].replace('""', '"')
            if m[1] is not None
            else m[2].replace("``", "`")
            if m[2] is not None
            else m[3]
        )
        for m in _ID_PART.finditer(text)
    ]
    if len(parts) == 1:
        return TableId(None, database, parts[0])
    # "db"."table" (MySQL), "schema"."table", or "db"."schema"."table": the data topics' ids keep the
    # last two parts.
    return TableId(None, parts[-2], parts[-1])


def _schema(table: Row, table_id: TableId, *, mysql: bool) -> Schema:
    raw = table.get("columns")
    if type(raw) is not list:
        raise DecodeError(f"the definition of table {table_id} has no 'columns'")
    entries = [c for c in raw if type(c) is dict]
    entries.sort(key=_position)
    keys = [k for k in table.get("primaryKeyColumnNames") or [] if isinstance(k, str)]
    columns: list[Column] = []
    for entry in entries:
        name = entry.get("name")
        if not isinstance(name, str):
            raise DecodeError(f"a column of table {table_id} has no name")
        try:
            data_type = _mysql_column_type(entry) if mysql else _jdbc_column_type(entry)
        except DecodeError as e:
            raise DecodeError(f"column {name!r} of table {table_id}: {e.reason}") from None
        nullable = entry.get("optional") is not False and name not in keys
        default = entry.get("defaultValueExpression")
        columns.append(
            Column(
                name,
                data_type.with_nullable(nullable),
                _text_or_none(entry.get("comment")),
                literal_default(_default_text(default, data_type, mysql=mysql), data_type),
            )
        )
    try:
        return Schema(tuple(columns), tuple(keys), comment=_text_or_none(table.get("comment")))
    except SchemaError as e:
        raise DecodeError(f"table {table_id}: {e}") from None


def _default_text(default: Any, data_type: DataType, *, mysql: bool) -> str | None:
    """A column's ``defaultValueExpression``. The MySQL connector gives a text default as the body of
    the DDL's quoted literal, escapes and all (``it''s`` for ``'it''s'``): read as MySQL reads it."""
    if not isinstance(default, str):
        return None
    if mysql and data_type.root in CHARACTER and ("'" in default or "\\" in default):
        return mysql_string(default)
    return default


def _position(column: Row) -> int:
    position = column.get("position")
    return position if type(position) is int else 0


def _mysql_column_type(entry: Row) -> DataType:
    name = str(entry.get("typeName") or entry.get("typeExpression") or "")
    if not name:
        raise DecodeError("no typeName")
    length, scale = entry.get("length"), entry.get("scale")
    numbers = [n for n in (length, scale) if type(n) is int]
    if type(length) is not int:
        numbers = []
    values = [_unquote(v) for v in entry.get("enumValues") or [] if isinstance(v, str)]
    upper = name.upper()
    unsigned = "UNSIGNED" in upper or "ZEROFILL" in upper
    base = upper.replace("UNSIGNED", "").replace("ZEROFILL", "").strip()
    return mysql_type(base, numbers, unsigned=unsigned, values=values).data_type


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


# java.sql.Types codes
_JDBC_SIMPLE: dict[int, DataType] = {
    -6: t.TINYINT(),
    5: t.SMALLINT(),
    4: t.INT(),
    -5: t.BIGINT(),
    7: t.FLOAT(),
    6: t.DOUBLE(),
    8: t.DOUBLE(),
    16: t.BOOLEAN(),
    -1: t.STRING(),
    -16: t.STRING(),
    2005: t.STRING(),
    2011: t.STRING(),
    2009: t.STRING(),
    -4: t.BYTES(),
    2004: t.BYTES(),
    91: t.DATE(),
}


def _jdbc_column_type(entry: Row) -> DataType:
    code = entry.get("jdbcType")
    length = entry.get("length") if type(entry.get("length")) is int else None
    scale = entry.get("scale") if type(entry.get("scale")) is int else None
    if type(code) is not int:
        raise DecodeError("no jdbcType")
    simple = _JDBC_SIMPLE.get(code)
    if simple is not None:
        return simple
    if code == -7:  # BIT
        return t.BOOLEAN() if not length or length == 1 else t.BINARY((length + 7) // 8)
    if code in (2, 3):  # NUMERIC, DECIMAL
        precision = length or t.MAX_DECIMAL_PRECISION
        if precision > t.MAX_DECIMAL_PRECISION or (scale or 0) > precision:
            return t.STRING()
        return t.DECIMAL(precision, scale or 0)
    if code in (1, -15):  # CHAR, NCHAR
        return t.CHAR(length) if length else t.STRING()
    if code in (12, -9):  # VARCHAR, NVARCHAR
        return t.VARCHAR(length) if length else t.STRING()
    if code == -2:  # BINARY
        return t.BINARY(length) if length else t.BYTES()
    if code == -3:  # VARBINARY
        return t.VARBINARY(length) if length else t.BYTES()
    if code == 92:  # TIME
        return t.TIME(min(scale if scale is not None else 0, 9))
    if code == 93:  # TIMESTAMP
        return t.TIMESTAMP(min(scale if scale is not None else 6, 9))
    if code == 2014:  # TIMESTAMP_WITH_TIMEZONE
        return t.TIMESTAMP_LTZ(min(scale if scale is not None else 6, 9))
    return t.STRING()


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
