"""Compactions written in the background into Iceberg (merge-on-read), committed by a later commit,
read back by pyiceberg against a model of the rows.

The compacted files are written by a :class:`~tests.integration.helpers.Gate` in these tests: an
executor that runs what it was handed when the test opens it, so that commits land before, while and after a compaction is
written in any order the test (or Hypothesis) chooses.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ferry.model.events import AddColumn
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import STRING
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import ORDERS, Feed, Gate, create, write
from tests.integration.test_iceberg_merge_on_read import _compactions
from tests.integration.test_iceberg_sink import T, make_config, order, read

pytestmark = pytest.mark.integration


def _sink(warehouse: Path, gate: Gate, **options: Any) -> IcebergSink:
    config = {
        "sink.compaction.enabled": True,
        "sink.compaction.commit-interval": 3,
        "sink.compaction.min-input-files": 2,
        **options,
    }
    sink = IcebergSink(make_config(warehouse, **config), pipeline="p1")
    sink.compaction_executor = gate
    return sink


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def sink(tmp_path: Path, gate: Gate) -> Iterator[IcebergSink]:
    s = _sink(tmp_path / "warehouse", gate)
    yield s
    s.close()


def _warehouse_files(sink: IcebergSink) -> set[Path]:
    table = sink.load_table(T)
    assert table is not None
    return set(Path(table.location().removeprefix("file://"), "data").glob("*.parquet"))


def test_rows_changed_while_the_compaction_is_written_stay_changed(sink: IcebergSink, gate: Gate) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    expected = {}
    for i in range(3):  # three files of two rows; the third commit starts the compaction
        rows = [order(2 * i), order(2 * i + 1)]
        write(sink, ORDERS, feed, *(feed.insert(r) for r in rows))
        expected |= {r["id"]: r for r in rows}
    assert len(gate.waiting) == 1 and _compactions(sink, T) == 0
    # while it is written: a row of its input updated, one deleted, one updated twice
    write(
        sink,
        ORDERS,
        feed,
        feed.update(order(1), order(1, qty=10)),
        feed.delete(order(2)),
        feed.update(order(4), order(4, qty=40)),
    )
    write(sink, ORDERS, feed, feed.update(order(4, qty=40), order(4, qty=41)))
    expected |= {1: order(1, qty=10), 4: order(4, qty=41)}
    del expected[2]
    assert gate.open() == 1
    assert _compactions(sink, T) == 0  # written, not committed: the next commit of the table does
    write(sink, ORDERS, feed, feed.update(order(0), order(0, qty=5)))
    expected[0] = order(0, qty=5)
    assert _compactions(sink, T) == 1
    assert read(sink) == [expected[k] for k in sorted(expected)]
    # the key index follows the compaction: rows now in its file are found again
    write(sink, ORDERS, feed, feed.update(order(3), order(3, qty=30)), feed.delete(order(5)))
    expected[3] = order(3, qty=30)
    del expected[5]
    assert read(sink) == [expected[k] for k in sorted(expected)]


def test_tables_due_together_are_compacted_in_the_background_one_after_the_other(
    sink: IcebergSink, gate: Gate
) -> None:
    first, second = T, TableId(None, "shop", "returns")
    feeds = {first: Feed(first), second: Feed(second, partition=1)}

    def checkpoint(number: int) -> None:
        for table_id, feed in feeds.items():
            sink.write(table_id, ORDERS, [feed.insert(order(number))])
        sink.flush({tp: o for feed in feeds.values() for tp, o in feed.offsets().items()})

    for table_id in feeds:
        create(sink, ORDERS, table_id)
    for number in range(3):  # both due at the third checkpoint: the first table's starts
        checkpoint(number)
    assert len(gate.waiting) == 1
    gate.open()
    checkpoint(3)  # the first's is committed; the second's, due since, starts
    assert (_compactions(sink, first), _compactions(sink, second)) == (1, 0)
    assert len(gate.waiting) == 1
    gate.open()
    checkpoint(4)
    assert (_compactions(sink, first), _compactions(sink, second)) == (1, 1)
    for table_id in feeds:
        assert read(sink, table_id) == [order(i) for i in range(5)]


def test_a_schema_change_meanwhile_gives_the_compaction_up(sink: IcebergSink, gate: Gate) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    for i in range(3):
        write(sink, ORDERS, feed, feed.insert(order(i)))
    before = _warehouse_files(sink)
    assert gate.open() == 1
    written = _warehouse_files(sink) - before
    assert written  # the compacted file
    wider = Schema.of([*ORDERS.columns, Column("note", STRING())], ["id"])
    sink.apply_schema_change(AddColumn(T, Column("note", STRING())), wider)
    write(sink, wider, feed, feed.insert({**order(9), "note": "n"}))
    assert _compactions(sink, T) == 0
    assert not (written & _warehouse_files(sink))  # its file deleted
    assert read(sink) == [{**order(i), "note": None} for i in range(3)] + [{**order(9), "note": "n"}]


def test_closing_deletes_a_compaction_not_committed(tmp_path: Path, gate: Gate) -> None:
    sink = _sink(tmp_path / "warehouse", gate)
    feed = Feed(T)
    try:
        create(sink, ORDERS)
        for i in range(3):
            write(sink, ORDERS, feed, feed.insert(order(i)))
        before = _warehouse_files(sink)
        gate.open()
        assert _warehouse_files(sink) > before
    finally:
        sink.close()
    assert _warehouse_files(sink) == before
    assert read(sink) == [order(i) for i in range(3)]


def test_a_failed_compaction_leaves_the_table_as_it_was(sink: IcebergSink, gate: Gate, caplog: Any) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    for i in range(3):
        write(sink, ORDERS, feed, feed.insert(order(i)))
    [(future, _fn, args, kwargs)] = gate.waiting
    gate.waiting = [(future, _raise, args, kwargs)]
    gate.open()
    write(sink, ORDERS, feed, feed.update(order(1), order(1, qty=3)))
    assert "a compaction written in the background failed: the disk is full" in caplog.text
    assert _compactions(sink, T) == 0
    assert read(sink) == [order(0), order(1, qty=3), order(2)]


def _raise(*_args: Any, **_kwargs: Any) -> None:
    raise OSError("the disk is full")


# ------------------------------------------------------------------------------ every interleaving

#: One step: a commit of some changes (key, qty or None for a delete), or the gate opened.
_changes = st.lists(
    st.tuples(st.integers(0, 11), st.one_of(st.none(), st.integers(0, 99))), min_size=1, max_size=6
)
_steps = st.lists(st.one_of(st.just("open"), _changes), min_size=1, max_size=18)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, interval=st.integers(1, 3))
def test_every_interleaving_of_commits_and_background_compactions_ends_with_the_model(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Any], interval: int
) -> None:
    gate = Gate()
    sink = _sink(tmp_path_factory.mktemp("warehouse"), gate, **{"sink.compaction.commit-interval": interval})
    model: dict[int, dict[str, Any]] = {}
    feed = Feed(T)
    try:
        create(sink, ORDERS)
        for step in steps:
            if step == "open":
                gate.open()
                continue
            changes = []
            for key, qty in step:
                old = model.get(key)
                if qty is None:
                    if old is not None:
                        changes.append(feed.delete(old))
                        del model[key]
                    continue
                new = order(key, qty=qty)
                changes.append(feed.insert(new) if old is None else feed.update(old, new))
                model[key] = new
            if changes:
                write(sink, ORDERS, feed, *changes)
        gate.open()
        write(sink, ORDERS, feed, feed.insert(order(100)))  # commits what the gate let through
        model[100] = order(100)
        compactions = _compactions(sink, T)
        event(f"compactions committed: {min(compactions, 2)}")
        assert read(sink) == [model[k] for k in sorted(model)]
        # what is read is what the index holds: every live key updated once more lands once
        write(sink, ORDERS, feed, *(feed.update(row, {**row, "qty": -1}) for row in model.values()))
        assert read(sink) == [{**model[k], "qty": -1} for k in sorted(model)]
    finally:
        sink.close()
