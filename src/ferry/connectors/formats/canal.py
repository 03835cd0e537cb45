"""Canal JSON (``canal-json``): Canal's flat messages, and the variant Flink CDC's Kafka sink writes.

A Canal server message holds one or more rows of one table in ``data`` (every value a string,
typed by ``mysqlType``), the changed columns' previous values in ``old`` (``old[i]`` pairs with
``data[i]``), the key in ``pkNames`` and the change in ``type``: ``INSERT``, ``UPDATE``, ``DELETE``,
and ``INIT`` for the rows of an initial load (Alibaba Cloud DTS), read as snapshot rows. A message
with ``isDdl: true`` carries a DDL statement in ``sql``; it becomes a
:class:`~ferry.model.events.SchemaHint` per table it changes (ordered: it travels with the rows).

The Flink CDC variant has no ``isDdl``/``mysqlType``, native JSON values and a full ``old`` row;
its schema is inferred from the values, as for Debezium JSON without a schema.

A Canal server writes records without a key. A record whose key is a JSON object (the primary key,
as Flink CDC's and ferry's Kafka sinks write it: ``{"id": 42}``) naming other values than its rows
is a bad record with both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ferry.connectors.exceptions import DecodeError, UnknownFormatError
from ferry.connectors.formats import (
    InferredTable,
    JsonMessageDecoder,
    bad_record,
    check_key,
    check_key_values,
    hints,
    json_key,
)
from ferry.connectors.formats.connect_types import CONVERSION_ERRORS
from ferry.connectors.formats.ddl import parse_ddl
from ferry.connectors.formats.mysql_types import Converter, parse_mysql_type
from ferry.connectors.record import RecordLike
from ferry.model.events import (
    DataChange,
    Event,
    Op,
    SchemaObserved,
    SourcePosition,
)
from ferry.model.schema import Column, Schema, TableId

_OPS = {"INSERT": Op.INSERT, "UPDATE": Op.UPDATE, "DELETE": Op.DELETE, "INIT": Op.READ}
_new = tuple.__new__
Row = dict[str, Any]


@dataclass(slots=True, eq=False)
class _Typed:
    """The schema and value converters that one ``mysqlType``/``pkNames`` pair gives."""

    mysql_types: dict[str, Any]
    keys: list[str]
    schema: Schema
    converters: tuple[tuple[str, Converter, str], ...]


@dataclass(slots=True, eq=False)
class _Table:
    table_id: TableId
    typed: _Typed | None = None
    inferred: InferredTable = field(default_factory=InferredTable.empty)
    emitted: Schema | None = None


class CanalJsonDecoder(JsonMessageDecoder):
    """Decodes ``canal-json`` records (see the module documentation).

    ``server_time_zone`` is the MySQL server's time zone, in which Canal writes ``TIMESTAMP`` values.
    """

    message_kind = "a Canal message"

    def __init__(self, server_time_zone: str = "UTC") -> None:
        try:
            self._time_zone: tzinfo = ZoneInfo(server_time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise UnknownFormatError(
                f"canal-json: unknown server_time_zone {server_time_zone!r}", format="canal-json"
            ) from None
        self._tables: dict[tuple[str, str, int], _Table] = {}

    def decode_record(self, record: RecordLike, out: list[Event]) -> None:
        position, message = self.parse(record)
        if message.get("isDdl") is True:
            self._ddl(message, position, out)
            return
        kind = message.get("type")
        op = _OPS.get(kind)  # type: ignore[arg-type]
        if op is None:
            raise self.unknown_type(kind)
        database, name = self.message_table(message)
        data = message.get("data")
        if type(data) is not list or not data or any(type(row) is not dict for row in data):
            raise DecodeError("'data' must be a non-empty list of rows")
        old = message.get("old")
        if old is not None and (
            type(old) is not list or any(o is not None and type(o) is not dict for o in old)
        ):
            raise DecodeError("'old' must be a list of rows")
        keys = message.get("pkNames") or []
        if type(keys) is not list or any(type(k) is not str for k in keys):
            raise DecodeError("'pkNames' must be a list of column names")
        for row in data:
            check_key_values(keys, row)
        key = json_key(record.key())
        if type(key) is dict:
            for row in data:
                check_key(key, row)
        table = self._table(database, name, position.partition)
        mysql_types = message.get("mysqlType")
        ts = message.get("es") or message.get("ts")
        changes = self._rows(op, data, old)
        if type(mysql_types) is dict and mysql_types:
            typed = table.typed
            if typed is None or typed.mysql_types != mysql_types or typed.keys != keys:
                typed = table.typed = self._typed(mysql_types, keys)
            schema = typed.schema
            good = []
            failures: list[str] = []
            for i, (before, after) in enumerate(changes):
                try:
                    if before is not None:
                        _convert(typed, before)
                    if after is not None:
                        _convert(typed, after)
                except DecodeError as e:
                    failures.append(f"row {i + 1}: {e.reason}")
                    continue
                good.append((before, after))
            if failures:
                out.append(bad_record(record, _rows_reason(failures, len(changes)), position))
            changes = good
        else:
            inferred = table.inferred
            changed = inferred.with_keys(tuple(keys))
            for before, after in changes:
                if after is not None and inferred.observe(after):
                    changed = True
                if before is not None and inferred.observe(before):
                    changed = True
            schema = inferred.rebuild() if changed else inferred.schema
        if not changes:
            return
        if table.emitted is not schema:
            if table.emitted is None or table.emitted != schema:
                out.append(SchemaObserved(table.table_id, schema, position))
            table.emitted = schema
        table_id = table.table_id
        for before, after in changes:
            out.append(_new(DataChange, (table_id, op, before, after, position, ts)))

    @staticmethod
    def _rows(op: Op, data: list[Row], old: list[Row | None] | None) -> list[tuple[Row | None, Row | None]]:
        if op is Op.DELETE:
            return [(row, None) for row in data]
        if op is not Op.UPDATE:
            return [(None, row) for row in data]
        changes: list[tuple[Row | None, Row | None]] = []
        for i, row in enumerate(data):
            previous = old[i] if old is not None and i < len(old) else None
            # ``old`` holds the changed columns only: the before-image is the row overlaid with it.
            changes.append(({**row, **previous} if previous is not None else None, row))
        return changes

    def _typed(self, mysql_types: dict[str, Any], keys: list[str]) -> _Typed:
        columns: list[Column] = []
        converters: list[tuple[str, Converter, str]] = []
        for column, text in mysql_types.items():
            if type(text) is not str:
                raise DecodeError(f"mysqlType of column {column!r} is not text: {text!r}")
            try:
                parsed = parse_mysql_type(text, self._time_zone)
            except DecodeError as e:
                raise DecodeError(f"column {column!r}: {e.reason}") from None
            columns.append(Column(column, parsed.data_type.with_nullable(column not in keys)))
            if parsed.convert is not None:
                converters.append((column, parsed.convert, text))
        schema = Schema(tuple(columns), tuple(k for k in keys if k in mysql_types))
        return _Typed(dict(mysql_types), list(keys), schema, tuple(converters))

    def _table(self, database: str, name: str, partition: int) -> _Table:
        key = (database, name, partition)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table(TableId(None, database, name))
        return table

    def _ddl(self, message: Row, position: SourcePosition, out: list[Event]) -> None:
        sql = message.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise DecodeError("a DDL message without 'sql'")
        database = message.get("database")
        changes = parse_ddl(
            sql, default_database=database if isinstance(database, str) and database else None
        )
        out.extend(hints(changes, sql, ordered=True, position=position))


def _convert(typed: _Typed, row: Row) -> None:
    if len(row) != len(typed.mysql_types):
        for column in row:
            if column not in typed.mysql_types:
                raise DecodeError(f"column {column!r} has no mysqlType")
        for column in typed.mysql_types:
            row.setdefault(column, None)
    column = text = ""
    value: Any = None
    try:
        for column, convert, text in typed.converters:  # noqa: B007 - named in the error below
            value = row[column]
            if value is not None:
                row[column] = convert(value)
    except CONVERSION_ERRORS:
        raise DecodeError(f"field {column!r} is not a valid {text}: {_short(value)}") from None


def _rows_reason(failures: list[str], count: int) -> str:
    """One reason for the rows of a message that cannot be decoded (the others are emitted)."""
    if count == 1:
        return failures[0].split(": ", 1)[1]
    return f"{len(failures)} of {count} rows cannot be decoded; {failures[0]}"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
