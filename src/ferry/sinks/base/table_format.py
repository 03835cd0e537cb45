"""What the sinks of open table formats (Iceberg, Paimon) have in common.

Both keep tables in a catalog, apply schema changes through the catalog, buffer rows until a
checkpoint and then commit one snapshot per table that also records the source offsets, so that
a restart skips what a table already holds; a table can be committed alone
(:meth:`TableFormatSink.flush_tables`: the barrier before a schema change commits only its tables).
A subclass says how to load a table, read its schema, create and alter it, commit rows, and walk
its snapshots' properties.

Several workers of one pipeline commit to the same tables, each with the offsets of the partitions
it reads. A commit therefore carries those offsets merged into the ones the table's newest
snapshots carry (per partition, the highest): no worker's commit erases another's. A commit that
loses the race to another writer is retried on the refreshed table, a bounded number of times,
with the offsets merged again.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from abc import abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from operator import itemgetter
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ferry.model.apply import is_applied
from ferry.model.events import CreateTable, DataChange, DropTable, Op, Row, SchemaChange, TruncateTable
from ferry.model.raw_values import ColumnForm, RawForms, materialize_column, same_form
from ferry.model.schema import Schema, TableId
from ferry.model.unavailable import fill, unavailable_reason
from ferry.offsets import Offsets, decode_offsets, encode_offsets
from ferry.retry import Operation, RetryPolicy
from ferry.sinks.base import RefusedRows, Sink
from ferry.sinks.base.exceptions import SinkError, SinkTerminalError, SinkTransientError
from ferry.sinks.base.rows import complete_before_reading

log = logging.getLogger(__name__)

#: The snapshot property holding a pipeline's offsets.
OFFSETS_PROPERTY = "ferry.offsets.{pipeline}"
#: How many of a table's newest snapshots that carry the pipeline's offsets are read for them: a
#: commit that raced another one (and was retried inside the format's library with the offsets
#: merged before the other landed) may carry an older offset than its parent.
OFFSET_SNAPSHOTS = 10
#: How many times a commit that lost a race to another writer is tried.
COMMIT_ATTEMPTS = 8
#: How a commit that lost a race to another writer is tried again.
#: What the file system says when it cannot take a write now but may later: full (or a quota, or
#: a file-size limit), read-only, or a folder whose permissions were taken away. Retried under the
#: pipeline's restart strategy like any outage; an operator frees the space or the folder.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})
#: The same, as the libraries that write files (pyarrow) put them in their messages.
_STORAGE_MESSAGES = tuple(os.strerror(n).lower() for n in STORAGE_ERRNOS)


def storage_may_recover(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) is the table's storage refusing a write for a
    reason an operator can remove (:data:`STORAGE_ERRNOS`)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in STORAGE_ERRNOS:
            return True
        if isinstance(current, OSError) and any(m in str(current).lower() for m in _STORAGE_MESSAGES):
            return True
        current = current.__cause__ or current.__context__
    return False


COMMIT_RETRIES = RetryPolicy(
    attempts=COMMIT_ATTEMPTS, timeout_s=60.0, initial_s=0.05, max_s=2.0, jitter=0.5, log_level=logging.INFO
)


_Catalog = TypeVar("_Catalog")


class TableFormatSink(Sink):
    """The common part of the Iceberg and Paimon sinks (see the module documentation)."""

    #: The format's name in messages ("Iceberg").
    format_name: ClassVar[str]

    def __init__(self, *, pipeline: str) -> None:
        self.pipeline = pipeline
        self.offsets_property = OFFSETS_PROPERTY.format(pipeline=pipeline)
        #: Deletes received for tables without a primary key, which an append-only table cannot apply.
        self.skipped_deletes: dict[TableId, int] = {}
        self._schemas: dict[TableId, Schema | None] = {}
        self._buffers: dict[TableId, list[DataChange]] = {}
        #: Where a row whose value does not fit its column goes (None: the commit fails).
        self.refused: RefusedRows | None = None
        self._written_schemas: dict[TableId, Schema] = {}
        #: Per table, the forms of the raw columns of its buffered rows (see :meth:`write_raw`)
        self._raw_forms: dict[TableId, dict[str, ColumnForm]] = {}

    def open_catalog(self, warehouse: Path | None, catalog: str, opener: Callable[[], _Catalog]) -> _Catalog:
        """The catalog ``opener`` opens, the local ``warehouse`` directory created first; a failure
        is terminal, naming ``catalog``."""
        try:
            if warehouse is not None:
                warehouse.mkdir(parents=True, exist_ok=True)
            return opener()
        except Exception as e:
            raise SinkTerminalError(f"cannot open {catalog} ({type(e).__name__}: {e})", sink=self.type) from e

    # ------------------------------------------------------------------------------- what a format says

    @abstractmethod
    def identifier(self, table_id: TableId) -> Any:
        """The format's name for a ferry table."""

    @abstractmethod
    def load_table(self, table_id: TableId) -> Any | None:
        """The table as the catalog has it now, or ``None`` when it does not exist."""

    @abstractmethod
    def read_schema(self, table: Any) -> Schema:
        """A table's schema as ferry types."""

    @abstractmethod
    def create_table(self, change: CreateTable) -> None:
        """Create the table, or check that the existing one can take the rows."""

    @abstractmethod
    def alter_table(self, change: SchemaChange) -> None:
        """Apply a column or comment change to an existing table."""

    @abstractmethod
    def commit(
        self, table_id: TableId, table: Any, changes: list[DataChange], properties: dict[str, str]
    ) -> None:
        """One snapshot of ``table`` (as loaded for the offsets) with these changes, carrying
        ``properties`` (the offsets)."""

    @abstractmethod
    def snapshot_properties(self, table: Any) -> Iterable[dict[str, str]]:
        """The properties of the table's snapshots, newest first."""

    @abstractmethod
    def drop_catalog_table(self, table_id: TableId) -> None:
        """Drop an existing table from the catalog."""

    @abstractmethod
    def read_rows(self, table: Any, keys: tuple[str, ...], values: list[Hashable]) -> list[Row]:
        """The rows of ``table`` whose key is one of ``values`` (tuples for a composite key), as
        the table holds them now (at least those: the caller matches the keys)."""

    def already_applied(self, change: SchemaChange) -> bool:
        """Whether the table already shows the change (a replay); names compared exactly."""
        return is_applied(self.read_schema(self.require_table(change.table_id)), change)

    def is_transient(self, error: Exception) -> bool:
        """Whether an error of the format's library may go away on retry."""
        return False

    def is_conflict(self, error: BaseException | None) -> bool:
        """Whether a commit failed because another writer committed first (retried on the table as
        it is now)."""
        return False

    def commit_guard(self, table_id: TableId) -> AbstractContextManager[Any]:
        """Held while the offsets are merged and the table committed; nothing by default (the
        catalog detects conflicting commits)."""
        return nullcontext()

    def after_commit(self, table_id: TableId, properties: dict[str, str]) -> None:
        """Work that follows a table's commit (compaction); nothing by default."""

    # ------------------------------------------------------------------------------- Sink

    def require_table(self, table_id: TableId) -> Any:
        table = self.load_table(table_id)
        if table is None:
            raise SinkTerminalError(
                f"table does not exist ({self.format_name} {self.identifier(table_id)})",
                sink=self.type,
                table=str(table_id),
            )
        return table

    def drop_table(self, table_id: TableId) -> bool:
        """Drop the table from the catalog (a replay rebuilds it); False when it did not exist."""
        self._schemas.pop(table_id, None)
        if self.load_table(table_id) is None:
            return False
        self.drop_catalog_table(table_id)
        return True

    def forget_schema(self, table_id: TableId) -> None:
        self._schemas.pop(table_id, None)

    def table_schema(self, table_id: TableId) -> Schema | None:
        if table_id not in self._schemas:
            with self.errors(table_id, "reading the schema"):
                table = self.load_table(table_id)
                self._schemas[table_id] = None if table is None else self.read_schema(table)
        return self._schemas[table_id]

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        table_id = change.table_id
        self._schemas.pop(table_id, None)
        with self.errors(table_id, f"applying {change.tag}"):
            if isinstance(change, CreateTable):
                self.create_table(change)
            elif isinstance(change, DropTable | TruncateTable):
                raise SinkTerminalError(
                    f"{change.tag} is not supported: the sink never drops or truncates "
                    f"a {self.format_name} table",
                    sink=self.type,
                    table=str(table_id),
                )
            elif not self.already_applied(change):
                self.alter_table(change)
        self._schemas.pop(table_id, None)

    def on_refused(self, handler: RefusedRows) -> None:
        """A row with a value that does not fit its column is set aside (see
        :func:`ferry.sinks.base.arrow.rows_to_arrow_setting_aside`) and goes to ``handler``."""
        self.refused = handler

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        buffer = self._buffers.get(table_id)
        if buffer is None:
            self._buffers[table_id] = list(changes)
        else:
            buffer.extend(changes)
        self._written_schemas[table_id] = schema

    def write_raw(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], forms: RawForms
    ) -> None:
        """:meth:`write`, with columns whose values are raw in some rows (see
        :mod:`ferry.model.raw_values`): converted when the table builds its Arrow data
        (:meth:`raw_forms`), but for key columns (rows are matched by them) and a column whose
        form differs from that of the rows buffered before, converted here."""
        keys = set(schema.primary_keys)
        kept = self._raw_forms.setdefault(table_id, {})
        for name, form in forms.items():
            known = kept.get(name)
            if name in keys or (known is not None and not same_form(known, form)):
                for change in changes:
                    materialize_column((change.before, change.after), name, form)
            else:
                kept[name] = form
        self.write(table_id, schema, changes)

    def raw_forms(self, table_id: TableId) -> RawForms | None:
        """The forms of the raw columns of a table's buffered rows (None: no column is raw)."""
        return self._raw_forms.get(table_id)

    def complete_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], partial: Sequence[int]
    ) -> list[tuple[int, str]]:
        """A partial row takes its missing values from its key's last version: buffered for this
        checkpoint, else read from the table (one read of every such key of the checkpoint)."""
        keys = schema.primary_keys
        buffered = self._buffers.get(table_id, ())
        still, rejected = complete_before_reading(changes, partial, keys, buffered, self.type)
        if not still:
            return rejected
        get = itemgetter(*keys)
        wanted: dict[Hashable, list[int]] = {}
        for index in still:
            after = changes[index].after
            assert after is not None
            wanted.setdefault(get(after), []).append(index)
        table = self.load_table(table_id)
        held: dict[Hashable, Row] = {}
        if table is not None:
            with self.errors(table_id, "reading the rows to update"):
                held = {get(row): row for row in self.read_rows(table, keys, list(wanted))}
        for key, indexes in wanted.items():
            for index in indexes:
                after = changes[index].after
                assert after is not None
                row = held.get(key)
                if row is None or not fill(after, row):
                    reason = f"{unavailable_reason(changes[index])}; the table has no row of its key"
                    rejected.append((index, reason))
                else:
                    held[key] = after  # a later partial row of the key in this checkpoint
        return rejected

    def append_only_rows(self, table_id: TableId, changes: Sequence[DataChange]) -> list[Row]:
        """The rows a table without a primary key gets: the new rows of inserts and updates. Its
        deletes cannot be matched to a row: they are counted in :attr:`skipped_deletes`."""
        rows = [c.after for c in changes if c.op is not Op.DELETE and c.after is not None]
        deletes = sum(1 for c in changes if c.op is Op.DELETE)
        if deletes:
            self.skipped_deletes[table_id] = self.skipped_deletes.get(table_id, 0) + deletes
            log.warning("%s has no primary key: %d deletes not applied (append-only)", table_id, deletes)
        return rows

    def flush(self, offsets: Offsets) -> None:
        self.flush_tables(list(self._buffers), offsets)
        self._buffers.clear()
        self._raw_forms.clear()

    def flush_tables(self, table_ids: Collection[TableId], offsets: Offsets) -> None:
        """One snapshot per table of ``table_ids`` that has rows buffered, carrying ``offsets``; the
        rows of the other tables stay buffered."""
        for table_id in [t for t in table_ids if self._buffers.get(t)]:
            properties = self._commit_merged(table_id, self._buffers[table_id], offsets)
            del self._buffers[table_id]
            self._raw_forms.pop(table_id, None)
            self.after_commit(table_id, properties)

    def _commit_merged(
        self, table_id: TableId, changes: list[DataChange], offsets: Offsets
    ) -> dict[str, str]:
        """Commit the rows with ``offsets`` merged into the table's; retry a commit another writer
        beat (the table is loaded again for each attempt). Returns the properties committed."""

        def commit() -> dict[str, str]:
            with self.errors(table_id, "committing rows"), self.commit_guard(table_id):
                # merged into the offsets of the very table state the commit builds on: a commit
                # another writer makes after this load fails this one (and is merged on the
                # retry), never goes unseen
                table = self.require_table(table_id)
                merged = self._offsets_in(table)
                for tp, offset in offsets.items():
                    merged[tp] = max(offset, merged.get(tp, offset))
                text = json.dumps(encode_offsets(merged), separators=(",", ":"))  # compact
                properties = {self.offsets_property: text}
                self.commit(table_id, table, changes, properties)
            return properties

        def lost_a_race(error: BaseException) -> bool:
            return isinstance(error, SinkTransientError) and self.is_conflict(error.__cause__)

        return COMMIT_RETRIES.call(
            commit,
            f"{table_id}: another writer committed first; committing",
            operation=Operation.SINK_COMMIT,
            transient=lost_a_race,
        )

    def committed_offsets(self, table_id: TableId) -> dict[tuple[str, int], int]:
        """Per partition, the highest offset the newest snapshots carrying this pipeline's offsets have."""
        with self.errors(table_id, "reading committed offsets"):
            return self._committed(table_id)

    def _committed(self, table_id: TableId) -> dict[tuple[str, int], int]:
        table = self.load_table(table_id)
        return {} if table is None else self._offsets_in(table)

    def _offsets_in(self, table: Any) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        seen = 0
        for properties in self.snapshot_properties(table):
            value = properties.get(self.offsets_property)
            if value is None:
                continue
            for tp, offset in decode_offsets(json.loads(value)).items():
                out[tp] = max(offset, out.get(tp, offset))
            seen += 1
            if seen == OFFSET_SNAPSHOTS:
                break
        return out

    def close(self) -> None:
        if self._buffers:
            log.warning("closing with unflushed rows for %s", ", ".join(str(t) for t in self._buffers))

    @contextmanager
    def errors(self, table_id: TableId, action: str) -> Iterator[None]:
        """Turn the library's errors into sink errors naming the table; forget the cached schema."""
        try:
            yield
        except SinkError:
            self._schemas.pop(table_id, None)
            raise
        except Exception as e:
            self._schemas.pop(table_id, None)
            transient = self.is_transient(e) or storage_may_recover(e)
            error = SinkTransientError if transient else SinkTerminalError
            raise error(f"{action}: {type(e).__name__}: {e}", sink=self.type, table=str(table_id)) from e
