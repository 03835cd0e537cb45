"""The MaxCompute sink: DDL as SQL instances, metadata and rows through pyodps (REST API and Tunnel).

Schema. :meth:`MaxComputeSink.table_schema` reads the table through pyodps (``Table.table_schema``
for the columns, the extended metadata for the primary key). :meth:`MaxComputeSink.apply_schema_change`
compares the change with that schema first (a replayed change is not applied twice), then runs the
dialect's statements as SQL instances (``ODPS.execute_sql``, with the ``odps2`` type system and
schema evolution hints, as Flink CDC's connector runs them) and waits for each to succeed.
MaxCompute keeps table and column names in lower case: names are matched ignoring case.

Rows. :meth:`MaxComputeSink.write` only buffers. :meth:`MaxComputeSink.flush` writes each table's
changes through the Tunnel:

- a table with a primary key (a Delta table, ``transactional``) through an **upsert session**: the
  changes are collapsed to the last state of each key, then upserted or deleted (an update that
  changes the key deletes the old key) and committed at once. A retried flush writes the same final
  states again: at-least-once, idempotent by key;
- a table without a primary key through an **upload session** (one commit per flush): inserts,
  updates and snapshot rows are appended (an update is an insert, as Flink CDC writes it); deletes
  cannot be matched and are counted in :attr:`MaxComputeSink.skipped_deletes`. A retried flush
  appends its rows again.

Errors name the table; a connection failure, a timeout or a server-side error (5xx, a busy quota)
is transient, everything else terminal. The access key and STS token never appear in a message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import requests
from odps import ODPS
from odps import errors as odps_errors
from odps.tunnel import CompressOption, TableTunnel
from odps.tunnel.tabletunnel import TableUpsertSession

from ferry.model import events as E
from ferry.model.events import DataChange, Op, Row, SchemaChange
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DataType
from ferry.offsets import Offsets
from ferry.sinks.base import Sink, SinkCapabilities
from ferry.sinks.base.exceptions import SinkError, SinkTerminalError, SinkTransientError, incompatible_table
from ferry.sinks.base.rows import collapse
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.maxcompute import MAXCOMPUTE
from ferry.sinks.maxcompute.config import MaxComputeSinkConfig
from ferry.sinks.maxcompute.dialect import MaxComputeDialect
from ferry.sinks.maxcompute.types import from_type_name, sink_type

log = logging.getLogger(__name__)

#: The settings of every SQL instance the sink runs (as Flink CDC's connector sets them).
SQL_HINTS = {
    "odps.sql.type.system.odps2": "true",
    "odps.sql.decimal.odps2": "true",
    "odps.sql.allow.schema.evolution": "true",
}
#: HTTP statuses of Tunnel answers worth a retry: timeout, throttling, server errors.
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_TEXT_TYPES = ("string", "varchar", "char", "json")
#: The columns pyodps appends to the schema of an upsert session.
_UPSERT_COLUMNS = frozenset(
    getattr(TableUpsertSession, f"UPSERT_{name}_KEY")
    for name in ("VERSION", "APP_VERSION", "OPERATION", "KEY_COLS", "VALUE_COLS")
)


@dataclass(frozen=True, slots=True)
class _Table:
    """A MaxCompute table as the sink last read it."""

    handle: Any  # pyodps ``Table``
    schema: Schema
    transactional: bool


class MaxComputeSink(Sink):
    """Writes change events into MaxCompute tables of one project."""

    type: str = MAXCOMPUTE.type
    capabilities: SinkCapabilities = MAXCOMPUTE.capabilities
    dialect: MaxComputeDialect = MaxComputeDialect()

    def __init__(self, config: MaxComputeSinkConfig, *, pipeline: str) -> None:
        self.config = config
        self.pipeline = pipeline
        #: Deletes received for tables without a primary key, which an append-only table cannot apply.
        self.skipped_deletes: dict[TableId, int] = {}
        self._odps: Any = None
        self._tunnel: Any = None
        self._tables: dict[TableId, _Table | None] = {}
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._buffer_schemas: dict[TableId, Schema] = {}

    # ------------------------------------------------------------------------------- client

    @property
    def odps(self) -> Any:
        """The pyodps entry object, made on first use."""
        if self._odps is None:
            c = self.config
            self._odps = ODPS(
                c.access_id,
                c.access_key.get_secret_value(),
                c.project,
                endpoint=c.endpoint,
                tunnel_endpoint=c.tunnel_endpoint,
                **({"sts_token": c.sts_token.get_secret_value()} if c.sts_token is not None else {}),
            )
        return self._odps

    @property
    def tunnel(self) -> Any:
        """pyodps' Table Tunnel (on ``quota.name``, a Tunnel quota: SQL instances do not use it)."""
        if self._tunnel is None:
            c = self.config
            self._tunnel = TableTunnel(self.odps, endpoint=c.tunnel_endpoint, quota_name=c.quota_name)
        return self._tunnel

    def _compress(self) -> Any:
        if self.config.compress_algorithm == "raw":
            return None
        return CompressOption(CompressOption.CompressAlgorithm.ODPS_ZLIB)

    def sql_table(self, table_id: TableId) -> SqlTable:
        """The MaxCompute table of a ferry table: the table name in the configured project."""
        return SqlTable(self.config.project, table_id.table_name)

    def sink_type(self, source_type: DataType) -> DataType:
        return sink_type(source_type)

    # ------------------------------------------------------------------------------- schemas

    def table_schema(self, table_id: TableId) -> Schema | None:
        table = self._table(table_id)
        return None if table is None else table.schema

    def forget_schema(self, table_id: TableId) -> None:
        """The next :meth:`table_schema` reads the table again (another worker may have changed it)."""
        self._tables.pop(table_id, None)

    def _table(self, table_id: TableId) -> _Table | None:
        if table_id not in self._tables:
            with self._errors(table_id, "reading the table"):
                self._tables[table_id] = self._read_table(table_id)
        return self._tables[table_id]

    def _read_table(self, table_id: TableId) -> _Table | None:
        handle = self.odps.get_table(table_id.table_name, project=self.config.project)
        try:
            handle.reload()
        except odps_errors.NoSuchObject:
            return None
        handle.reload_extend_info()
        columns = [
            Column(c.name, from_type_name(c.type.name).with_nullable(bool(c.nullable)), c.comment or None)
            for c in handle.table_schema.simple_columns
        ]
        keys = [str(k) for k in handle.primary_key or ()]
        schema = Schema.of(columns, keys, comment=handle.comment or None)
        return _Table(handle, schema, bool(handle.is_transactional))

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        table_id = change.table_id
        table = self.sql_table(table_id)
        self._tables.pop(table_id, None)
        with self._errors(table_id, f"applying {change.tag}"):
            current = self._read_table(table_id)
            existing = None if current is None else current.schema
            if isinstance(change, E.CreateTable):
                if existing is not None:
                    self._check_existing(table_id, existing, change.schema)
                    statements = []
                else:
                    statements = [self.create_table_statement(table, change.schema)]
            elif existing is None and not isinstance(change, E.DropTable | E.TruncateTable):
                raise SinkTerminalError(f"table {table} does not exist", sink=self.type, table=str(table_id))
            else:
                statements = self.schema_change_statements(table, change, existing)
            for statement in statements:
                log.debug("%s: %s", table_id, statement)
                self.odps.execute_sql(statement, hints=SQL_HINTS)
        self._tables.pop(table_id, None)

    def create_table_statement(self, table: SqlTable, schema: Schema) -> str:
        """``CREATE TABLE``: the sink's types, key columns NOT NULL; a Delta table when keyed."""
        keys = set(schema.primary_keys)
        stored = schema.with_columns(
            replace(c, type=sink_type(c.type).with_nullable(c.type.nullable and c.name not in keys))
            for c in schema
        )
        properties = (
            {"transactional": "true", "write.bucket.num": str(self.config.buckets_num)} if keys else {}
        )
        return self.dialect.create_table(table, stored, schema.primary_keys, properties)

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
        assert current is not None
        match change:
            case E.AddColumn(column=column):
                if current.find_ignoring_case(column.name) is not None:
                    return []
                added = replace(column, type=sink_type(column.type).with_nullable(True))
                return [dialect.add_column(table, added)]
            case E.DropColumn(column_name=name):
                dropped = current.find_ignoring_case(name)
                return [] if dropped is None else [dialect.drop_column(table, dropped.name)]
            case E.RenameColumn(old_name=old, new_name=new):
                have = current.find_ignoring_case(old)
                renamed = have is None and current.find_ignoring_case(new) is not None
                if renamed or old.lower() == new.lower():
                    return []
                return [dialect.rename_column(table, self._column(current, old, change).name, new)]
            case E.AlterColumnType(column_name=name, new_type=new_type):
                column = self._column(current, name, change)
                wanted = sink_type(new_type)
                statements = []
                if not wanted.same_ignoring_nullability(column.type):
                    statements.append(dialect.alter_column_type(table, column.name, wanted))
                if wanted.nullable and not column.type.nullable:
                    statements.append(dialect.drop_not_null(table, column.name))
                return statements  # NOT NULL is never added to an existing column
            case E.AlterColumnComment() | E.AlterTableComment():
                return []  # comments are not synced
        raise TypeError(f"no statements for {type(change).__name__}")

    def _column(self, schema: Schema, name: str, change: SchemaChange) -> Column:
        column = schema.find_ignoring_case(name)
        if column is None:
            raise SinkTerminalError(
                f"{change.tag}: no column {name}; columns are {', '.join(schema.names)}",
                sink=self.type,
                table=str(change.table_id),
            )
        return column

    def _check_existing(self, table_id: TableId, existing: Schema, wanted: Schema) -> None:
        """A repeated create is a no-op; a table that cannot take the new table's rows is refused."""
        problems = [f"no column {c.name}" for c in wanted if existing.find_ignoring_case(c.name) is None]
        have_keys = [k.lower() for k in existing.primary_keys]
        if have_keys != [k.lower() for k in wanted.primary_keys]:
            problems.append(
                f"primary key ({', '.join(existing.primary_keys)}) is not ({', '.join(wanted.primary_keys)})"
            )
        if problems:
            raise incompatible_table(problems, existing, wanted, sink=self.type, table=table_id)

    # ------------------------------------------------------------------------------- rows

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self._buffers.setdefault(table_id, []).extend(changes)
        self._buffer_schemas[table_id] = schema

    def flush(self, offsets: Offsets) -> None:
        """Commit every table's buffered rows (one Tunnel session per table); kept if it fails."""
        for table_id in list(self._buffers):
            with self._errors(table_id, "writing rows"):
                table = self._table(table_id)
                if table is None:
                    raise SinkTerminalError("rows for a table that does not exist", sink=self.type)
                self._write_table(table_id, table, self._buffers[table_id])
            del self._buffers[table_id]
            self._buffer_schemas.pop(table_id, None)

    def _write_table(self, table_id: TableId, table: _Table, changes: list[DataChange]) -> None:
        keys = table.schema.primary_keys
        if keys and table.transactional:
            self._upsert(table, collapse(changes, keys, self.type))
            return
        rows = [c.after for c in changes if c.op is not Op.DELETE and c.after is not None]
        if rows:
            self._append(table, rows)
        deletes = sum(1 for c in changes if c.op is Op.DELETE)
        if deletes:
            self.skipped_deletes[table_id] = self.skipped_deletes.get(table_id, 0) + deletes
            log.info("%s: %d deletes not applied (the table has no primary key)", table_id, deletes)

    def _upsert(self, table: _Table, state: dict[Hashable, Row | None]) -> None:
        keys = table.schema.primary_keys
        compress = self._compress()
        session = self.tunnel.create_upsert_session(table.handle, compress_option=compress)
        try:
            stream = session.open_upsert_stream(compress=compress is not None)
            columns = _columns(session.schema)
            for key, row in state.items():
                if row is None:
                    parts: tuple[Any, ...] = key if isinstance(key, tuple) and len(keys) > 1 else (key,)
                    stream.delete(session.new_record(_values(columns, dict(zip(keys, parts, strict=True)))))
                else:
                    stream.upsert(session.new_record(_values(columns, row)))
            stream.close()
            session.commit()
        except BaseException:
            try:
                session.abort()
            except Exception as e:  # the session expires by itself
                log.debug("aborting upsert session %s: %s", session.id, e)
            raise
        finally:
            session.close()

    def _append(self, table: _Table, rows: list[Row]) -> None:
        compress = self._compress()
        session = self.tunnel.create_upload_session(table.handle, compress_option=compress)
        columns = _columns(session.schema)
        writer = session.open_record_writer(compress=compress is not None)
        try:
            for row in rows:
                writer.write(session.new_record(_values(columns, row)))
        finally:
            writer.close()
        session.commit(writer.get_blocks_written())

    # ------------------------------------------------------------------------------- errors

    def secrets(self) -> list[str]:
        c = self.config
        return [s.get_secret_value() for s in (c.access_key, c.sts_token) if s is not None]

    def scrub(self, text: str) -> str:
        for secret in self.secrets():
            if secret:
                text = text.replace(secret, "***")
        return text

    def is_transient(self, error: BaseException) -> bool:
        if isinstance(error, odps_errors.InternalServerError | odps_errors.RequestQuotaExceeded):
            return True
        if isinstance(error, odps_errors.ODPSError):
            status = getattr(error, "status_code", None)
            return isinstance(error, TimeoutError) or status in _TRANSIENT_STATUSES
        return isinstance(error, ConnectionError | TimeoutError | requests.ConnectionError | requests.Timeout)

    @contextmanager
    def _errors(self, table_id: TableId, action: str) -> Iterator[None]:
        """Turn pyodps errors into sink errors naming the table, with secrets scrubbed."""
        try:
            yield
        except SinkError as e:
            self._tables.pop(table_id, None)
            if e.table is None:  # name the table
                message = self.scrub(str(e).removeprefix(f"{e.sink} sink: "))
                raise type(e)(message, sink=self.type, table=str(table_id)) from None
            raise
        except Exception as e:
            self._tables.pop(table_id, None)
            error = SinkTransientError if self.is_transient(e) else SinkTerminalError
            # pyodps' exception is not chained: its text or arguments could hold a secret
            message = " ".join(f"{action}: {type(e).__name__}: {e}".split())
            raise error(self.scrub(message), sink=self.type, table=str(table_id)) from None

    def close(self) -> None:
        if self._buffers:
            log.warning("closing with unflushed rows for %s", ", ".join(str(t) for t in self._buffers))
        self._odps = self._tunnel = None
        self._tables.clear()


# ----------------------------------------------------------------------------------- values


def _columns(session_schema: Any) -> list[tuple[str, str]]:
    """(name, MaxCompute type name) of the table's columns in a session's schema: an upsert session's
    schema ends with its own bookkeeping columns, which pyodps fills itself."""
    return [(c.name, c.type.name) for c in session_schema.simple_columns if c.name not in _UPSERT_COLUMNS]


def _values(columns: list[tuple[str, str]], row: Row) -> list[Any]:
    lowered = {k.lower(): v for k, v in row.items()} if any(k != k.lower() for k in row) else row
    return [odps_value(lowered.get(name), type_name) for name, type_name in columns]


def odps_value(value: Any, type_name: str) -> Any:
    """A row value as pyodps takes it for a column of MaxCompute type ``type_name``."""
    if value is None:
        return None
    base = type_name.split("(", 1)[0].split("<", 1)[0]
    if base in _TEXT_TYPES:
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list | tuple):
            return json.dumps(value, default=str, ensure_ascii=False)
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, date | time):
            return value.isoformat()
        return str(value)
    if base in ("double", "float"):
        return float(value)
    if base == "decimal":
        return value if isinstance(value, Decimal) else Decimal(str(value))
    if base == "binary":
        return value.encode() if isinstance(value, str) else bytes(value)
    if base == "date":
        return value.date() if isinstance(value, datetime) else value
    if base == "timestamp":  # an instant: a naive value is UTC
        return value if not isinstance(value, datetime) or value.tzinfo else value.replace(tzinfo=UTC)
    if base in ("timestamp_ntz", "datetime") and isinstance(value, datetime) and value.tzinfo:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value
