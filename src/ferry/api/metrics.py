"""``GET /metrics`` of ``ferry serve``: the control plane's pipelines by environment and phase, and
the process's and the interpreter's metrics, written by ``prometheus_client`` from a registry of
the app's own. A running pipeline's own counters are on its status port
(:mod:`ferry.api.status`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

import ferry
from ferry.pipeline.phase import Phase

if TYPE_CHECKING:
    from ferry.control.service import ControlPlane

#: The process-wide collectors of ``prometheus_client``, registered in each registry of ferry's too.
PROCESS_COLLECTORS = (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR)


def registry_of(collector: Collector) -> CollectorRegistry:
    """A registry of ``collector`` and the process's collectors."""
    registry = CollectorRegistry()
    registry.register(collector)
    for process_collector in PROCESS_COLLECTORS:
        registry.register(process_collector)
    return registry


def build_info() -> Metric:
    return InfoMetricFamily(
        "ferry_build", "The version of ferry serving these metrics.", {"version": ferry.version()}
    )


def retry_families(
    label_names: Sequence[str], retries: Iterable[tuple[Sequence[str], Mapping[str, Any] | None]]
) -> Iterator[Metric]:
    """What pipelines retry now, from each one's ``metrics.retry`` (``None``: nothing): whether it
    retries, the attempt that failed last and when the next one comes, per thing retried."""
    retrying = GaugeMetricFamily(
        "ferry_retrying",
        "1 while the pipeline retries a call that failed (the sink, the state store, the brokers, "
        "the schema registry), else 0.",
        labels=list(label_names),
    )
    attempt = GaugeMetricFamily(
        "ferry_retry_attempt",
        "The attempt of the call being retried that failed last (the first attempt is 1).",
        labels=[*label_names, "what"],
    )
    next_attempt = GaugeMetricFamily(
        "ferry_retry_next_attempt_timestamp_seconds",
        "When the call being retried is tried next (Unix time).",
        labels=[*label_names, "what"],
        unit="seconds",
    )
    for labels, retry in retries:
        retrying.add_metric(list(labels), 0.0 if retry is None else 1.0)
        if retry is not None:
            attempt.add_metric([*labels, retry["what"]], retry["attempt"])
            next_attempt.add_metric([*labels, retry["what"]], retry["next_attempt_ms"] / 1000)
    yield from (retrying, attempt, next_attempt)


class ControlPlaneCollector(Collector):
    """The pipelines of the state store, counted when scraped."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def collect(self) -> Iterator[Metric]:
        yield build_info()
        rows = self.plane.store.pipelines()
        counts = Counter((row.environment, row.phase) for row in rows)
        family = GaugeMetricFamily(
            "ferry_pipelines",
            "Pipelines of the state store, per environment and phase.",
            labels=["environment", "phase"],
        )
        for environment in sorted({row.environment for row in rows}):
            for phase in Phase:
                family.add_metric([environment, phase.value], counts[(environment, phase)])
        yield family
        running = [row for row in rows if row.phase == Phase.RUNNING]
        retries = []
        for row in running:
            status = self.plane.state.get_status(row.runtime_name)
            retry = (status or {}).get("metrics", {}).get("retry") if status else None
            if status is not None and status["phase"] != Phase.RUNNING:
                retry = None
            retries.append(((row.environment, row.name), retry))
        yield from retry_families(("environment", "pipeline"), retries)


def registry_for(plane: ControlPlane) -> CollectorRegistry:
    return registry_of(ControlPlaneCollector(plane))
