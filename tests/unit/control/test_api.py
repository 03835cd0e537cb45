"""The HTTP API over a control plane on a SQLite state store: auth, roles, codes, OpenAPI.

Requests go through httpx to the real ASGI application; no pipeline runs (phases and savepoints a
worker would record are set in the store).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ferry.api.app import create_app
from ferry.control.config import TokenConfig
from ferry.control.models import INITIAL_OFFSET_FROM
from ferry.control.service import ControlPlane, ControlSettings

EDITOR = "editor-token-0123456789"
VIEWER = "viewer-token-0123456789"
STAGING = "staging-token-0123456789"
ADMIN = "admin-token-0123456789ab"
TOKENS = [
    TokenConfig(name="deployer", token=EDITOR, roles={"default": "editor", "staging": "viewer"}),
    TokenConfig(name="reader", token=VIEWER, roles={"default": "viewer"}),
    TokenConfig(name="stager", token=STAGING, roles={"staging": "editor"}),
    TokenConfig(name="admin", token=ADMIN, roles={"*": "editor"}),
]
BASE = "/api/v1/environments"


def job(topic: str = "orders", extra: str = "") -> str:
    return f"""source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: {topic}
  value.format: debezium-json
sink:
  type: memory
{extra}"""


class Client:
    """A blocking httpx client of an ASGI app (each request on its own event loop)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ferry") as client:
                return await client.request(method, url, **kwargs)

        return asyncio.run(send())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)


class Api:
    """Requests to the app, each with a token (or none)."""

    def __init__(self, client: Client, plane: ControlPlane) -> None:
        self.client = client
        self.plane = plane

    def request(
        self, method: str, path: str, token: str | None = EDITOR, env: str = "default", **kwargs: Any
    ) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.client.request(method, f"{BASE}/{env}{path}", headers=headers, **kwargs)

    def create(self, name: str, token: str = EDITOR, env: str = "default", **spec: Any) -> httpx.Response:
        body = {"metadata": {"name": name}, "spec": {"job": job(), **spec}}
        return self.request("POST", "/pipelines", token, env, json=body)

    def set_phase(self, name: str, phase: str, env: str = "default") -> None:
        row = self.plane.store.pipeline(env, name)
        assert row is not None
        assert self.plane.store.update_pipeline(row, phase=phase)


def message(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"errors"} and body["errors"], body
    return " ".join(e["message"] for e in body["errors"])


def refused(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return message(response)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield Api(Client(create_app(plane, TOKENS)), plane)
    plane.close()


def test_health_needs_no_token(api: Api) -> None:
    response = api.client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer not-a-configured-token-at-all", f"Basic {EDITOR}", "Bearer "],
    ids=["none", "unknown", "basic", "empty"],
)
def test_a_request_without_a_known_bearer_token_is_unauthorized(api: Api, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in [("GET", "/pipelines"), ("POST", "/pipelines"), ("DELETE", "/pipelines/a")]:
        response = api.request(method, path, token=None, headers=dict(headers))
        assert refused(response, 401)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_viewer_reads_but_may_not_change(api: Api) -> None:
    assert api.create("orders").status_code == 200
    assert api.request("GET", "/pipelines", VIEWER).json()["items"][0]["metadata"]["name"] == "orders"
    assert api.request("GET", "/pipelines/orders", VIEWER).json()["status"]["phase"] == "PENDING"
    assert api.request("GET", "/pipelines/orders/savepoints", VIEWER).json() == {
        "metadata": {"size": 0},
        "items": [],
    }
    resource = api.request("GET", "/pipelines/orders", VIEWER).json()
    stop = {"metadata": {"name": "orders"}, "spec": {**resource["spec"], "stopped": True}}
    attempts = [
        api.create("other", VIEWER),
        api.request("PUT", "/pipelines/orders", VIEWER, json=stop),
        api.request("DELETE", "/pipelines/orders", VIEWER),
        api.request("POST", "/pipelines/orders/savepoints", VIEWER),
        api.request("DELETE", "/pipelines/orders/savepoints", VIEWER, params={"source": "UPGRADE"}),
    ]
    for response in attempts:
        assert "token 'reader' is a viewer in environment 'default'" in refused(response, 403)
    assert api.request("GET", "/pipelines/orders", VIEWER).json()["status"]["phase"] == "PENDING"
    assert [p["metadata"]["name"] for p in api.request("GET", "/pipelines").json()["items"]] == ["orders"]


def test_an_editor_of_one_environment_has_no_role_in_another(api: Api) -> None:
    for response in (api.create("orders", STAGING), api.request("GET", "/pipelines", STAGING)):
        assert "token 'stager' has no role in environment 'default'" in refused(response, 403)
    assert api.create("orders", STAGING, env="staging").status_code == 200
    assert "is a viewer in environment 'staging'" in refused(api.create("more", EDITOR, env="staging"), 403)
    assert api.request("GET", "/pipelines/orders", EDITOR, env="staging").status_code == 200


def test_a_wildcard_role_covers_every_environment(api: Api) -> None:
    assert api.create("orders", ADMIN, env="anywhere").status_code == 200
    assert api.request("GET", "/pipelines/orders", ADMIN, env="anywhere").json()["metadata"][
        "environment"
    ] == ("anywhere")


def test_unknown_pipelines_savepoints_and_references_are_not_found(api: Api) -> None:
    assert "pipeline 'nope' not found" in refused(api.request("GET", "/pipelines/nope"), 404)
    assert refused(api.request("DELETE", "/pipelines/nope"), 404)
    assert api.create("orders").status_code == 200
    assert "savepoint 'x' of pipeline 'orders' not found" in refused(
        api.request("GET", "/pipelines/orders/savepoints/x"), 404
    )
    response = api.create("v2", properties={INITIAL_OFFSET_FROM: "orders-v1"})
    assert "reference pipeline 'orders-v1' not found" in refused(response, 404)
    assert "no such route" in refused(api.request("GET", "/nothing-here"), 404)


def test_inheriting_offsets_needs_view_permission_on_the_reference(api: Api) -> None:
    assert api.create("orders", STAGING, env="staging").status_code == 200
    # The deployer views staging: its request reaches the control plane, which refuses another
    # environment's reference; the stager cannot view default at all.
    response = api.create("v2", EDITOR, properties={INITIAL_OFFSET_FROM: "staging/orders"})
    assert "must be in the same environment" in refused(response, 404)
    response = api.create("v2", STAGING, env="staging", properties={INITIAL_OFFSET_FROM: "default/orders"})
    assert "token 'stager' has no role in environment 'default'" in refused(response, 403)


def test_savepoints_block_deleting_a_pipeline_until_deleted_with_force(api: Api) -> None:
    assert api.create("orders").status_code == 200
    api.set_phase("orders", "STOPPED")
    upgrade = api.plane.store.insert_savepoint("default", "orders", "UPGRADE", state="COMPLETED")
    manual = api.plane.store.insert_savepoint("default", "orders", "MANUAL", state="COMPLETED")
    assert "2 savepoint(s) attached" in refused(api.request("DELETE", "/pipelines/orders"), 409)
    listed = api.request("GET", "/pipelines/orders/savepoints", VIEWER, params={"source": "UPGRADE"}).json()
    assert [s["metadata"]["uid"] for s in listed["items"]] == [upgrade.uid]
    response = api.request("DELETE", "/pipelines/orders/savepoints", params={"source": "UPGRADE"})
    assert "needs force=true" in refused(response, 409)
    pinned = api.request(
        "PATCH", f"/pipelines/orders/savepoints/{manual.uid}", json={"spec": {"pinned": True}}
    )
    assert pinned.status_code == 200 and pinned.json()["spec"] == {"source": "MANUAL", "pinned": True}
    assert "pinned: unpin it first" in refused(
        api.request("DELETE", f"/pipelines/orders/savepoints/{manual.uid}", params={"force": "true"}), 409
    )
    response = api.request(
        "DELETE", "/pipelines/orders/savepoints", params={"source": "MANUAL", "force": "true"}
    )
    assert response.status_code == 200 and response.json() == {"deleted": []}
    response = api.request(
        "DELETE", "/pipelines/orders/savepoints", params={"source": "UPGRADE", "force": "true"}
    )
    assert response.status_code == 200 and response.json() == {"deleted": [upgrade.uid]}
    api.request("PATCH", f"/pipelines/orders/savepoints/{manual.uid}", json={"spec": {"pinned": False}})
    response = api.request("DELETE", f"/pipelines/orders/savepoints/{manual.uid}", params={"force": "true"})
    assert response.status_code == 204 and response.content == b""
    assert api.request("DELETE", "/pipelines/orders").status_code == 204
    assert refused(api.request("GET", "/pipelines/orders"), 404)


def test_a_put_that_sets_the_update_timestamp_is_unprocessable(api: Api) -> None:
    assert api.create("orders").status_code == 200
    resource = api.request("GET", "/pipelines/orders").json()
    resource["spec"]["stopped"] = True
    metadata = {"name": "orders", "updateTimestamp": resource["metadata"]["updateTimestamp"]}
    response = api.request("PUT", "/pipelines/orders", json={**resource, "metadata": metadata})
    assert "metadata.updateTimestamp is read-only" in refused(response, 422)
    assert api.request("GET", "/pipelines/orders").json()["status"]["phase"] == "PENDING"
    body = {
        "apiVersion": "ferry/v1",
        "kind": "Pipeline",
        "metadata": {"name": "orders"},
        "spec": resource["spec"],
    }
    stopped = api.request("PUT", "/pipelines/orders", json=body)
    assert stopped.status_code == 200 and stopped.json()["status"]["phase"] == "STOPPED"
    body["spec"] = {**body["spec"], "stopped": False}
    resumed = api.request("PUT", "/pipelines/orders", json=body)
    assert resumed.status_code == 200 and resumed.json()["status"]["phase"] == "PENDING"


def test_a_failed_savepoint_of_the_reference_is_a_bad_request(api: Api) -> None:
    assert api.create("orders-v1").status_code == 200
    api.set_phase("orders-v1", "STOPPED")
    savepoint = api.plane.store.insert_savepoint("default", "orders-v1", "UPGRADE")
    api.plane.store.finish_savepoint(savepoint.uid, "FAILED", reason="the sink commit timed out")
    response = api.create("orders-v2", properties={INITIAL_OFFSET_FROM: "orders-v1"})
    text = refused(response, 400)
    assert savepoint.uid in text and "the sink commit timed out" in text


def test_a_savepoint_still_being_recorded_is_a_conflict(api: Api) -> None:
    assert api.create("orders-v1").status_code == 200
    api.set_phase("orders-v1", "STOPPED")
    savepoint = api.plane.store.insert_savepoint("default", "orders-v1", "UPGRADE")
    response = api.create("orders-v2", properties={INITIAL_OFFSET_FROM: "orders-v1"})
    assert f"savepoint {savepoint.uid}" in refused(response, 409)


def test_a_pipeline_waiting_for_offsets_shows_its_deadline(api: Api) -> None:
    assert api.create("orders-v1").status_code == 200
    api.set_phase("orders-v1", "RUNNING")
    response = api.create("orders-v2", properties={INITIAL_OFFSET_FROM: "orders-v1"})
    assert response.status_code == 200, response.text
    status = response.json()["status"]
    assert status["phase"] == "PENDING" and status["deadline"] in status["detail"]


def test_a_job_with_a_bad_key_is_refused_with_its_line(api: Api) -> None:
    body = {
        "metadata": {"name": "orders"},
        "spec": {"job": job(extra="pipeline:\n  parallelism: 1\n  bogus: 1\n")},
    }
    text = refused(api.request("POST", "/pipelines", json=body), 400)
    assert "spec.job:10:3: pipeline.bogus: unknown key" in text


def test_a_job_ferry_cannot_run_is_refused_at_its_key_in_spec_job(api: Api) -> None:
    stateful = "transform:\n  - source-table: db.orders\n    projection: id, Count(*) AS n\n"
    body = {"metadata": {"name": "orders"}, "spec": {"job": job(extra=stateful)}}
    text = refused(api.request("POST", "/pipelines", json=body), 400)
    assert text.startswith("pipeline orders spec.job:10:5: transform[0].projection: transform[0]"), text
    assert "Count(*) is an aggregate" in text
    # a change of a stored pipeline's job is checked alike
    assert api.create("orders", stopped=True).status_code == 200
    changed = {"metadata": {"name": "orders"}, "spec": {"job": job(extra=stateful), "stopped": True}}
    text = refused(api.request("PUT", "/pipelines/orders", json=changed), 400)
    assert text.startswith("pipeline orders spec.job:10:5: transform[0].projection: "), text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"metadata": {"name": "orders"}, "spec": {"job": job(), "upgradeMode": "x"}}, "spec.upgradeMode:"),
        ({"metadata": {"name": "orders"}}, "spec: Field required"),
        ({"metadata": {"name": "Orders!"}, "spec": {"job": job()}}, "metadata.name: a pipeline name"),
        (["not", "an", "object"], "the request body"),
    ],
)
def test_an_invalid_body_is_a_bad_request_in_the_error_shape(api: Api, body: Any, expected: str) -> None:
    assert expected in refused(api.request("POST", "/pipelines", json=body), 400)


def test_a_body_that_is_not_json_is_a_bad_request(api: Api) -> None:
    response = api.request(
        "POST", "/pipelines", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert "not valid JSON" in refused(response, 400)


def test_an_unknown_savepoint_source_is_a_bad_request(api: Api) -> None:
    assert api.create("orders").status_code == 200
    response = api.request(
        "DELETE", "/pipelines/orders/savepoints", params={"source": "NIGHTLY", "force": "true"}
    )
    assert "query parameter source" in refused(response, 400)
    assert "query parameter source: Field required" in refused(
        api.request("DELETE", "/pipelines/orders/savepoints"), 400
    )


def test_a_manual_savepoint_needs_a_running_pipeline(api: Api) -> None:
    assert api.create("orders").status_code == 200
    assert "only a running pipeline takes a savepoint" in refused(
        api.request("POST", "/pipelines/orders/savepoints"), 400
    )
    api.set_phase("orders", "RUNNING")
    response = api.request("POST", "/pipelines/orders/savepoints")
    assert response.status_code == 200, response.text
    uid = response.json()["metadata"]["uid"]
    assert (
        api.request("GET", f"/pipelines/orders/savepoints/{uid}", VIEWER).json()["status"]["state"]
        == "PENDING"
    )
    assert "still being recorded" in refused(api.request("POST", "/pipelines/orders/savepoints"), 409)


def test_a_replay_is_a_pipeline_created_with_a_start(api: Api) -> None:
    response = api.create(
        "replay",
        startFrom={"offsets": {"orders": "partition:0,offset:42"}},
        bounded={"mode": "timestamp", "timestampMillis": 1_714_564_800_000},
    )
    assert response.status_code == 200, response.text
    spec = response.json()["spec"]
    assert spec["bounded"]["timestampMillis"] == 1_714_564_800_000
    assert spec["startFrom"]["offsets"]["orders"] in ("partition:0,offset:42", {"0": 42})
    response = api.create("replay-2", startFrom={"savepoint": "no-such-savepoint"})
    assert "savepoint 'no-such-savepoint' not found" in refused(response, 404)


def test_tokens_are_never_logged(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api.create("orders")
    api.request("GET", "/pipelines", "wrong-token-value-0123456789")
    api.request("GET", "/pipelines", VIEWER)
    assert caplog.records, "nothing was logged: the check below would prove nothing"
    for token in (EDITOR, VIEWER, "wrong-token-value-0123456789"):
        assert token not in caplog.text


def test_the_openapi_document_lists_the_routes_and_their_schemas(api: Api) -> None:
    response = api.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    paths = document["paths"]
    expected = {
        "/healthz": {"get"},
        "/readyz": {"get"},
        "/metrics": {"get"},
        f"{BASE}/{{env}}/pipelines": {"get", "post"},
        f"{BASE}/{{env}}/pipelines/{{name}}": {"get", "put", "delete"},
        f"{BASE}/{{env}}/pipelines/{{name}}/savepoints": {"get", "post", "delete"},
        f"{BASE}/{{env}}/pipelines/{{name}}/savepoints/{{savepoint}}": {"get", "patch", "delete"},
    }
    assert {path: set(operations) for path, operations in paths.items()} == expected
    schemas = document["components"]["schemas"]
    assert schemas["RestError"]["properties"]["errors"]["items"]["$ref"].endswith("/ErrorMessage")
    assert "HTTPValidationError" not in schemas
    create = paths[f"{BASE}/{{env}}/pipelines"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/PipelineRequest")
    assert {"401", "403", "400", "404", "409", "422"} <= set(create["responses"])
    assert create["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith("/RestError")
    assert create["security"] == [{"HTTPBearer": []}]
    assert "security" not in paths["/healthz"]["get"]
    spec = next(v for k, v in schemas.items() if k.startswith("PipelineSpec"))
    assert {"job", "properties", "stopped", "upgradeMode", "startFrom", "bounded", "rebuildTables"} <= set(
        spec["properties"]
    )
    delete = paths[f"{BASE}/{{env}}/pipelines/{{name}}/savepoints"]["delete"]
    assert {p["name"] for p in delete["parameters"]} >= {"env", "name", "source", "force"}
    assert "422" not in delete["responses"]
    assert "Replays" in document["info"]["description"]
