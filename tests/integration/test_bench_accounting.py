"""The throughput benchmark counts all of a lane's work: its window ends where the lane's run ends.

A lane's counted CPU is compared with the process's own CPU, read by the test at the two ends of
the lane's work: where the warm-up share of the events has been processed, and where the
pipeline's ``close()`` returned (for the ceiling, where the lane returned after closing its
consumer). Checkpoints every millisecond make the last one start from ``step()`` (as periodic and
row-count checkpoints do), after the last batch; the lanes' output is read back and checked. Not
timed: only the accounting is asserted.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ferry.model.events import Event
from ferry.pipeline.runner import PipelineRunner

BENCH = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"

#: CPU seconds allowed between the test's reading and the benchmark's at each end of the window
#: (a few lines of Python, and what librdkafka's threads do meanwhile).
MARGIN_S = 0.01


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    name = "bench_throughput_accounting"
    spec = importlib.util.spec_from_file_location(name, BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def produced(bench: ModuleType, kafka_broker: Any) -> tuple[Any, Any]:
    workload = bench.Workload(
        events=8000,
        tables=2,
        partitions=2,
        change_every=2000,
        with_schema=True,
        server=f"acct{uuid.uuid4().hex[:6]}",
    )
    return workload, bench.produce_workload(kafka_broker.bootstrap_servers, workload)


def _spec(bench: ModuleType, bootstrap: str, produced: tuple[Any, Any], work_dir: Path) -> Any:
    workload, result = produced
    return bench.RunSpec(
        bootstrap=bootstrap,
        topics=workload.topics(),
        expected=workload.events,
        warmup=0.05,
        batch_size=500,
        work_dir=str(work_dir),
        stall_s=120.0,
        cpu=None,
        profile_dir=None,
        live_rows=result.live_rows,
        live_versions=result.live_versions,
        segments=2,
        checkpoint_interval="1ms",
    )


class Ends:
    """The process's CPU and wall clock where the window must start and end, read by the test."""

    def __init__(self) -> None:
        self.warm_at = 0
        self.expected = 0
        self.warm: tuple[float, float] | None = None
        self.closed: tuple[float, float] | None = None
        self.checkpoints_after_last_batch = 0
        self.read_all = False

    @staticmethod
    def now(bench: ModuleType) -> tuple[float, float]:
        return bench.cpu_seconds(), time.perf_counter()


@pytest.fixture
def ends(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ends]:
    """Reads the process's CPU after the pipeline's ``process`` and ``close`` (the real ones)."""
    observed = Ends()
    process, close, begin = PipelineRunner.process, PipelineRunner.close, PipelineRunner.begin_checkpoint

    def observed_process(self: PipelineRunner, events: list[Event], records: Sequence[Any]) -> None:
        process(self, events, records)
        if observed.warm is None and self.metrics.records_read >= observed.warm_at:
            observed.warm = Ends.now(bench)
        observed.read_all = self.metrics.records_read >= observed.expected

    def observed_close(self: PipelineRunner) -> None:
        close(self)
        observed.closed = Ends.now(bench)

    def observed_begin(self: PipelineRunner, schemas: Any = None) -> None:
        begin(self, schemas)
        if observed.read_all:
            observed.checkpoints_after_last_batch += 1

    monkeypatch.setattr(PipelineRunner, "process", observed_process)
    monkeypatch.setattr(PipelineRunner, "close", observed_close)
    monkeypatch.setattr(PipelineRunner, "begin_checkpoint", observed_begin)
    yield observed


@pytest.mark.parametrize("sink", ["null", "iceberg", "paimon"])
def test_a_ferry_lane_counts_its_cpu_and_wall_time_up_to_close(
    bench: ModuleType,
    kafka_bootstrap: str,
    produced: tuple[Any, Any],
    tmp_path: Path,
    ends: Ends,
    sink: str,
) -> None:
    spec = _spec(bench, kafka_bootstrap, produced, tmp_path)
    ends.warm_at, ends.expected = spec.clock("warm-up").warm_at, spec.expected

    result = bench.run_ferry(spec, sink)

    assert result["verified"], result.get("ferry")
    assert ends.warm is not None and ends.closed is not None
    assert ends.checkpoints_after_last_batch >= 1  # the last batch's checkpoint was begun by step()
    # the counted CPU is the process's CPU from the warm-up mark to close() returning
    assert result["cpu_s"] == pytest.approx(ends.closed[0] - ends.warm[0], abs=2 * MARGIN_S)
    (cpu0, cpu1), (t0, t1) = result["window_cpu_s"], result["window_wall_s"]
    assert 0 <= cpu0 - ends.warm[0] <= MARGIN_S
    assert 0 <= cpu1 - ends.closed[0] <= MARGIN_S
    # and its wall time too: the window opens after the warm-up share, closes after close() returned
    assert t0 >= ends.warm[1] and t1 >= ends.closed[1]


class ObservedConsumer:
    """The ceiling's real consumer, with the process's CPU and wall clock read when ``close()`` returned."""

    def __init__(self, bench: ModuleType, consumer: Any) -> None:
        self.bench, self.consumer = bench, consumer
        self.consume = consumer.consume
        self.closed: tuple[float, float] | None = None

    def close(self) -> None:
        self.consumer.close()
        self.closed = Ends.now(self.bench)


def test_the_ceiling_counts_its_cpu_and_wall_time_up_to_its_consumers_close(
    bench: ModuleType,
    kafka_bootstrap: str,
    produced: tuple[Any, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = _spec(bench, kafka_bootstrap, produced, tmp_path)
    consumers: list[ObservedConsumer] = []
    make = bench._consumer

    def observed(spec: Any, group: str) -> ObservedConsumer:
        consumers.append(ObservedConsumer(bench, make(spec, group)))
        return consumers[-1]

    monkeypatch.setattr(bench, "_consumer", observed)

    result = bench.run_ceiling(spec)

    closed = consumers[0].closed
    assert closed is not None
    (_cpu0, cpu1), (_t0, t1) = result["window_cpu_s"], result["window_wall_s"]
    assert 0 <= cpu1 - closed[0] <= MARGIN_S and t1 >= closed[1]  # the window closes after close()
    assert result["parsed_whole"] > 0  # it parsed what ferry parses: each schema's first record whole
