"""What the web page shows of a pipeline: its resource, schema-change timeline, dead letters,
savepoints and the last hour of samples.

Built from the same :class:`~ferry.control.service.ControlPlane` the API serves, with no web
framework: the page (:mod:`ferry.api.web`) only renders these objects.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ferry.control.models import Pipeline, Savepoint
from ferry.control.service import ControlPlane, iso, savepoint_resource
from ferry.control.store import SAMPLES_KEPT_MS, Sample
from ferry.pipeline.catch_up import eta_seconds
from ferry.pipeline.checkpoints import SchemaHistoryEntry, now_ms
from ferry.pipeline.phase import Phase


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One schema change as the sink met it: what changed, the decision, when, and the barrier."""

    at: str
    source_table: str
    sink_table: str
    change: str
    decision: str
    reason: str
    #: From the start of the barrier before the change to the change applied, as the schema
    #: operator measured it (0: applied without a barrier). For a change recorded before ferry
    #: measured it (``barrier_exact`` false): the time the pipeline waited on barriers in the sample
    #: interval of the change (None before the interval was sampled), shared by
    #: ``barrier_shared_by`` changes of that interval.
    barrier_ms: int | None
    barrier_shared_by: int
    barrier_exact: bool = True


@dataclass(frozen=True, slots=True)
class DeadLetters:
    count: int
    reasons: dict[str, int]
    #: Newest first: ``{reason, topic, partition, offset, at}``.
    latest: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition read: where the pipeline is in it, how far behind, and which worker reads it."""

    topic: str
    partition: int
    offset: int | None
    lag: int | None
    #: The worker it is assigned to (None: no worker says it reads it now).
    worker: str | None


def partitions(metrics: Mapping[str, Any]) -> list[PartitionView]:
    """The partitions of a runner's status: its offsets and lag (``{topic: {"0": n}}``) and the
    assignments of its running workers (``workers: {worker: {phase, assigned: {topic: [0, ...]}}}``)."""
    offsets = metrics.get("offsets") or {}
    lag = metrics.get("lag") or {}
    readers: dict[tuple[str, int], str] = {}
    for worker, said in sorted((metrics.get("workers") or {}).items()):
        if said.get("phase") != Phase.RUNNING:  # a worker whose run ended reads nothing
            continue
        for topic, numbers in (said.get("assigned") or {}).items():
            for number in numbers:
                readers[(topic, int(number))] = worker
    keys = {(t, int(p)) for table in (offsets, lag) for t, parts in table.items() for p in parts}
    return [
        PartitionView(
            topic,
            number,
            offsets.get(topic, {}).get(str(number)),
            lag.get(topic, {}).get(str(number)),
            readers.get((topic, number)),
        )
        for topic, number in sorted(keys | set(readers))
    ]


@dataclass(frozen=True, slots=True)
class PipelineOverview:
    pipeline: Pipeline
    lag_records: int | None
    throughput_eps: float | None
    #: A running pipeline's catch-up: records behind ÷ the recent rate, in seconds (0 caught up;
    #: None without a rate or when not running).
    eta_s: float | None
    rows_written: int | None
    timeline: list[TimelineEntry]
    dead_letters: DeadLetters
    savepoints: list[Savepoint]
    samples: list[Sample] = field(default_factory=list)
    partitions: list[PartitionView] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.pipeline.metadata.name


def overview(plane: ControlPlane, environment: str, name: str) -> PipelineOverview:
    """Everything the page shows of one pipeline."""
    pipeline = plane.get_pipeline(environment, name)
    row = plane.store.pipeline(environment, name)
    assert row is not None
    samples = plane.store.samples(environment, name, since_ms=now_ms() - SAMPLES_KEPT_MS)
    metrics: Mapping[str, Any] = {}
    runner = plane.state.get_status(row.runtime_name)
    if runner is not None and pipeline.status.metrics is not None:
        metrics = runner["metrics"]
    lag = metrics.get("lag")
    rows = metrics.get("rows_written")
    behind = None if lag is None else sum(int(n) for parts in lag.values() for n in parts.values())
    running = pipeline.status.phase == Phase.RUNNING
    if not running and not lag and samples:
        # a run that ended before its source was assigned a partition could not count its lag:
        # the pipeline keeps the lag it had when last sampled
        behind = samples[-1].lag_records
    return PipelineOverview(
        pipeline=pipeline,
        lag_records=behind,
        throughput_eps=metrics.get("throughput_eps"),
        eta_s=eta_seconds(behind, metrics.get("rate_eps")) if running and behind is not None else None,
        rows_written=None if rows is None else sum(int(n) for n in rows.values()),
        timeline=timeline(plane.state.schema_history(row.runtime_name), samples),
        dead_letters=DeadLetters(
            count=int(metrics.get("bad_records") or 0),
            reasons=dict(metrics.get("bad_record_reasons") or {}),
            latest=[
                {**each, "at": iso(each.get("at_ms"))}
                for each in reversed(metrics.get("latest_bad_records") or [])
            ],
        ),
        savepoints=[savepoint_resource(s) for s in reversed(plane.store.savepoints(environment, name))],
        samples=samples,
        partitions=partitions(metrics),
    )


def timeline(history: Sequence[SchemaHistoryEntry], samples: Sequence[Sample]) -> list[TimelineEntry]:
    """The schema changes, newest first, each with its barrier time: the one the schema operator
    recorded with the change, or for a change recorded without one, the barrier time of the
    sample interval it fell in (the growth of the runner's barrier total from the sample before
    to the first sample at or after the change; a runner that restarted counts from 0 again)."""
    instants = [s.at_ms for s in samples]
    windows: list[int | None] = []
    for entry in history:
        i = bisect_left(instants, entry.at_ms)
        windows.append(None if i == len(samples) or entry.barrier_ms is not None else i)
    shared: dict[int, int] = {}
    for window in windows:
        if window is not None:
            shared[window] = shared.get(window, 0) + 1
    entries = []
    for entry, window in zip(history, windows, strict=True):
        barrier: int | None = entry.barrier_ms
        if window is not None:
            after = samples[window].barrier_ms
            before = samples[window - 1].barrier_ms if window > 0 else 0
            barrier = after - before if after >= before else after
        entries.append(
            TimelineEntry(
                at=iso(entry.at_ms) or "",
                source_table=entry.source_table,
                sink_table=entry.sink_table,
                change=entry.change,
                decision=entry.outcome,
                reason=entry.reason,
                barrier_ms=barrier,
                barrier_shared_by=1 if window is None else shared[window],
                barrier_exact=entry.barrier_ms is not None,
            )
        )
    return entries[::-1]
