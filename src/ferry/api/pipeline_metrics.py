"""The metric families of pipelines, built from what each runner saves in its status row
(:meth:`ferry.pipeline.metrics.Metrics.as_dict`): one naming for a pipeline's own status port
(labelled ``pipeline``) and for ``ferry serve``'s ``/metrics``, which gathers every pipeline of the
state store (labelled ``environment`` and ``pipeline``).

Counters count from the start of the pipeline's process, as a Prometheus client's counters do:
a restart starts every one of them at 0 again, and each sample's ``_created`` (OpenMetrics) is
when that run started, so ``rate()`` and ``increase()`` see the reset for what it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ferry.control.models import Progress
from ferry.offsets import decode_offsets
from ferry.pipeline.bad_records import DeadLetterKind
from ferry.pipeline.phase import Phase
from ferry.pipeline.router import Action
from ferry.retry import Operation

#: The histograms of :class:`ferry.pipeline.metrics.Timings`, with their help text.
HISTOGRAMS = {
    "ferry_checkpoint_duration_seconds": "Time a checkpoint took: rows written, sink flushed, schemas and "
    "offsets saved (the commit, run beside the reading of the next batches by default).",
    "ferry_schema_change_barrier_duration_seconds": "Time the hot path waited on schema-change barriers "
    "(checkpoint before the change, then the sink applying it), observed once per status update in "
    "which one happened.",
    "ferry_end_to_end_latency_seconds": "Time from the event time of the newest change a checkpoint "
    "committed (the source database's commit, when the format carries it) to that checkpoint.",
}


@dataclass(frozen=True, slots=True)
class PipelineSample:
    """One pipeline as its metrics show it: its label values, its phase, its saved counters, how
    far behind it reads (seconds), and a bounded replay's progress (from the control plane's start
    and end offsets)."""

    labels: tuple[str, ...]
    phase: str
    metrics: Mapping[str, Any]
    lag_seconds: float = 0.0
    replay: Progress | None = None


class _Families:
    """Families of the same label names, filled pipeline by pipeline."""

    def __init__(self, label_names: Sequence[str]) -> None:
        self.names = list(label_names)
        self.families: dict[str, Metric] = {}

    def counter(self, name: str, documentation: str, extra: Sequence[str] = ()) -> CounterMetricFamily:
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = CounterMetricFamily(
                name, documentation, labels=[*self.names, *extra]
            )
        assert isinstance(family, CounterMetricFamily)
        return family

    def gauge(
        self, name: str, documentation: str, extra: Sequence[str] = (), unit: str = ""
    ) -> GaugeMetricFamily:
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = GaugeMetricFamily(
                name, documentation, labels=[*self.names, *extra], unit=unit
            )
        assert isinstance(family, GaugeMetricFamily)
        return family

    def histogram(self, name: str) -> HistogramMetricFamily:
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = HistogramMetricFamily(
                name, HISTOGRAMS[name], labels=self.names, unit="seconds"
            )
        assert isinstance(family, HistogramMetricFamily)
        return family


def pipeline_families(label_names: Sequence[str], pipelines: Sequence[PipelineSample]) -> Iterator[Metric]:
    """Every pipeline metric family, one sample per pipeline (and table, partition, kind...)."""
    out = _Families(label_names)
    for each in pipelines:
        _add(out, each)
    yield from out.families.values()
    yield from retry_families(label_names, [(each.labels, _retrying(each)) for each in pipelines])


def retry_families(
    label_names: Sequence[str], retries: Iterable[tuple[Sequence[str], Mapping[str, Any] | None]]
) -> Iterator[Metric]:
    """What pipelines retry now, from each one's ``metrics.retry`` (``None``: nothing): whether it
    retries, the attempt that failed last and when the next one comes, per kind of operation
    (:class:`ferry.retry.Operation`; the text naming the table is in the status, not a label)."""
    retrying = GaugeMetricFamily(
        "ferry_retrying",
        "1 while the pipeline retries a call that failed (the sink, the state store, the brokers, "
        "the schema registry), else 0.",
        labels=list(label_names),
    )
    attempt = GaugeMetricFamily(
        "ferry_retry_attempt",
        "The attempt of the call being retried that failed last (the first attempt is 1).",
        labels=[*label_names, "operation"],
    )
    next_attempt = GaugeMetricFamily(
        "ferry_retry_next_attempt_timestamp_seconds",
        "When the call being retried is tried next (Unix time).",
        labels=[*label_names, "operation"],
        unit="seconds",
    )
    for labels, retry in retries:
        retrying.add_metric(list(labels), 0.0 if retry is None else 1.0)
        if retry is not None:
            operation = retry.get("operation", "other")
            attempt.add_metric([*labels, operation], retry["attempt"])
            next_attempt.add_metric([*labels, operation], retry["next_attempt_ms"] / 1000)
    yield from (retrying, attempt, next_attempt)


def _retrying(each: PipelineSample) -> Mapping[str, Any] | None:
    return each.metrics.get("retry") if each.phase == Phase.RUNNING else None


def _add(out: _Families, each: PipelineSample) -> None:
    labels, m = list(each.labels), each.metrics
    created = (m.get("started_ms") or 0) / 1000 or None

    def counter(name: str, documentation: str, value: float) -> None:
        out.counter(name, documentation).add_metric(labels, value, created=created)

    def per(
        name: str, documentation: str, label: str, values: Mapping[str, int] | None, known: Iterable[str] = ()
    ) -> None:
        """A counter per label value; the values known in advance (a fixed set) are there at 0."""
        family = out.counter(name, documentation, [label])
        counts = {**dict.fromkeys(known, 0), **(values or {})}
        for key, value in sorted(counts.items()):
            family.add_metric([*labels, key], value, created=created)

    phase = out.gauge(
        "ferry_pipeline_phase", "1 for the phase the pipeline is in, 0 for the others.", ["phase"]
    )
    for one in Phase:
        if one is not Phase.DELETED:
            phase.add_metric([*labels, one.value], 1.0 if each.phase == one else 0.0)
    counter(
        "ferry_records_read",
        "Kafka records read (change events, tombstones, bad records).",
        m.get("records_read", 0),
    )
    per("ferry_rows_written", "Rows written to the sink, per sink table.", "table", m.get("rows_written"))
    per(
        "ferry_dead_letters",
        "Records sent to the dead-letter destination, per kind of reason (undecodable, "
        "table-not-selected, no-schema, schema-change, row-not-writable, sink-refused).",
        "reason",
        m.get("dead_letters"),
        [kind.value for kind in DeadLetterKind],
    )
    per(
        "ferry_schema_changes",
        "Schema changes decided for the sink, per outcome (apply, ignored, skip, fail).",
        "outcome",
        m.get("schema_change_outcomes"),
        [action.value for action in Action],
    )
    per(
        "ferry_retries",
        "Calls that failed with a transient error and were tried again, per kind of operation.",
        "operation",
        m.get("retries"),
        [operation.value for operation in Operation],
    )
    per(
        "ferry_rows_with_dropped_columns",
        "Rows written without columns the sink lacks (a skipped schema change), per source table.",
        "table",
        m.get("columns_dropped"),
    )
    counter(
        "ferry_tombstones",
        "Tombstones (a key without a value, after a delete) passed over.",
        m.get("tombstones", 0),
    )
    counter(
        "ferry_rows_skipped_committed",
        "Rows read again after a restart and skipped: the sink's commit already held them.",
        m.get("rows_skipped_committed", 0),
    )
    counter("ferry_checkpoints", "Checkpoints taken.", m.get("checkpoints", 0))
    lost = sum(max(0, r["earliest"] - r["wanted"]) for r in m.get("lost_offsets") or ())
    counter("ferry_records_lost_to_retention", "Records deleted by retention before they were read.", lost)

    lag = out.gauge(
        "ferry_consumer_lag_records",
        "Records in a partition not read yet (high watermark minus position).",
        ["topic", "partition"],
        unit="records",
    )
    for (topic, partition), records in sorted(decode_offsets(m.get("lag") or {}).items()):
        lag.add_metric([*labels, topic, str(partition)], records)
    out.gauge(
        "ferry_consumer_lag_seconds",
        "How far behind the pipeline reads: the age of the last record read while records wait, else 0.",
        unit="seconds",
    ).add_metric(labels, each.lag_seconds)
    out.gauge("ferry_assigned_partitions", "Partitions the pipeline's worker reads.").add_metric(
        labels, sum(len(p) for p in (m.get("assigned") or {}).values())
    )
    if m.get("last_checkpoint_ms") is not None:
        out.gauge(
            "ferry_last_checkpoint_timestamp_seconds",
            "When the last checkpoint finished (Unix time).",
            unit="seconds",
        ).add_metric(labels, m["last_checkpoint_ms"] / 1000)
    for name, histogram in sorted((m.get("timings") or {}).items()):
        if name in HISTOGRAMS:
            buckets = [(str(le), float(count)) for le, count in histogram["buckets"]]
            out.histogram(name).add_metric(labels, buckets, float(histogram["sum"]))
    if each.replay is not None:
        _replay(out, labels, each.replay)


def _replay(out: _Families, labels: list[str], progress: Progress) -> None:
    to_read = out.gauge(
        "ferry_replay_records_to_read",
        "A bounded replay's records between its start and end offsets, per partition.",
        ["topic", "partition"],
    )
    done = out.gauge(
        "ferry_replay_records_read",
        "A bounded replay's records read (offsets passed) of those to read, per partition.",
        ["topic", "partition"],
    )
    for part in progress.partitions:
        at = [*labels, part.topic, str(part.partition)]
        to_read.add_metric(at, part.records_total)
        done.add_metric(at, part.records_done)
    if progress.eta_seconds is not None:
        out.gauge(
            "ferry_replay_eta_seconds",
            "When a bounded replay will have read its records at its recent rate (0 once completed).",
            unit="seconds",
        ).add_metric(labels, progress.eta_seconds)
