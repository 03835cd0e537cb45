"""The API's figures for the page (workers, checkpoints, errors: masked) and the page's actions
refused as the API refuses them, through the app over HTTP (httpx on ASGI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from tests.unit.control.test_api import EDITOR, TOKENS, VIEWER, Api, Client

from ferry.api.app import create_app
from ferry.control.service import ControlPlane, ControlSettings
from ferry.pipeline.phase import Phase


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield Api(Client(create_app(plane, TOKENS)), plane)
    plane.close()


def page(api: Api, method: str, path: str, token: str, **kwargs: object) -> tuple[int, str, str]:
    """The status, body and redirect of a page request signed in with ``token``."""
    headers = {"Authorization": f"Bearer {token}"}
    response = api.client.request(method, path, headers=headers, **kwargs)
    return response.status_code, response.text, response.headers.get("location", "")


def test_the_status_carries_workers_checkpoints_and_errors_with_credentials_masked(api: Api) -> None:
    assert api.create("orders").status_code == 200
    api.set_phase("orders", Phase.RUNNING)
    row = api.plane.store.pipeline("default", "orders")
    assert row is not None
    error = "connection to postgresql://ferry:sink-password@db:5432/ods refused"
    metrics = {
        "lag": {"t": {"0": 3}},
        "offsets": {"t": {"0": 7}},
        "recent_checkpoints": [{"at_ms": 1, "duration_ms": 5, "rows": 2, "barrier": True, "count": 1}],
        "recent_errors": [{"at_ms": 2, "what": "flushing the sink", "error": error}],
        "retry": {
            "what": "flushing the sink",
            "attempt": 2,
            "attempts": 5,
            "error": error,
            "next_attempt_ms": 3,
            "gives_up_ms": None,
        },
    }
    api.plane.state.set_status(row.runtime_name, Phase.RUNNING, "reading", metrics, worker="w1")
    seen = api.request("GET", "/pipelines/orders", VIEWER).json()["status"]["metrics"]
    assert seen["workers"]["w1"]["assigned"] == {} and seen["workers"]["w1"]["phase"] == Phase.RUNNING
    assert seen["recent_checkpoints"] == metrics["recent_checkpoints"]
    assert [e["what"] for e in seen["recent_errors"]] == ["flushing the sink"]
    for shown in (seen["recent_errors"][0]["error"], seen["retry"]["error"]):
        assert "sink-password" not in shown and "postgresql://ferry:" in shown, shown


def test_a_page_action_is_confirmed_first_and_refused_as_the_api_refuses_it(api: Api) -> None:
    assert api.create("orders").status_code == 200
    api.set_phase("orders", Phase.RUNNING)
    # a viewer: the API's 403, on the confirmation and on the action
    for method in ("GET", "POST"):
        status, body, _ = page(api, method, "/pipelines/default/orders/stop", VIEWER)
        assert status == 403 and "needs the editor role" in body, body
    # the confirmation changes nothing
    status, body, _ = page(api, "GET", "/pipelines/default/orders/savepoint", EDITOR)
    assert status == 200 and "Take a MANUAL savepoint of pipeline orders?" in body
    assert api.plane.list_savepoints("default", "orders") == []
    status, _, location = page(api, "POST", "/pipelines/default/orders/savepoint", EDITOR)
    assert status == 303 and parse_qs(urlsplit(location).query)["done"] == ["savepoint"]
    [savepoint] = api.plane.list_savepoints("default", "orders")
    assert savepoint.spec.source == "MANUAL"
    # the control plane's refusals: a savepoint in flight blocks another, savepoints block a delete
    status, body, _ = page(api, "POST", "/pipelines/default/orders/savepoint", EDITOR)
    assert status == 409 and "Refused (409)" in body, body
    status, body, _ = page(api, "POST", "/pipelines/default/orders/delete", EDITOR)
    assert status == 409 and "savepoint(s) attached" in body, body
    # a replay needs a valid name and a start
    form = {"replay_name": "Not A Name", "start": "time", "time": "2026-01-01T00:00:00Z"}
    status, body, _ = page(api, "POST", "/pipelines/default/orders/replay", EDITOR, data=form)
    assert status == 400 and "not a valid pipeline name" in body, body
    form = {"replay_name": "orders-again", "start": "time", "time": "yesterday"}
    status, body, _ = page(api, "POST", "/pipelines/default/orders/replay", EDITOR, data=form)
    assert status == 400 and "neither ISO 8601" in body, body
    form = {"replay_name": "orders-again", "start": "time", "time": "2026-01-01T00:00:00Z"}
    status, _, location = page(api, "POST", "/pipelines/default/orders/replay", EDITOR, data=form)
    assert status == 303, location
    replay = api.plane.get_pipeline("default", "orders-again").spec
    assert replay.start_from is not None and replay.start_from.timestamp_millis == 1_767_225_600_000
    assert replay.bounded is None  # the box was not ticked
    status, body, _ = page(api, "POST", "/pipelines/default/orders/restart", EDITOR)
    assert status == 404 and "no action &#39;restart&#39;" in body
