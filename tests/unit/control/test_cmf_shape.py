"""The pipeline and savepoint resources in CMF's shape: labels and annotations, YAML bodies,
COMPLETED for a finished bounded run, savepoints by name, stable operationIds and the traits.

Requests go through httpx to the real ASGI application over a SQLite state store; what a worker
would record (a phase, a checkpoint) is set in the store or done by a real Supervisor.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.unit.control.test_api import EDITOR, TOKENS, Api, Client, job, refused

from ferry.api.app import create_app
from ferry.control.models import INITIAL_OFFSET_FROM
from ferry.control.service import ControlPlane, ControlSettings
from ferry.control.supervisor import Supervisor
from ferry.pipeline.phase import Phase

YAML = {"Content-Type": "application/yaml"}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield Api(Client(create_app(plane, TOKENS)), plane)
    plane.close()


def created(response: httpx.Response) -> dict:  # type: ignore[type-arg]
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------ labels and annotations


def test_labels_and_annotations_are_stored_and_returned(api: Api) -> None:
    body = {
        "metadata": {
            "name": "orders",
            "labels": {"team": "payments", "app.example.com/tier": "gold"},
            "annotations": {"owner": "ops@example.com", "description": "orders into the lake"},
        },
        "spec": {"job": job()},
    }
    resource = created(api.request("POST", "/pipelines", json=body))
    assert resource["metadata"]["labels"] == body["metadata"]["labels"]
    assert resource["metadata"]["annotations"] == body["metadata"]["annotations"]
    again = api.request("GET", "/pipelines/orders").json()
    assert again["metadata"]["labels"] == {"team": "payments", "app.example.com/tier": "gold"}
    listed = api.request("GET", "/pipelines").json()["items"][0]
    assert listed["metadata"]["annotations"]["owner"] == "ops@example.com"


def test_a_put_replaces_the_labels_it_names_and_keeps_those_it_leaves_out(api: Api) -> None:
    body = {"metadata": {"name": "orders", "labels": {"team": "a"}}, "spec": {"job": job()}}
    created(api.request("POST", "/pipelines", json=body))
    current = api.request("GET", "/pipelines/orders").json()
    current["metadata"].pop("updateTimestamp")
    current["metadata"]["labels"] = {"team": "b", "env": "prod"}
    put = created(api.request("PUT", "/pipelines/orders", json=current))
    assert put["metadata"]["labels"] == {"team": "b", "env": "prod"}
    stop = {"metadata": {"name": "orders"}, "spec": {**put["spec"], "stopped": True}}
    stopped = created(api.request("PUT", "/pipelines/orders", json=stop))
    assert stopped["metadata"]["labels"] == {"team": "b", "env": "prod"}
    assert stopped["status"]["phase"] == "STOPPED"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"bad key": "x"}, "metadata.labels: 'bad key' is not a valid key"),
        ({"team": 3}, "metadata.labels.team: Input should be a valid string"),
        (["team"], "metadata.labels: Input should be a valid dictionary"),
    ],
)
def test_a_bad_label_is_refused_naming_it(api: Api, labels: object, expected: str) -> None:
    body = {"metadata": {"name": "orders", "labels": labels}, "spec": {"job": job()}}
    assert expected in refused(api.request("POST", "/pipelines", json=body), 400)


# ------------------------------------------------------------------------------ YAML bodies


def test_a_yaml_body_creates_and_updates_a_pipeline(api: Api) -> None:
    indented = "".join(f"      {line}\n" for line in job().splitlines())
    document = f"""apiVersion: ferry/v1
kind: Pipeline
metadata:
  name: orders
  labels:
    team: payments
spec:
  savepointInterval: 10 min
  job: |
{indented}"""
    resource = created(api.request("POST", "/pipelines", content=document, headers=YAML))
    assert resource["metadata"]["labels"] == {"team": "payments"}
    assert resource["spec"]["savepointInterval"] == "10 min"
    assert resource["spec"]["job"] == job()
    stop = document.replace("  savepointInterval: 10 min\n", "  savepointInterval: 10 min\n  stopped: true\n")
    stopped = created(
        api.request("PUT", "/pipelines/orders", content=stop, headers={"Content-Type": "application/x-yaml"})
    )
    assert stopped["status"]["phase"] == "STOPPED"


def test_a_body_that_is_not_yaml_is_refused_with_its_line_and_column(api: Api) -> None:
    document = "metadata:\n  name: orders\nspec: [unclosed\n"
    message = refused(api.request("POST", "/pipelines", content=document, headers=YAML), 400)
    assert re.search(r"not valid YAML at line \d+, column \d+", message), message


def test_a_yaml_body_is_validated_like_json(api: Api) -> None:
    document = "metadata:\n  name: orders\nspec:\n  job: 'x: 1'\n  upgradeMode: sometimes\n"
    message = refused(api.request("POST", "/pipelines", content=document, headers=YAML), 400)
    assert "spec.upgradeMode" in message, message


# ------------------------------------------------------------------------------ COMPLETED


def test_a_bounded_run_that_read_to_its_end_is_completed_with_its_savepoint(api: Api) -> None:
    plane = api.plane
    created(api.create("replay", bounded={"mode": "latest-offset"}, startFrom={"timestampMillis": 0}))
    row = plane.store.pipeline("default", "replay")
    assert row is not None
    plane.store.update_pipeline(row, phase=Phase.RUNNING)
    row = plane.store.pipeline("default", "replay")
    assert row is not None
    plane.state.save_checkpoint(row.runtime_name, {("orders", 0): 42}, {})
    Supervisor(plane)._finish_if_done(row)  # what a worker does when every process exited with 0
    resource = api.request("GET", "/pipelines/replay").json()
    assert resource["status"]["phase"] == "COMPLETED", resource["status"]
    assert resource["status"]["detail"] == "finished: the bounded read reached its end"
    [savepoint] = api.request("GET", "/pipelines/replay/savepoints").json()["items"]
    assert savepoint["status"]["state"] == "COMPLETED"
    assert savepoint["status"]["offsets"] == {"orders": "partition:0,offset:42"}
    # a completed run's offsets are inherited as a stopped one's
    created(api.create("next", properties={INITIAL_OFFSET_FROM: "replay"}))


def test_every_phase_the_control_plane_writes_is_a_member_of_the_phase_enum() -> None:
    root = Path(__file__).resolve().parents[3] / "src" / "ferry"
    members = {p.value for p in Phase}
    assert "COMPLETED" in members
    for path in [*root.glob("control/*.py"), *root.glob("api/*.py"), *root.glob("cli/*.py")]:
        for literal in re.findall(r"phase=\"([A-Z]+)\"", path.read_text()):
            assert literal in members, (path, literal)


# ------------------------------------------------------------------------------ savepoints by name


def test_savepoints_are_addressed_by_name_as_by_uid(api: Api) -> None:
    created(api.create("orders"))
    api.set_phase("orders", "RUNNING")
    named = created(
        api.request("POST", "/pipelines/orders/savepoints", json={"metadata": {"name": "before-upgrade"}})
    )
    assert named["metadata"]["name"] == "before-upgrade"
    uid = named["metadata"]["uid"]
    assert api.request("GET", "/pipelines/orders/savepoints/before-upgrade").json()["metadata"]["uid"] == uid
    assert (
        api.request("GET", f"/pipelines/orders/savepoints/{uid}").json()["metadata"]["name"]
        == "before-upgrade"
    )
    api.plane.store.finish_savepoint(uid, "COMPLETED")
    pinned = api.request(
        "PATCH", "/pipelines/orders/savepoints/before-upgrade", json={"spec": {"pinned": True}}
    )
    assert pinned.json()["spec"]["pinned"] is True
    again = api.request("POST", "/pipelines/orders/savepoints", json={"metadata": {"name": "before-upgrade"}})
    assert "already has a savepoint named" in refused(again, 409)
    api.request("PATCH", f"/pipelines/orders/savepoints/{uid}", json={"spec": {"pinned": False}})
    gone = api.request("DELETE", "/pipelines/orders/savepoints/before-upgrade", params={"force": "true"})
    assert gone.status_code == 204, gone.text
    assert refused(api.request("GET", f"/pipelines/orders/savepoints/{uid}"), 404)


def test_a_savepoint_without_a_name_is_named_after_its_source_and_uid(api: Api) -> None:
    created(api.create("orders"))
    api.set_phase("orders", "RUNNING")
    savepoint = created(api.request("POST", "/pipelines/orders/savepoints"))
    uid = savepoint["metadata"]["uid"]
    assert savepoint["metadata"]["name"] == f"manual-{uid[:8]}"
    listed = api.request("GET", "/pipelines/orders/savepoints").json()["items"]
    assert [s["metadata"]["name"] for s in listed] == [f"manual-{uid[:8]}"]


def test_a_bad_savepoint_name_is_refused(api: Api) -> None:
    created(api.create("orders"))
    api.set_phase("orders", "RUNNING")
    response = api.request("POST", "/pipelines/orders/savepoints", json={"metadata": {"name": "Not OK"}})
    assert "metadata.name" in refused(response, 400)


# ------------------------------------------------------------------------------ operationIds


def test_every_route_has_a_unique_operation_id_in_cmf_style(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    operations = {
        (method.upper(), path): operation.get("operationId")
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    ids = list(operations.values())
    assert None not in ids and len(ids) == len(set(ids)), operations
    assert all(re.fullmatch(r"(get|create|update|delete)[A-Z][A-Za-z]+", i) for i in ids), ids
    pipelines = "/api/v1/environments/{env}/pipelines"
    assert {
        ("GET", pipelines): "getPipelines",
        ("POST", pipelines): "createPipeline",
        ("GET", pipelines + "/{name}"): "getPipeline",
        ("PUT", pipelines + "/{name}"): "updatePipeline",
        ("DELETE", pipelines + "/{name}"): "deletePipeline",
        ("GET", pipelines + "/{name}/savepoints"): "getSavepoints",
        ("POST", pipelines + "/{name}/savepoints"): "createSavepoint",
        ("DELETE", pipelines + "/{name}/savepoints"): "deleteSavepoints",
        ("GET", pipelines + "/{name}/savepoints/{savepoint}"): "getSavepoint",
        ("PATCH", pipelines + "/{name}/savepoints/{savepoint}"): "updateSavepoint",
        ("DELETE", pipelines + "/{name}/savepoints/{savepoint}"): "deleteSavepoint",
    }.items() <= operations.items()
    create = document["paths"][pipelines]["post"]["requestBody"]["content"]
    assert set(create) == {"application/json", "application/yaml"}


# ------------------------------------------------------------------------------ traits


def test_traits_say_whether_the_pipeline_is_bounded_and_append_only(api: Api) -> None:
    unbounded = created(api.create("live"))["status"]["traits"]
    assert (unbounded["isBounded"], unbounded["isAppendOnly"]) == (False, False)
    replay = created(
        api.create("replay", bounded={"mode": "latest-offset"}, startFrom={"timestampMillis": 0})
    )
    assert replay["status"]["traits"]["isBounded"] is True
    bounded_job = job(extra="").replace(
        "  value.format", "  scan.bounded.mode: latest-offset\n  value.format"
    )
    body = {"metadata": {"name": "bounded-job"}, "spec": {"job": bounded_job}}
    assert created(api.request("POST", "/pipelines", json=body))["status"]["traits"]["isBounded"] is True
    kafka = job().replace(
        "sink:\n  type: memory\n",
        "sink:\n  type: kafka\n  properties.bootstrap.servers: 127.0.0.1:9\n  topic: out\n",
    )
    body = {"metadata": {"name": "to-kafka"}, "spec": {"job": kafka}}
    traits = created(api.request("POST", "/pipelines", json=body))["status"]["traits"]
    assert traits["isAppendOnly"] is True, traits
    assert traits["inheritedOffsetTopics"] == []
    assert EDITOR  # the editor token created every pipeline above


def test_a_state_store_written_before_labels_and_savepoint_names_gets_their_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    plane = ControlPlane(ControlSettings(state_url=url))
    created(Api(Client(create_app(plane, TOKENS)), plane).create("orders"))
    uid = plane.store.insert_savepoint("default", "orders", "MANUAL").uid
    with plane.store.engine.begin() as conn:  # the tables as an earlier version created them
        for table, column in (
            ("ferry_pipelines", "labels"),
            ("ferry_pipelines", "annotations"),
            ("ferry_savepoints", "name"),
        ):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")
    plane.close()
    reopened = ControlPlane(ControlSettings(state_url=url))
    try:
        pipeline = reopened.get_pipeline("default", "orders")
        assert (pipeline.metadata.labels, pipeline.metadata.annotations) == ({}, {})
        assert reopened.get_savepoint("default", "orders", f"manual-{uid[:8]}").metadata.uid == uid
    finally:
        reopened.close()
