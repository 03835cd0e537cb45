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

Delete files do not pile up against old data files: a data file has at most
:data:`DELETE_FILES_PER_DATA_FILE` of ferry's, and the commit that would write one more writes one
file with every position deleted from it (before and now) and removes the others in the same
snapshot; the index keeps each data file's deleted positions, so the merge reads no file. Nor do
delete manifests: a table has at most :data:`DELETE_MANIFESTS`, and the commit that would make one
more lists every delete file in one. A commit rewrites a data file's positions only every few
times it deletes from it, so its cost does not grow with every position deleted before.

The snapshot producers subclass pyiceberg's own, adding what they lack: a manifest of delete
files (``content: deletes``) beside the data manifest, delete files removed (those a merged file
replaces, and, for a compaction, those of the data files it rewrites).
"""

from __future__ import annotations

import itertools
import mmap
import uuid
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    DataFileStatistics,
    ParquetFormatModel,
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
from pyiceberg.schema import sanitize_column_names
from pyiceberg.table import FileScanTask, Table, Transaction
from pyiceberg.table.metadata import TableMetadata
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
_FILE_FORMAT = "write.format.default"
#: A key's place: the data file's number in :attr:`KeyIndex.files`, shifted, plus the row position.
_SHIFT = 40


#: A data file has at most this many delete files of ferry's: the commit that would write one more
#: writes one with every position deleted from it instead, and removes the others.
DELETE_FILES_PER_DATA_FILE = 4
#: The delete manifests a table has at most: the commit that would make one more lists every
#: delete file in one (as does a commit that removes delete files).
DELETE_MANIFESTS = 8

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
    """Primary key → where its live row is (data file, position), for one table at one snapshot.

    A key of one integer column (the usual case) is kept in :class:`IntegerPlaces`: 16 bytes per
    live key in NumPy arrays. Any other key is kept in a dict (about 100 bytes per key, more for
    composite keys).
    """

    __slots__ = ("_numbers", "_places", "deletes", "files", "keys", "snapshot_id")

    def __init__(self, keys: tuple[str, ...], snapshot_id: int | None) -> None:
        self.keys = keys
        self.snapshot_id = snapshot_id
        self.files: list[str] = []
        self._numbers: dict[str, int] = {}
        self._places: IntegerPlaces | dict[Hashable, int] | None = None
        #: Per data file, the live delete files that apply to it alone (at most
        #: :data:`DELETE_FILES_PER_DATA_FILE` once ferry wrote them), each with the positions it removes.
        self.deletes: dict[str, list[tuple[DataFile, np.ndarray]]] = {}

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
            deleted: list[np.ndarray] = []
            own: list[tuple[DataFile, np.ndarray]] = []
            for delete_file in task.delete_files:
                found = _read_deletes(table.io, delete_file).get(path)
                if found is None:
                    continue
                positions = np.asarray(found.to_numpy(), dtype=np.int64)
                deleted.append(positions)
                if referenced_data_file(delete_file) == path:  # ferry's, or one for this file alone
                    own.append((delete_file, positions))
            index.add_file(path, columns, skip=np.concatenate(deleted) if deleted else None)
            if own:
                index.deletes[path] = own
        return index

    def __len__(self) -> int:
        """How many keys are indexed."""
        return 0 if self._places is None else len(self._places)

    def add_file(
        self,
        path: str,
        key_columns: Sequence[pa.ChunkedArray | pa.Array],
        skip: np.ndarray | None = None,
        *,
        unindexed: bool = False,
    ) -> None:
        """Index the rows of a data file, given its key columns in row order (``skip``: the positions
        of deleted rows). A key indexed already moves to its row in this file; ``unindexed`` says
        none is (the caller took or forgot each of them first), so none is looked for."""
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self.files)
            self.files.append(path)
        base = number << _SHIFT
        count = len(key_columns[0])
        places = self._places
        if places is None:
            integer = len(key_columns) == 1 and pa.types.is_integer(key_columns[0].type)
            places = self._places = IntegerPlaces() if integer else {}
        if isinstance(places, IntegerPlaces):
            column = key_columns[0]
            if column.null_count:
                raise ValueError(f"{path}: a row has no value for its primary key")
            values = np.asarray(pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
            rows = np.arange(base, base + count, dtype=np.int64)
            if skip is not None and len(skip):
                kept = np.ones(count, dtype=bool)
                kept[skip] = False
                values, rows = values[kept], rows[kept]
            places.add(values, rows, unindexed=unindexed)
            return
        keys: Iterable[Hashable]
        if len(key_columns) == 1:
            keys = key_columns[0].to_pylist()
        else:
            keys = zip(*(c.to_pylist() for c in key_columns), strict=True)
        if skip is not None and len(skip):
            deleted = set(skip.tolist())
            for position, key in enumerate(keys):
                if position not in deleted:
                    places[key] = base | position
        else:
            places.update(zip(keys, range(base, base + count), strict=True))

    def take(self, keys: Sequence[Hashable]) -> dict[str, list[int]]:
        """Remove these keys from the index: the positions of their rows, by data file."""
        places = self._places
        if places is None or not keys:
            return {}
        if isinstance(places, IntegerPlaces):
            found = places.take(np.fromiter(keys, dtype=np.int64, count=len(keys)))
        else:
            pop = places.pop
            found = np.fromiter(
                (place for place in (pop(k, None) for k in keys) if place is not None), dtype=np.int64
            )
        if not len(found):
            return {}
        numbers, positions = found >> _SHIFT, found & ((1 << _SHIFT) - 1)
        order = np.lexsort((positions, numbers))
        numbers, positions = numbers[order], positions[order]
        starts = np.flatnonzero(np.diff(numbers, prepend=-1))
        return {
            self.files[int(numbers[start])]: chunk.tolist()
            for start, chunk in zip(starts, np.split(positions, starts[1:]), strict=True)
        }

    def planned_deletes(
        self, positions: dict[str, list[int]]
    ) -> tuple[dict[str, np.ndarray], list[DataFile]]:
        """What a commit that deletes ``positions`` (by data file) writes: for each data file, the
        sorted positions of its new delete file (those deleted now; or, when the data file has
        :data:`DELETE_FILES_PER_DATA_FILE` delete files already, every position deleted from it),
        and the delete files that the merged ones replace."""
        planned: dict[str, np.ndarray] = {}
        replaced: list[DataFile] = []
        for path, rows in positions.items():
            new = np.asarray(rows, dtype=np.int64)
            own = self.deletes.get(path, [])
            if len(own) >= DELETE_FILES_PER_DATA_FILE:
                planned[path] = sorted_positions([*(p for _, p in own), new])
                replaced.extend(f for f, _ in own)
            else:
                planned[path] = sorted_positions([new])
        return planned, replaced

    def record_deletes(
        self, planned: dict[str, np.ndarray], written: Sequence[DataFile], replaced: Sequence[DataFile]
    ) -> None:
        """After a commit: the delete files written for ``planned`` join their data files' own, in
        place of those ``replaced``."""
        removed = set(replaced)
        for delete_file in written:
            path = referenced_data_file(delete_file)
            assert path is not None and path in planned
            kept = [(f, p) for f, p in self.deletes.get(path, []) if f not in removed]
            self.deletes[path] = [*kept, (delete_file, off_heap(planned[path]))]

    def forget_files(self, paths: set[str]) -> None:
        """Drop the keys whose rows are in these files (a compaction rewrote them)."""
        for path in paths:
            self.deletes.pop(path, None)
        numbers = {self._numbers[p] for p in paths if p in self._numbers}
        places = self._places
        if not numbers or places is None:
            return
        if isinstance(places, IntegerPlaces):
            places.forget(np.fromiter(numbers, dtype=np.int64, count=len(numbers)))
        else:
            self._places = {k: v for k, v in places.items() if v >> _SHIFT not in numbers}


class IntegerPlaces:
    """Integer keys → places (file number << 40 | row position), in sorted NumPy runs.

    Written here: neither pyarrow nor NumPy has a mutable integer hash map, and a dict of Python
    ints costs about 100 bytes per key. Each run holds unique sorted keys and their places; a
    removed key's place is -1 until its run is merged. New keys make a new run, and a run merges
    with the one before it while that is not more than twice its size (so there are a logarithm of
    the key count runs, and each key is merged that many times). A key in a newer run shadows the
    same key in an older one (the index's "a key moves to its newer row").
    """

    __slots__ = ("_live", "_runs")

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def add(self, keys: np.ndarray, places: np.ndarray, *, unindexed: bool = False) -> None:
        """Index these keys at these places; one indexed already moves here (a newer run shadows
        it), unless ``unindexed`` says none is."""
        if not len(keys):
            return
        order = np.argsort(keys, kind="stable")
        keys, places = keys[order], places[order]
        last = np.ones(len(keys), dtype=bool)  # of equal keys, the last row of the file wins
        last[:-1] = keys[1:] != keys[:-1]
        keys, places = off_heap(keys[last]), off_heap(places[last])
        if not unindexed:
            self._shadow(keys)
        self._runs.append((keys, places))
        self._live += len(keys)
        while len(self._runs) > 1 and len(self._runs[-2][0]) <= 2 * len(self._runs[-1][0]):
            newer = self._runs.pop()
            older = self._runs.pop()
            self._runs.append(_merge(older, newer))

    def _shadow(self, keys: np.ndarray) -> None:
        """Remove these keys from the runs (they move to a newer run)."""
        for run_keys, run_places in self._runs:
            hits = _find(run_keys, run_places, keys)
            self._live -= len(hits)
            run_places[hits] = -1

    def take(self, keys: np.ndarray) -> np.ndarray:
        """Remove these (distinct) keys: the places they had, for those indexed."""
        found = []
        for run_keys, run_places in self._runs:
            hits = _find(run_keys, run_places, keys)
            if len(hits):
                found.append(run_places[hits].copy())
                run_places[hits] = -1
                self._live -= len(hits)
        return np.concatenate(found) if found else np.empty(0, dtype=np.int64)

    def forget(self, numbers: np.ndarray) -> None:
        """Remove the keys whose places are in these files."""
        for _keys, run_places in self._runs:
            gone = (run_places >= 0) & np.isin(run_places >> _SHIFT, numbers)
            self._live -= int(gone.sum())
            run_places[gone] = -1


def _find(run_keys: np.ndarray, run_places: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The positions in a run of those of ``keys`` it holds live."""
    at = np.searchsorted(run_keys, keys)
    inside = at < len(run_keys)
    at = at[inside]
    live: np.ndarray = at[(run_keys[at] == keys[inside]) & (run_places[at] >= 0)]
    return live


def _merge(
    older: tuple[np.ndarray, np.ndarray], newer: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Two runs as one, removed keys left out (a live key is in at most one of them)."""
    (old_keys, old_places), (new_keys, new_places) = older, newer
    live_old, live_new = old_places >= 0, new_places >= 0
    old_keys, old_places = old_keys[live_old], old_places[live_old]
    new_keys, new_places = new_keys[live_new], new_places[live_new]
    keys, places = np.concatenate([old_keys, new_keys]), np.concatenate([old_places, new_places])
    if len(old_keys) and len(new_keys) and new_keys[0] <= old_keys[-1]:
        order = np.argsort(keys, kind="stable")
        keys, places = keys[order], places[order]
    return off_heap(keys), off_heap(places)


#: Arrays of at least this many bytes that the index keeps get a memory map of their own.
OFF_HEAP_BYTES = 64 * 1024


def off_heap(values: np.ndarray) -> np.ndarray:
    """``values``, or, when large, a copy of them in an anonymous memory map of its own.

    The index's arrays live as long as the table's keys do, while the arrays of each commit come
    and go around them. On glibc's heap, each long-lived array would pin the memory around it and
    the heap's free space would grow with the table; a map of its own is given back whole when
    the array goes.
    """
    if not values.nbytes or values.nbytes < OFF_HEAP_BYTES:
        return values
    copy = np.frombuffer(
        mmap.mmap(-1, values.nbytes, flags=mmap.MAP_PRIVATE), dtype=values.dtype, count=len(values)
    )
    copy[:] = values
    return copy


def deleted_positions(
    io: FileIO, task: FileScanTask, known: Mapping[str, np.ndarray] | None = None
) -> np.ndarray:
    """The sorted positions of a data file's rows that its scan task's delete files remove; those of
    the delete files in ``known`` (by path: their positions in this data file) are not read."""
    path = task.file.file_path
    positions = []
    for delete_file in task.delete_files:
        if known is not None and delete_file.file_path in known:
            positions.append(known[delete_file.file_path])
            continue
        found = _read_deletes(io, delete_file).get(path)
        if found is not None:
            positions.append(positions_array(found))
    return sorted_positions(positions)


def positions_array(positions: pa.ChunkedArray) -> np.ndarray:
    """Row positions as pyiceberg reads them from a delete file, as an int64 array."""
    return np.asarray(positions.to_numpy(), dtype=np.int64)


def sorted_positions(runs: Sequence[np.ndarray]) -> np.ndarray:
    """The distinct positions of several sorted runs of them, sorted. A stable sort (timsort)
    merges the runs as they are (``np.unique`` sorts them from scratch: 20 times slower on 150,000)."""
    if not runs:
        return np.empty(0, dtype=np.int64)
    merged = np.sort(np.concatenate(runs), kind="stable")
    if len(merged) > 1:
        distinct = np.empty(len(merged), dtype=bool)
        distinct[0] = True
        np.not_equal(merged[1:], merged[:-1], out=distinct[1:])
        if not distinct.all():
            merged = merged[distinct]
    return merged


def positions_kept(count: int, deleted: np.ndarray) -> np.ndarray:
    """The positions of a data file of ``count`` rows that ``deleted`` does not remove, sorted."""
    kept = np.ones(count, dtype=bool)
    kept[deleted[(deleted >= 0) & (deleted < count)]] = False  # a position past the file deletes nothing
    return np.flatnonzero(kept).astype(np.int64, copy=False)


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


def write_data_file(
    table: Table, metadata: TableMetadata, data: pa.Table, write_uuid: uuid.UUID
) -> list[DataFile] | None:
    """The rows as one Parquet data file of an unpartitioned table, written on the calling thread
    with pyiceberg's Parquet writer (its writer properties and column statistics); ``None`` when
    pyiceberg's own write is needed (another file format, a partitioned table, column names that
    Parquet needs sanitized, or rows not in the table's Arrow schema).

    pyiceberg's ``_dataframe_to_data_files`` does the same on its thread pool, after projecting the
    rows onto the file schema again: twice this one's cost for a commit's few thousand rows, and a
    thread hand-over per commit on a busy machine.
    """
    schema = metadata.schema()
    arrow_schema = schema.as_arrow()
    if not writes_parquet_here(metadata) or not data.schema.equals(arrow_schema):
        return None
    if not data.schema.equals(arrow_schema, check_metadata=True):  # rows read back: no field ids
        data = pa.Table.from_arrays(data.columns, schema=arrow_schema)
    if not data.num_rows:
        return []
    location = table.location_provider().new_data_location(f"00000-0-{write_uuid}.parquet")
    output = table.io.new_output(location)
    writer = ParquetFormatModel().create_writer(output, schema, metadata.properties)
    with writer:
        writer.write(data)
    return [parquet_file(location, len(output), writer.result(), metadata.default_spec_id)]


def writes_parquet_here(metadata: TableMetadata) -> bool:
    """Whether ferry writes the table's data files itself: Parquet, unpartitioned, and column names
    that Parquet takes as they are."""
    schema = metadata.schema()
    return (
        metadata.properties.get(_FILE_FORMAT, "parquet").lower() == "parquet"
        and metadata.spec().is_unpartitioned()
        and sanitize_column_names(schema) == schema
    )


def parquet_file(
    location: str,
    size: int,
    statistics: DataFileStatistics,
    spec_id: int,
    *,
    referenced_data_file: str | None = None,
) -> DataFile:
    """The manifest's description of a Parquet file written here: a data file, or the position
    delete file of ``referenced_data_file``."""
    data_file = DataFile.from_args(
        content=DataFileContent.DATA if referenced_data_file is None else DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        file_size_in_bytes=size,
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
        referenced_data_file=referenced_data_file,
        **statistics.to_serialized_dict(),
    )
    data_file.spec_id = spec_id  # not a field of the struct: pyiceberg sets it apart
    return data_file


def write_position_deletes(
    table: Table, tx: Transaction, positions: Mapping[str, Sequence[int] | np.ndarray], write_uuid: uuid.UUID
) -> list[DataFile]:
    """One position delete file per data file with deleted rows (``positions`` sorted)."""
    provider = table.location_provider()
    stats_plan = compute_statistics_plan(POSITION_DELETE_SCHEMA, _METRICS)
    id_mapping = parquet_path_to_id_mapping(POSITION_DELETE_SCHEMA)
    spec_id = tx.table_metadata.default_spec_id
    out = []
    for number, (path, rows) in enumerate(sorted(positions.items())):
        indices = pa.array(np.zeros(len(rows), dtype=np.int32))
        paths = pa.DictionaryArray.from_arrays(indices, pa.array([path])).cast(pa.string())
        data = pa.table({"file_path": paths, "pos": pa.array(rows, pa.int64())})
        data = data.cast(_ARROW_SCHEMA)
        location = provider.new_data_location(f"{write_uuid}-deletes-{number:05d}.parquet")
        output = table.io.new_output(location)
        with output.create(overwrite=True) as stream:
            writer = pq.ParquetWriter(stream, _ARROW_SCHEMA, compression="zstd")
            writer.write_table(data)
            writer.close()
            metadata = writer.writer.metadata
        statistics = data_file_statistics_from_parquet_metadata(metadata, stats_plan, id_mapping)
        out.append(parquet_file(location, len(output), statistics, spec_id, referenced_data_file=path))
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


class _RemovingDeleteFiles:
    """What both producers below share: delete files removed from the table in their snapshot,
    counted in its summary as removed."""

    _deleted_data_files: set[DataFile]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._removed_delete_files: set[DataFile] = set()

    def remove_delete_file(self, delete_file: DataFile) -> None:
        self._removed_delete_files.add(delete_file)

    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Any:  # noqa: B006 (pyiceberg's signature)
        removed = self._deleted_data_files
        self._deleted_data_files = removed | self._removed_delete_files
        try:
            return super()._summary(snapshot_properties)  # type: ignore[misc]
        finally:
            self._deleted_data_files = removed

    def _rewritten_delete_manifest(
        self, entries: Iterable[ManifestEntry], added: Iterable[DataFile] = ()
    ) -> ManifestFile:
        """One delete manifest: ``added`` as new, each of ``entries`` as it was, or as deleted in
        this snapshot when removed (kept as a DELETED entry, so that expiring this snapshot's parent
        finds its file)."""
        producer: Any = self
        snapshot_id = producer.snapshot_id
        with _delete_manifest_writer(producer) as writer:
            for delete_file in added:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=delete_file,
                    )
                )
            for entry in entries:
                removed = entry.data_file in self._removed_delete_files
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.DELETED if removed else ManifestEntryStatus.EXISTING,
                        snapshot_id=snapshot_id if removed else entry.snapshot_id,
                        sequence_number=entry.sequence_number,
                        file_sequence_number=entry.file_sequence_number,
                        data_file=entry.data_file,
                    )
                )
        return writer.to_manifest_file()

    def _manifests_but_added_deletes(self) -> tuple[list[DataFile], list[ManifestFile]]:
        """The delete files added, and the manifests pyiceberg writes for the rest (its writers
        would list delete files in a data manifest)."""
        producer: Any = self
        added = producer._added_data_files
        deletes = [f for f in added if _is_delete(f)]
        producer._added_data_files = [f for f in added if not _is_delete(f)]
        try:
            manifests: list[ManifestFile] = super()._manifests()  # type: ignore[misc]
        finally:
            producer._added_data_files = added  # the summary counts both kinds
        return deletes, manifests

    def _parent_delete_manifests(self) -> list[ManifestFile]:
        producer: Any = self
        snapshot = producer._transaction.table_metadata.snapshot_by_name(name=producer._target_branch)
        if snapshot is None:
            return []
        return [
            m
            for m in snapshot.manifests(io=producer._io)
            if m.content == ManifestContent.DELETES and (m.has_added_files() or m.has_existing_files())
        ]


class RowDelta(_RemovingDeleteFiles, _MergeAppendFiles):
    """Adds data files and position delete files in one snapshot (Iceberg's "row delta"), removing
    the delete files that the added ones replace; past :data:`DELETE_MANIFESTS` delete manifests,
    or when it removes delete files, it lists the table's delete files in one."""

    def __init__(self, tx: Transaction, io: FileIO, snapshot_properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, tx, io, snapshot_properties=snapshot_properties)

    def _existing_manifests(self) -> list[ManifestFile]:
        # the parent's delete manifests are listed again, or merged into one, by _manifests
        return [m for m in super()._existing_manifests() if m.content == ManifestContent.DATA]

    def _manifests(self) -> list[ManifestFile]:
        deletes, manifests = self._manifests_but_added_deletes()
        existing = self._parent_delete_manifests()
        if not self._removed_delete_files and len(existing) + bool(deletes) <= DELETE_MANIFESTS:
            new = [self._rewritten_delete_manifest((), deletes)] if deletes else []
            return [*new, *existing, *manifests]
        entries = [e for m in existing for e in m.fetch_manifest_entry(io=self._io, discard_deleted=True)]
        return [self._rewritten_delete_manifest(entries, deletes), *manifests]


class RewriteWithDeletes(_RemovingDeleteFiles, _OverwriteFiles):
    """pyiceberg's overwrite, which also drops the delete files of the data files it removes, and
    can add position delete files for the data files it adds (in a delete manifest of their own)."""

    def __init__(self, tx: Transaction, io: FileIO, snapshot_properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, tx, io, snapshot_properties=snapshot_properties)

    def _manifests(self) -> list[ManifestFile]:
        deletes, manifests = self._manifests_but_added_deletes()
        return [self._rewritten_delete_manifest((), deletes), *manifests] if deletes else manifests

    def _existing_manifests(self) -> list[ManifestFile]:
        data = super()._existing_manifests()
        kept = [m for m in data if m.content == ManifestContent.DATA]
        for manifest in self._parent_delete_manifests():
            entries = manifest.fetch_manifest_entry(io=self._io, discard_deleted=True)
            if any(e.data_file in self._removed_delete_files for e in entries):
                kept.append(self._rewritten_delete_manifest(entries))
            else:
                kept.append(manifest)
        return kept


def positions_of_slices(record_counts: Sequence[int]) -> list[tuple[int, int]]:
    """The ``(start, stop)`` row slices of an Arrow table that files of these row counts hold, in order."""
    bounds = [0, *itertools.accumulate(record_counts)]
    return list(itertools.pairwise(bounds))
