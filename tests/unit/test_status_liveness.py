"""``ferry status`` says what is true of a pipeline whose status row says it runs: its workers are
looked for (on this host, their processes; elsewhere, the age of their status)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from ferry.cli.output import STALE_AFTER_MS, live_phase, worker_alive

NOW = 10_000_000_000


def row(worker: str, updated_ms: int, phase: str = "RUNNING") -> dict[str, object]:
    return {
        "phase": phase,
        "detail": "reading",
        "updated_ms": updated_ms,
        "metrics": {"worker": worker, "workers": {worker: {"phase": phase, "updated_ms": updated_ms}}},
    }


def test_a_worker_on_this_host_is_alive_while_its_process_is() -> None:
    here = socket.gethostname()
    assert worker_alive(f"{here}:{os.getpid()}:abc123", None, NOW)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    worker = f"{here}:{ended.pid}:abc123"
    assert not worker_alive(worker, NOW, NOW)
    phase, detail = live_phase(row(worker, NOW), NOW)
    assert phase == "FAILED"
    assert detail.startswith(f"its worker {worker} ended without a final status (killed?)")
    assert "it last said RUNNING: reading" in detail


def test_a_worker_elsewhere_is_taken_for_gone_once_its_status_is_old() -> None:
    worker = "another-host:1234:abc123"
    assert live_phase(row(worker, NOW - 1000), NOW) == ("RUNNING", "reading")
    assert live_phase(row(worker, NOW - STALE_AFTER_MS - 1), NOW)[0] == "FAILED"


def test_a_pipeline_that_ended_is_shown_as_it_said() -> None:
    gone = "another-host:1234:abc123"
    assert live_phase(row(gone, 0, "STOPPED"), NOW) == ("STOPPED", "reading")
