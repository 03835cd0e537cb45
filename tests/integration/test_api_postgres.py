"""The HTTP API over a control plane whose state store is a real PostgreSQL server.

Each test works in an environment of its own (the session's database is shared). No pipeline
runs: what a worker would record is set in the store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ferry.api.app import create_app
from ferry.control.config import TokenConfig
from ferry.control.models import INITIAL_OFFSET_FROM
from ferry.control.service import ControlPlane, ControlSettings
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration

EDITOR = "pg-editor-token-0123456789"
VIEWER = "pg-viewer-token-0123456789"
JOB = """source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: orders
  value.format: debezium-json
sink:
  type: memory
"""


class Api:
    def __init__(self, app: FastAPI, plane: ControlPlane, env: str) -> None:
        self.app = app
        self.plane = plane
        self.env = env

    def request(self, method: str, path: str, token: str | None = EDITOR, **kwargs: Any) -> httpx.Response:
        """``path`` is under the environment, unless it is absolute (``/healthz``)."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        url = path if path == "/healthz" else f"/api/v1/environments/{self.env}{path}"

        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ferry") as client:
                return await client.request(method, url, headers=headers, **kwargs)

        return asyncio.run(send())

    def create(self, name: str, token: str = EDITOR, **spec: Any) -> httpx.Response:
        return self.request(
            "POST", "/pipelines", token, json={"metadata": {"name": name}, "spec": {"job": JOB, **spec}}
        )

    def set_phase(self, name: str, phase: str) -> None:
        row = self.plane.store.pipeline(self.env, name)
        assert row is not None and self.plane.store.update_pipeline(row, phase=phase)


def refused(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return " ".join(e["message"] for e in response.json()["errors"])


@pytest.fixture
def api(postgres_server: PostgresServer) -> Iterator[Api]:
    env = f"e{uuid.uuid4().hex[:12]}"
    tokens = [
        TokenConfig(name="deployer", token=EDITOR, roles={env: "editor"}),
        TokenConfig(name="reader", token=VIEWER, roles={env: "viewer"}),
    ]
    plane = ControlPlane(ControlSettings(state_url=postgres_server.sqlalchemy_url))
    yield Api(create_app(plane, tokens), plane, env)
    plane.close()


def test_auth_and_roles_on_postgresql(api: Api) -> None:
    assert api.request("GET", "/pipelines", token=None).status_code == 401
    assert api.request("GET", "/pipelines", token="unknown-token-0123456789").status_code == 401
    assert api.create("orders").status_code == 200
    assert api.request("GET", "/pipelines/orders", VIEWER).json()["metadata"]["environment"] == api.env
    assert "is a viewer" in refused(api.create("other", VIEWER), 403)
    assert "is a viewer" in refused(api.request("DELETE", "/pipelines/orders", VIEWER), 403)
    other = Api(api.app, api.plane, "elsewhere")
    assert "has no role in environment 'elsewhere'" in refused(other.create("orders"), 403)


def test_refusals_keep_their_codes_on_postgresql(api: Api) -> None:
    assert "not found" in refused(api.request("GET", "/pipelines/nope"), 404)
    assert "reference pipeline 'v0' not found" in refused(
        api.create("v2", properties={INITIAL_OFFSET_FROM: "v0"}), 404
    )
    assert api.create("v1").status_code == 200
    resource = api.request("GET", "/pipelines/v1").json()
    body = {
        "metadata": {"name": "v1", "updateTimestamp": resource["metadata"]["updateTimestamp"]},
        "spec": resource["spec"],
    }
    assert "updateTimestamp is read-only" in refused(api.request("PUT", "/pipelines/v1", json=body), 422)

    api.set_phase("v1", "STOPPED")
    failed = api.plane.store.insert_savepoint(api.env, "v1", "UPGRADE")
    api.plane.store.finish_savepoint(failed.uid, "FAILED", reason="no checkpoint to record")
    message = refused(api.create("v2", properties={INITIAL_OFFSET_FROM: "v1"}), 400)
    assert failed.uid in message and "no checkpoint to record" in message

    assert "savepoint(s) attached" in refused(api.request("DELETE", "/pipelines/v1"), 409)
    assert "needs force=true" in refused(
        api.request("DELETE", "/pipelines/v1/savepoints", params={"source": "UPGRADE"}), 409
    )
    deleted = api.request("DELETE", "/pipelines/v1/savepoints", params={"source": "UPGRADE", "force": "true"})
    assert deleted.json() == {"deleted": [failed.uid]}
    assert api.request("DELETE", "/pipelines/v1").status_code == 204

    bad = JOB + "pipeline:\n  bogus: 1\n"
    response = api.request("POST", "/pipelines", json={"metadata": {"name": "v3"}, "spec": {"job": bad}})
    assert "spec.job:9:3: pipeline.bogus: unknown key" in refused(response, 400)


def test_stop_and_resume_through_put_on_postgresql(api: Api) -> None:
    assert api.create("orders").status_code == 200
    spec = api.request("GET", "/pipelines/orders").json()["spec"]
    body = {"metadata": {"name": "orders"}, "spec": {**spec, "stopped": True}}
    assert api.request("PUT", "/pipelines/orders", json=body).json()["status"]["phase"] == "STOPPED"
    body["spec"] = {**spec, "stopped": False}
    assert api.request("PUT", "/pipelines/orders", json=body).json()["status"]["phase"] == "PENDING"


def test_health_reaches_postgresql(api: Api) -> None:
    response = api.request("GET", "/healthz", token=None)
    assert response.status_code == 200 and response.json() == {"status": "ok"}
