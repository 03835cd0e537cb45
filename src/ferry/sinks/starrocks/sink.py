"""The StarRocks sink: DDL and metadata over the MySQL protocol (PyMySQL), rows through Stream Load.

:class:`MySqlProtocolSink` is what StarRocks and SelectDB share. Schema changes are DDL from the
SQL sink base in the dialect's spelling. At a flush each table's changes collapse to the last state
of every key and go out as one Stream Load (:mod:`ferry.sinks.starrocks.stream_load`) under the label
``<sink.label-prefix>_<table>_<digest of the table and the batch's end offsets>``: a retried flush
of the same batch carries the same label and is refused as already loaded, so it is not loaded
twice. Deleted keys are rows with the vendor's delete column (``__op = 1`` in StarRocks,
``__DORIS_DELETE_SIGN__ = 1`` in Doris). Without a ``load-url`` rows are written with
``INSERT ... ON DUPLICATE KEY UPDATE`` and ``DELETE``.

StarRocks's ALTERs run in the background: :meth:`MySqlProtocolSink.schema_change_pending` reads the
state of the table's latest column change job (``SHOW ALTER TABLE COLUMN``), and a flush first waits
for it, bounded by ``schema.evolution.timeout``. On a MySQL-compatible server (``vendor_only=False``,
no vendor clauses, types or ``SHOW ALTER``) an ALTER of another session still running on the table
(``information_schema.processlist``) is what is pending.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from datetime import time as dt_time
from decimal import Decimal
from typing import Any, ClassVar

import pymysql

from ferry.model import types as ft
from ferry.model.events import AddColumn, ColumnPosition, ColumnPositionKind, DataChange, Op, SchemaChange
from ferry.model.schema import Schema, TableId
from ferry.model.types import DataType, TypeRoot
from ferry.model.unavailable import UNAVAILABLE, is_partial, keep_partial
from ferry.offsets import Offsets
from ferry.sinks.base import RefusedRow, SinkCapabilities
from ferry.sinks.base.exceptions import SinkRowError, SinkTerminalError, SinkTransientError
from ferry.sinks.base.rows import collapse, one_change_per_key
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.base.sql.sink import DbConnection, DbCursor, SqlSink
from ferry.sinks.starrocks import STARROCKS
from ferry.sinks.starrocks.config import MySqlProtocolSinkConfig
from ferry.sinks.starrocks.dialect import MySqlProtocolDialect, StarRocksDialect
from ferry.sinks.starrocks.stream_load import stream_load

log = logging.getLogger(__name__)

#: MySQL error codes that may pass on retry: lock wait timeout, deadlock, server gone or lost, cannot
#: connect, too many connections, server shutting down.
_TRANSIENT_CODES = frozenset({1040, 1053, 1205, 1213, 2002, 2003, 2006, 2013})
#: A row that breaks a CHECK constraint (MariaDB 4025, MySQL 3819).
_CHECK_CONSTRAINT_CODES = frozenset({3819, 4025})
#: Largest DECIMAL precision (StarRocks and Doris: 38); wider decimals are stored as strings.
MAX_DECIMAL_PRECISION = 38
#: Longest CHAR of a MySQL server.
MAX_CHAR_LENGTH = 255
#: A key column of an unbounded string type is stored as a VARCHAR of this many characters.
KEY_STRING_LENGTH = 255
#: Seconds between two polls of a schema change job.
POLL_SECONDS = 0.2
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")
_JSON_TYPES = (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW)
_BINARY_TYPES = (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES)
#: Job states of ``SHOW ALTER TABLE COLUMN`` that are over.
_DONE_STATES = ("FINISHED", "CANCELLED")


class MySqlProtocolSink(SqlSink):
    """Writes change events into a MySQL-protocol warehouse with Stream Load (StarRocks, SelectDB)."""

    capabilities: SinkCapabilities
    dialect: MySqlProtocolDialect
    #: The dialect class of the vendor.
    dialect_class: ClassVar[type[MySqlProtocolDialect]]
    #: The column that marks a Stream Load row as a delete, and its value for upserts and deletes.
    delete_column: ClassVar[str]
    #: The Stream Load header that loads some of the columns and keeps the others' values.
    partial_update_header: ClassVar[str]

    def __init__(
        self, config: MySqlProtocolSinkConfig, *, pipeline: str, vendor_only_statements: bool = True
    ) -> None:
        super().__init__(default_schema=config.default_database, table_properties=config.table_properties)
        self.config = config
        self.pipeline = pipeline
        #: Whether the vendor's clauses, types and ``SHOW ALTER`` are used (off: a MySQL-compatible server).
        self.vendor_only_statements = vendor_only_statements
        self.dialect = self.dialect_class(vendor_only=vendor_only_statements, buckets=config.create_buckets())
        #: Successful flushes: part of every label.
        self.flushes = 0
        #: Stream Load answers of the last flush, by table.
        self.last_loads: dict[TableId, dict[str, Any]] = {}
        self._altered: set[TableId] = set()

    # ------------------------------------------------------------------------------- driver hooks

    def connect(self) -> DbConnection:
        c = self.config
        connection: DbConnection = pymysql.connect(
            host=c.host,
            port=c.port,
            user=c.username,
            password=c.password.get_secret_value(),
            connect_timeout=c.connect_timeout,
            charset="utf8mb4",
            autocommit=False,
            program_name=f"ferry {self.pipeline}"[:60],
        )
        return connection

    def is_transient(self, error: Exception) -> bool:
        if isinstance(error, pymysql.err.MySQLError):
            code = error.args[0] if error.args and isinstance(error.args[0], int) else None
            return code in _TRANSIENT_CODES
        return super().is_transient(error)

    def is_row_error(self, error: Exception) -> bool:
        if isinstance(error, pymysql.err.DataError | pymysql.err.IntegrityError):
            return True  # a value too long or out of range, a NULL in a NOT NULL column
        code = error.args[0] if isinstance(error, pymysql.err.MySQLError) and error.args else None
        return code in _CHECK_CONSTRAINT_CODES

    def secrets(self) -> Sequence[str]:
        return (self.config.password.get_secret_value(),)

    # ------------------------------------------------------------------------------- types

    def sink_type(self, source_type: DataType) -> DataType:
        root = source_type.root
        nullable = source_type.nullable
        if root in _JSON_TYPES or root in _BINARY_TYPES or root in (TypeRoot.TIME, TypeRoot.VARIANT):
            return ft.STRING().with_nullable(nullable)
        if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
            return ft.TIMESTAMP(6).with_nullable(nullable)
        if root is TypeRoot.DECIMAL and (source_type.precision or 0) > MAX_DECIMAL_PRECISION:
            return ft.STRING().with_nullable(nullable)
        if root is TypeRoot.CHAR and (source_type.length or 1) > MAX_CHAR_LENGTH:
            return ft.VARCHAR(source_type.length or 1).with_nullable(nullable)
        if root is TypeRoot.VARCHAR and (source_type.length or 0) > self.dialect.max_varchar_length:
            return ft.STRING().with_nullable(nullable)
        return source_type

    def sink_schema(self, schema: Schema) -> Schema:
        """A key column of an unbounded string type is a ``VARCHAR(255)``: keys must have a length."""
        stored = super().sink_schema(schema)
        keys = set(schema.primary_keys)
        return stored.with_columns(
            replace(c, type=ft.VARCHAR(KEY_STRING_LENGTH).not_null())
            if c.name in keys and c.type.root is TypeRoot.STRING
            else c
            for c in stored
        )

    # ------------------------------------------------------------------------------- schema changes

    def schema_change_statements(
        self, table: SqlTable, change: SchemaChange, current: Schema | None
    ) -> list[str]:
        if (
            isinstance(change, AddColumn)
            and change.position.kind is ColumnPositionKind.BEFORE
            and current is not None
            and change.position.reference in current.names
        ):
            # MySQL has no BEFORE: after the column before the reference, or first
            names = current.names
            index = names.index(change.position.reference or "")
            position = (
                ColumnPosition(ColumnPositionKind.AFTER, names[index - 1])
                if index
                else ColumnPosition(ColumnPositionKind.FIRST)
            )
            change = replace(change, position=position)
        return super().schema_change_statements(table, change, current)

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        super().apply_schema_change(change, schema_after)
        self._altered.add(change.table_id)

    def schema_change_pending(self, table_id: TableId) -> bool:
        """Whether a column change of the table is still running (a cancelled one is an error)."""
        table = self.sql_table(table_id)
        with self._errors(table_id, "reading the schema change state"), self._transaction() as cursor:
            if self.vendor_only_statements:
                cursor.execute(self.dialect.alter_job_state_query(table), (table.name,))
                rows = cursor.fetchall()
                names = [str(d[0]) for d in getattr(cursor, "description", None) or ()]
                if not rows or "State" not in names:
                    return False
                state = str(rows[0][names.index("State")]).upper()
                if state == "CANCELLED":
                    message = rows[0][names.index("Msg")] if "Msg" in names else ""
                    raise SinkTerminalError(
                        f"the schema change was cancelled: {message}", sink=self.type, table=str(table_id)
                    )
                return state not in _DONE_STATES
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.processlist "
                "WHERE id <> CONNECTION_ID() AND command = 'Query' "
                "AND info LIKE 'ALTER TABLE %%' AND LOCATE(%s, info) > 0",
                (self.dialect.table_name(table),),
            )
            return int(cursor.fetchall()[0][0]) > 0

    def wait_for_schema_changes(self) -> None:
        """Wait until the schema changes this sink made are done, at most ``schema.evolution.timeout``."""
        deadline = time.monotonic() + self.config.schema_evolution_timeout
        for table_id in sorted(self._altered, key=str):
            while self.schema_change_pending(table_id):
                if time.monotonic() > deadline:
                    raise SinkTransientError(
                        f"the schema change did not finish within {self.config.schema_evolution_timeout:g} s",
                        sink=self.type,
                        table=str(table_id),
                    )
                # a poll of a running ALTER, not a retry of an error: bounded by schema.evolution.timeout
                time.sleep(POLL_SECONDS)
            self._altered.discard(table_id)

    # ------------------------------------------------------------------------------- rows

    def flush(self, offsets: Offsets) -> None:
        if not self._buffers:
            return
        self.wait_for_schema_changes()
        if not self.config.load_urls:
            super().flush(offsets)
            self.flushes += 1
            return
        self.last_loads = {}
        for table_id in list(self._buffers):
            schema = self._buffer_schemas[table_id]
            label = self.label(table_id, offsets)
            with self._errors(table_id, "loading rows"):
                rows, columns = self.load_rows(table_id, schema, self._buffers[table_id])
                whole, partial = split_partial(rows, columns)
                try:
                    if whole:
                        self.last_loads[table_id] = self._stream_load(table_id, label, whole, columns)
                    # a partial row's unavailable columns keep the table's values: one load per set
                    # of columns, each under a label of its own (a retried flush loads none twice)
                    for number, (loaded, group) in enumerate(sorted(partial.items())):
                        self.last_loads[table_id] = self._stream_load(
                            table_id, f"{label[:120]}_p{number}", group, loaded, partial=True
                        )
                except SinkRowError:
                    if self._refused is None:
                        raise
                    self._load_one_by_one(table_id, schema, label)
            del self._buffers[table_id]
            del self._buffer_schemas[table_id]
        self.flushes += 1

    def _load_one_by_one(self, table_id: TableId, schema: Schema, label: str) -> None:
        """A batch the server filtered rows of, loaded one key's last state per load (each under
        a label of its own, the same for a retried flush); the rows refused go to the handler of
        refused rows with the server's reason."""
        assert self._refused is not None
        refused: list[RefusedRow] = []
        changes = one_change_per_key(self._buffers[table_id], schema.primary_keys, self.type)
        for index, change in enumerate(changes):
            rows, columns = self.load_rows(table_id, schema, [change])
            if not rows:
                continue
            whole, partial = split_partial(rows, columns)
            try:
                if whole:
                    self._stream_load(table_id, f"{label[:110]}_r{index}", whole, columns)
                for loaded, group in partial.items():
                    self._stream_load(table_id, f"{label[:110]}_r{index}", group, loaded, partial=True)
            except SinkRowError as e:
                why = str(e).split(": ", 1)[-1]  # named after the whole table, not the load's
                refused.append(RefusedRow(change, f"{self.type} sink, table {table_id}: {why}"))
        if refused:
            log.warning("%s sink: %d row(s) refused by the server, set aside", self.type, len(refused))
            self._refused(refused)

    def _stream_load(
        self,
        table_id: TableId,
        label: str,
        rows: list[dict[str, Any]],
        columns: Sequence[str],
        *,
        partial: bool = False,
    ) -> dict[str, Any]:
        table = self.sql_table(table_id)
        if table.schema is None:
            raise SinkTerminalError("no database for the table", sink=self.type, table=str(table_id))
        urls = self.config.load_urls
        for index, url in enumerate(urls):
            try:
                return stream_load(
                    url,
                    table.schema,
                    table.name,
                    label=label,
                    rows=rows,
                    columns=columns,
                    username=self.config.username,
                    password=self.config.password.get_secret_value(),
                    timeout=self.config.connect_timeout,
                    sink=self.type,
                    properties=(
                        {**self.config.load_properties, self.partial_update_header: "true"}
                        if partial
                        else self.config.load_properties
                    ),
                )
            except SinkTransientError:
                if index == len(urls) - 1:
                    raise
        raise AssertionError("unreachable")

    def label(self, table_id: TableId, offsets: Offsets) -> str:
        """``<prefix>_<table>_<digest>``: the same for a retried flush of the same batch.

        The digest covers the table and the offsets the batch ends at, so a batch replayed after a
        restart carries the label it was loaded under. Without offsets it also covers the count of
        this sink's successful flushes (:attr:`flushes`), so successive batches differ.
        """
        table = self.sql_table(table_id)
        positions = sorted((str(topic), partition, offset) for (topic, partition), offset in offsets.items())
        counter = None if positions else self.flushes
        digest = hashlib.sha256(
            json.dumps([table.schema, table.name, positions, counter]).encode()
        ).hexdigest()
        readable = _LABEL_UNSAFE.sub("_", f"{table.schema or ''}_{table.name}")[:60]
        return f"{self.config.label_prefix}_{readable}_{digest[:24]}"[:128]

    def load_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The Stream Load rows of a batch (with the delete column) and the ``columns`` header."""
        names = schema.names
        types = [c.type for c in schema]
        keys = schema.primary_keys

        def values(row: Mapping[str, Any], deleted: bool) -> dict[str, Any]:
            out = keep_partial(
                row, {n: unavailable_or(row.get(n), t) for n, t in zip(names, types, strict=True)}
            )
            out[self.delete_column] = 1 if deleted else 0
            return out

        columns = [*names, self.delete_column]
        if not keys:
            self._count_skipped(table_id, changes)
            return [values(c.after, False) for c in changes if c.op is not Op.DELETE and c.after], columns
        state = collapse(changes, keys, self.type)
        rows: list[dict[str, Any]] = []
        for key, row in state.items():
            if row is None:
                parts = key if len(keys) > 1 else (key,)
                assert isinstance(parts, tuple)
                rows.append(values(dict(zip(keys, parts, strict=True)), True))
            else:
                rows.append(values(row, False))
        return rows, columns

    def _count_skipped(self, table_id: TableId, changes: Sequence[DataChange]) -> None:
        deletes = sum(1 for c in changes if c.op is Op.DELETE)
        if deletes:
            self.skipped_deletes[table_id] = self.skipped_deletes.get(table_id, 0) + deletes

    def _write_table(
        self, cursor: DbCursor, table_id: TableId, schema: Schema, changes: list[DataChange]
    ) -> None:
        """The INSERT fallback: deletes by key, then ``INSERT ... ON DUPLICATE KEY UPDATE``."""
        table = self.sql_table(table_id)
        names = schema.names
        keys = schema.primary_keys
        rows, columns = self.load_rows(table_id, schema, changes)
        whole, partial = split_partial(rows, columns)
        gone = [[r[k] for k in keys] for r in whole if r[self.delete_column]]
        kept = [[r[n] for n in names] for r in whole if not r[self.delete_column]]
        if gone:
            cursor.executemany(self.dialect.delete_by_key(table, keys), gone)
        if kept:
            statement = self.dialect.upsert(table, names, keys) if keys else self.dialect.insert(table, names)
            cursor.executemany(statement, kept)
        for loaded, group in partial.items():
            written = [n for n in loaded if n != self.delete_column]
            statement = self.dialect.upsert(table, written, keys)
            cursor.executemany(statement, [[r[n] for n in written] for r in group])


def unavailable_or(value: Any, source_type: DataType) -> Any:
    """:func:`load_value`, or :data:`~ferry.model.unavailable.UNAVAILABLE` as it is."""
    return value if value is UNAVAILABLE else load_value(value, source_type)


def split_partial(
    rows: list[dict[str, Any]], columns: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[tuple[str, ...], list[dict[str, Any]]]]:
    """The whole rows of a load, and the partial ones (those with unavailable values) by the
    columns they have, without the others."""
    whole: list[dict[str, Any]] = []
    partial: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        if is_partial(row):
            loaded = tuple(c for c in columns if row.get(c) is not UNAVAILABLE)
            partial.setdefault(loaded, []).append({c: row[c] for c in loaded})
        else:
            whole.append(row)
    return whole, partial


def load_value(value: Any, source_type: DataType) -> Any:
    """A row value as JSON and the INSERT take it, for the type :meth:`MySqlProtocolSink.sink_type` stores."""
    if value is None:
        return None
    root = source_type.root
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if root in _JSON_TYPES or isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, date | dt_time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if root in (TypeRoot.STRING, TypeRoot.VARCHAR, TypeRoot.CHAR) and not isinstance(value, str):
        return str(value)
    return value


class StarRocksSink(MySqlProtocolSink):
    """Writes change events into StarRocks (or, without the vendor clauses, a MySQL-compatible server)."""

    type: str = STARROCKS.type
    capabilities: SinkCapabilities = STARROCKS.capabilities
    dialect: MySqlProtocolDialect = StarRocksDialect()
    dialect_class = StarRocksDialect
    delete_column = "__op"
    partial_update_header = "partial_update"
