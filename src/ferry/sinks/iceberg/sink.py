"""The Iceberg sink: schema changes through pyiceberg's ``update_schema``, rows in one commit per flush.

Writing. :meth:`IcebergSink.write` only buffers. :meth:`IcebergSink.flush` makes one Iceberg
transaction per table with buffered changes: the changes are collapsed by primary key to the last
state of each key, the touched keys' old rows are deleted and the surviving rows are appended. A
table whose ``write.update.mode`` is ``merge-on-read`` (ferry's default for the tables it creates)
gets one snapshot with the new data files and position delete files for the old rows, found in a
key index (see :mod:`~ferry.sinks.iceberg.deletes`): a commit costs what its changed rows cost,
whatever the table's size. Otherwise the deletes are copy-on-write: every data file that may
hold a touched key is rewritten without it. The snapshots of that
commit carry the source offsets (``ferry.offsets.<pipeline>`` in the snapshot summary), which
:meth:`IcebergSink.committed_offsets` reads back after a restart. A table without a primary key is
append-only: its deletes cannot be matched and are counted in :attr:`IcebergSink.skipped_deletes`.

Upkeep happens in the commits themselves: a commit that takes a table past ``snapshot.retain``
snapshots also expires the older ones, and every ``sink.compaction.commit-interval`` commits the
small data files of the smallest size tier that has ``sink.compaction.min-input-files`` of them
are rewritten into one (see :func:`compaction_input`), so commit latency stays flat as the table's
history grows. A merge-on-read table's compacted file is written in the background and committed
by a later commit (see :mod:`~ferry.sinks.iceberg.compaction`). What pyiceberg would do more
than once per commit (reading the table's metadata, staging it) is done once (see
:mod:`~ferry.sinks.iceberg.catalog`).
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy.exc
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    ServerError,
    ServiceUnavailableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThanOrEqual,
)
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile, ManifestEntryStatus
from pyiceberg.partitioning import PARTITION_FIELD_ID_START, PartitionField, PartitionSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.table import FileScanTask, Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update.schema import UpdateSchema
from pyiceberg.table.update.snapshot import ExpireSnapshots
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)

from ferry.model import events as E
from ferry.model.defaults import default_value
from ferry.model.events import ColumnPositionKind, DataChange, Op, Row, SchemaChange
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DataType
from ferry.offsets import Offsets
from ferry.retry import Operation, RetryPolicy
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base.arrow import rows_to_arrow_setting_aside
from ferry.sinks.base.exceptions import SinkError, SinkTerminalError, SinkTransientError, incompatible_table
from ferry.sinks.base.rows import last_changes
from ferry.sinks.base.table_format import TableFormatSink, storage_may_recover
from ferry.sinks.iceberg import ICEBERG
from ferry.sinks.iceberg.catalog import CachingSqlCatalog, StagedTransaction
from ferry.sinks.iceberg.compaction import (
    PreparedCompaction,
    compaction_input,
    live_bytes,
    prepare,
    write_compacted,
)
from ferry.sinks.iceberg.config import PARTITION_FIELD, IcebergSinkConfig
from ferry.sinks.iceberg.deletes import (
    KeyIndex,
    RewriteWithDeletes,
    RowDelta,
    deleted_positions,
    merges_on_read,
    positions_of_slices,
    read_key_columns,
    referenced_data_file,
    write_data_file,
    write_position_deletes,
)
from ferry.sinks.iceberg.types import (
    IcebergTypeError,
    field_ids,
    plan_type_change,
    sink_schema,
    sink_type,
    to_ferry_schema,
    to_iceberg_schema,
    to_iceberg_type,
)

log = logging.getLogger(__name__)

CAPABILITIES = ICEBERG.capabilities

#: Snapshot summary key holding a pipeline's offsets: ``{"topic": {"partition": next offset}}``.
#: Table property holding the table comment (Spark and Flink use the same key).
COMMENT_PROPERTY = "comment"

_TRANSIENT = (
    CommitFailedException,
    CommitStateUnknownException,
    ValidationException,  # a concurrent commit changed the files this one rewrites
    ServiceUnavailableError,
    ServerError,
    sqlalchemy.exc.OperationalError,
    ConnectionError,
    TimeoutError,
)
_ROW = "__ferry_row"
#: The Python types whose values an Arrow type reads back unchanged, by the Arrow type's id.
_AS_READ_BACK: dict[int, set[type]] = {
    **{t.id: {int} for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())},
    **{t.id: {str} for t in (pa.string(), pa.large_string())},
}
#: pyiceberg skips files by an ``IN`` only up to this many values.
_IN_PRUNING_LIMIT = 200


class IcebergSink(TableFormatSink):
    """Writes change events into Iceberg tables through a pyiceberg catalog."""

    format_name = "Iceberg"

    type: str = ICEBERG.type
    capabilities: SinkCapabilities = CAPABILITIES

    def __init__(self, config: IcebergSinkConfig, *, pipeline: str) -> None:
        super().__init__(pipeline=pipeline)
        self.config = config
        self._commits_since_compaction: dict[TableId, int] = {}
        #: Live bytes the compactions of the checkpoint being flushed read so far: once they reach
        #: ``sink.compaction.small-file-bytes``, the other tables due wait for the next checkpoint.
        self._compacted_bytes = 0.0
        self._key_indexes: dict[TableId, KeyIndex] = {}
        #: Per table, the compaction whose files are being written in the background (at most one).
        self._compactions: dict[TableId, PreparedCompaction] = {}
        #: Where they are written: one thread, started at the first (a test may set another).
        self.compaction_executor: Executor | None = None
        #: While a checkpoint's commits are gathered: the files to delete once they landed
        self._garbage: list[tuple[Table, list[str]]] | None = None
        self.catalog: Catalog = self.open_catalog(
            config.warehouse_dir(), f"catalog {config.catalog_name!r}", lambda: _open_catalog(config)
        )

    # ------------------------------------------------------------------------------- identifiers

    def identifier(self, table_id: TableId) -> tuple[str, str]:
        """The Iceberg ``(namespace, table)`` of a ferry table."""
        return (table_id.schema_name or self.config.namespace, table_id.table_name)

    def load_table(self, table_id: TableId) -> Table | None:
        """The Iceberg table as the catalog has it now, or ``None`` when it does not exist."""
        try:
            return self.catalog.load_table(self.identifier(table_id))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def drop_catalog_table(self, table_id: TableId) -> None:
        self.catalog.drop_table(self.identifier(table_id))

    def read_rows(self, table: Table, keys: tuple[str, ...], values: list[Hashable]) -> list[Row]:
        columns = [values] if len(keys) == 1 else [[_parts(v)[i] for v in values] for i in range(len(keys))]
        prune = [_prune_filter(k, vals) for k, vals in zip(keys, columns, strict=True)]
        rows: list[Row] = (
            table.scan(row_filter=prune[0] if len(prune) == 1 else And(*prune)).to_arrow().to_pylist()
        )
        return rows

    # ------------------------------------------------------------------------------- schemas

    def sink_type(self, source_type: DataType) -> DataType:
        return sink_type(source_type)

    def read_schema(self, table: Table) -> Schema:
        return _read_schema(table)

    def alter_table(self, change: SchemaChange) -> None:
        self._alter(self.require_table(change.table_id), change)

    def create_table(self, change: E.CreateTable) -> None:
        namespace, name = self.identifier(change.table_id)
        table = self.load_table(change.table_id)
        if table is None:
            # a transform's table-options after table.properties.*, as Flink CDC's Paimon sink
            properties = {**self.config.new_table_properties(), **dict(change.schema.options)}
            if change.schema.comment:
                properties[COMMENT_PROPERTY] = change.schema.comment
            schema = to_iceberg_schema(change.schema)
            fields = self.config.partition_keys.get(str(change.table_id), change.schema.partition_keys)
            spec = partition_spec(schema, fields, str(change.table_id))
            self.catalog.create_namespace_if_not_exists(namespace)
            try:
                self.catalog.create_table(
                    (namespace, name), schema, partition_spec=spec, properties=properties
                )
                return
            except TableAlreadyExistsError:
                table = self.require_table(change.table_id)
        problems = _incompatibilities(table.schema(), change.schema)
        if problems:
            raise incompatible_table(
                problems,
                _read_schema(table),
                sink_schema(change.schema),
                sink=self.type,
                table=change.table_id,
            )

    def _alter(self, table: Table, change: SchemaChange) -> None:
        table_id = change.table_id
        match change:
            case E.AddColumn(column=column, position=position):
                reference = position.reference
                if reference is not None and reference not in {f.name for f in table.schema().fields}:
                    log.warning("%s: %s is not a column, adding %s last", table_id, reference, column.name)
                    reference = None
                default = default_value(column)
                if default is not None and table.current_snapshot() is not None:
                    where = (reference, position.kind)
                    self._add_column_with_default(table_id, table, column, where, default)
                    return
                with table.update_schema() as update:
                    _add_column(update, column, reference, position.kind)
            case E.DropColumn(column_name=name):
                with table.update_schema() as update:
                    update.delete_column(name)
            case E.RenameColumn(old_name=old, new_name=new):
                with table.update_schema() as update:
                    update.rename_column(old, new)
            case E.AlterColumnType(column_name=name, new_type=new_type):
                self._alter_type(table, table_id, name, new_type)
            case E.AlterColumnComment(column_name=name, comment=comment):
                with table.update_schema() as update:
                    update.update_column(name, doc=comment or "")
            case E.AlterTableComment(comment=comment):
                with table.transaction() as tx:
                    if comment:
                        tx.set_properties({COMMENT_PROPERTY: comment})
                    elif COMMENT_PROPERTY in table.properties:
                        tx.remove_properties(COMMENT_PROPERTY)
            case _:
                raise SinkTerminalError(f"no rule for {change.tag}", sink=self.type, table=str(table_id))

    def _add_column_with_default(
        self,
        table_id: TableId,
        table: Table,
        column: Column,
        position: tuple[str | None, ColumnPositionKind],
        default: Any,
    ) -> None:
        """Add a column with a default to a table that holds rows: they read the default.

        A format v2 table has no ``initial-default`` (format v3's, which pyiceberg does not write
        tables of), so the rows are backfilled: every data file is written again with the default
        in the column (its delete files applied, then dropped), in the snapshot that adds the
        column. The schema change and the backfill are one commit, so a table that has the column
        has its default in every row written before it; a replay sees the column and does neither
        again. The snapshot carries no offsets (its rows are those of the commit before it, whose
        offsets stand).
        """
        tasks = list(table.scan().plan_files())
        with StagedTransaction(table) as tx:
            with tx.update_schema() as update:
                _add_column(update, column, *position)
            if tasks:
                rewrite = RewriteWithDeletes(tx, table.io, {})
                with rewrite:
                    removed: set[str] = set()
                    for task in tasks:
                        rewrite.delete_data_file(task.file)
                        for delete_file in task.delete_files:
                            if delete_file.file_path not in removed:
                                removed.add(delete_file.file_path)
                                rewrite.remove_delete_file(delete_file)
                    added, _ = write_compacted(
                        table, tx.table_metadata, tasks, (), rewrite.commit_uuid, fill={column.name: default}
                    )
                    for data_file in added:
                        rewrite.append_data_file(data_file)
        self._key_indexes.pop(table_id, None)
        log.info(
            "%s: %s added with default %s, %d data files written again with it",
            table_id,
            column.name,
            column.default,
            len(tasks),
        )

    def _alter_type(self, table: Table, table_id: TableId, name: str, new_type: DataType) -> None:
        schema = table.schema()
        field = schema.find_field(name)
        wanted_required = not new_type.nullable or field.field_id in schema.identifier_field_ids
        try:
            steps = plan_type_change(
                (name,),
                field.field_type,
                field.required,
                to_iceberg_type(new_type, field_ids()),
                wanted_required,
            )
        except IcebergTypeError as e:
            current = _read_schema(table).column(name).type
            raise SinkTerminalError(
                f"cannot change the type of column {name} from {current} to {new_type}: {e}",
                sink=self.type,
                table=str(table_id),
            ) from e
        if not steps:
            return
        with table.update_schema() as update:
            for step in steps:
                if step.kind == "promote":
                    update.update_column(step.path, field_type=step.type)
                elif step.kind == "make-optional":
                    update.make_column_optional(step.path)
                else:
                    assert step.type is not None
                    update.add_column(step.path, step.type, required=False)

    # ------------------------------------------------------------------------------- rows

    def commit(
        self, table_id: TableId, table: Table, changes: list[DataChange], properties: dict[str, str]
    ) -> None:
        schema = table.schema()
        keys = self._key_columns(table_id, schema)
        touched: list[Hashable] = []
        if keys:
            last = last_changes(changes, keys, self.type)
            delete = Op.DELETE
            rows = [row for op, row in last.values() if op is not delete]
            if table.current_snapshot() is not None:
                touched = list(last)
        else:
            rows = self.append_only_rows(table_id, changes)
        data, unfit = rows_to_arrow_setting_aside(
            schema.as_arrow(),
            rows,
            changes,
            self.refused,
            sink=self.type,
            table_id=table_id,
            raw=self.raw_forms(table_id),
        )
        if unfit and touched:  # a row set aside leaves its key's row in the table as it was
            get = itemgetter(*keys)
            kept = {get(rows[i]) for i in unfit}
            touched = [key for key in touched if key not in kept]
        if touched and merges_on_read(table):
            self._commit_row_delta(table_id, table, keys, touched, data, properties)
            return
        with StagedTransaction(table) as tx:
            if touched:
                delete_keys(table, tx, keys, touched, properties)
            # always an append, even an empty one: the newest snapshot then carries the offsets
            tx.append(data, snapshot_properties=properties)
            garbage = self._expire_snapshots(table, tx)
        self._delete_files(table, garbage)

    def _commit_row_delta(  # noqa: PLR0917 (commit's arguments, and what it found)
        self,
        table_id: TableId,
        table: Table,
        keys: tuple[str, ...],
        touched: list[Hashable],
        data: pa.Table,
        properties: dict[str, str],
    ) -> None:
        """Merge-on-read: position deletes for the touched keys' old rows and the new rows' data files,
        in one snapshot; the key index follows (see :mod:`~ferry.sinks.iceberg.deletes`)."""
        index = self._key_index(table_id, table, keys)
        try:
            positions = index.take(_arrow_keys(table.schema(), keys, touched))
            # a delete file per data file of the positions deleted now, or of all of them (see deletes)
            planned, replaced = index.planned_deletes(positions)
            with StagedTransaction(table) as tx:
                delta = RowDelta(tx, table.io, properties)
                with delta:
                    added = _data_files(table, tx.table_metadata, data, delta.commit_uuid)
                    for data_file in added:
                        delta.append_data_file(data_file)
                    written = write_position_deletes(table, tx, planned, delta.commit_uuid)
                    for delete_file in written:
                        delta.append_data_file(delete_file)
                    for delete_file in replaced:
                        delta.remove_delete_file(delete_file)
                garbage = self._expire_snapshots(table, tx)
            index.record_deletes(planned, written, replaced)
            self._index_new_files(index, table, keys, data, added)
        except BaseException:
            self._key_indexes.pop(table_id, None)  # the table is the truth: indexed again next time
            raise
        self._delete_files(table, garbage)

    def _key_index(self, table_id: TableId, table: Table, keys: tuple[str, ...]) -> KeyIndex:
        """The key index of the table as it is now (built again when another commit moved it)."""
        index = self._key_indexes.get(table_id)
        snapshot = table.current_snapshot()
        current = None if snapshot is None else snapshot.snapshot_id
        if index is None or index.snapshot_id != current or index.keys != keys:
            index = self._key_indexes[table_id] = KeyIndex.of_table(table, keys)
        return index

    @staticmethod
    def _index_new_files(
        index: KeyIndex,
        table: Table,
        keys: tuple[str, ...],
        data: pa.Table,
        added: list[DataFile],
        *,
        deleted: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Index the rows of data files just written from ``data`` (files hold its rows in order),
        but those ``deleted`` (positions by data file) removes. None of their keys is indexed: each
        was taken from the index (a commit's touched keys) or forgotten with its file (a compaction's)."""
        skip = {} if deleted is None else deleted
        if sum(f.record_count for f in added) == data.num_rows and table.spec().is_unpartitioned():
            for data_file, (start, stop) in zip(
                added, positions_of_slices([f.record_count for f in added]), strict=True
            ):
                path = data_file.file_path
                columns = [data[k].slice(start, stop - start) for k in keys]
                index.add_file(path, columns, skip=skip.get(path), unindexed=True)
        else:
            field_ids = [table.schema().find_field(k).field_id for k in keys]
            for data_file in added:
                path = data_file.file_path
                columns = read_key_columns(table.io, path, field_ids)
                index.add_file(path, columns, skip=skip.get(path), unindexed=True)
        snapshot = table.current_snapshot()
        index.snapshot_id = None if snapshot is None else snapshot.snapshot_id

    def _key_columns(self, table_id: TableId, schema: IcebergSchema) -> tuple[str, ...]:
        """The identifier fields, or the primary key the pipeline knows when the table has none."""
        names = [schema.find_column_name(i) for i in schema.identifier_field_ids]
        keys = tuple(n for n in names if n is not None)
        if keys:
            return keys
        written = self._written_schemas.get(table_id)
        known = {f.name for f in schema.fields}
        if written is not None and written.primary_keys and all(k in known for k in written.primary_keys):
            return written.primary_keys
        return ()

    def _expire_snapshots(self, table: Table, tx: Transaction) -> list[str]:
        """Expire, in the same commit, the snapshots older than the ``snapshot.retain`` newest.

        Returns the files that only the expired snapshots reference, to delete once the commit
        has succeeded (pyiceberg's expiry removes snapshots from the metadata, not their files).
        """
        retain = self.config.snapshot_retain
        snapshots = table.metadata.snapshots
        if len(snapshots) <= retain:
            return []
        cutoff = sorted(s.timestamp_ms for s in snapshots)[-retain]
        ExpireSnapshots(tx).older_than(datetime.fromtimestamp(cutoff / 1000, UTC)).commit()
        return _files_of_expired(table, cutoff)

    def _delete_files(self, table: Table, paths: list[str]) -> None:
        if self._garbage is not None:  # commits gathered: deleted once they landed
            self._garbage.append((table, paths))
            return
        for path in paths:
            try:
                table.io.delete(path)
            except OSError as e:  # already gone, or not ours to delete: it stays an orphan
                log.debug("could not delete %s: %s", path, e)

    def flush(self, offsets: Offsets) -> None:
        """One snapshot per table with rows; in a SQL catalog, the tables committed together (see
        :meth:`~ferry.sinks.iceberg.catalog.CachingSqlCatalog.commits_together`), or one by one
        when another writer moved one of them meanwhile; in other catalogs, one by one."""
        self._compacted_bytes = 0.0
        tables = [t for t, rows in self._buffers.items() if rows]
        catalog = self.catalog
        if (
            len(tables) > 1
            and isinstance(catalog, CachingSqlCatalog)
            and catalog.gathers_commits
            and self._flush_together(catalog, tables, offsets)
        ):
            self._buffers.clear()
            self._raw_forms.clear()
            return
        super().flush(offsets)

    def _flush_together(self, catalog: CachingSqlCatalog, tables: list[TableId], offsets: Offsets) -> bool:
        """Commit the tables' rows (and their compactions due) in one catalog transaction; False when
        another writer committed one of them first (nothing committed: the caller commits them one
        by one, each on the table as it is now). The buffers stay until the caller clears them."""
        garbage: list[tuple[Table, list[str]]] = []
        self._garbage = garbage
        try:
            with catalog.commits_together():
                for table_id in tables:
                    properties = self._commit_merged(table_id, self._buffers[table_id], offsets)
                    self.after_commit(table_id, properties)
        except BaseException as e:
            # nothing landed: the key indexes followed commits that are not the tables' (built again)
            for table_id in tables:
                self._key_indexes.pop(table_id, None)
            if isinstance(e, CommitFailedException):
                log.info("%s; committing the tables one by one", e)
                return False
            if isinstance(e, SinkError) or not isinstance(e, Exception):
                raise
            transient = self.is_transient(e) or storage_may_recover(e)
            error = SinkTransientError if transient else SinkTerminalError
            raise error(
                f"committing {len(tables)} tables together: {type(e).__name__}: {e}", sink=self.type
            ) from e
        finally:
            self._garbage = None
        for table, paths in garbage:
            self._delete_files(table, paths)
        return True

    def after_commit(self, table_id: TableId, properties: dict[str, str]) -> None:
        """Every ``sink.compaction.commit-interval`` commits of a table, its compaction
        (:meth:`compact`). A checkpoint's compactions together read at most
        ``sink.compaction.small-file-bytes`` (the first one always runs): tables due at the same
        checkpoint take turns, a table whose turn has not come staying due. A merge-on-read table's
        compaction is written in the background (``sink.compaction.background``), one at a time
        (the others due wait their turn), and committed by the first of its table's commits after
        the files are written."""
        if not self.config.compaction_enabled:
            return
        prepared = self._compactions.get(table_id)
        if prepared is not None:
            if prepared.result.done():
                del self._compactions[table_id]
                try:
                    self._commit_prepared(table_id, prepared, properties)
                except SinkTransientError as e:  # the rows are committed; its file stays an orphan
                    log.warning("%s", e)
            return  # one compaction of a table at a time
        count = self._commits_since_compaction.get(table_id, 0) + 1
        self._commits_since_compaction[table_id] = count
        if count < self.config.compaction_commit_interval:
            return
        try:
            with self.errors(table_id, "compacting small files"):
                table = self.require_table(table_id)
                background = self.config.compaction_background and merges_on_read(table)
                if background and self._compactions:
                    return  # one compaction in the background at a time: the table stays due
                tasks = self._compaction_input(table)
                size = sum(live_bytes(t) for t in tasks)
                share = self.config.compaction_small_file_bytes
                if self._compacted_bytes and self._compacted_bytes + size > share:
                    return  # the checkpoint's compactions read their share: the table stays due
                self._commits_since_compaction[table_id] = 0
                self._compacted_bytes += size
                if not tasks:
                    return
                if background:
                    self._prepare(table_id, table, tasks)
                else:
                    self._rewrite(table_id, table, tasks, properties)
        except SinkTransientError as e:
            # the rows are committed; a compaction that lost a race is tried again later
            log.warning("%s", e)

    def _prepare(self, table_id: TableId, table: Table, tasks: list[FileScanTask]) -> None:
        """Start writing the compacted files of ``tasks`` in the background."""
        if self.compaction_executor is None:
            self.compaction_executor = ThreadPoolExecutor(1, thread_name_prefix="ferry-compaction")
        keys = self._key_columns(table_id, table.schema())
        result = self.compaction_executor.submit(prepare, table, table.metadata, tasks, keys)
        self._compactions[table_id] = PreparedCompaction(table.metadata.current_schema_id, tasks, result)

    def _commit_prepared(
        self, table_id: TableId, prepared: PreparedCompaction, properties: dict[str, str]
    ) -> None:
        """Commit a compaction written in the background: its input files replaced by its files, and
        the rows deleted from the inputs since they were read deleted from its files, in one
        snapshot. Given up (its files deleted) when the table moved otherwise than by ferry's own
        commits (the key index no longer matches), its schema changed, or an input file is gone."""
        try:
            done = prepared.result.result()
        except Exception as e:  # upkeep: the rows are committed, the table is as it was
            log.warning("%s: a compaction written in the background failed: %s", table_id, e)
            return
        table = self.require_table(table_id)
        inputs = {t.file.file_path for t in prepared.tasks}
        snapshot = table.current_snapshot()
        index = self._key_indexes.get(table_id)
        keys = self._key_columns(table_id, table.schema())
        live = {t.file.file_path: t for t in table.scan().plan_files() if t.file.file_path in inputs}
        if (
            snapshot is None
            or index is None
            or index.snapshot_id != snapshot.snapshot_id
            or index.keys != keys
            or table.metadata.current_schema_id != prepared.schema_id
            or len(live) != len(inputs)
        ):
            log.debug("%s: a compaction written in the background is given up (the table moved)", table_id)
            self._delete_files(table, [f.file_path for f in done.added])
            return
        # the positions of ferry's own delete files are in the index (it matches the table): only
        # other delete files are read
        known = {f.file_path: positions for path in live for f, positions in index.deletes.get(path, [])}
        late = {
            path: np.setdiff1d(
                deleted_positions(table.io, task, known), done.deleted[path], assume_unique=True
            )
            for path, task in live.items()
        }
        deletes = done.places(late)
        with self.errors(table_id, "committing a compaction"), StagedTransaction(table) as tx:
            rewrite = RewriteWithDeletes(tx, table.io, properties)
            with rewrite:
                for task in live.values():
                    rewrite.delete_data_file(task.file)
                    for delete_file in task.delete_files:
                        if referenced_data_file(delete_file) in inputs:
                            rewrite.remove_delete_file(delete_file)
                for data_file in done.added:
                    rewrite.append_data_file(data_file)
                written = write_position_deletes(table, tx, deletes, rewrite.commit_uuid)
                for delete_file in written:
                    rewrite.append_data_file(delete_file)
            garbage = self._expire_snapshots(table, tx)
        # the keys live in the input files are now at their rows in its files, less those deleted
        index.forget_files(set(done.kept))
        index.record_deletes(deletes, written, [])
        self._index_new_files(index, table, keys, done.key_rows, done.added, deleted=deletes)
        self._delete_files(table, garbage)
        log.debug(
            "%s: compacted %d small files in the background (%d rows)",
            table_id,
            len(inputs),
            done.key_rows.num_rows,
        )

    def compact(self, table_id: TableId, properties: dict[str, str] | None = None) -> int:
        """Rewrite the table's small data files into one; returns how many files were replaced.

        Runs when the table has at least ``sink.compaction.min-input-files`` files smaller than
        ``sink.compaction.small-file-bytes`` in one size tier (:mod:`~ferry.sinks.iceberg.compaction`).
        The rows do not change, so the snapshot carries the same offsets as the commit before it.
        """
        table = self.require_table(table_id)
        tasks = self._compaction_input(table)
        if tasks:
            self._rewrite(table_id, table, tasks, properties or {})
        return len(tasks)

    def _compaction_input(self, table: Table) -> list[FileScanTask]:
        small = self.config.compaction_small_file_bytes
        row_delta = merges_on_read(table)
        return compaction_input(
            [
                t
                for t in table.scan().plan_files()
                if t.file.file_size_in_bytes < small and (row_delta or not t.delete_files)
            ],
            self.config.compaction_min_files,
            small,
        )

    def _rewrite(
        self, table_id: TableId, table: Table, tasks: list[FileScanTask], properties: dict[str, str]
    ) -> None:
        index = self._key_indexes.pop(table_id, None)
        snapshot = table.current_snapshot()
        if index is not None and (snapshot is None or index.snapshot_id != snapshot.snapshot_id):
            index = None
        keys = self._key_columns(table_id, table.schema())
        rewritten = {t.file.file_path for t in tasks}
        with StagedTransaction(table) as tx:
            rewrite = RewriteWithDeletes(tx, table.io, properties)
            with rewrite:
                for task in tasks:
                    rewrite.delete_data_file(task.file)
                    for delete_file in task.delete_files:
                        if referenced_data_file(delete_file) in rewritten:
                            rewrite.remove_delete_file(delete_file)
                # the data files' rows less their deletes; the delete files only they need go with them
                added, key_rows = write_compacted(table, tx.table_metadata, tasks, keys, rewrite.commit_uuid)
                for data_file in added:
                    rewrite.append_data_file(data_file)
            garbage = self._expire_snapshots(table, tx)
        if index is not None and keys and keys == index.keys:
            index.forget_files(rewritten)
            self._index_new_files(index, table, keys, key_rows, added)
            self._key_indexes[table_id] = index
        self._delete_files(table, garbage)
        log.debug("%s: compacted %d small files (%d rows)", table_id, len(tasks), key_rows.num_rows)

    # ------------------------------------------------------------------------------- offsets

    def snapshot_properties(self, table: Table) -> Iterator[dict[str, str]]:
        for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
            yield snapshot.summary.additional_properties if snapshot.summary else {}

    # ------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        super().close()
        self._give_up_compactions()
        if isinstance(self.catalog, SqlCatalog):
            self.catalog.engine.dispose()

    def _give_up_compactions(self) -> None:
        """The compactions not committed given up: those not started are not, and the files of the
        others are deleted once written."""
        for table_id, prepared in self._compactions.items():
            if prepared.result.cancel():
                continue
            try:
                done = prepared.result.result()
            except Exception:  # nothing was committed; what it wrote is an orphan
                continue
            table = self.load_table(table_id)
            if table is not None:
                self._delete_files(table, [f.file_path for f in done.added])
        self._compactions.clear()
        if self.compaction_executor is not None:
            self.compaction_executor.shutdown(wait=True)
            self.compaction_executor = None

    def is_transient(self, error: Exception) -> bool:
        return isinstance(error, _TRANSIENT)

    def is_conflict(self, error: BaseException | None) -> bool:
        # the SQL catalog's commit fails when the table's metadata changed since it was loaded
        # (pyiceberg has retried it already, with the offsets merged before); a copy-on-write
        # delete fails validation when another commit changed the files it rewrites
        return isinstance(error, CommitFailedException | ValidationException)


# ----------------------------------------------------------------------------------- helpers


def _add_column(
    update: UpdateSchema, column: Column, reference: str | None, kind: ColumnPositionKind
) -> None:
    # optional even when the source says NOT NULL: a table format v2 field has no initial default
    update.add_column(
        column.name, to_iceberg_type(column.type, field_ids()), doc=column.comment, required=False
    )
    if kind is ColumnPositionKind.FIRST:
        update.move_first(column.name)
    elif kind is ColumnPositionKind.BEFORE and reference is not None:
        update.move_before(column.name, reference)
    elif kind is ColumnPositionKind.AFTER and reference is not None:
        update.move_after(column.name, reference)


#: Workers opening a SQL catalog together race to create its tables; the losers open it again.
_CATALOG_RACE = RetryPolicy(attempts=3, timeout_s=10.0, initial_s=0.2, max_s=0.4, log_level=logging.INFO)


def _open_catalog(config: IcebergSinkConfig) -> Catalog:
    """The catalog; a SQL catalog creates its tables when they are missing, and of workers starting
    together all but one lose that race: they open it again, and find the tables."""
    properties = config.resolved_catalog_properties()

    def open_catalog() -> Catalog:
        if properties.get("type") == "sql":
            return CachingSqlCatalog(config.catalog_name, **properties)
        return load_catalog(config.catalog_name, **properties)

    return _CATALOG_RACE.call(
        open_catalog,
        "opening the catalog",
        operation=Operation.SINK_CONNECT,
        transient=lambda e: isinstance(e, sqlalchemy.exc.DBAPIError),
    )


_TIME_TRANSFORMS: dict[str, Callable[[], Transform[Any, Any]]] = {
    "year": YearTransform,
    "month": MonthTransform,
    "day": DayTransform,
    "hour": HourTransform,
}


def partition_spec(schema: IcebergSchema, fields: Iterable[str], table: str) -> PartitionSpec:
    """The partition spec of ``partition.key``'s fields (Iceberg's names of the partition fields:
    ``region``, ``created_at_day``, ``id_bucket``, ``name_trunc``)."""
    parts = []
    for i, text in enumerate(fields):
        match = PARTITION_FIELD.match(text)
        if match is None:
            raise SinkTerminalError(
                f"partition field {text!r} is not one Iceberg has", sink="iceberg", table=table
            )
        column = (match["column"] or match["time_column"] or match["sized_column"]).strip()
        try:
            source = schema.find_field(column)
        except ValueError:
            raise SinkTerminalError(
                f"partition key {column} is not a column of the table (partition.key or the transform's "
                "partition-keys)",
                sink="iceberg",
                table=table,
            ) from None
        transform: Transform[Any, Any]
        if match["time"]:
            transform, name = _TIME_TRANSFORMS[match["time"]](), f"{column}_{match['time']}"
        elif match["sized"] == "bucket":
            transform, name = BucketTransform(int(match["size"])), f"{column}_bucket"
        elif match["sized"] == "truncate":
            transform, name = TruncateTransform(int(match["size"])), f"{column}_trunc"
        else:
            transform, name = IdentityTransform(), column
        if not transform.can_transform(source.field_type):
            raise SinkTerminalError(
                f"partition field {text}: {transform} does not apply to {column} of type {source.field_type}",
                sink="iceberg",
                table=table,
            )
        parts.append(PartitionField(source.field_id, PARTITION_FIELD_ID_START + i, transform, name))
    return PartitionSpec(*parts)


def _data_files(
    table: Table, metadata: TableMetadata, data: pa.Table, write_uuid: uuid.UUID
) -> list[DataFile]:
    """The rows as data files of the table: one, written here, when it can be (see
    :func:`~ferry.sinks.iceberg.deletes.write_data_file`); pyiceberg's write otherwise."""
    if not data.num_rows:
        return []
    written = write_data_file(table, metadata, data, write_uuid)
    if written is None:
        written = list(_dataframe_to_data_files(metadata, data, table.io, write_uuid=write_uuid))
    return written


def _read_schema(table: Table) -> Schema:
    return to_ferry_schema(table.schema(), table.properties.get(COMMENT_PROPERTY))


def _files_of_expired(table: Table, cutoff_ms: int) -> list[str]:
    """The files that only the snapshots older than ``cutoff_ms`` reference.

    The table's history is a single chain (only ``main``, checked), and expiry removes its oldest
    part, so: a data file deleted by a snapshot whose parent is expired is live in no remaining
    snapshot; a manifest of an expired snapshot that the oldest remaining one does not list is
    listed by no remaining snapshot (a manifest is listed by consecutive snapshots). Each snapshot's
    deletions are collected once, when its parent expires.
    """
    metadata = table.metadata
    if set(metadata.refs) != {MAIN_BRANCH}:
        return []  # a tag or a branch keeps older snapshots' files alive: leave them
    io = table.io
    expired = [s for s in metadata.snapshots if s.timestamp_ms < cutoff_ms]
    expired_ids = {s.snapshot_id for s in expired}
    orphaned_by = [s for s in metadata.snapshots if s.parent_snapshot_id in expired_ids]
    kept_manifests = {
        m.manifest_path for s in orphaned_by if s.snapshot_id not in expired_ids for m in s.manifests(io)
    }
    garbage = {s.manifest_list for s in expired}
    garbage.update(
        m.manifest_path for s in expired for m in s.manifests(io) if m.manifest_path not in kept_manifests
    )
    for snapshot in orphaned_by:
        for manifest in snapshot.manifests(io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.deleted_files_count == 0:
                continue
            garbage.update(
                entry.data_file.file_path
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)
                if entry.status == ManifestEntryStatus.DELETED
            )
    return sorted(garbage)


def _incompatibilities(existing: IcebergSchema, wanted: Schema) -> list[str]:
    """Why an existing table cannot take the rows of a table created with ``wanted`` (empty: it can)."""
    target = to_iceberg_schema(wanted)
    problems = []
    have_keys = {existing.find_column_name(i) for i in existing.identifier_field_ids}
    if have_keys != set(wanted.primary_keys):
        keys = ", ".join(sorted(k for k in have_keys if k))
        problems.append(f"primary key ({keys}) is not ({', '.join(wanted.primary_keys)})")
    have_fields = {f.name: f for f in existing.fields}
    for field in target.fields:
        have = have_fields.get(field.name)
        if have is None:
            problems.append(f"no column {field.name}")
            continue
        if have.required and not field.required:
            problems.append(f"column {field.name} is NOT NULL")
        try:
            plan_type_change((field.name,), field.field_type, field.required, have.field_type, have.required)
        except IcebergTypeError as e:
            problems.append(f"column {field.name}: {e}")
    wanted_names = {f.name for f in target.fields}
    problems += [
        f"column {f.name} is NOT NULL and not in the new table"
        for f in existing.fields
        if f.required and f.name not in wanted_names
    ]
    return problems


def _arrow_keys(schema: IcebergSchema, keys: tuple[str, ...], values: list[Hashable]) -> list[Hashable]:
    """The key values as the table's columns hold them (as Arrow reads them back)."""
    arrow_schema = schema.as_arrow()
    if len(keys) == 1:
        arrow_type = arrow_schema.field(keys[0]).type
        if set(map(type, values)) <= _AS_READ_BACK.get(arrow_type.id, set()):
            return values  # read back as they are
        return list(pa.array(values, type=arrow_type).to_pylist())
    columns = [
        pa.array([_parts(v)[i] for v in values], type=arrow_schema.field(k).type).to_pylist()
        for i, k in enumerate(keys)
    ]
    return list(zip(*columns, strict=True))


def _bounds(column: str, values: list[Any]) -> BooleanExpression | None:
    try:
        low, high = min(values), max(values)
    except (TypeError, ValueError):  # no values, or values of mixed types: no order
        return None
    return And(GreaterThanOrEqual(column, low), LessThanOrEqual(column, high))  # type: ignore[call-arg]


def delete_keys(
    table: Table, tx: Transaction, keys: tuple[str, ...], values: list[Hashable], properties: dict[str, str]
) -> None:
    """Rewrite, in ``tx``, the data files holding any of these keys without those rows (copy-on-write).

    ``values`` are tuples for a composite key. The files are pruned with each key column's bounds
    (and its values, when few), then each file is read and its matching rows found with one hash
    join on the key columns.
    """
    columns = [values] if len(keys) == 1 else [[_parts(v)[i] for v in values] for i in range(len(keys))]
    schema = table.schema()
    arrow_schema = schema.as_arrow()
    wanted = pa.table(
        {k: pa.array(vals, type=arrow_schema.field(k).type) for k, vals in zip(keys, columns, strict=True)}
    )
    prune = [_prune_filter(k, vals) for k, vals in zip(keys, columns, strict=True)]
    rewritten: list[tuple[DataFile, pa.Table]] = []
    for task in table.scan(row_filter=prune[0] if len(prune) == 1 else And(*prune)).plan_files():
        data = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
        positions = pa.array(range(data.num_rows), type=pa.int64())
        index = pa.table({**{k: data[k] for k in keys}, _ROW: positions})
        hits = index.join(wanted, keys=list(keys), join_type="left semi")[_ROW]
        if len(hits):
            gone = pc.is_in(positions, value_set=hits.combine_chunks())
            rewritten.append((task.file, data.filter(pc.invert(gone))))
    if not rewritten:
        return
    counter = itertools.count()
    with tx.update_snapshot(snapshot_properties=properties).overwrite() as rewrite:
        for old_file, kept in rewritten:
            rewrite.delete_data_file(old_file)
            if kept.num_rows:
                for new_file in _dataframe_to_data_files(
                    tx.table_metadata, kept, table.io, write_uuid=rewrite.commit_uuid, counter=counter
                ):
                    rewrite.append_data_file(new_file)


def _prune_filter(column: str, values: list[Any]) -> BooleanExpression:
    """What the key values of one column tell about the files that may hold them."""
    bounds = _bounds(column, values)
    if len(set(values)) <= _IN_PRUNING_LIMIT:
        exact: BooleanExpression = In(term=column, literals=values)
        return exact if bounds is None else And(exact, bounds)
    return AlwaysTrue() if bounds is None else bounds


def _parts(value: Hashable) -> tuple[Any, ...]:
    assert isinstance(value, tuple)
    return value
