"""The Fluss sink: tables and rows through the Apache Fluss Python client (``pyfluss``).

Tables. A table with a primary key becomes a Fluss primary-key table (rows upserted and deleted by
key); a table without one becomes a log table (rows appended; a delete cannot be applied and is
counted in :attr:`FlussSink.skipped_deletes`). The sink creates the database and the table, with
``bucket.num``, ``bucket.key`` and ``properties.table.*``; an existing table is checked for
compatibility instead. Types are stored as :mod:`ferry.sinks.fluss.types` maps them.

Schema changes. Fluss appends columns, and drops tables; nothing else (see its declaration in
``ferry.sinks.fluss``). A column is added through the Java client (:mod:`.alter`), since
the Python client has no call for it; Fluss wants added columns nullable and refuses others.

Rows. :meth:`FlussSink.write` buffers; :meth:`FlussSink.flush` collapses each table's changes to
the last state of every key, hands them to the table's writer and waits until the cluster has
acknowledged them all. A partial row (values the source did not send, see
:mod:`ferry.pipeline.unavailable`) takes the values it lacks from its key's row as the table holds
it (a primary-key lookup) and is written whole; one of a key the table does not hold is refused.
(Fluss's own partial update, ``partial_update_by_name``, refuses a table with a NOT NULL column
other than the key.) Delivery is at least once: a replay after a restart upserts the same rows
again (idempotent on a primary-key table, appended twice on a log table).

The client is asynchronous: its calls run on an event loop of the sink's own thread, so that the
sink can be used from any thread, including one whose event loop is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar

import fluss

from ferry.model.events import AddColumn, CreateTable, DataChange, DropTable, Op, Row, SchemaChange
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DataType, can_widen
from ferry.model.unavailable import fill, unavailable_reason
from ferry.offsets import Offsets
from ferry.sinks.base import Sink, SinkCapabilities
from ferry.sinks.base.exceptions import SinkError, SinkTerminalError, SinkTransientError, incompatible_table
from ferry.sinks.base.rows import collapse, complete_before_reading
from ferry.sinks.fluss import FLUSS, alter
from ferry.sinks.fluss.config import FlussSinkConfig
from ferry.sinks.fluss.types import (
    FlussTypeError,
    fluss_sql,
    parse_fluss_type,
    sink_schema,
    sink_type,
    to_arrow_schema,
    value_converter,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_MISSING = (fluss.ErrorCode.TABLE_NOT_EXIST, fluss.ErrorCode.DATABASE_NOT_EXIST)


class _Loop:
    """An event loop on a thread of its own, on which every client call runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ferry-fluss", daemon=True)
        self.thread.start()

    def call(self, fn: Callable[[], Awaitable[_T]], timeout: float) -> _T:
        """Run ``await fn()`` on the loop (the client's futures must be made there) and wait for it."""

        async def run() -> _T:
            return await fn()

        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Cancel what still runs (a call that timed out), then stop the loop and its thread."""

        async def cancel_all() -> None:
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class _Table:
    """A table's client handle with its writer, for one schema of the table."""

    def __init__(self, handle: Any, schema: Schema) -> None:
        self.handle = handle
        self.schema = schema
        self.primary_key = bool(schema.primary_keys)
        self.writer: Any = handle.new_upsert().create_writer() if self.primary_key else None
        if self.writer is None:
            self.writer = handle.new_append().create_writer()
        self.converters = {
            c.name: convert for c in schema if (convert := value_converter(c.type)) is not None
        }
        self._lookuper: Any = None

    @property
    def lookuper(self) -> Any:
        if self._lookuper is None:
            self._lookuper = self.handle.new_lookup().create_lookuper()
        return self._lookuper

    def row(self, row: Row) -> dict[str, Any]:
        """The row with the values the client takes, and only the table's columns."""
        out = {}
        for name, value in row.items():
            if name not in self.schema:
                continue
            convert = self.converters.get(name)
            out[name] = value if convert is None or value is None else convert(value)
        return out


class FlussSink(Sink):
    """Writes change events into Apache Fluss tables."""

    type: str = FLUSS.type
    capabilities: SinkCapabilities = FLUSS.capabilities

    def __init__(self, config: FlussSinkConfig, *, pipeline: str) -> None:
        self.config = config
        self.pipeline = pipeline
        #: Deletes received for log tables (no primary key), which cannot apply them.
        self.skipped_deletes: dict[TableId, int] = {}
        self._schemas: dict[TableId, Schema | None] = {}
        self._tables: dict[TableId, _Table] = {}
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._loop = _Loop()
        try:
            self._connect()
        except Exception as e:
            self._loop.close()
            raise SinkTerminalError(
                f"cannot connect to {config.bootstrap_servers} ({type(e).__name__}: {_message(e)})",
                sink=self.type,
            ) from e

    def _connect(self) -> None:
        client_config = fluss.Config(self.config.python_client_properties())
        self._connection: Any = self._loop.call(
            lambda: fluss.FlussConnection.create(client_config), self.config.request_timeout
        )
        self._admin: Any = self._connection.get_admin()

    def _reconnect(self) -> None:
        """A call got no answer: the connection (with its cached metadata, table handles and
        writers) is replaced, so that the retry does not wait on what may no longer answer."""
        self._tables.clear()
        with contextlib.suppress(Exception):
            self._loop.call(self._connection.close, 5.0)
        try:
            self._connect()
        except Exception as e:  # the retry that follows connects first
            log.warning("connecting to Fluss again: %s: %s", type(e).__name__, _message(e))
            self._connection = None

    # ------------------------------------------------------------------------------- names

    def table_path(self, table_id: TableId) -> Any:
        """The Fluss ``database.table`` of a ferry table."""
        return fluss.TablePath(table_id.schema_name or self.config.database, table_id.table_name)

    def _call(self, fn: Callable[[], Awaitable[_T]], table_id: TableId | None, action: str) -> _T:
        """One client call, its errors turned into sink errors naming the table and what was done."""
        try:
            if self._connection is None:
                self._connect()
            return self._loop.call(fn, self.config.request_timeout)
        except SinkError:
            raise
        except TimeoutError as e:
            self._reconnect()
            raise SinkTransientError(
                f"{action}: no answer within {self.config.request_timeout:.0f} s (request.timeout)",
                sink=self.type,
                table=None if table_id is None else str(table_id),
            ) from e
        except Exception as e:
            error = SinkTransientError if _retriable(e) else SinkTerminalError
            raise error(
                f"{action}: {type(e).__name__}: {_message(e)}",
                sink=self.type,
                table=None if table_id is None else str(table_id),
            ) from e

    # ------------------------------------------------------------------------------- schemas

    def sink_type(self, source_type: DataType) -> DataType:
        return sink_type(source_type)

    def table_schema(self, table_id: TableId) -> Schema | None:
        if table_id not in self._schemas:
            self._schemas[table_id] = self._read_schema(table_id)
        return self._schemas[table_id]

    def _read_schema(self, table_id: TableId) -> Schema | None:
        path = self.table_path(table_id)

        async def read() -> Any:
            try:
                return await self._admin.get_table_info(path)
            except fluss.FlussError as e:
                if e.error_code in _MISSING:
                    return None
                raise

        info = self._call(read, table_id, "reading the schema")
        if info is None:
            return None
        try:
            columns = [Column(name, parse_fluss_type(text)) for name, text in info.get_schema().get_columns()]
        except FlussTypeError as e:
            raise SinkTerminalError(str(e), sink=self.type, table=str(table_id)) from e
        return Schema.of(columns, info.get_primary_keys(), comment=info.comment or None)

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        table_id = change.table_id
        self._forget(table_id)
        try:
            if isinstance(change, CreateTable):
                self._create_table(change)
            elif isinstance(change, AddColumn):
                self._add_column(change)
            elif isinstance(change, DropTable):
                self._buffers.pop(table_id, None)
                path = self.table_path(table_id)
                self._call(
                    lambda: self._admin.drop_table(path, ignore_if_not_exists=True), table_id, "dropping"
                )
            else:
                raise SinkTerminalError(
                    f"{change.tag} is not supported: Fluss only appends columns and drops tables",
                    sink=self.type,
                    table=str(table_id),
                )
        finally:
            self._forget(table_id)

    def _create_table(self, change: CreateTable) -> None:
        table_id, schema = change.table_id, change.schema
        path = self.table_path(table_id)
        existing = self.table_schema(table_id)
        if existing is None:
            try:
                descriptor = self._descriptor(path, schema)
            except FlussTypeError as e:
                raise SinkTerminalError(str(e), sink=self.type, table=str(table_id)) from e

            async def create() -> bool:
                await self._admin.create_database(path.database_name, ignore_if_exists=True)
                try:
                    await self._admin.create_table(path, descriptor, ignore_if_exists=False)
                except fluss.FlussError as e:
                    if e.error_code == fluss.ErrorCode.TABLE_ALREADY_EXIST:
                        return False
                    raise
                return True

            if self._call(create, table_id, "creating the table"):
                return
            self._forget(table_id)
            existing = self.table_schema(table_id)
            assert existing is not None
        problems = _incompatibilities(existing, schema)
        if problems:
            raise incompatible_table(problems, existing, sink_schema(schema), sink=self.type, table=table_id)

    def _descriptor(self, path: Any, schema: Schema) -> Any:
        fluss_schema = fluss.Schema(to_arrow_schema(schema), primary_keys=list(schema.primary_keys) or None)
        options: dict[str, Any] = {}
        bucket_count = self.config.bucket_count_for(path.database_name, path.table_name)
        if bucket_count is not None:
            options["bucket_count"] = bucket_count
        bucket_keys = self.config.bucket_keys_for(path.database_name, path.table_name)
        if bucket_keys is not None:
            options["bucket_keys"] = bucket_keys
        if self.config.table_properties:
            options["properties"] = dict(self.config.table_properties)
        if schema.comment:
            options["comment"] = schema.comment
        return fluss.TableDescriptor(fluss_schema, **options)

    def _add_column(self, change: AddColumn) -> None:
        table_id, column = change.table_id, change.column
        current = self.table_schema(table_id)
        if current is None:
            raise SinkTerminalError("the table does not exist", sink=self.type, table=str(table_id))
        if column.name in current:
            return  # a replay: already added
        path = self.table_path(table_id)
        try:
            alter.add_columns(
                java=self.config.alter_table_java,
                classpath=self.config.alter_table_classpath,
                client=self.config.java_client_properties(),
                database=path.database_name,
                table=path.table_name,
                columns=[alter.NewColumn(column.name, fluss_sql(column.type), column.comment)],
                timeout=self.config.alter_table_timeout,
            )
        except alter.AlterTableError as e:
            raise SinkTerminalError(
                f"adding column {column.name} {sink_type(column.type)}: {e}",
                sink=self.type,
                table=str(table_id),
            ) from e

    def _forget(self, table_id: TableId) -> None:
        """Drop what is cached of a table: its schema, its handle and writer (both tied to a schema)."""
        self._schemas.pop(table_id, None)
        self._tables.pop(table_id, None)

    # ------------------------------------------------------------------------------- rows

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        self._buffers.setdefault(table_id, []).extend(changes)

    def flush(self, offsets: Offsets) -> None:
        for table_id in [t for t, changes in self._buffers.items() if changes]:
            self._commit(table_id, self._buffers[table_id])
            del self._buffers[table_id]
        self._buffers.clear()

    def _table(self, table_id: TableId) -> _Table:
        table = self._tables.get(table_id)
        if table is None:
            schema = self.table_schema(table_id)
            if schema is None:
                raise SinkTerminalError(
                    f"table does not exist (Fluss {self.table_path(table_id)})",
                    sink=self.type,
                    table=str(table_id),
                )
            path = self.table_path(table_id)

            async def open_table() -> _Table:
                return _Table(await self._connection.get_table(path), schema)

            table = self._tables[table_id] = self._call(open_table, table_id, "opening the table")
        return table

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """Partial rows take the values they lack from their key's last version: one the sink holds
        unwritten, else the row the table holds (a lookup by key), and are written whole; those of
        a key the table does not hold, or of a table without a primary key, are refused."""
        keys = schema.primary_keys
        still, rejected = complete_before_reading(
            changes, partial, keys, self._buffers.get(table_id, ()), self.type
        )
        if not still:
            return rejected
        table = self._table(table_id)
        key_rows = []
        for index in still:
            after = changes[index].after
            assert after is not None
            key_rows.append(table.row({k: after[k] for k in keys}))

        async def look_up() -> list[Any]:
            return [await table.lookuper.lookup(key) for key in key_rows]

        found = self._call(look_up, table_id, f"looking up {len(key_rows)} rows to complete")
        for index, held in zip(still, found, strict=True):
            after = changes[index].after
            assert after is not None
            if held is None:
                reason = f"{unavailable_reason(changes[index])}; the table has no row of its key"
                rejected.append((index, reason))
            elif not fill(after, held):
                reason = f"{unavailable_reason(changes[index])}; the table's row lacks the column"
                rejected.append((index, reason))
        return rejected

    def _commit(self, table_id: TableId, changes: list[DataChange]) -> None:
        table = self._table(table_id)
        writer = table.writer
        if table.primary_key:
            keys = table.schema.primary_keys
            state = collapse(changes, keys, self.type)
            upserts = [table.row(row) for row in state.values() if row is not None]
            deletes = [_key_row(keys, key) for key, row in state.items() if row is None]
        else:
            upserts = [table.row(c.after) for c in changes if c.op is not Op.DELETE and c.after is not None]
            deletes = []
            skipped = sum(1 for c in changes if c.op is Op.DELETE)
            if skipped:
                self.skipped_deletes[table_id] = self.skipped_deletes.get(table_id, 0) + skipped
                log.warning("%s is a log table: %d deletes not applied (append-only)", table_id, skipped)

        add = writer.upsert if table.primary_key else writer.append

        async def send() -> None:
            for row in upserts:
                add(row)
            for key in deletes:
                writer.delete(key)
            await writer.flush()

        try:
            self._call(send, table_id, f"writing {len(upserts)} rows and {len(deletes)} deletes")
        except SinkError:
            self._tables.pop(table_id, None)  # a writer that failed is not reused
            raise

    def close(self) -> None:
        if self._buffers:
            log.warning("closing with unflushed rows for %s", ", ".join(str(t) for t in self._buffers))
        self._tables.clear()
        try:
            if self._connection is not None:
                self._loop.call(self._connection.close, self.config.request_timeout)
        except Exception as e:  # closing is best effort
            log.warning("closing the Fluss connection: %s: %s", type(e).__name__, _message(e))
        finally:
            self._loop.close()


# ----------------------------------------------------------------------------------- helpers


def _key_row(keys: tuple[str, ...], key: Hashable) -> dict[str, Any]:
    """A deleted key as the writer takes it (a primary key is a tuple only for several columns)."""
    values = key if len(keys) > 1 and isinstance(key, tuple) else (key,)
    return dict(zip(keys, values, strict=True))


def _retriable(error: Exception) -> bool:
    return isinstance(error, fluss.FlussError) and bool(error.is_retriable)


def _message(error: Exception) -> str:
    text = error.message if isinstance(error, fluss.FlussError) else str(error)
    return text.removeprefix("FlussError: ").strip()


def _incompatibilities(existing: Schema, wanted: Schema) -> list[str]:
    """Why an existing table cannot take the rows of a table created with ``wanted`` (empty: it can)."""
    problems = []
    if set(existing.primary_keys) != set(wanted.primary_keys):
        problems.append(
            f"primary key ({', '.join(existing.primary_keys)}) is not ({', '.join(wanted.primary_keys)})"
        )
    for column in sink_schema(wanted):
        have = existing.find(column.name)
        if have is None:
            problems.append(f"no column {column.name}")
        elif not can_widen(column.type.with_nullable(have.type.nullable), have.type):
            problems.append(f"column {column.name} is {have.type}, not {column.type}")
    problems += [
        f"column {c.name} is NOT NULL and not in the new table"
        for c in existing.columns
        if not c.type.nullable and c.name not in wanted and c.name not in existing.primary_keys
    ]
    return problems
