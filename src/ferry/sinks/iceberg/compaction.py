"""Compaction of an Iceberg table's small data files: which files, and their rows written again.

Commits leave one small data file each. Every ``sink.compaction.commit-interval`` commits of a
table, the files under ``sink.compaction.small-file-bytes`` of the lowest size tier that holds
``sink.compaction.min-input-files`` of them are rewritten into one (:func:`compaction_input`).
Sizes count only the rows no delete file removes, so a file whose rows were mostly updated away
drops to a lower tier and is rewritten sooner.

A compaction's work is bounded, so that the checkpoint it runs in costs about what the others
cost however large the table grows: it takes at most ``small-file-bytes`` of live data (the
smallest files of the tier first; a file written by a compaction is therefore never larger), and
it reads and writes one input file at a time (:func:`write_compacted`), so its memory is that of
one file's rows, not the tier's.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, ParquetFormatModel, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata

from ferry.sinks.iceberg.deletes import parquet_file, referenced_data_file, writes_parquet_here

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
) -> tuple[list[DataFile], pa.Table]:
    """The live rows of ``tasks``' data files (their deletes applied) written as the table's data
    files, and the ``keys`` columns of the rows written, in the files' order.

    One Parquet file, written one input file at a time, where ferry writes the table's files itself
    (:func:`~ferry.sinks.iceberg.deletes.writes_parquet_here`); pyiceberg's write of all the rows
    at once otherwise.
    """
    schema = metadata.schema()
    arrow_schema = schema.as_arrow()
    scan = ArrowScan(metadata, table.io, schema, AlwaysTrue())
    if not writes_parquet_here(metadata):
        data = scan.to_table(tasks)
        written = list(_dataframe_to_data_files(metadata, data, table.io, write_uuid=write_uuid))
        return written, data.select(list(keys))
    location = table.location_provider().new_data_location(f"00000-0-{write_uuid}.parquet")
    output = table.io.new_output(location)
    writer = ParquetFormatModel().create_writer(output, schema, metadata.properties)
    key_parts: list[pa.Table] = []
    for task in tasks:
        rows = scan.to_table([task])
        if not rows.num_rows:
            continue
        rows = rows.cast(arrow_schema)  # the table's field ids, which rows read back lack
        writer.write(rows)
        key_parts.append(rows.select(list(keys)))
    if not key_parts:  # every row deleted: no file (the writer creates it at its first rows)
        return [], arrow_schema.empty_table().select(list(keys))
    statistics = writer.close()
    data_file = parquet_file(location, len(output), statistics, metadata.default_spec_id)
    return [data_file], pa.concat_tables(key_parts)
