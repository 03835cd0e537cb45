"""The work every SQL-speaking sink does, over a DB-API connection and a :class:`SqlDialect`.

Schema. :meth:`SqlSink.table_schema` reads ``information_schema.columns`` and the primary key
constraint. :meth:`SqlSink.apply_schema_change` compares the change with that schema first (a
replayed change is not applied twice), then runs the dialect's statements in one transaction.

Rows. :meth:`SqlSink.write` only buffers. :meth:`SqlSink.flush` collapses each table's changes to
the last state of every primary key, then in one transaction deletes the keys that are gone and
upserts the rows that stay (batched with ``executemany``). A retried flush writes the same final
states again: delivery is at-least-once and idempotent by primary key. When the database refuses
a row for its data (:meth:`SqlSink.is_row_error`: a value it cannot hold, a constraint the row
breaks) and a handler for refused rows is set (:meth:`SqlSink.on_refused`), the batch is written
again one row (one key's last state) per transaction: the rows refused go to the handler with the
database's message, the others are written. A table without a primary
key is append-only: its deletes cannot be matched and are counted in :attr:`SqlSink.skipped_deletes`.

A subclass gives :meth:`SqlSink.connect` (the driver), :meth:`SqlSink.is_transient` (which driver
errors may pass on retry) and :meth:`SqlSink.secrets` (strings never to appear in an error message).
"""

from __future__ import annotations

import json
import logging
from abc import abstractmethod
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from ferry.model import events as E
from ferry.model.apply import is_applied
from ferry.model.events import DataChange, Op, Row, SchemaChange
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DataType, TypeRoot
from ferry.model.unavailable import UNAVAILABLE, is_partial, unavailable_reason
from ferry.offsets import Offsets
from ferry.sinks.base import RefusedRow, RefusedRows, Sink
from ferry.sinks.base.exceptions import (
    SinkError,
    SinkRowError,
    SinkTerminalError,
    SinkTransientError,
    incompatible_table,
)
from ferry.sinks.base.rows import collapse, complete_before_reading, one_change_per_key
from ferry.sinks.base.sql.dialect import CatalogColumn, SqlDialect, SqlTable

log = logging.getLogger(__name__)


class DbCursor(Protocol):
    """The part of a DB-API cursor the sink uses."""

    def execute(self, query: str, params: Sequence[Any] | None = None, /) -> object: ...

    def executemany(self, query: str, params_seq: Sequence[Sequence[Any]], /) -> object: ...

    def fetchall(self) -> Sequence[Sequence[Any]]: ...

    def close(self) -> None: ...


class DbConnection(Protocol):
    """The part of a DB-API connection the sink uses (not in autocommit mode)."""

    def cursor(self) -> DbCursor: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...


class SqlSink(Sink):
    """Schema changes as DDL and rows as batched upserts, in the spelling of :attr:`dialect`."""

    dialect: SqlDialect

    def __init__(
        self,
        *,
        default_schema: str | None,
        table_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.default_schema = default_schema
        self.table_properties: Mapping[str, str] = dict(table_properties or {})
        #: Deletes received for tables without a primary key, which an append-only table cannot apply.
        self.skipped_deletes: dict[TableId, int] = {}
        self._schemas: dict[TableId, Schema | None] = {}
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._buffer_schemas: dict[TableId, Schema] = {}
        self._connection: DbConnection | None = None
        self._refused: RefusedRows | None = None

    def on_refused(self, handler: RefusedRows) -> None:
        self._refused = handler

    # ------------------------------------------------------------------------------- driver hooks

    @abstractmethod
    def connect(self) -> DbConnection:
        """A new connection to the database."""

    def is_transient(self, error: Exception) -> bool:
        """Whether a driver error may pass when the operation is tried again."""
        return isinstance(error, ConnectionError | TimeoutError)

    def is_row_error(self, error: Exception) -> bool:
        """Whether a driver error is the database refusing a row for its data (the same row fails
        again, the others would not): such a write is retried one row at a time."""
        return False

    def secrets(self) -> Sequence[str]:
        """Strings (passwords) replaced by ``***`` in every error message the sink raises."""
        return ()

    # ------------------------------------------------------------------------------- naming and types

    def sql_table(self, table_id: TableId) -> SqlTable:
        """The database table of a ferry table: its schema part (or the default schema) and name."""
        return SqlTable(table_id.schema_name or self.default_schema, table_id.table_name)

    def sink_schema(self, schema: Schema) -> Schema:
        """``schema`` with the types the sink stores (:meth:`sink_type`); key columns NOT NULL."""
        keys = set(schema.primary_keys)
        return schema.with_columns(
            replace(
                c,
                type=self.sink_type(c.type).with_nullable(c.type.nullable and c.name not in keys),
                comment=None,
            )
            for c in schema
        )

    # ------------------------------------------------------------------------------- schemas

    def table_schema(self, table_id: TableId) -> Schema | None:
        if table_id not in self._schemas:
            with self._errors(table_id, "reading the schema"), self._transaction() as cursor:
                self._schemas[table_id] = self._read_schema(cursor, self.sql_table(table_id))
        return self._schemas[table_id]

    def _read_schema(self, cursor: DbCursor, table: SqlTable) -> Schema | None:
        params = (table.schema or "", table.name)
        cursor.execute(self.dialect.columns_query(), params)
        columns = [CatalogColumn(*row) for row in cursor.fetchall()]
        if not columns:
            return None
        cursor.execute(self.dialect.primary_key_query(), params)
        keys = [str(row[0]) for row in cursor.fetchall()]
        return Schema.of((Column(c.name, self.dialect.catalog_type(c)) for c in columns), keys)

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        table_id = change.table_id
        table = self.sql_table(table_id)
        self._schemas.pop(table_id, None)
        with self._errors(table_id, f"applying {change.tag}"), self._transaction() as cursor:
            current = self._read_schema(cursor, table)
            if isinstance(change, E.CreateTable):
                if current is not None:
                    self._check_existing(table_id, current, change.schema)
                statements = [] if current is not None else self.create_table_statements(table, change.schema)
                if statements and table.schema is not None and not self._schema_exists(cursor, table.schema):
                    statements.insert(0, self.dialect.create_schema(table.schema))
            elif current is None and not isinstance(change, E.DropTable | E.TruncateTable):
                raise SinkTerminalError(f"table {table} does not exist", sink=self.type, table=str(table_id))
            else:
                statements = self.schema_change_statements(table, change, current)
            for statement in statements:
                log.debug("%s: %s", table_id, statement)
                cursor.execute(statement)
        self._schemas.pop(table_id, None)

    def create_table_statements(self, table: SqlTable, schema: Schema) -> list[str]:
        """The statements that create a table in an existing schema (a dialect may add more)."""
        sink_schema = self.sink_schema(schema)
        return [self.dialect.create_table(table, sink_schema, schema.primary_keys, self.table_properties)]

    def _schema_exists(self, cursor: DbCursor, schema: str) -> bool:
        cursor.execute(self.dialect.schema_exists_query(), (schema,))
        return bool(cursor.fetchall())

    def schema_change_statements(
        self, table: SqlTable, change: SchemaChange, current: Schema | None
    ) -> list[str]:
        """The statements of one change to an existing table; none when it is already applied."""
        dialect = self.dialect
        match change:
            case E.DropTable():
                return [] if current is None else [dialect.drop_table(table)]
            case E.TruncateTable():
                return [] if current is None else [dialect.truncate(table)]
            case E.AddColumn(column=column, position=position):
                if is_applied(current, change):
                    return []
                return [dialect.add_column(table, self.added_column(column), position)]
            case E.DropColumn(column_name=name):
                return [] if is_applied(current, change) else [dialect.drop_column(table, name)]
            case E.RenameColumn(old_name=old, new_name=new):
                return [] if is_applied(current, change) else [dialect.rename_column(table, old, new)]
            case E.AlterColumnType(column_name=name, new_type=new_type):
                stored = self.sink_type(new_type)
                if is_applied(current, replace(change, new_type=stored)):
                    return []
                return [dialect.alter_column_type(table, name, stored)]
            case E.AlterColumnComment() | E.AlterTableComment():
                return []  # comments are not synced
        raise TypeError(f"no statements for {type(change).__name__}")

    def added_column(self, column: Column) -> Column:
        """The column an ADD COLUMN creates: the sink's type, nullable when the sink says so."""
        nullable = column.type.nullable or self.capabilities.nullable_added_columns
        return replace(column, type=self.sink_type(column.type).with_nullable(nullable))

    def _check_existing(self, table_id: TableId, existing: Schema, wanted: Schema) -> None:
        """A repeated create is a no-op; a table that cannot take the new table's rows is refused."""
        problems = [f"no column {c.name}" for c in wanted if c.name not in existing]
        if existing.primary_keys != wanted.primary_keys:
            problems.append(
                f"primary key ({', '.join(existing.primary_keys)}) is not ({', '.join(wanted.primary_keys)})"
            )
        if problems:
            raise incompatible_table(
                problems, existing, self.sink_schema(wanted), sink=self.type, table=table_id
            )

    # ------------------------------------------------------------------------------- rows

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self._buffers.setdefault(table_id, []).extend(changes)
        self._buffer_schemas[table_id] = schema

    def flush(self, offsets: Offsets) -> None:
        """Write every buffered row in one transaction; the buffers are kept if it fails."""
        if not self._buffers:
            return
        table_ids = list(self._buffers)
        single = table_ids[0] if len(table_ids) == 1 else None
        try:
            with self._errors(single, "writing rows"), self._transaction() as cursor:
                for table_id in table_ids:
                    schema, changes = self._buffer_schemas[table_id], self._buffers[table_id]
                    self._write_table(cursor, table_id, schema, changes)
        except SinkRowError:
            if self._refused is None:
                raise
            self._write_one_by_one(table_ids)
        self._buffers.clear()
        self._buffer_schemas.clear()

    def _write_one_by_one(self, table_ids: Sequence[TableId]) -> None:
        """The buffered rows written one key's last state per transaction; the rows the database
        refuses for their data go to the handler of refused rows, with its message."""
        assert self._refused is not None
        refused: list[RefusedRow] = []
        for table_id in table_ids:
            schema = self._buffer_schemas[table_id]
            for change in one_change_per_key(self._buffers[table_id], schema.primary_keys, self.type):
                try:
                    with self._errors(table_id, "writing a row"), self._transaction() as cursor:
                        self._write_table(cursor, table_id, schema, [change])
                except SinkRowError as e:
                    refused.append(RefusedRow(change, str(e)))
        if refused:
            log.warning("%s sink: %d row(s) refused by the database, set aside", self.type, len(refused))
            self._refused(refused)

    def _write_table(
        self, cursor: DbCursor, table_id: TableId, schema: Schema, changes: list[DataChange]
    ) -> None:
        table = self.sql_table(table_id)
        names = schema.names
        types = [c.type for c in schema]

        def values(row: Row) -> list[Any]:
            return [adapt_value(row.get(n), ty) for n, ty in zip(names, types, strict=True)]

        keys = schema.primary_keys
        if not keys:
            rows = [values(c.after) for c in changes if c.op is not Op.DELETE and c.after is not None]
            deletes = sum(1 for c in changes if c.op is Op.DELETE)
            if deletes:
                self.skipped_deletes[table_id] = self.skipped_deletes.get(table_id, 0) + deletes
            if rows:
                cursor.executemany(self.dialect.insert(table, names), rows)
            return
        state = collapse(changes, keys, self.type)
        gone = [list(_parts(k, len(keys))) for k, row in state.items() if row is None]
        whole: list[list[Any]] = []
        partial: dict[tuple[str, ...], list[list[Any]]] = {}
        for row in state.values():
            if row is None:
                continue
            if is_partial(row):
                # the columns without a value keep the table's: left out of the upsert
                columns = tuple(n for n in names if row.get(n) is not UNAVAILABLE)
                partial.setdefault(columns, []).append(
                    [adapt_value(row.get(n), ty) for n, ty in zip(names, types, strict=True) if n in columns]
                )
            else:
                whole.append(values(row))
        if gone:
            cursor.executemany(self.dialect.delete_by_key(table, keys), gone)
        if whole:
            cursor.executemany(self.upsert_statement(cursor, table_id, names, keys), whole)
        for columns, rows in partial.items():
            cursor.executemany(self.upsert_statement(cursor, table_id, columns, keys), rows)

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """Partial rows are written leaving their unavailable columns out of the upsert (the table
        keeps its values); those of a key the table does not hold (and no earlier change of the
        checkpoint wrote) cannot be, nor those of a table without a primary key."""
        keys = schema.primary_keys
        buffered = self._buffers.get(table_id, ())
        still, rejected = complete_before_reading(changes, partial, keys, buffered, self.type)
        if still:
            with self._errors(table_id, "reading the rows to update"), self._transaction() as cursor:
                query = self.dialect.select_keys(self.sql_table(table_id), keys)
                for index in still:
                    after = changes[index].after
                    assert after is not None
                    cursor.execute(query, [after[k] for k in keys])
                    if not cursor.fetchall():
                        reason = f"{unavailable_reason(changes[index])}; the table has no row of its key"
                        rejected.append((index, reason))
        return rejected

    def upsert_statement(
        self, cursor: DbCursor, table_id: TableId, columns: Sequence[str], keys: Sequence[str]
    ) -> str:
        """The statement that writes rows of ``columns`` whose key may already be in the table: the
        dialect's insert-or-update (a sink may write otherwise, from the table's ``cursor``)."""
        return self.dialect.upsert(self.sql_table(table_id), columns, keys)

    # ------------------------------------------------------------------------------- connection

    @contextmanager
    def _transaction(self) -> Iterator[DbCursor]:
        """A cursor in a transaction: committed at the end, rolled back on an error."""
        if self._connection is None:
            self._connection = self.connect()
        connection = self._connection
        cursor = connection.cursor()
        try:
            yield cursor
            connection.commit()
        except BaseException:
            try:
                connection.rollback()
            except Exception:  # the connection is broken: open a new one next time
                self._drop_connection()
            raise
        finally:
            try:
                cursor.close()
            except Exception:
                self._drop_connection()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as e:
                log.debug("closing a broken connection: %s", e)

    def close(self) -> None:
        if self._buffers:
            log.warning("closing with unflushed rows for %s", ", ".join(str(t) for t in self._buffers))
        self._drop_connection()

    def scrub(self, text: str) -> str:
        """``text`` without any of :meth:`secrets`."""
        for secret in self.secrets():
            if secret:
                text = text.replace(secret, "***")
        return text

    @contextmanager
    def _errors(self, table_id: TableId | None, action: str) -> Iterator[None]:
        """Turn driver errors into sink errors naming the table, with secrets scrubbed."""
        table = None if table_id is None else str(table_id)
        try:
            yield
        except SinkError as e:
            if table_id is not None:
                self._schemas.pop(table_id, None)
            if self.secrets() and self.scrub(str(e)) != str(e):
                raise SinkTerminalError(self.scrub(str(e)), sink=self.type, table=table) from None
            raise
        except Exception as e:
            if table_id is not None:
                self._schemas.pop(table_id, None)
            transient = self.is_transient(e)
            if transient:
                self._drop_connection()
            error = (
                SinkTransientError
                if transient
                else SinkRowError
                if self.is_row_error(e)
                else SinkTerminalError
            )
            # the driver's exception is not chained: its text or arguments could hold a secret
            raise error(
                self.scrub(f"{action}: {type(e).__name__}: {e}"), sink=self.type, table=table
            ) from None


# ----------------------------------------------------------------------------------- helpers


def adapt_value(value: Any, sink_type: DataType) -> Any:
    """A row value as the driver takes it: nested values in a text column become JSON."""
    if (
        value is not None
        and sink_type.root in (TypeRoot.STRING, TypeRoot.VARCHAR, TypeRoot.CHAR)
        and not isinstance(value, str)
    ):
        if isinstance(value, dict | list | tuple):
            return json.dumps(value, default=str, ensure_ascii=False)
        return str(value)
    return value


def _parts(key: Hashable, width: int) -> tuple[Any, ...]:
    if width == 1:
        return (key,)
    assert isinstance(key, tuple)
    return key
