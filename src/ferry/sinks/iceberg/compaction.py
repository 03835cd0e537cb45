"""Compaction of an Iceberg table's small data files: which files, and their rows written again.

Commits leave one small data file each. Every ``sink.compaction.commit-interval`` commits of a
table, the files under ``sink.compaction.small-file-bytes`` of the lowest size tier that holds
``sink.compaction.min-input-files`` of them are rewritten into one (:func:`compaction_input`).
Sizes count only the rows no delete file removes, so a file whose rows were mostly updated away
drops to a lower tier and is rewritten sooner.

A compaction's work is bounded, so that the checkpoint it runs in costs about what the others
cost however large the table grows: it takes at most ``small-file-bytes`` of live data (the
smallest files of the tier first; a file written by a compaction is therefore never larger), and
it reads and writes one batch of an input file's rows at a time (:func:`write_compacted`), so its
memory is that of a batch (pyarrow's scanner reads up to 131,072 rows in one), not the tier's.

In a merge-on-read table the files are written in the background (``sink.compaction.background``):
:func:`prepare` writes them on a thread of their own from the snapshot a commit left, while the
pipeline reads on, and a later commit of the table commits them (the sink's ``_commit_prepared``).
Rows deleted from the input files in between are deleted from the compacted file in the same
snapshot: :class:`CompactedRows` says which input row each of its rows is.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import (
    ArrowScan,
    ParquetFormatModel,
    _dataframe_to_data_files,
    _read_all_delete_files,
)
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata

from ferry.sinks.iceberg.deletes import (
    parquet_file,
    positions_array,
    positions_kept,
    positions_of_slices,
    referenced_data_file,
    sorted_positions,
    writes_parquet_here,
)

#: Data files under this size are all of the lowest tier compaction merges.
TIER_BYTES = 64 * 1024


def live_bytes(task: FileScanTask) -> float:
    """A data file's size, counting only the rows that its own delete files do not remove."""
    data = task.file
    deleted = sum(d.record_count for d in task.delete_files if referenced_data_file(d) == data.file_path)
    live = 1.0 if not data.record_count else max(0.0, 1 - deleted / data.record_count)
    return float(data.file_size_in_bytes * live)


def compaction_input(tasks: list[FileScanTask], min_files: int, max_bytes: int) -> list[FileScanTask]:
    """The files one compaction rewrites: of the lowest tier holding ``min_files`` files, the
    smallest ones that fit in ``max_bytes`` of live data (two at least); none when no tier has them.

    Tiers are sizes a factor ``min_files`` apart (under 64 KiB, then under 64 KiB × ``min_files``,
    ...). So ``min_files`` files of one tier merge into about one file of the next, each row is
    rewritten once per tier (a logarithm of the table's size, up to ``max_bytes``), and a
    compaction reads a bounded share of the table instead of all of it.
    """
    tiers: dict[int, list[tuple[float, FileScanTask]]] = defaultdict(list)
    for task in tasks:
        size = live_bytes(task)
        tier = 0 if size < TIER_BYTES else 1 + int(math.log(size / TIER_BYTES, min_files))
        tiers[tier].append((size, task))
    for tier in sorted(tiers):
        if len(tiers[tier]) < min_files:
            continue
        chosen: list[FileScanTask] = []
        total = 0.0
        for size, task in sorted(tiers[tier], key=lambda pair: pair[0]):
            if chosen and total + size > max_bytes:
                break
            chosen.append(task)
            total += size
        if len(chosen) >= 2:
            return chosen
    return []


def write_compacted(
    table: Table,
    metadata: TableMetadata,
    tasks: Sequence[FileScanTask],
    keys: Sequence[str],
    write_uuid: uuid.UUID,
    *,
    deletes: dict[str, list[pa.ChunkedArray]] | None = None,
    fill: dict[str, Any] | None = None,
) -> tuple[list[DataFile], pa.Table]:
    """The live rows of ``tasks``' data files (their deletes applied) written as the table's data
    files, and the ``keys`` columns of the rows written, in the files' order. ``deletes``: by data
    file, the positions its delete files remove, as pyiceberg reads them (read here when not given).

    One Parquet file, written one batch of rows at a time, where ferry writes the table's files itself
    (:func:`~ferry.sinks.iceberg.deletes.writes_parquet_here`); pyiceberg's write of all the rows
    at once otherwise.
    """
    schema = metadata.schema()
    arrow_schema = schema.as_arrow()
    scan = ArrowScan(metadata, table.io, schema, AlwaysTrue())
    if not writes_parquet_here(metadata):
        data = _filled(scan.to_table(tasks), fill)
        written = list(_dataframe_to_data_files(metadata, data, table.io, write_uuid=write_uuid))
        return written, data.select(list(keys))
    location = table.location_provider().new_data_location(f"00000-0-{write_uuid}.parquet")
    output = table.io.new_output(location)
    writer = ParquetFormatModel().create_writer(output, schema, metadata.properties)
    key_parts: list[pa.Table] = []
    if deletes is None:
        deletes = _read_all_delete_files(table.io, tasks)
    for task in tasks:
        # batch by batch (pyiceberg's scan of a file reads all of its batches first)
        for batch in scan._record_batches_from_scan_tasks_and_deletes([task], deletes):
            if not batch.num_rows:
                continue
            # the table's field ids, which rows read back lack
            rows = _filled(pa.Table.from_batches([batch]).cast(arrow_schema), fill)
            writer.write(rows)
            key_parts.append(rows.select(list(keys)))
    if not key_parts:  # every row deleted: no file (the writer creates it at its first rows)
        return [], arrow_schema.empty_table().select(list(keys))
    statistics = writer.close()
    data_file = parquet_file(location, len(output), statistics, metadata.default_spec_id)
    return [data_file], pa.concat_tables(key_parts)


def _filled(rows: pa.Table, fill: dict[str, Any] | None) -> pa.Table:
    """``rows`` with each column of ``fill`` set to its value in every row."""
    for name, value in (fill or {}).items():
        at = rows.schema.get_field_index(name)
        field = rows.schema.field(at)
        rows = rows.set_column(at, field, pa.repeat(pa.scalar(value, type=field.type), rows.num_rows))
    return rows


@dataclass(frozen=True)
class CompactedRows:
    """A compaction's files written: the data files, the key columns of their rows in order, and
    for each input file (in the order of the tasks) the positions of its rows they hold, in order,
    and those its delete files had removed when it was read."""

    added: list[DataFile]
    key_rows: pa.Table
    kept: dict[str, np.ndarray]
    deleted: dict[str, np.ndarray]

    def places(self, positions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Where rows of the input files (positions, by input path, each sorted and among those
        kept) are in the added files: positions by added file."""
        rows, offset = [], 0
        for path, kept in self.kept.items():
            wanted = positions.get(path)
            if wanted is not None and len(wanted):
                at = np.searchsorted(kept, wanted)
                if (at >= len(kept)).any() or (kept[np.minimum(at, len(kept) - 1)] != wanted).any():
                    raise ValueError(f"{path}: a position deleted now was not among the rows compacted")
                rows.append(offset + at)
            offset += len(kept)
        if not rows:
            return {}
        everywhere = np.concatenate(rows)
        out: dict[str, np.ndarray] = {}
        for data_file, (start, stop) in zip(
            self.added, positions_of_slices([f.record_count for f in self.added]), strict=True
        ):
            inside = everywhere[(everywhere >= start) & (everywhere < stop)] - start
            if len(inside):
                out[data_file.file_path] = inside
        return out


@dataclass
class PreparedCompaction:
    """A compaction whose files are being written (or were) in the background: the table's schema
    then, its input files as planned, and the files written (:class:`CompactedRows`)."""

    schema_id: int
    tasks: list[FileScanTask]
    result: Future[CompactedRows]


def prepare(
    table: Table, metadata: TableMetadata, tasks: Sequence[FileScanTask], keys: Sequence[str]
) -> CompactedRows:
    """The compacted files of ``tasks`` written (not committed), with where each row came from.
    Reads and writes only files: safe on a thread of its own while the table takes commits."""
    deletes = _read_all_delete_files(table.io, tasks)  # once, for the positions and the rows
    deleted = {
        t.file.file_path: sorted_positions([positions_array(c) for c in deletes.get(t.file.file_path, [])])
        for t in tasks
    }
    added, key_rows = write_compacted(table, metadata, tasks, keys, uuid.uuid4(), deletes=deletes)
    kept = {t.file.file_path: positions_kept(t.file.record_count, deleted[t.file.file_path]) for t in tasks}
    if sum(len(k) for k in kept.values()) != key_rows.num_rows:
        raise ValueError("the compacted rows are not the input files' rows less their deletes")
    return CompactedRows(added, key_rows, kept, deleted)
