"""What a running pipeline shows: its counters, the distributions of its timings, its worker's
name, and the collector's tuning.

:class:`Metrics` holds the counters ``ferry status`` shows (saved with the status row);
:class:`Timings` holds what a counter cannot say — how long checkpoints and schema-change barriers
took, how old a change was when it was committed, how far behind the newest record read is — as
``prometheus_client`` histograms in a registry of the pipeline's own, observed as they happen.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram

from ferry.connectors.base import RetentionReporting, Source
from ferry.model.events import DataChange, Event
from ferry.offsets import encode_offsets
from ferry.pipeline.catch_up import CatchUpLog, RecentRate, catch_up_line, eta_seconds
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.route import unmatched_rules

if TYPE_CHECKING:
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator

log = logging.getLogger(__name__)

#: A checkpoint writes and commits every table's rows: milliseconds into a local table, seconds
#: into a remote catalog.
CHECKPOINT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: A barrier checkpoints, then applies the change, bounded by ``schema.operator.rpc-timeout``.
BARRIER_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0)
#: From a change's event time to its commit: a checkpoint interval when caught up, hours in a catch-up.
#: How many of the last checkpoints and errors the status keeps.
RECENT_KEPT = 20
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0)

Decode = Callable[[Sequence[Any]], list[Event]]


class Timings:
    """Histograms of one pipeline, in a registry of its own (several pipelines may share a process).

    The runner reports a checkpoint by setting :attr:`Metrics.last_checkpoint_duration_ms`; the
    event times come from :meth:`watch`, which wraps the decoder: per batch it keeps the Kafka
    timestamp of the last record and the event time of the newest change (``ts_ms``: when the
    source database committed it), so the hot path pays two look-ups a batch.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.checkpoint_duration = Histogram(
            "ferry_checkpoint_duration_seconds",
            "Time a checkpoint took: rows written, sink flushed, schemas and offsets saved (the "
            "commit, run beside the reading of the next batches by default).",
            unit="seconds",
            buckets=CHECKPOINT_BUCKETS,
            registry=self.registry,
        )
        self.barrier_duration = Histogram(
            "ferry_schema_change_barrier_duration_seconds",
            "Time the hot path waited on schema-change barriers (checkpoint before the change, then "
            "the sink applying it), observed once per status update in which one happened.",
            unit="seconds",
            buckets=BARRIER_BUCKETS,
            registry=self.registry,
        )
        self.end_to_end_latency = Histogram(
            "ferry_end_to_end_latency_seconds",
            "Time from the event time of the newest change a checkpoint committed (the source "
            "database's commit, when the format carries it) to that checkpoint.",
            unit="seconds",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        #: Event time (ms since the epoch) of the newest change read, when the format carries one.
        self.newest_event_ms: int | None = None
        #: Kafka timestamp (ms since the epoch) of the last record read.
        self.last_record_ms: int | None = None
        #: The event time of the newest change read before the checkpoint being reported started
        #: (its commit ran while later changes were read); None: the newest read.
        self.committing_event_ms: int | None = None
        self._committed_event_ms: int | None = None
        self._barrier_ms = 0

    def watch(self, decode: Decode) -> Decode:
        """``decode``, noting the times of each batch it decodes."""

        def decoding(records: Sequence[Any]) -> list[Event]:
            events = decode(records)
            if records:
                kind, ms = records[-1].timestamp()
                if kind:  # 0: the record has no timestamp
                    self.last_record_ms = ms
            for event in reversed(events):
                if type(event) is DataChange:
                    if event.ts_ms is not None:
                        self.newest_event_ms = max(event.ts_ms, self.newest_event_ms or 0)
                    break
            return events

        return decoding

    def checkpointed(self, duration_s: float, at_ms: int) -> None:
        self.checkpoint_duration.observe(duration_s)
        newest = self.newest_event_ms if self.committing_event_ms is None else self.committing_event_ms
        if newest is not None and newest != self._committed_event_ms:
            self.end_to_end_latency.observe(max(0.0, (at_ms - newest) / 1000))
            self._committed_event_ms = newest

    def waited(self, barrier_ms_total: int) -> None:
        """The schema operator's barrier time so far; the growth since the last call is observed."""
        grown = barrier_ms_total - self._barrier_ms
        if grown > 0:
            self.barrier_duration.observe(grown / 1000)
        self._barrier_ms = barrier_ms_total

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """The histograms as the status row keeps them, for the control plane's ``/metrics``:
        ``{name: {"buckets": [[upper bound, cumulative count], ...], "sum": s, "count": n}}``."""
        out: dict[str, dict[str, Any]] = {}
        for family in self.registry.collect():
            buckets: list[list[Any]] = []
            histogram: dict[str, Any] = {"buckets": buckets, "sum": 0.0, "count": 0}
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    buckets.append([sample.labels["le"], sample.value])
                elif sample.name.endswith("_sum"):
                    histogram["sum"] = sample.value
                elif sample.name.endswith("_count"):
                    histogram["count"] = sample.value
            out[family.name] = histogram
        return out

    def lag_seconds(self, lag_records: int, now: float | None = None) -> float:
        """How far behind the pipeline reads: the age of the last record read while records wait
        to be read, 0 once it has read everything."""
        if lag_records <= 0 or self.last_record_ms is None:
            return 0.0
        now = time.time() if now is None else now
        return max(0.0, now - self.last_record_ms / 1000)


@dataclass
class Metrics:
    """What ``ferry status`` shows; updated by the runner, saved with the status row."""

    started_ms: int = field(default_factory=now_ms)
    records_read: int = 0
    rows_written: dict[str, int] = field(default_factory=dict)
    rows_skipped_committed: int = 0
    bad_records: int = 0
    #: Bad records per reason (the reason's text before its first ``:``).
    bad_record_reasons: dict[str, int] = field(default_factory=dict)
    #: Bad records per kind (:class:`ferry.pipeline.bad_records.DeadLetterKind`).
    dead_letters: dict[str, int] = field(default_factory=dict)
    #: The latest bad records, newest last: ``{reason, topic, partition, offset, at_ms}``.
    latest_bad_records: list[dict[str, Any]] = field(default_factory=list)
    #: Tombstones (a key without a value, after a delete) read and passed over.
    tombstones: int = 0
    columns_dropped: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0
    last_checkpoint_ms: int | None = None
    last_checkpoint_duration_ms: int | None = None
    schema_changes: int = 0
    #: The sink changes decided per outcome (the router's action: apply, ignored, skip, fail).
    schema_change_outcomes: dict[str, int] = field(default_factory=dict)
    schema_change_wait_ms: int = 0
    #: Retries (attempts that failed and were tried again) per kind of call
    #: (:class:`ferry.retry.Operation`).
    retries: dict[str, int] = field(default_factory=dict)
    throughput_eps: float = 0.0
    #: Records read per second over the last 30 s: the rate an ETA divides by (None: none yet).
    rate_eps: float | None = None
    #: Records not read yet, over every partition, and when they will have been read at ``rate_eps``
    #: (seconds; None without a rate).
    records_behind: int = 0
    eta_s: float | None = None
    #: How far behind the pipeline reads, in seconds (:meth:`Timings.lag_seconds`).
    lag_s: float = 0.0
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    lag: dict[str, dict[str, int]] = field(default_factory=dict)
    #: This worker (``host:pid:random``) and the partitions assigned to it: ``{topic: [partition, ...]}``.
    worker: str = ""
    assigned: dict[str, list[int]] = field(default_factory=dict)
    #: Records deleted by retention before they were read: ``{topic, partition, wanted, earliest}``.
    lost_offsets: list[dict[str, Any]] = field(default_factory=list)
    #: What the pipeline retries now, if anything: ``{what, attempt, attempts, error,
    #: next_attempt_ms, gives_up_ms}`` (:func:`ferry.pipeline.status.retry_metrics`).
    retry: dict[str, Any] | None = None
    #: The routes and transforms that match none of the tables read so far, each said in a line
    #: (:func:`ferry.pipeline.route.unmatched_rules`); each is logged once as a warning.
    unmatched_rules: list[str] = field(default_factory=list)
    #: The last :data:`RECENT_KEPT` checkpoints, oldest first: ``{at_ms, duration_ms, rows, barrier,
    #: count}`` (``barrier``: the checkpoint a schema change's barrier took, before the change;
    #: ``count``: how many empty checkpoints in a row the entry stands for, the newest's figures).
    recent_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    #: The last :data:`RECENT_KEPT` errors, oldest first: ``{at_ms, what, error}``: each failed
    #: attempt of a retry (``what`` was retried), and the error that failed the run (``what`` null).
    recent_errors: list[dict[str, Any]] = field(default_factory=list)
    warned_rules: set[str] = field(default_factory=set, repr=False, compare=False)
    timings: Timings = field(default_factory=Timings, repr=False, compare=False)
    recent: RecentRate = field(default_factory=RecentRate, repr=False, compare=False)
    catch_up_log: CatchUpLog = field(default_factory=CatchUpLog, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "last_checkpoint_duration_ms" and value is not None and "timings" in self.__dict__:
            # the runner sets it once per checkpoint, after the checkpoint's time
            self.timings.checkpointed(value / 1000, self.last_checkpoint_ms or now_ms())

    def checkpointed(self, at_ms: int, duration_ms: int, rows: int, *, barrier: bool) -> None:
        """One more checkpoint in the history; checkpoints in a row that wrote nothing (an idle
        source's, at each interval) are one entry: the newest, with how many they were."""
        entry = {"at_ms": at_ms, "duration_ms": duration_ms, "rows": rows, "barrier": barrier, "count": 1}
        history = self.recent_checkpoints
        if history and rows == 0 and not barrier and history[-1]["rows"] == 0 and not history[-1]["barrier"]:
            self.recent_checkpoints = [*history[:-1], {**entry, "count": history[-1]["count"] + 1}]
            return
        self.recent_checkpoints = [*history[1 - RECENT_KEPT :], entry]

    def failed(self, error: str, what: str | None = None, at_ms: int | None = None) -> None:
        entry = {"at_ms": now_ms() if at_ms is None else at_ms, "what": what, "error": error}
        self.recent_errors = [*self.recent_errors[1 - RECENT_KEPT :], entry]

    def as_dict(self) -> dict[str, Any]:
        """The counters as the status row saves them, and the histograms of the timings."""
        saved = {k: v for k, v in self.__dict__.items() if k not in _NOT_SAVED}
        saved["timings"] = self.timings.snapshot()
        return saved

    def refresh(
        self,
        now: float,
        window: tuple[float, int],
        source: Source,
        partitions: PartitionOffsets,
        schemas: SchemaOperator,
        *,
        restart_from: Mapping[tuple[str, int], int] | None = None,
    ) -> tuple[float, int]:
        """Bring the counters up to date before the status is saved; returns the throughput window.
        ``restart_from``: the offsets a restart reads from (the run ended), from which the lag counts."""
        since, count = window
        if now - since >= 1.0:
            self.throughput_eps = round((self.records_read - count) / (now - since), 1)
            window = (now, self.records_read)
        self.offsets = encode_offsets(partitions.offsets)
        self.assigned = partitions.assigned()
        self.rows_skipped_committed = partitions.rows_skipped
        self.schema_change_wait_ms = schemas.wait_ms
        self.timings.waited(schemas.wait_ms)
        self.schema_changes = schemas.changes_routed
        self.schema_change_outcomes = dict(schemas.outcomes)
        lost = source.lost if isinstance(source, RetentionReporting) else ()
        if len(lost) != len(self.lost_offsets):
            self.lost_offsets = [
                {"topic": r.topic, "partition": r.partition, "wanted": r.wanted, "earliest": r.earliest}
                for r in lost
            ]
        try:
            self.lag = encode_offsets(source.lag() if restart_from is None else source.lag(restart_from))
        except Exception:
            log.debug("lag not available", exc_info=True)
        self.unmatched_rules = unmatched_rules(schemas.tables, schemas.transforms)
        for line in self.unmatched_rules:
            rule = line.partition(" matches none")[0]
            if rule not in self.warned_rules:
                self.warned_rules.add(rule)
                log.warning("%s: it selects no table (a table pattern is <database>.<table>)", line)
        self.catching_up(now)
        return window

    def catching_up(self, now: float) -> None:
        """The records behind, the recent rate and the ETA; the catch-up line while the lag is large."""
        rate = self.recent.add(now, self.records_read)
        self.rate_eps = None if rate is None else round(rate, 1)
        self.records_behind = sum(int(n) for parts in self.lag.values() for n in parts.values())
        eta = eta_seconds(self.records_behind, self.rate_eps)
        self.eta_s = None if eta is None else round(eta, 1)
        self.lag_s = round(self.timings.lag_seconds(self.records_behind, now_ms() / 1000), 3)
        if self.catch_up_log.due(now, self.records_behind):
            log.info(
                "%s",
                catch_up_line(self.records_behind, self.rate_eps),
                extra={
                    "records_behind": self.records_behind,
                    "rate_eps": self.rate_eps,
                    "eta_s": self.eta_s,
                },
            )


#: What :meth:`Metrics.as_dict` leaves out: the objects behind the figures.
_NOT_SAVED = frozenset({"timings", "recent", "catch_up_log", "warned_rules"})


def worker_name() -> str:
    """How a runner is known to the other workers of its pipeline: ``host:pid:random`` (a process
    may run more than one)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
