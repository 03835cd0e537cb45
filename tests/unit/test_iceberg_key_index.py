"""The Iceberg sink's key index: primary key → (data file, row), kept in NumPy runs for integer keys."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.sinks.iceberg import deletes
from ferry.sinks.iceberg.deletes import KeyIndex, off_heap, positions_kept, sorted_positions


def _model_take(model: dict[object, tuple[str, int]], keys: list[object]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for key in keys:
        place = model.pop(key, None)
        if place is not None:
            out.setdefault(place[0], []).append(place[1])
    return {path: sorted(rows) for path, rows in out.items()}


@pytest.mark.parametrize("mapped", [False, True], ids=["heap", "maps"])
@pytest.mark.parametrize("kind", ["int32", "int64", "string"])
def test_the_index_follows_a_model_through_adds_takes_and_forgotten_files(
    kind: str, mapped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mapped:  # every array the index keeps in a memory map of its own, as large ones are
        monkeypatch.setattr(deletes, "OFF_HEAP_BYTES", 1)
    rng = random.Random(7)
    index = KeyIndex(("id",), None)
    model: dict[object, tuple[str, int]] = {}
    arrow_type = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string()}[kind]

    def value(key: int) -> object:
        return f"k{key}" if kind == "string" else key * (1 if kind == "int32" else 1_000_003)

    next_key, files = 0, []
    for step in range(300):
        path = f"file-{step}.parquet"
        # new keys, and keys written again (an update: taken first, then in the new file)
        fresh = list(range(next_key, next_key + rng.randrange(1, 40)))
        next_key = fresh[-1] + 1
        again = rng.sample(sorted(k for k in range(next_key) if value(k) in model), k=min(5, len(model)))
        assert index.take([value(k) for k in again]) == _model_take(model, [value(k) for k in again])
        rows = [*fresh, *again]
        rng.shuffle(rows)
        skip = {i for i in range(len(rows)) if rng.random() < 0.1}
        # every key of the file was taken or never indexed: told so on every other file
        index.add_file(
            path,
            [pa.array([value(k) for k in rows], arrow_type)],
            skip=np.array(sorted(skip), dtype=np.int64),
            unindexed=step % 2 == 0,
        )
        for position, key in enumerate(rows):
            if position not in skip:
                model[value(key)] = (path, position)
        files.append(path)
        if step % 7 == 3:  # deletes, some of keys never indexed
            wanted = [value(rng.randrange(next_key + 10)) for _ in range(20)]
            wanted = list(dict.fromkeys(wanted))
            assert index.take(wanted) == _model_take(model, wanted)
        if step % 50 == 49:  # a compaction rewrote some files
            gone = set(rng.sample(files, k=5))
            index.forget_files(gone)
            model = {k: p for k, p in model.items() if p[0] not in gone}
        assert len(index) == len(model)
    everything = list(model)
    assert index.take(everything) == _model_take(dict(model), everything)
    assert len(index) == 0


def test_a_mapped_copy_is_equal_writable_and_apart_from_its_original() -> None:
    values = np.arange(deletes.OFF_HEAP_BYTES // 8 + 1, dtype=np.int64)
    copy = off_heap(values)
    assert copy.dtype == values.dtype and copy.tolist() == values.tolist()
    copy[0] = -1  # the index marks removed keys in place
    assert copy[0] == -1 and values[0] == 0
    small = np.arange(3, dtype=np.int64)
    assert off_heap(small) is small
    assert len(off_heap(np.empty(0, dtype=np.int64))) == 0


def test_a_key_written_twice_in_one_file_is_at_its_last_row() -> None:
    index = KeyIndex(("id",), None)
    index.add_file("a", [pa.array([1, 2, 1], pa.int64())])
    index.add_file("b", [pa.array([2], pa.int64())])  # moves key 2
    assert index.take([1, 2, 3]) == {"a": [2], "b": [0]}
    assert len(index) == 0


def test_a_null_key_is_refused() -> None:
    index = KeyIndex(("id",), None)
    with pytest.raises(ValueError, match="no value for its primary key"):
        index.add_file("a", [pa.array([1, None], pa.int64())])


@given(
    st.lists(st.lists(st.integers(0, 300), max_size=40), max_size=6),
    st.integers(0, 320),
)
def test_positions_merged_and_kept_are_numpy_set_operations(runs: list[list[int]], count: int) -> None:
    """The merge of sorted runs of deleted positions (overlapping or not) is their sorted distinct
    union, and a file's kept positions are its rows less those deleted (past its end: none)."""
    arrays = [np.array(sorted(run), dtype=np.int64) for run in runs]
    merged = sorted_positions(arrays)
    expected = np.unique(np.concatenate(arrays)) if arrays else np.empty(0, dtype=np.int64)
    assert merged.dtype == np.int64 and merged.tolist() == expected.tolist()
    kept = positions_kept(count, merged)
    assert kept.tolist() == [p for p in range(count) if p not in set(merged.tolist())]
