"""Garbage collection while a runner runs: automatic collection off, the young objects collected
after each checkpoint (and when none came for long), the collector as it was once the run ends."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import SCHEMA_CHANGE_TAGS, Event
from ferry.pipeline.collector import COLLECT_EVERY_S, GarbageCollection
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def garbage_cycle() -> weakref.ref[Cycle]:
    return weakref.ref(Cycle())


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_while_running_cycles_wait_for_a_checkpoint_and_the_collector_is_back_after(
    collector_enabled: None,
) -> None:
    collection = GarbageCollection()
    with collection.running():
        assert not gc.isenabled()
        cycle = garbage_cycle()
        _ = [(i, str(i)) for i in range(200_000)]  # many allocations: no automatic collection
        collection.collect(time.monotonic(), checkpoint=False)  # the last collection is recent
        assert cycle() is not None
        collection.collect(time.monotonic(), checkpoint=True)
        assert cycle() is None
        later = garbage_cycle()
        collection.collect(time.monotonic() + COLLECT_EVERY_S, checkpoint=False)  # no checkpoint for long
        assert later() is None
    assert gc.isenabled()
    assert collection.collections == 2


def test_a_run_collects_the_cycles_of_a_batch_at_the_checkpoint_after_it(
    tmp_path: Path, collector_enabled: None
) -> None:
    """Each batch makes a cycle and a checkpoint follows each batch: when a batch is decoded, the
    previous batch's cycle is gone."""
    table = dbz.DebeziumTable("srv", "db", "t", [dbz.ConnectColumn("id", dbz.INT32, optional=False)])
    source = MemorySource(
        Record("srv.db.t", 0, i, key=k, value=v)
        for i, (k, v) in enumerate(table.insert({"id": n}) for n in range(1, 7))
    )
    decoder = decoder_for("debezium-json")
    cycles: list[weakref.ref[Cycle]] = []
    alive_at_next_batch: list[bool] = []

    def decode(records: Sequence[Any]) -> list[Event]:
        if cycles:
            alive_at_next_batch.append(cycles[-1]() is not None)
        cycles.append(garbage_cycle())
        return decoder.decode(records)

    sink = MemorySink()
    runner = PipelineRunner(
        settings=RunnerSettings(name="gc", batch_size=2, checkpoint_interval_s=0.0),
        source=source,
        decode=decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.run()
    assert len(cycles) == 3
    assert alive_at_next_batch == [False, False]
    assert runner.garbage.collections >= 2
    assert gc.isenabled()
