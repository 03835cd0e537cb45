"""``GET /metrics`` of ``ferry serve``: the control plane's pipelines by environment and phase, and
the process's and the interpreter's metrics, written by ``prometheus_client`` from a registry of
the app's own. A running pipeline's own counters are on its status port
(:mod:`ferry.api.status`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

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


def registry_for(plane: ControlPlane) -> CollectorRegistry:
    return registry_of(ControlPlaneCollector(plane))
