"""Merge-on-read upserts and deletes: Iceberg position delete files, written from a key index.

pyiceberg (0.12) reads position delete files but writes only copy-on-write deletes, which rewrite
every data file that may hold a changed key: the cost of a commit grows with the table. Here a
commit instead writes, for each data file that holds changed keys, one small position delete file
(spec v2: ``file_path``, ``pos``, sorted, with ``referenced_data_file`` set) and commits it in one
snapshot with the new rows' data files, so a commit costs what its changed rows cost.

Where a key's live row is comes from :class:`KeyIndex`: primary key → (data file, position). It is
built once from the table (the key columns of the live data files, less the positions their delete
files remove) and then kept up to date by the sink's own commits; a table whose current snapshot
is not the one the index was kept for (another writer, a restart) is indexed again. Nothing of it
is checkpointed: the table is the truth.

The snapshot producers subclass pyiceberg's own, adding what they lack: a manifest of delete
files (``content: deletes``) beside the data manifest, and, for a compaction, removing the delete
files of the data files it rewrites.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    _read_deletes,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _OverwriteFiles
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

#: The reserved field ids and names of a position delete file (Iceberg spec, "Position Delete Files").
FILE_PATH_ID, POS_ID = 2147483546, 2147483545
POSITION_DELETE_SCHEMA = IcebergSchema(
    NestedField(FILE_PATH_ID, "file_path", StringType(), required=True),
    NestedField(POS_ID, "pos", LongType(), required=True),
)
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
    ]
)
#: Full bounds on ``file_path``: equal lower and upper bounds tell readers the one file it applies to.
_METRICS = {"write.metadata.metrics.default": "full"}
#: A key's place: the data file's number in :attr:`KeyIndex.files`, shifted, plus the row position.
_SHIFT = 40


#: The table properties that choose between copy-on-write and merge-on-read (Iceberg's names).
UPDATE_MODE, DELETE_MODE = "write.update.mode", "write.delete.mode"
MERGE_ON_READ = "merge-on-read"


def merges_on_read(table: Table) -> bool:
    """Whether the table's upserts and deletes are position deletes: ``write.update.mode`` (or
    ``write.delete.mode``) is ``merge-on-read`` and the table can take them (format v2, written
    unpartitioned by ferry)."""
    properties = table.properties
    mode = properties.get(UPDATE_MODE) or properties.get(DELETE_MODE)
    return mode == MERGE_ON_READ and table.metadata.format_version == 2 and table.spec().is_unpartitioned()


class KeyIndex:
    """Primary key → where its live row is (data file, position), for one table at one snapshot."""

    __slots__ = ("_numbers", "files", "keys", "rows", "snapshot_id")

    def __init__(self, keys: tuple[str, ...], snapshot_id: int | None) -> None:
        self.keys = keys
        self.snapshot_id = snapshot_id
        self.files: list[str] = []
        self._numbers: dict[str, int] = {}
        self.rows: dict[Hashable, int] = {}

    @classmethod
    def of_table(cls, table: Table, keys: tuple[str, ...]) -> KeyIndex:
        """Index the table's current snapshot: each live data file's key columns, less its deletes."""
        snapshot = table.current_snapshot()
        index = cls(keys, None if snapshot is None else snapshot.snapshot_id)
        if snapshot is None:
            return index
        field_ids = [table.schema().find_field(k).field_id for k in keys]
        for task in table.scan().plan_files():
            path = task.file.file_path
            columns = read_key_columns(table.io, path, field_ids)
            deleted: set[int] = set()
            for delete_file in task.delete_files:
                positions = _read_deletes(table.io, delete_file).get(path)
                if positions is not None:
                    deleted.update(positions.to_pylist())
            index.add_file(path, columns, skip=deleted)
        return index

    def add_file(
        self, path: str, key_columns: Sequence[pa.ChunkedArray | pa.Array], skip: set[int] | None = None
    ) -> None:
        """Index the rows of a data file, given its key columns in row order (``skip``: deleted rows)."""
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self.files)
            self.files.append(path)
        base = number << _SHIFT
        values: Iterable[Hashable]
        if len(key_columns) == 1:
            values = key_columns[0].to_pylist()
        else:
            values = zip(*(c.to_pylist() for c in key_columns), strict=True)
        rows = self.rows
        if skip:
            for position, key in enumerate(values):
                if position not in skip:
                    rows[key] = base | position
        else:
            rows.update(zip(values, range(base, base + len(key_columns[0])), strict=True))

    def take(self, keys: Iterable[Hashable]) -> dict[str, list[int]]:
        """Remove these keys from the index: the positions of their rows, by data file."""
        mask = (1 << _SHIFT) - 1
        by_file: dict[int, list[int]] = defaultdict(list)
        pop = self.rows.pop
        for key in keys:
            place = pop(key, None)
            if place is not None:
                by_file[place >> _SHIFT].append(place & mask)
        return {self.files[number]: sorted(positions) for number, positions in by_file.items()}

    def forget_files(self, paths: set[str]) -> None:
        """Drop the keys whose rows are in these files (a compaction rewrote them)."""
        numbers = {self._numbers[p] for p in paths if p in self._numbers}
        if numbers:
            self.rows = {k: v for k, v in self.rows.items() if v >> _SHIFT not in numbers}


def referenced_data_file(delete_file: DataFile) -> str | None:
    """The one data file a position delete file applies to, when its ``file_path`` bounds say so."""
    lower, upper = delete_file.lower_bounds or {}, delete_file.upper_bounds or {}
    path = lower.get(FILE_PATH_ID)
    if path is None or path != upper.get(FILE_PATH_ID):
        return None
    return bytes(path).decode("utf-8")


def read_key_columns(io: FileIO, path: str, field_ids: Sequence[int]) -> list[pa.ChunkedArray]:
    """The columns of a Parquet data file with these Iceberg field ids, in row order."""
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        by_id = {
            int(f.metadata[b"PARQUET:field_id"]): f.name
            for f in parquet.schema_arrow
            if f.metadata and b"PARQUET:field_id" in f.metadata
        }
        names = [by_id[i] for i in field_ids]
        data = parquet.read(columns=names)
    return [data[name] for name in names]


def write_position_deletes(
    table: Table, tx: Transaction, positions: dict[str, list[int]], write_uuid: uuid.UUID
) -> list[DataFile]:
    """One position delete file per data file with deleted rows (positions sorted)."""
    provider = table.location_provider()
    stats_plan = compute_statistics_plan(POSITION_DELETE_SCHEMA, _METRICS)
    id_mapping = parquet_path_to_id_mapping(POSITION_DELETE_SCHEMA)
    spec_id = tx.table_metadata.default_spec_id
    out = []
    for number, (path, rows) in enumerate(sorted(positions.items())):
        data = pa.table({"file_path": pa.array([path] * len(rows)), "pos": pa.array(rows, pa.int64())})
        data = data.cast(_ARROW_SCHEMA)
        location = provider.new_data_location(f"{write_uuid}-deletes-{number:05d}.parquet")
        output = table.io.new_output(location)
        with output.create(overwrite=True) as stream:
            writer = pq.ParquetWriter(stream, _ARROW_SCHEMA, compression="zstd")
            writer.write_table(data)
            writer.close()
            metadata = writer.writer.metadata
        statistics = data_file_statistics_from_parquet_metadata(metadata, stats_plan, id_mapping)
        out.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path=location,
                file_format=FileFormat.PARQUET,
                partition=Record(),
                file_size_in_bytes=len(output),
                sort_order_id=None,
                spec_id=spec_id,
                equality_ids=None,
                key_metadata=None,
                referenced_data_file=path,
                **statistics.to_serialized_dict(),
            )
        )
    return out


# --------------------------------------------------------------------------- snapshot producers


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg's writers write data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def _delete_manifest_writer(producer: Any) -> ManifestWriter:
    metadata = producer._transaction.table_metadata
    return _DeleteManifestWriter(
        metadata.spec(),
        metadata.schema(),
        producer.new_manifest_output(),
        producer.snapshot_id,
        producer._compression,
    )


def _is_delete(data_file: DataFile) -> bool:
    return bool(data_file.content == DataFileContent.POSITION_DELETES)


class RowDelta(_MergeAppendFiles):
    """Adds data files and position delete files in one snapshot (Iceberg's "row delta")."""

    def __init__(self, tx: Transaction, io: FileIO, snapshot_properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, tx, io, snapshot_properties=snapshot_properties)

    def _manifests(self) -> list[ManifestFile]:
        added = self._added_data_files
        deletes = [f for f in added if _is_delete(f)]
        self._added_data_files = [f for f in added if not _is_delete(f)]
        try:
            manifests = super()._manifests()
        finally:
            self._added_data_files = added  # the summary counts both kinds
        if not deletes:
            return manifests
        with _delete_manifest_writer(self) as writer:
            for delete_file in deletes:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self.snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=delete_file,
                    )
                )
        return [writer.to_manifest_file(), *manifests]


class RewriteWithDeletes(_OverwriteFiles):
    """pyiceberg's overwrite, which also drops the delete files of the data files it removes."""

    def __init__(self, tx: Transaction, io: FileIO, snapshot_properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, tx, io, snapshot_properties=snapshot_properties)
        self._removed_delete_files: set[DataFile] = set()

    def remove_delete_file(self, delete_file: DataFile) -> None:
        self._removed_delete_files.add(delete_file)

    def _existing_manifests(self) -> list[ManifestFile]:
        data = super()._existing_manifests()
        kept = [m for m in data if m.content == ManifestContent.DATA]
        snapshot = self._transaction.table_metadata.snapshot_by_name(name=self._target_branch)
        if snapshot is None:
            return kept
        for manifest in snapshot.manifests(io=self._io):
            if manifest.content != ManifestContent.DELETES:
                continue
            entries = manifest.fetch_manifest_entry(io=self._io, discard_deleted=True)
            if not any(e.data_file in self._removed_delete_files for e in entries):
                kept.append(manifest)
                continue
            # the removed ones stay as DELETED entries, so that expiring this snapshot's parent
            # finds their files
            with _delete_manifest_writer(self) as writer:
                for entry in entries:
                    removed = entry.data_file in self._removed_delete_files
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.DELETED if removed else ManifestEntryStatus.EXISTING,
                            snapshot_id=self.snapshot_id if removed else entry.snapshot_id,
                            sequence_number=entry.sequence_number,
                            file_sequence_number=entry.file_sequence_number,
                            data_file=entry.data_file,
                        )
                    )
            kept.append(writer.to_manifest_file())
        return kept

    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Any:  # noqa: B006 (pyiceberg's signature)
        removed = self._deleted_data_files
        self._deleted_data_files = removed | self._removed_delete_files
        try:
            return super()._summary(snapshot_properties)
        finally:
            self._deleted_data_files = removed


def positions_of_slices(record_counts: Sequence[int]) -> list[tuple[int, int]]:
    """The ``(start, stop)`` row slices of an Arrow table that files of these row counts hold, in order."""
    bounds = [0, *itertools.accumulate(record_counts)]
    return list(itertools.pairwise(bounds))
