"""What a dead letter costs does not grow with the number of dead letters: the records of the rows
dead-lettered by one checkpoint are read again in one pass, and the dead letters are flushed once
per checkpoint, however many there are."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.pipeline.test_debezium_stream import TABLE, records, runner_for

from ferry.connectors.base import offset_runs
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.local import debezium as dbz
from ferry.pipeline.router import SchemaChangeBehavior
from ferry.sinks.memory import MemorySink


def run_with_dead_letters(tmp_path: Path, count: int) -> tuple[MemorySource, MemoryDeadLetter, MemorySink]:
    t = dbz.DebeziumTable(
        "srv",
        "db",
        "t",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT32)],
    )
    first = [t.insert({"id": 0, "n": 0})]
    t.change_type("n", dbz.INT64)  # the sink keeps INT (it refuses the change)
    later = [t.insert({"id": i, "n": 2**40 if i % 2 else i}) for i in range(1, 2 * count + 1)]
    source = MemorySource(records(first + later))
    sink, dead = MemorySink(), MemoryDeadLetter()
    sink.refuse_tags = {"alter.column.type"}
    runner = runner_for(source, sink, tmp_path, behavior=SchemaChangeBehavior.LENIENT, dead_letter=dead)
    runner.run()
    assert runner.metrics.bad_records == count
    return source, dead, sink


@pytest.mark.parametrize("count", [10, 2000])
def test_reads_again_and_flushes_do_not_grow_with_the_dead_letters(tmp_path: Path, count: int) -> None:
    source, dead, sink = run_with_dead_letters(tmp_path, count)

    assert len(dead.records) == count
    assert [letter.offset for letter in dead.records] == list(range(1, 2 * count + 1, 2))
    by_offset = {r.offset(): r for r in source.records}
    assert all(letter.value == by_offset[letter.offset].value() for letter in dead.records)  # as read
    assert sorted(r["id"] for r in sink.rows(TABLE)) == list(range(0, 2 * count + 1, 2))
    assert source.fetches == 1  # one read-again pass for the checkpoint's dead letters
    assert dead.flushes <= 3  # per checkpoint (the run has a few), not per dead letter


@given(
    st.sets(st.integers(min_value=0, max_value=10_000), min_size=1), st.integers(min_value=0, max_value=50)
)
def test_offset_runs_cover_every_offset_and_split_only_at_wide_gaps(offsets: set[int], gap: int) -> None:
    runs = offset_runs(sorted(offsets), gap)
    assert all(first <= last for first, last in runs)
    assert {o for o in offsets if any(first <= o <= last for first, last in runs)} == offsets
    assert all(first in offsets and last in offsets for first, last in runs)
    for (_, last), (first, _) in itertools.pairwise(runs):
        assert first - last > gap + 1  # a new run only after a gap wider than ``gap`` records
    for first, last in runs:
        inside = sorted(o for o in offsets if first <= o <= last)
        assert all(b - a <= gap + 1 for a, b in itertools.pairwise(inside))
