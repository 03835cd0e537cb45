"""``ferry serve``'s ``/readyz`` and ``/metrics``: no token needed, the pipelines by environment
and phase, and the process's metrics, read back with ``prometheus_client``'s parser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.unit.control.test_api import EDITOR, TOKENS, Api, Client

from ferry.api.app import create_app
from ferry.control.service import ControlPlane, ControlSettings


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield plane
    plane.close()


def test_metrics_count_the_pipelines_per_environment_and_phase(plane: ControlPlane) -> None:
    api = Api(Client(create_app(plane, TOKENS)), plane)
    for name in ("orders", "refunds"):
        assert api.create(name, EDITOR, stopped=True).status_code == 200
    api.set_phase("refunds", "FAILED")
    response = api.client.get("/metrics")  # no token
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    counts = {
        (s.labels["environment"], s.labels["phase"]): s.value for s in families["ferry_pipelines"].samples
    }
    assert counts[("default", "STOPPED")] == 1 and counts[("default", "FAILED")] == 1
    assert counts[("default", "RUNNING")] == 0
    assert families["ferry_pipelines"].documentation
    assert "process_cpu_seconds" in families and "python_info" in families
    assert families["ferry_build_info"].samples[0].labels["version"]


def test_readiness_says_why_the_process_is_not_ready(plane: ControlPlane) -> None:
    reason: list[str] = ["the worker of this process is not running"]
    client = Client(create_app(plane, TOKENS, lambda: reason[0] if reason else None))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"errors": [{"message": "the worker of this process is not running"}]}
    assert client.get("/healthz").status_code == 200  # alive all the same
    reason.clear()
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readiness_needs_the_state_store(tmp_path: Path) -> None:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    client = Client(create_app(plane, TOKENS))
    assert client.get("/readyz").status_code == 200
    plane.store.engine.dispose()
    (tmp_path / "state.db").unlink()
    (tmp_path / "state.db").mkdir()  # a folder where the database was: no connection opens
    try:
        response = client.get("/readyz")
    finally:
        plane.close()
    assert response.status_code == 503 and "state store cannot be reached" in response.text
