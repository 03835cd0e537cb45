"""A running pipeline's status over HTTP (``pipeline.status.port``).

``GET /status`` returns the phase, detail and counters as JSON; ``GET /metrics`` returns them in
the Prometheus text format (OpenMetrics when the scraper asks for it), written by
``prometheus_client`` from a registry of this server's own: the pipeline's counters, the
histograms of its timings (:class:`~ferry.pipeline.metrics.Timings`), and the process's and the
interpreter's metrics. ``GET /healthz`` answers 200 while the pipeline has not failed, ``GET
/readyz`` 200 while it is running (503 otherwise, with the phase and detail).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ferry.api.metrics import build_info, registry_of
from ferry.api.pipeline_metrics import PipelineSample, pipeline_families
from ferry.pipeline.phase import Phase
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.status import retry_metrics


def labelled(families: Iterable[Metric], **labels: str) -> Iterator[Metric]:
    """``families`` with ``labels`` added to every sample."""
    for family in families:
        copy = Metric(family.name, family.documentation, family.type, family.unit)
        for sample in family.samples:
            copy.add_sample(sample.name, {**labels, **sample.labels}, sample.value, sample.timestamp)
        yield copy


class PipelineCollector(Collector):
    """One runner's metrics, read when scraped: the families ``ferry serve`` shows of every
    pipeline (:mod:`ferry.api.pipeline_metrics`), labelled with this pipeline's name."""

    def __init__(self, runner: PipelineRunner) -> None:
        self.runner = runner

    def collect(self) -> Iterator[Metric]:
        runner, m = self.runner, self.runner.metrics
        saved = m.as_dict()
        retry = runner.status.retry
        saved["retry"] = None if retry is None else retry_metrics(retry)
        behind = sum(int(n) for parts in m.lag.values() for n in parts.values())
        yield build_info()
        sample = PipelineSample(
            (runner.settings.name,), runner.status.phase, saved, m.timings.lag_seconds(behind)
        )
        yield from pipeline_families(("pipeline",), [sample])


def registry_for(runner: PipelineRunner) -> CollectorRegistry:
    """The registry ``/metrics`` is written from: the runner's metrics and the process's."""
    return registry_of(PipelineCollector(runner))


def health(runner: PipelineRunner) -> tuple[int, dict[str, Any]]:
    """``/healthz``: alive unless the pipeline failed."""
    ok = runner.status.phase is not Phase.FAILED
    return (200 if ok else 503), {
        "status": "ok" if ok else "failed",
        "phase": runner.status.phase,
        "detail": runner.status.detail,
    }


def readiness(runner: PipelineRunner) -> tuple[int, dict[str, Any]]:
    """``/readyz``: ready while the pipeline is running and retries nothing (a pipeline that cannot
    read, write or commit now is not ready, though alive: ``/healthz`` stays 200 while it waits)."""
    ok = runner.status.phase is Phase.RUNNING and runner.status.retry is None
    return (200 if ok else 503), {
        "status": "ready" if ok else "not ready",
        "phase": runner.status.phase,
        "detail": runner.status.detail,
    }


class StatusServer:
    """Serves one runner's status on ``host:port`` (``127.0.0.1`` unless told) from a daemon thread."""

    def __init__(self, runner: PipelineRunner, port: int, host: str = "127.0.0.1") -> None:
        outer = self

        # http.server, not Starlette/uvicorn: those come with the `server` extra only, and the status
        # port serves in a plain install, and no base dependency routes HTTP requests.
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path == "/metrics":
                    encode, content_type = choose_encoder(self.headers.get("Accept", ""))
                    self._send(200, encode(outer.registry), content_type)
                elif path == "/status":
                    body: dict[str, Any] = {
                        "pipeline": outer.runner.settings.name,
                        "phase": outer.runner.status.phase,
                        "detail": outer.runner.status.detail,
                        "metrics": outer.runner.metrics.as_dict(),
                    }
                    self._send(200, orjson.dumps(body), "application/json")
                elif path in ("/healthz", "/readyz"):
                    code, answer = (health if path == "/healthz" else readiness)(outer.runner)
                    self._send(code, orjson.dumps(answer), "application/json")
                else:
                    self._send(
                        404,
                        b'{"error": "not found: use /status, /metrics, /healthz or /readyz"}',
                        "application/json",
                    )

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.runner = runner
        self.registry = registry_for(runner)
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.host, self.port = host, self.server.server_address[1]
        # a stop is noticed within 0.1 s
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.1,), name="ferry-status", daemon=True
        )

    def start(self) -> StatusServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
