"""``GET /metrics`` of ``ferry serve``: the control plane's pipelines by environment and phase; every
pipeline's counters, gauges and histograms labelled with its environment and name, as its runner
last saved them in its status row (:mod:`ferry.api.pipeline_metrics`), whichever worker runs it;
and the process's and the interpreter's metrics, written by ``prometheus_client`` from a registry
of the app's own. A pipeline's status port (:mod:`ferry.api.status`) shows the same families for
that pipeline alone, with its process's metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

import ferry
from ferry.api.pipeline_metrics import PipelineSample, pipeline_families
from ferry.control.replay import replay_progress
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
        samples = []
        for row in sorted(rows, key=lambda r: (r.environment, r.name)):
            if row.phase == Phase.DELETED:
                continue
            status = self.plane.state.get_status(row.runtime_name)
            if status is None:
                continue
            metrics = status.get("metrics") or {}
            if status["phase"] != Phase.RUNNING:  # a runner that stopped retries nothing
                metrics = {**metrics, "retry": None}
            samples.append(
                PipelineSample(
                    (row.environment, row.name),
                    row.phase,
                    metrics,
                    float(metrics.get("lag_s") or 0.0),
                    replay_progress(row.traits, row.phase, metrics),
                )
            )
        yield from pipeline_families(("environment", "pipeline"), samples)


def registry_for(plane: ControlPlane) -> CollectorRegistry:
    return registry_of(ControlPlaneCollector(plane))
