"""Which data files one Iceberg compaction rewrites: the lowest full tier, bounded in bytes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import DataFileStatistics
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import FileScanTask
from pyiceberg.typedef import Record

from ferry.sinks.iceberg.compaction import TIER_BYTES, compaction_input, live_bytes
from ferry.sinks.iceberg.deletes import FILE_PATH_ID, parquet_file

KIB, MIB = 1024, 1024 * 1024


def task(number: int, size: int, rows: int = 1000, deleted: int = 0) -> FileScanTask:
    """A data file of ``size`` bytes and ``rows`` rows, ``deleted`` of them by its own delete file."""
    path = f"file:///warehouse/data/{number:05d}.parquet"

    def statistics(count: int) -> DataFileStatistics:
        return DataFileStatistics(
            record_count=count,
            column_sizes={},
            value_counts={},
            null_value_counts={},
            nan_value_counts={},
            column_aggregates={},
            split_offsets=[],
        )

    data = parquet_file(path, size, statistics(rows), 0)
    if not deleted:
        return FileScanTask(data)
    # a position delete file whose file_path bounds name the one data file it applies to
    bounds = {FILE_PATH_ID: path.encode()}
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"{path}.deletes",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        file_size_in_bytes=100,
        record_count=deleted,
        lower_bounds=bounds,
        upper_bounds=bounds,
    )
    return FileScanTask(data, {delete})


def tier(size: float, min_files: int) -> int:
    return 0 if size < TIER_BYTES else 1 + int(math.log(size / TIER_BYTES, min_files))


def test_the_smallest_files_of_the_lowest_full_tier_fit_in_the_bound() -> None:
    small = [task(i, 20 * KIB) for i in range(3)]  # tier 0: too few
    middle = [task(10 + i, (5 + i) * MIB) for i in range(8)]  # one tier: 5, 6, ... 12 MiB
    chosen = compaction_input([*small, *middle], min_files=8, max_bytes=32 * MIB)
    # the smallest first, while they fit: 5 + 6 + 7 + 8 = 26 MiB (with 9 MiB more it would be 35)
    assert [t.file.file_path for t in chosen] == [t.file.file_path for t in middle[:4]]


def test_rows_deleted_by_its_own_delete_file_move_a_file_to_a_lower_tier() -> None:
    mostly_deleted = task(1, 600 * KIB, rows=1000, deleted=950)  # 30 KiB live: tier 0
    assert live_bytes(mostly_deleted) == pytest.approx(30 * KIB)
    others = [task(2 + i, 10 * KIB) for i in range(7)]
    assert compaction_input([mostly_deleted, *others], min_files=8, max_bytes=32 * MIB)[-1] is mostly_deleted


def test_nothing_when_no_two_files_of_a_full_tier_fit() -> None:
    big = [task(i, 20 * MIB) for i in range(8)]
    assert compaction_input(big, min_files=8, max_bytes=32 * MIB) == []


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40 * MIB), min_size=0, max_size=30),
    min_files=st.integers(2, 8),
    max_bytes=st.integers(64 * KIB, 64 * MIB),
)
def test_a_compaction_reads_at_most_its_bound_from_one_tier(
    sizes: list[int], min_files: int, max_bytes: int
) -> None:
    tasks = [task(i, size) for i, size in enumerate(sizes)]
    chosen = compaction_input(tasks, min_files, max_bytes)
    if not chosen:
        # no tier has min_files files of which the two smallest fit in the bound
        by_tier: dict[int, list[int]] = {}
        for size in sizes:
            by_tier.setdefault(tier(size, min_files), []).append(size)
        assert all(len(s) < min_files or sum(sorted(s)[:2]) > max_bytes for s in by_tier.values())
        return
    assert len(chosen) >= 2
    assert sum(live_bytes(t) for t in chosen) <= max_bytes
    tiers = {tier(live_bytes(t), min_files) for t in chosen}
    assert len(tiers) == 1
    [chosen_tier] = tiers
    members = sorted(live_bytes(t) for t in tasks if tier(live_bytes(t), min_files) == chosen_tier)
    assert len(members) >= min_files
    # the smallest of the tier, as many as fit
    assert sorted(live_bytes(t) for t in chosen) == members[: len(chosen)]
    assert len(chosen) == len(members) or sum(members[: len(chosen) + 1]) > max_bytes
    # no lower tier could have been compacted
    for lower in {tier(live_bytes(t), min_files) for t in tasks} - tiers:
        if lower < chosen_tier:
            sizes_of = sorted(live_bytes(t) for t in tasks if tier(live_bytes(t), min_files) == lower)
            assert len(sizes_of) < min_files or sum(sizes_of[:2]) > max_bytes
