"""A running pipeline's status over HTTP (``pipeline.status.port``).

``GET /status`` returns the phase, detail and metrics as JSON; ``GET /metrics`` returns the same
counters in the Prometheus text format (lag per partition, throughput, rows written per table,
bad records, schema changes, checkpoint duration).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from ferry.pipeline.runner import PipelineRunner


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def prometheus_text(runner: PipelineRunner) -> str:
    m = runner.metrics
    name = _label(runner.settings.name)
    lines = [
        "# TYPE ferry_up gauge",
        f'ferry_up{{pipeline="{name}",phase="{runner.phase}"}} 1',
        "# TYPE ferry_records_read_total counter",
        f'ferry_records_read_total{{pipeline="{name}"}} {m.records_read}',
        "# TYPE ferry_bad_records_total counter",
        f'ferry_bad_records_total{{pipeline="{name}"}} {m.bad_records}',
        "# TYPE ferry_tombstones_total counter",
        f'ferry_tombstones_total{{pipeline="{name}"}} {m.tombstones}',
        "# TYPE ferry_schema_changes_total counter",
        f'ferry_schema_changes_total{{pipeline="{name}"}} {m.schema_changes}',
        "# TYPE ferry_schema_change_wait_ms_total counter",
        f'ferry_schema_change_wait_ms_total{{pipeline="{name}"}} {m.schema_change_wait_ms}',
        "# TYPE ferry_throughput_events_per_second gauge",
        f'ferry_throughput_events_per_second{{pipeline="{name}"}} {m.throughput_eps}',
        "# TYPE ferry_checkpoints_total counter",
        f'ferry_checkpoints_total{{pipeline="{name}"}} {m.checkpoints}',
        "# TYPE ferry_checkpoint_duration_ms gauge",
        f'ferry_checkpoint_duration_ms{{pipeline="{name}"}} {m.last_checkpoint_duration_ms or 0}',
        "# TYPE ferry_rows_written_total counter",
    ]
    lines += [
        f'ferry_rows_written_total{{pipeline="{name}",table="{_label(t)}"}} {n}'
        for t, n in sorted(m.rows_written.items())
    ]
    lines.append("# TYPE ferry_lag_records gauge")
    lines += [
        f'ferry_lag_records{{pipeline="{name}",topic="{_label(t)}",partition="{p}"}} {n}'
        for t, parts in sorted(m.lag.items())
        for p, n in sorted(parts.items())
    ]
    return "\n".join(lines) + "\n"


class StatusServer:
    """Serves one runner's status on ``127.0.0.1:<port>`` from a daemon thread."""

    def __init__(self, runner: PipelineRunner, port: int, host: str = "127.0.0.1") -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._send(200, prometheus_text(outer.runner).encode(), "text/plain; version=0.0.4")
                elif self.path == "/status":
                    body: dict[str, Any] = {
                        "pipeline": outer.runner.settings.name,
                        "phase": outer.runner.phase,
                        "detail": outer.runner.detail,
                        "metrics": outer.runner.metrics.as_dict(),
                    }
                    self._send(200, orjson.dumps(body), "application/json")
                else:
                    self._send(404, b'{"error": "not found: use /status or /metrics"}', "application/json")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.runner = runner
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="ferry-status", daemon=True)

    def start(self) -> StatusServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
