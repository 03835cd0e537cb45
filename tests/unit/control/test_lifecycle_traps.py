"""Lifecycle traps of the control plane, each pinned by a test that failed before its fix:
carry-over into an upsert sink, server-side paths in a failure's detail, a resumed wait's deadline,
scheduled savepoints piling up and a stop losing to one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.control_helpers import wait_for
from tests.unit.control.test_service import ENV, create, refused, set_phase, stopped_with_savepoint

from ferry.control import service, supervisor
from ferry.control.models import INITIAL_OFFSET_FROM
from ferry.control.service import ControlPlane, ControlSettings, iso
from ferry.control.store import runtime_name
from ferry.control.supervisor import Child, Supervisor
from ferry.pipeline.checkpoints import now_ms

UPSERT_JOB = """
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: orders
sink:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  sink.upsert: true
"""


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    control = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield control
    control.close()


@pytest.fixture
def worker(plane: ControlPlane, tmp_path: Path) -> Iterator[Supervisor]:
    each = Supervisor(plane, data_dir=tmp_path / "pipelines", worker="w1")
    yield each
    for child in each.children.values():
        if child.exit_code() is None:
            child.process.kill()
            child.process.wait(10)
        child.log_handle.close()


def running(
    plane: ControlPlane, worker: Supervisor, tmp_path: Path, name: str, code: str, **spec: object
) -> Child:
    """A pipeline RUNNING on ``worker`` whose process runs ``code``."""
    create(plane, name, **spec)
    row = plane.store.pipeline(ENV, name)
    assert row is not None
    plane.store.update_pipeline(row, phase="RUNNING", prepared=row.generation, traits={"startedMs": now_ms()})
    log_file = tmp_path / f"{name}.log"
    handle = log_file.open("a", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    child = Child(process, row.generation, log_file, handle)
    worker.children[(ENV, name)] = child
    return child


def test_an_upsert_sink_cannot_inherit_offsets(plane: ControlPlane) -> None:
    stopped_with_savepoint(plane, "v1")
    message = refused(
        400,
        plane.create_pipeline,
        ENV,
        {"metadata": {"name": "v2"}, "spec": {"job": UPSERT_JOB, "properties": {INITIAL_OFFSET_FROM: "v1"}}},
    )
    assert "sink.upsert" in message and "stateful" in message


def test_a_failure_detail_names_no_server_side_path(
    plane: ControlPlane, worker: Supervisor, tmp_path: Path
) -> None:
    child = running(plane, worker, tmp_path, "v1", "print('the broker said no'); raise SystemExit(3)")
    child.process.wait(30)
    worker.tick()
    status = plane.get_pipeline(ENV, "v1").status
    assert status.phase == "FAILED"
    assert "exited with code 3" in status.detail and "the broker said no" in status.detail
    assert str(tmp_path) not in status.detail and ".log" not in status.detail, status.detail


def test_resuming_a_wait_for_inherited_offsets_keeps_its_deadline(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "RUNNING")
    first = create(plane, "v2", properties={INITIAL_OFFSET_FROM: "v1"})["status"]["deadline"]
    plane.set_stopped(ENV, "v2", True)
    later = now_ms() + 600_000
    monkeypatch.setattr(service, "now_ms", lambda: later)
    resumed = plane.set_stopped(ENV, "v2", False).document()["status"]
    assert resumed["phase"] == "PENDING"
    assert resumed["deadline"] == first  # counted from the creation, as CMF does


def test_at_most_one_savepoint_is_in_flight_and_a_stop_wins_over_a_scheduled_one(
    plane: ControlPlane, worker: Supervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running(plane, worker, tmp_path, "v1", "import time; time.sleep(60)", savepointInterval="1 s")
    clock = [now_ms()]
    monkeypatch.setattr(supervisor, "now_ms", lambda: clock[0])
    for _ in range(4):  # no checkpoint ever comes: each interval would ask for another
        clock[0] += 1_500
        worker.tick()
    in_flight = [s for s in plane.list_savepoints(ENV, "v1") if s.status.state == "PENDING"]
    assert [s.spec.source for s in in_flight] == ["SCHEDULE"]

    stopping = plane.set_stopped(ENV, "v1", True)
    assert stopping.status.phase == "STOPPING"
    scheduled = plane.get_savepoint(ENV, "v1", in_flight[0].metadata.uid)
    assert scheduled.status.state == "FAILED" and "stop" in scheduled.status.reason
    sources = {s.spec.source: s.status.state for s in plane.list_savepoints(ENV, "v1")}
    assert sources["UPGRADE"] == "PENDING"


def test_running_says_when_reading_began(plane: ControlPlane, worker: Supervisor, tmp_path: Path) -> None:
    running(plane, worker, tmp_path, "v1", "import time; time.sleep(60)")
    name = runtime_name(ENV, "v1")
    plane.state.set_status(name, "RUNNING", "reading", {"started_ms": now_ms(), "assigned": {}})
    worker.tick()
    status = plane.get_pipeline(ENV, "v1").document()["status"]
    assert status["phase"] == "RUNNING" and "readingSince" not in status
    assert "not reading yet" in status["detail"]

    plane.state.set_status(name, "RUNNING", "reading", {"started_ms": now_ms(), "assigned": {"orders": [0]}})
    worker.tick()
    status = plane.get_pipeline(ENV, "v1").document()["status"]
    assert status["detail"] == "reading"
    assert status["readingSince"] == iso(plane.state.get_status(name)["updated_ms"])  # type: ignore[index]


def test_a_stop_right_after_the_start_waits_for_the_process_and_takes_a_savepoint(
    plane: ControlPlane, worker: Supervisor, tmp_path: Path
) -> None:
    name = runtime_name(ENV, "v1")
    plane.state.save_checkpoint(name, {("orders", 0): 5}, {})
    url = plane.settings.state_url
    runner = f"""
import signal, sys, time
from ferry.state import StateStore
from ferry.pipeline.checkpoints import now_ms
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a runner's final checkpoint, in short
StateStore({url!r}).set_status({name!r}, "RUNNING", "reading", {{"started_ms": now_ms(), "assigned": {{"orders": [0]}}}})
time.sleep(60)
"""
    running(plane, worker, tmp_path, "v1", runner)
    plane.set_stopped(ENV, "v1", True)  # before the process could handle SIGTERM

    def ended() -> str | None:
        worker.tick()
        phase = plane.get_pipeline(ENV, "v1").status.phase
        return phase if phase in ("STOPPED", "FAILED") else None

    assert wait_for(ended, 30, lambda: str(plane.get_pipeline(ENV, "v1").status)) == "STOPPED"
    (upgrade,) = plane.list_savepoints(ENV, "v1", "UPGRADE")
    assert upgrade.status.state == "COMPLETED"
    assert upgrade.status.offsets == {"orders": "partition:0,offset:5"}
