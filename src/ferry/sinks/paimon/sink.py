"""The Paimon sink: schema changes through ``catalog.alter_table``, rows in one commit per table and flush.

Writing. :meth:`PaimonSink.write` only buffers. :meth:`PaimonSink.flush` commits, per table with
buffered changes, one Paimon snapshot holding them all, collapsed to the last state of each key.
A primary-key table deduplicates by key (upsert). pypaimon writes a row kind only from a column
named by the table option ``rowkind.field``: a table with such a column (opt-in, hidden from the
schema the sink reports) takes deletes as rows saying ``-D``; a table without one, as Flink CDC
creates it, takes a flush with deletes as one overwrite of the table without the deleted keys
(:meth:`PaimonSink._rewrite`). Tables are created as Flink CDC's Paimon sink creates them: the
partition keys join the primary key, a transform's ``table-options`` are table options. A table
without a primary key is append-only: its deletes are counted in
:attr:`PaimonSink.skipped_deletes`. A
commit's rows are one Arrow table, written by pypaimon's Rust writer unless the table's options
say otherwise (:data:`NATIVE_WRITE_OPTION`).

Each snapshot carries the source offsets it reaches (``ferry.offsets.<pipeline>`` in the snapshot
properties), which :meth:`PaimonSink.committed_offsets` reads back after a restart. Its commit user
is ``commit.user`` (the pipeline's name unless set); each commit has its own identifier, so that
pypaimon's retry after a conflict never takes another commit for its own.

Column names are matched ignoring case: a change naming a column the table spells differently
(source ``Qty``, table ``qty``) fails at Paimon and is retried with the table's spelling.

Several writers. pypaimon retries a commit that lost the race for the next snapshot id (with the
snapshot properties it was given) and gives up with a ``RuntimeError`` naming commit conflicts,
which the sink retries with the offsets merged again. On a local file system pypaimon's snapshot
commit is atomic within one process only (a thread lock around "exists, then rename"), so the
workers of a pipeline on one machine also take an exclusive ``flock`` on the table's directory
around each commit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Hashable, Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from datetime import time as dt_time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pypaimon import CatalogFactory
from pypaimon import Schema as PaimonSchema
from pypaimon.catalog.catalog_exception import (
    DatabaseNotExistException,
    TableAlreadyExistException,
    TableNotExistException,
)
from pypaimon.data.generic_variant import GenericVariant
from pypaimon.schema.data_types import AtomicType, PyarrowFieldParser
from pypaimon.schema.schema_change import Move
from pypaimon.schema.schema_change import SchemaChange as PaimonChange

from ferry.model import events as E
from ferry.model.apply import is_applied
from ferry.model.defaults import default_value
from ferry.model.events import ColumnPositionKind, DataChange, Op, Row, SchemaChange
from ferry.model.schema import Schema, TableId
from ferry.model.types import DataType
from ferry.model.variant import Variant
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base.arrow import rows_to_arrow_setting_aside
from ferry.sinks.base.exceptions import SinkTerminalError, incompatible_table
from ferry.sinks.base.rows import last_changes
from ferry.sinks.base.table_format import TableFormatSink
from ferry.sinks.paimon import PAIMON
from ferry.sinks.paimon.config import PaimonSinkConfig
from ferry.sinks.paimon.types import (
    PaimonTypeError,
    check_type_change,
    sink_schema,
    sink_type,
    to_ferry_schema,
    to_paimon_fields,
    to_paimon_type,
)

log = logging.getLogger(__name__)

CAPABILITIES = PAIMON.capabilities
#: Table option naming a column added with a default whose rows are not backfilled yet (its value).
BACKFILL_OPTION = "ferry.backfill."
#: Snapshot property of the commit that backfilled a column (its name).
BACKFILLED_PROPERTY = "ferry.backfilled"

#: Snapshot property holding a pipeline's offsets: ``{"topic": {"partition": next offset}}``.
#: The table option naming the row-kind column of a primary-key table.
ROWKIND_OPTION = "rowkind.field"
#: The table option that writes through pypaimon's Rust writer (``pypaimon-rust``): it sorts,
#: deduplicates and buckets the rows and writes the Parquet files off the Python interpreter. A
#: commit sets it on the table it writes unless the table's own options set it.
NATIVE_WRITE_OPTION = "write.native.enabled"
#: Row kind of each operation, in the row-kind column.
ROW_KINDS: dict[Op, str] = {Op.INSERT: "+I", Op.READ: "+I", Op.UPDATE: "+U", Op.DELETE: "-D"}
DELETE_KIND = ROW_KINDS[Op.DELETE]
#: The table option under which an overwrite replaces only the partitions it writes rows to.
DYNAMIC_OVERWRITE_OPTION = "dynamic-partition-overwrite"

_TRANSIENT = (ConnectionError, TimeoutError)
#: A column of row numbers, in a table of key columns only.
_ROW_NUMBER = "__ferry_row_number"


class PaimonSink(TableFormatSink):
    """Writes change events into Paimon tables through a pypaimon catalog."""

    format_name = "Paimon"

    type: str = PAIMON.type
    capabilities: SinkCapabilities = CAPABILITIES

    def __init__(self, config: PaimonSinkConfig, *, pipeline: str) -> None:
        super().__init__(pipeline=pipeline)
        self.config = config
        self.commit_user = config.resolved_commit_user(pipeline)
        self._last_identifier = 0
        self.catalog: Any = self.open_catalog(
            config.warehouse_dir(),
            "catalog",
            lambda: CatalogFactory.create(config.resolved_catalog_properties()),
        )

    # ------------------------------------------------------------------------------- identifiers

    def identifier(self, table_id: TableId) -> str:
        """The Paimon ``database.table`` of a ferry table."""
        return f"{table_id.schema_name or self.config.database}.{table_id.table_name}"

    def load_table(self, table_id: TableId) -> Any | None:
        """The Paimon table as the catalog has it now, or ``None`` when it does not exist."""
        try:
            return self.catalog.get_table(self.identifier(table_id))
        except (TableNotExistException, DatabaseNotExistException):
            return None

    def drop_catalog_table(self, table_id: TableId) -> None:
        self.catalog.drop_table(self.identifier(table_id), True)

    def read_rows(self, table: Any, keys: tuple[str, ...], values: list[Hashable]) -> list[Row]:
        builder = table.new_read_builder()
        predicates = builder.new_predicate_builder()
        if len(keys) == 1:
            condition = predicates.is_in(keys[0], list(values))
        else:
            condition = predicates.and_predicates(
                [predicates.is_in(k, [v[i] for v in values]) for i, k in enumerate(keys)]  # type: ignore[index]
            )
        builder = builder.with_filter(condition)
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        rows: list[Row] = [] if data is None else data.to_pylist()
        return rows

    # ------------------------------------------------------------------------------- schemas

    def sink_type(self, source_type: DataType) -> DataType:
        return sink_type(source_type)

    def read_schema(self, table: Any) -> Schema:
        return _read_schema(table)

    def already_applied(self, change: SchemaChange) -> bool:
        # column names match ignoring case here: the retry with the table's spelling decides
        return False

    def alter_table(self, change: SchemaChange) -> None:
        self._finish_backfills(change.table_id, self.require_table(change.table_id))
        self._alter_with_retry(change)
        if isinstance(change, E.AddColumn):
            self._finish_backfills(change.table_id, self.require_table(change.table_id))

    def _finish_backfills(self, table_id: TableId, table: Any) -> Any:
        """Backfill the columns added with a default whose rows are not backfilled yet; returns
        the table as it is then.

        Paimon keeps a default for the rows written without the column, not for the rows a table
        held before it (pypaimon's reader gives them NULL), so those rows are written again with
        the default. The column is added with a table option naming its default
        (``ferry.backfill.<column>``) in the same schema change; the rows are then overwritten in
        one commit marked with the column (snapshot property ``ferry.backfilled``), and the option
        removed. Every change or commit of the table first finishes what a stop between those
        steps left: a table with the option whose newest snapshot is not the backfill's is
        backfilled (its rows still all predate the column); one whose newest snapshot is loses
        the option.
        """
        pending = {
            k[len(BACKFILL_OPTION) :]: v
            for k, v in table.table_schema.options.items()
            if k.startswith(BACKFILL_OPTION)
        }
        if not pending:
            return table
        for name, text in pending.items():
            latest = table.snapshot_manager().get_latest_snapshot()
            done = latest is not None and (latest.properties or {}).get(BACKFILLED_PROPERTY) == name
            if not done and latest is not None:
                self._backfill(table_id, table, name, text)
            self.catalog.alter_table(
                self.identifier(table_id), [PaimonChange.remove_option(BACKFILL_OPTION + name)], False
            )
            table = self.require_table(table_id)
        return table

    def _backfill(self, table_id: TableId, table: Any, name: str, text: str) -> None:
        """The table's rows overwritten with ``name`` set to the default ``text`` in every row."""
        fields = table.table_schema.fields
        arrow_schema = PyarrowFieldParser.from_paimon_schema(fields)
        column = _read_schema(table).column(name)
        value = default_value(replace(column, default=text))
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        if data is None:
            data = arrow_schema.empty_table()
        data = data.select(arrow_schema.names).cast(arrow_schema)
        at = arrow_schema.get_field_index(name)
        field = arrow_schema.field(at)
        data = data.set_column(at, field, pa.repeat(pa.scalar(value, type=field.type), data.num_rows))
        writes = table.new_batch_write_builder().overwrite()
        writer = writes.new_write()
        commit = writes.new_commit()
        try:
            if data.num_rows:
                writer.write_arrow(data)
            commit.commit(writer.prepare_commit(), snapshot_properties={BACKFILLED_PROPERTY: name})
        finally:
            writer.close()
            commit.close()
        log.info(
            "%s: %s added with default %s, %d rows written again with it", table_id, name, text, data.num_rows
        )

    def create_table(self, change: E.CreateTable) -> None:
        database, _ = self.identifier(change.table_id).split(".", 1)
        table = self.load_table(change.table_id)
        if table is None:
            partition_keys = self._partition_keys(change)
            missing = [k for k in partition_keys if k not in change.schema]
            if missing:
                raise SinkTerminalError(
                    f"partition key {', '.join(missing)} is not a column of the table "
                    f"(partition.key or the transform's partition-keys)",
                    sink=self.type,
                    table=str(change.table_id),
                )
            schema = keyed_schema(change.schema, partition_keys)
            options = {
                **self.config.new_table_properties(primary_key=bool(schema.primary_keys)),
                **dict(schema.options),
            }
            if not schema.primary_keys:
                options.pop(ROWKIND_OPTION, None)
            rowkind = options.get(ROWKIND_OPTION)
            if rowkind is not None and rowkind in schema:
                raise SinkTerminalError(
                    f"the table has a column {rowkind!r}, which {ROWKIND_OPTION} names for the row kind: "
                    f"set table.properties.{ROWKIND_OPTION} to another name",
                    sink=self.type,
                    table=str(change.table_id),
                )
            extra = [] if rowkind is None else [(rowkind, AtomicType("STRING"))]
            try:
                fields = to_paimon_fields(schema, extra)
            except PaimonTypeError as e:
                raise SinkTerminalError(str(e), sink=self.type, table=str(change.table_id)) from e
            paimon_schema = PaimonSchema(
                fields,
                partition_keys=list(partition_keys),
                primary_keys=list(schema.primary_keys),
                options=options,
                comment=schema.comment,
            )
            self.catalog.create_database(database, True)
            try:
                self.catalog.create_table(self.identifier(change.table_id), paimon_schema, False)
                return
            except TableAlreadyExistException:
                table = self.require_table(change.table_id)
        existing = _read_schema(table)
        partition_keys = self._partition_keys(change)
        problems = _incompatibilities(existing, change.schema, keyed_schema(change.schema, partition_keys))
        if problems:
            raise incompatible_table(
                problems, existing, sink_schema(change.schema), sink=self.type, table=change.table_id
            )

    def _partition_keys(self, change: E.CreateTable) -> tuple[str, ...]:
        """The partition keys of a table created: ``partition.key``'s for it, else its schema's."""
        return self.config.partition_keys.get(str(change.table_id), change.schema.partition_keys)

    def _alter_with_retry(self, change: SchemaChange) -> None:
        """Apply a change; one that fails on a column spelled otherwise at the table is retried so."""
        table_id = change.table_id
        current = _read_schema(self.require_table(table_id))
        respelled = respell(change, current)
        if is_applied(current, respelled) or _added_ignoring_case(current, change):
            return
        try:
            self._alter(change, current)
        except Exception as e:
            if respelled == change:
                raise
            log.info(
                "%s: %s failed (%s); retrying with the table's spelling: %s", table_id, change, e, respelled
            )
            self._alter(respelled, current)

    def _alter(self, change: SchemaChange, current: Schema) -> None:
        table_id = change.table_id
        changes: list[Any]
        match change:
            case E.AddColumn(column=column, position=position):
                changes = [
                    PaimonChange.add_column(
                        column.name,
                        # nullable even when the source says NOT NULL: the rows already written have no value
                        to_paimon_type(column.type.with_nullable(True)),
                        comment=column.comment,
                        move=_move(column.name, position.kind, position.reference),
                    )
                ]
                if default_value(column) is not None and column.default is not None:
                    # the rows held are backfilled with it (_finish_backfills)
                    changes.append(PaimonChange.set_option(BACKFILL_OPTION + column.name, column.default))
            case E.DropColumn(column_name=name):
                changes = [PaimonChange.drop_column(name)]
            case E.RenameColumn(old_name=old, new_name=new):
                changes = [PaimonChange.rename_column(old, new)]
            case E.AlterColumnType(column_name=name, new_type=new_type):
                changes = self._type_changes(table_id, current, name, new_type)
            case E.AlterColumnComment(column_name=name, comment=comment):
                changes = [PaimonChange.update_column_comment(name, comment or "")]
            case E.AlterTableComment(comment=comment):
                changes = [PaimonChange.update_comment(comment)]
            case _:
                raise SinkTerminalError(f"no rule for {change.tag}", sink=self.type, table=str(table_id))
        if changes:
            self.catalog.alter_table(self.identifier(table_id), changes, False)

    def _type_changes(self, table_id: TableId, current: Schema, name: str, new_type: DataType) -> list[Any]:
        column = current.find(name)
        if column is None:
            # the catalog names the missing column; a respelled retry may find it
            return [PaimonChange.update_column_type(name, to_paimon_type(new_type), True)]
        have, want = column.type, sink_type(new_type)
        try:
            check_type_change(have, want)
        except PaimonTypeError as e:
            raise SinkTerminalError(
                f"cannot change the type of column {name} from {have} to {new_type}: {e}",
                sink=self.type,
                table=str(table_id),
            ) from e
        changes: list[Any] = []
        if not have.same_ignoring_nullability(want):
            changes.append(PaimonChange.update_column_type(name, to_paimon_type(want), True))
        # a primary key column stays NOT NULL; tightening is never asked (the sink stays nullable)
        if want.nullable and not have.nullable and name not in current.primary_keys:
            changes.append(PaimonChange.update_column_nullability(name, True))
        return changes

    # ------------------------------------------------------------------------------- rows

    def commit(
        self, table_id: TableId, table: Any, changes: list[DataChange], properties: dict[str, str]
    ) -> None:
        table = self._finish_backfills(table_id, table)
        data, kinds = self._arrow_rows(table_id, table, changes)
        if kinds is not None and table.options.ignore_delete():
            # Paimon's ignore-delete (or an older spelling): the table drops deletes
            data = data.filter(pa.array([kind != DELETE_KIND for kind in kinds], pa.bool_()))
        elif kinds is not None:
            self._rewrite(table_id, table, data, kinds, properties)
            return
        self._write(_writing(table, {}).new_stream_write_builder(), data, properties, self._next_identifier())

    def _write(
        self, builder: Any, rows: pa.Table, properties: dict[str, str], identifier: int | None
    ) -> None:
        """``rows`` written and committed through ``builder`` (a stream write's commit carries its
        ``identifier``; a batch write, None, has none)."""
        builder.commit_user = self.commit_user
        writer = builder.new_write()
        commit = builder.new_commit()
        try:
            if rows.num_rows:
                writer.write_arrow(rows)
            if identifier is None:
                commit.commit(writer.prepare_commit(), snapshot_properties=properties)
            else:
                commit.commit(writer.prepare_commit(identifier), identifier, snapshot_properties=properties)
        finally:
            writer.close()
            commit.close()

    def _rewrite(
        self, table_id: TableId, table: Any, data: pa.Table, kinds: list[str], properties: dict[str, str]
    ) -> None:
        """Deletes of a primary-key table without a row-kind column: the table overwritten, in one
        commit, with its rows but the deleted keys, then the rows of ``data`` that are not deletes
        (``kinds``), which Paimon merges over the rows of their keys as any upsert (after them,
        and by ``sequence.field`` when the table has one). pypaimon writes a row kind only from a
        column of the table."""
        keys = list(table.primary_keys)
        schema = data.schema
        deleted = pa.array([kind == DELETE_KIND for kind in kinds], pa.bool_())
        builder = table.new_read_builder()
        held = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        held = schema.empty_table() if held is None else held.select(schema.names).cast(schema)
        gone = data.filter(deleted).select(keys)
        # the join takes the key columns and row numbers only (Arrow joins no nested columns)
        numbered = held.select(keys).append_column(_ROW_NUMBER, pa.array(range(held.num_rows), pa.int64()))
        survivors = numbered.join(gone, keys=keys, join_type="left anti").column(_ROW_NUMBER)
        kept = held.take(survivors)
        rows = pa.concat_tables([kept, data.filter(pc.invert(deleted))])
        # every partition is replaced, also one whose last row is deleted
        overwrite = _writing(table, {DYNAMIC_OVERWRITE_OPTION: "false"}).new_batch_write_builder().overwrite()
        self._write(overwrite, rows, properties, None)
        log.info(
            "%s: %d deletes applied by writing the table again (%d rows; no %s column)",
            table_id,
            kinds.count(DELETE_KIND),
            rows.num_rows,
            ROWKIND_OPTION,
        )

    def _arrow_rows(
        self, table_id: TableId, table: Any, changes: list[DataChange]
    ) -> tuple[pa.Table, list[str] | None]:
        """The rows a commit writes, as one Arrow table of the table's schema: for a primary-key
        table the last change of each key, its row kind in the row-kind column when the table has
        one. The row kinds come second when the table has no such column and some are deletes
        (the commit then writes the table again); else None."""
        fields = table.table_schema.fields
        keys = tuple(table.primary_keys)
        rowkind = table.table_schema.options.get(ROWKIND_OPTION) if keys else None
        arrow_schema = PyarrowFieldParser.from_paimon_schema(fields)
        kinds: list[str] | None = None
        if keys:
            last = last_changes(changes, keys, self.type).values()
            required = [f for f in arrow_schema if not f.nullable]
            rows = [_fill_not_null(row, required) if op is Op.DELETE else row for op, row in last]
            kinds = [ROW_KINDS[op] for op, _ in last]
        else:
            rows = self.append_only_rows(table_id, changes)
        variants = [f.name for f in fields if isinstance(f.type, AtomicType) and f.type.type == "VARIANT"]
        if variants:
            rows = [_with_variants(row, variants, table_id) for row in rows]
        raw = self.raw_forms(table_id)
        if kinds is None or rowkind not in arrow_schema.names:
            data, unfit = rows_to_arrow_setting_aside(
                arrow_schema, rows, changes, self.refused, sink=self.type, table_id=table_id, raw=raw
            )
            if kinds is None:
                return data, None
            kinds = [kind for i, kind in enumerate(kinds) if i not in unfit]
            return data, kinds if DELETE_KIND in kinds else None
        # the row kinds are a column of their own, not a key added to a copy of every row
        at = arrow_schema.get_field_index(rowkind)
        data, unfit = rows_to_arrow_setting_aside(
            arrow_schema.remove(at), rows, changes, self.refused, sink=self.type, table_id=table_id, raw=raw
        )
        kinds = [kind for i, kind in enumerate(kinds) if i not in unfit]
        return data.add_column(at, arrow_schema.field(at), pa.array(kinds, pa.string())), None

    def _next_identifier(self) -> int:
        """A commit identifier of its own: the clock in nanoseconds, increasing within this sink."""
        self._last_identifier = max(self._last_identifier + 1, time.time_ns())
        return self._last_identifier

    # ------------------------------------------------------------------------------- offsets

    def snapshot_properties(self, table: Any) -> Iterator[dict[str, str]]:
        snapshots = table.snapshot_manager()
        snapshot = snapshots.get_latest_snapshot()
        while snapshot is not None:
            yield snapshot.properties or {}
            snapshot = snapshots.get_snapshot_by_id(snapshot.id - 1) if snapshot.id > 1 else None

    def is_transient(self, error: Exception) -> bool:
        return isinstance(error, _TRANSIENT) or _is_commit_conflict(error)

    def is_conflict(self, error: BaseException | None) -> bool:
        return isinstance(error, Exception) and _is_commit_conflict(error)

    @contextlib.contextmanager
    def commit_guard(self, table_id: TableId) -> Iterator[None]:
        table = self.load_table(table_id)
        directory = None if table is None else _local_directory(str(table.table_path))
        if directory is None or not os.path.isdir(directory):
            yield
            return
        import fcntl  # noqa: PLC0415 - POSIX only, like the local file systems it guards

        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


# ----------------------------------------------------------------------------------- helpers


def _read_schema(table: Any) -> Schema:
    table_schema = table.table_schema
    rowkind = table_schema.options.get(ROWKIND_OPTION)
    hidden = frozenset({rowkind} if rowkind else ())
    schema = to_ferry_schema(
        table_schema.fields, list(table_schema.primary_keys), table_schema.comment, hidden
    )
    partitions = tuple(table_schema.partition_keys or ())
    return replace(schema, partition_keys=partitions) if partitions else schema


def _local_directory(path: str) -> str | None:
    """The local directory of a table path, or None for a remote file system."""
    if path.startswith("file://"):
        return path.removeprefix("file://")
    return None if "://" in path else path


def _is_commit_conflict(error: Exception) -> bool:
    """pypaimon gives up on a commit that kept conflicting with a RuntimeError saying so."""
    return isinstance(error, RuntimeError) and "commit conflicts" in str(error)


def _move(name: str, kind: ColumnPositionKind, reference: str | None) -> Any:
    if kind is ColumnPositionKind.FIRST:
        return Move.first(name)
    if kind is ColumnPositionKind.AFTER and reference is not None:
        return Move.after(name, reference)
    if kind is ColumnPositionKind.BEFORE and reference is not None:
        return Move.before(name, reference)
    return None


def respell(change: SchemaChange, schema: Schema) -> SchemaChange:
    """``change`` with each existing column it names spelled as ``schema`` spells it, ignoring case."""

    def spelled(name: str) -> str:
        if name in schema:
            return name
        column = schema.find_ignoring_case(name)
        return name if column is None else column.name

    match change:
        case E.AddColumn(position=position) if position.reference is not None:
            return replace(change, position=replace(position, reference=spelled(position.reference)))
        case (
            E.DropColumn(column_name=name)
            | E.AlterColumnType(column_name=name)
            | E.AlterColumnComment(column_name=name)
        ):
            return replace(change, column_name=spelled(name))
        case E.RenameColumn(old_name=old):
            return replace(change, old_name=spelled(old))
    return change


def _added_ignoring_case(schema: Schema, change: SchemaChange) -> bool:
    """An added column the table already has under another spelling (column names ignore case)."""
    if not isinstance(change, E.AddColumn) or change.column.name in schema:
        return False
    existing = schema.find_ignoring_case(change.column.name)
    if existing is not None:
        log.info(
            "%s: column %s exists as %s; nothing to add", change.table_id, change.column.name, existing.name
        )
    return existing is not None


def keyed_schema(schema: Schema, partition_keys: tuple[str, ...]) -> Schema:
    """The schema of the Paimon table created for ``schema`` partitioned by ``partition_keys``: a
    primary key followed by the partition keys it lacks, as Flink CDC's Paimon sink creates it
    (Paimon wants a primary-key table's partition keys in its key). A table without a primary key
    stays without one (an append table)."""
    if not schema.primary_keys:
        return schema
    added = tuple(k for k in partition_keys if k not in schema.primary_keys)
    return replace(schema, primary_keys=schema.primary_keys + added) if added else schema


def _incompatibilities(existing: Schema, wanted: Schema, keyed: Schema) -> list[str]:
    """Why an existing table cannot take the rows of a table created with ``wanted`` (empty: it
    can); its key is either ``wanted``'s or ``keyed``'s (with the partition keys)."""
    target = sink_schema(wanted)
    problems = []
    if set(existing.primary_keys) not in ({*wanted.primary_keys}, {*keyed.primary_keys}):
        problems.append(
            f"primary key ({', '.join(existing.primary_keys)}) is not ({', '.join(keyed.primary_keys)})"
        )
    for column in target.columns:
        have = existing.find(column.name) or existing.find_ignoring_case(column.name)
        if have is None:
            problems.append(f"no column {column.name}")
            continue
        if not have.type.nullable and column.type.nullable:
            problems.append(f"column {have.name} is NOT NULL")
        try:
            check_type_change(column.type, have.type)
        except PaimonTypeError as e:
            problems.append(f"column {have.name}: {e}")
    wanted_names = {c.name.lower() for c in target.columns}
    problems += [
        f"column {c.name} is NOT NULL and not in the new table"
        for c in existing.columns
        if not c.type.nullable and c.name.lower() not in wanted_names
    ]
    return problems


def _with_variants(row: Row, names: list[str], table_id: TableId) -> Row:
    """The row with its VARIANT columns' values in Paimon's variant encoding (value and metadata)."""
    encoded = dict(row)
    for name in names:
        value = row.get(name)
        if value is None or isinstance(value, dict):
            continue
        if not isinstance(value, Variant):
            raise SinkTerminalError(
                f"column {name} is a VARIANT but a row holds {type(value).__name__} {value!r}",
                sink=PAIMON.type,
                table=str(table_id),
            )
        variant = GenericVariant.from_python(value.value)
        encoded[name] = {"value": variant.value(), "metadata": variant.metadata()}
    return encoded


def _fill_not_null(row: Row, required: list[pa.Field]) -> Row:
    """A deleted row with a stand-in value in each NOT NULL column (of ``required``) it lacks: Paimon
    needs only its key, but writes every column of the row."""
    missing = [f for f in required if row.get(f.name) is None]
    if not missing:
        return row
    return {**row, **{f.name: _stand_in(f.type) for f in missing}}


def _stand_in(arrow_type: pa.DataType) -> Any:
    """Some value of an Arrow type (its zero)."""
    if pa.types.is_struct(arrow_type):
        return {f.name: None if f.nullable else _stand_in(f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_map(arrow_type):
        return []
    if pa.types.is_string(arrow_type):
        return ""
    if pa.types.is_binary(arrow_type):
        return b""
    if pa.types.is_boolean(arrow_type):
        return False
    if pa.types.is_decimal(arrow_type):
        return Decimal(0)
    if pa.types.is_date(arrow_type):
        return date(1970, 1, 1)
    if pa.types.is_time(arrow_type):
        return dt_time(0)
    if pa.types.is_timestamp(arrow_type):
        return datetime(1970, 1, 1, tzinfo=UTC if arrow_type.tz else None)
    return 0


def _writing(table: Any, overrides: dict[str, str]) -> Any:
    """``table`` with ``overrides`` for a write, and pypaimon's Rust writer unless the table's own
    option decides."""
    if NATIVE_WRITE_OPTION not in table.table_schema.options:
        overrides = {**overrides, NATIVE_WRITE_OPTION: "true"}
    return table.copy(overrides) if overrides else table
