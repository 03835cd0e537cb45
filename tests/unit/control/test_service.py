"""The control plane's refusals and bookkeeping, on a SQLite state store (no pipeline runs here:
phases a worker would set are set in the store)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.support.waiting import Deadline

from ferry.config.loader import load_job_text
from ferry.control.exceptions import ControlError
from ferry.control.models import INITIAL_OFFSET_FROM, INITIAL_OFFSET_FROM_TIMEOUT
from ferry.control.service import ControlPlane, ControlSettings, inherited_offsets, latest_offsets_format
from ferry.control.supervisor import Supervisor, child_job_text

ENV = "default"


def job(topic: str = "orders", *, source_extra: str = "", transform: str = "") -> str:
    source = f"  topic: {topic}\n" if "topic-pattern" not in source_extra else ""
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
{source}{source_extra}
sink:
  type: memory
{transform}
"""


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    control = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield control
    control.close()


def create(plane: ControlPlane, name: str, text: str | None = None, **spec: Any) -> dict[str, Any]:
    return plane.create_pipeline(
        ENV, {"metadata": {"name": name}, "spec": {"job": text or job(), **spec}}
    ).document()


def refused(status: int, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ControlError) as error:
        call(*args, **kwargs)
    assert error.value.status == status, error.value.message
    return error.value.message


def set_phase(plane: ControlPlane, name: str, phase: str) -> None:
    row = plane.store.pipeline(ENV, name)
    assert row is not None
    assert plane.store.update_pipeline(row, phase=phase)


def stopped_with_savepoint(plane: ControlPlane, name: str, state: str = "COMPLETED", reason: str = "") -> str:
    create(plane, name)
    set_phase(plane, name, "STOPPED")
    savepoint = plane.store.insert_savepoint(ENV, name, "UPGRADE")
    plane.store.finish_savepoint(
        savepoint.uid, state, reason=reason, offsets={"orders": {"0": 42, "1": 300}}, schemas={}
    )
    return savepoint.uid


def inherit(plane: ControlPlane, name: str, reference: str, text: str | None = None) -> dict[str, Any]:
    return create(plane, name, text, properties={INITIAL_OFFSET_FROM: reference})


def test_a_pipeline_is_created_pending_and_listed(plane: ControlPlane) -> None:
    created = create(plane, "orders-v1")
    assert created["status"]["phase"] == "PENDING"
    assert created["metadata"]["name"] == "orders-v1" and created["metadata"]["uid"]
    assert [p.metadata.name for p in plane.list_pipelines(ENV)] == ["orders-v1"]
    assert plane.list_pipelines("other") == []
    assert "already exists" in refused(409, create, plane, "orders-v1")


@pytest.mark.parametrize("name", ["Orders", "-x", "a_b", "x" * 101, ""])
def test_a_bad_name_is_refused(plane: ControlPlane, name: str) -> None:
    assert "metadata.name" in refused(400, create, plane, name)


def test_a_bad_job_is_refused_with_its_line(plane: ControlPlane) -> None:
    message = refused(400, create, plane, "x", job(source_extra="  scan.startup.mod: latest-offset\n"))
    assert "scan.startup.mod" in message and ":6:" in message


def test_an_unknown_reference_is_not_found(plane: ControlPlane) -> None:
    assert "'orders-v0' not found" in refused(404, inherit, plane, "v2", "orders-v0")


def test_a_reference_in_another_environment_is_not_found(plane: ControlPlane) -> None:
    create(plane, "v1")
    assert "same environment" in refused(404, inherit, plane, "v2", "staging/v1")


def test_a_stateless_upgrade_mode_reference_is_refused(plane: ControlPlane) -> None:
    create(plane, "v1", upgradeMode="stateless")
    message = refused(400, inherit, plane, "v2", "v1")
    assert "upgradeMode stateless" in message and "no offsets" in message


def test_a_reference_stopped_without_a_savepoint_is_refused(plane: ControlPlane) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "STOPPED")
    assert "without a savepoint" in refused(400, inherit, plane, "v2", "v1")


def test_a_failed_savepoint_is_named_with_its_reason(plane: ControlPlane) -> None:
    uid = stopped_with_savepoint(plane, "v1", "FAILED", "worker w1: exited with code 1")
    message = refused(400, inherit, plane, "v2", "v1")
    assert uid in message and "exited with code 1" in message


def test_a_savepoint_still_being_recorded_is_a_conflict(plane: ControlPlane) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "STOPPING")
    savepoint = plane.store.insert_savepoint(ENV, "v1", "UPGRADE")
    message = refused(409, inherit, plane, "v2", "v1")
    assert savepoint.uid in message and "try again" in message


def test_a_stateful_pipeline_cannot_inherit(plane: ControlPlane) -> None:
    stopped_with_savepoint(plane, "v1")
    text = job(transform="transform:\n  - source-table: app.orders\n    projection: id, COUNT(*) AS n\n")
    message = refused(400, inherit, plane, "v2", "v1", text)
    assert "stateful" in message and "COUNT" in message.upper()


def test_a_pattern_covering_an_inherited_topic_is_refused(plane: ControlPlane) -> None:
    stopped_with_savepoint(plane, "v1")
    message = refused(400, inherit, plane, "v2", "v1", job(source_extra="  topic-pattern: ord.*\n"))
    assert "topic-pattern" in message and "'orders'" in message


def test_carry_over_turned_off_refuses_at_once(tmp_path: Path) -> None:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/s.db", carry_over_enabled=False))
    try:
        stopped_with_savepoint(plane, "v1")
        assert "turned off" in refused(400, inherit, plane, "v2", "v1")
    finally:
        plane.close()


def test_a_timeout_over_six_hours_is_refused(plane: ControlPlane) -> None:
    create(plane, "v1")
    message = refused(
        400, create, plane, "v2", properties={INITIAL_OFFSET_FROM: "v1", INITIAL_OFFSET_FROM_TIMEOUT: "7 h"}
    )
    assert "at most 6h" in message


def test_an_unknown_property_is_refused(plane: ControlPlane) -> None:
    assert "unknown property" in refused(400, create, plane, "v1", properties={"sql.nope": "1"})


def test_a_waiting_pipeline_shows_what_it_waits_for_and_fails_at_its_deadline(
    plane: ControlPlane, tmp_path: Path
) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "RUNNING")  # not prepared: no worker process is started for it
    waiting = create(plane, "v2", properties={INITIAL_OFFSET_FROM: "v1", INITIAL_OFFSET_FROM_TIMEOUT: "5 s"})
    assert waiting["status"]["phase"] == "PENDING"
    assert (
        "'v1'" in waiting["status"]["detail"] and waiting["status"]["deadline"] in waiting["status"]["detail"]
    )
    supervisor = Supervisor(plane, data_dir=tmp_path / "p", worker="w")
    supervisor.tick()
    detail = plane.get_pipeline(ENV, "v2").status.detail
    assert "to stop (it is RUNNING)" in detail
    # ticks until the deadline has passed (a loaded machine may tick late, never early)
    deadline = Deadline(180)
    while (failed := plane.get_pipeline(ENV, "v2").document()["status"])["phase"] == "PENDING":
        assert not deadline.expired(), failed
        time.sleep(0.2)
        supervisor.tick()
    assert failed["phase"] == "FAILED" and "timed out" in failed["detail"]


def test_turning_carry_over_off_fails_the_waiting_pipelines(plane: ControlPlane, tmp_path: Path) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "RUNNING")
    inherit(plane, "v2", "v1")
    off = ControlPlane(ControlSettings(state_url=plane.settings.state_url, carry_over_enabled=False))
    try:
        Supervisor(off, data_dir=tmp_path / "p", worker="w").tick()
    finally:
        off.close()
    status = plane.get_pipeline(ENV, "v2").document()["status"]
    assert status["phase"] == "FAILED" and "turned off" in status["detail"]


def test_while_waiting_only_stopped_may_change_and_deleting_cancels(
    plane: ControlPlane, tmp_path: Path
) -> None:
    create(plane, "v1")
    set_phase(plane, "v1", "RUNNING")
    waiting = inherit(plane, "v2", "v1")
    changed = {**waiting["spec"], "job": job("other")}
    message = refused(422, plane.update_pipeline, ENV, "v2", {"metadata": {"name": "v2"}, "spec": changed})
    assert "only spec.stopped" in message
    stopped = plane.set_stopped(ENV, "v2", True).document()
    assert stopped["status"]["phase"] == "STOPPED"
    assert plane.set_stopped(ENV, "v2", False).status.phase == "PENDING"
    plane.delete_pipeline(ENV, "v2")
    assert "not found" in refused(404, plane.get_pipeline, ENV, "v2")
    Supervisor(plane, data_dir=tmp_path / "p", worker="w").tick()
    row = plane.store.pipeline(ENV, "v2")
    assert row is not None and row.phase == "DELETED" and "cancelled" in row.detail


def test_an_update_setting_a_read_only_field_is_unprocessable(plane: ControlPlane) -> None:
    resource = create(plane, "v1")
    body = {"metadata": dict(resource["metadata"]), "spec": {**resource["spec"], "stopped": True}}
    assert "metadata.updateTimestamp is read-only" in refused(422, plane.update_pipeline, ENV, "v1", body)
    body["metadata"]["uid"] = "another"
    del body["metadata"]["updateTimestamp"]
    assert "metadata.uid is read-only" in refused(422, plane.update_pipeline, ENV, "v1", body)
    # CMF's way: the resource as read, without updateTimestamp, with spec.stopped set
    body["metadata"]["uid"] = resource["metadata"]["uid"]
    assert plane.update_pipeline(ENV, "v1", body).status.phase == "STOPPED"


def test_savepoints_block_deletion_until_deleted_with_force(plane: ControlPlane) -> None:
    stopped_with_savepoint(plane, "v1")
    manual = plane.store.insert_savepoint(ENV, "v1", "MANUAL")
    plane.store.finish_savepoint(manual.uid, "COMPLETED")
    pinned = plane.store.insert_savepoint(ENV, "v1", "MANUAL")
    plane.store.finish_savepoint(pinned.uid, "COMPLETED")
    plane.set_pinned(ENV, "v1", pinned.uid, True)

    assert "3 savepoint(s) attached" in refused(409, plane.delete_pipeline, ENV, "v1")
    assert "'NOPE'" in refused(400, plane.list_savepoints, ENV, "v1", "NOPE")
    assert "force=true" in refused(409, plane.delete_savepoints, ENV, "v1", "UPGRADE")
    assert len(plane.delete_savepoints(ENV, "v1", "UPGRADE", force=True)) == 1
    assert plane.delete_savepoints(ENV, "v1", "MANUAL", force=True) == [manual.uid]
    assert [s.metadata.uid for s in plane.list_savepoints(ENV, "v1")] == [pinned.uid]
    assert "pinned" in refused(409, plane.delete_savepoint, ENV, "v1", pinned.uid, force=True)
    plane.set_pinned(ENV, "v1", pinned.uid, False)
    plane.delete_savepoint(ENV, "v1", pinned.uid, force=True)
    plane.delete_pipeline(ENV, "v1")
    assert plane.list_pipelines(ENV) == []


def test_a_manual_savepoint_needs_a_running_pipeline_and_one_at_a_time(plane: ControlPlane) -> None:
    create(plane, "v1")
    assert "only a running pipeline" in refused(400, plane.create_savepoint, ENV, "v1")
    set_phase(plane, "v1", "RUNNING")
    first = plane.create_savepoint(ENV, "v1").document()
    assert first["spec"]["source"] == "MANUAL" and first["status"]["state"] == "PENDING"
    assert "still being recorded" in refused(409, plane.create_savepoint, ENV, "v1")


def test_one_worker_wins_a_scheduled_savepoint(plane: ControlPlane) -> None:
    create(plane, "v1", savepointInterval="1 min")
    row = plane.store.pipeline(ENV, "v1")
    assert row is not None
    assert plane.store.claim_schedule(row, None, 1000)
    assert not plane.store.claim_schedule(row, None, 1001)
    assert plane.store.claim_schedule(row, 1000, 2000)


def test_latest_offsets_use_the_specific_offsets_format() -> None:
    assert latest_offsets_format({"orders": {"1": 300, "0": 42}}) == {
        "orders": "partition:0,offset:42;partition:1,offset:300"
    }


def test_a_replay_job_starts_and_ends_where_asked(plane: ControlPlane) -> None:
    create(
        plane,
        "replay",
        startFrom={"offsets": {"orders": "partition:0,offset:5"}},
        bounded={"mode": "specific-offsets", "offsets": "partition:0,offset:9"},
    )
    row = plane.store.pipeline(ENV, "replay")
    assert row is not None
    text = child_job_text(row, "sqlite:///relative/state.db")
    assert "scan.startup.specific-offsets: partition:0,offset:5" in text
    assert "scan.bounded.specific-offsets: partition:0,offset:9" in text
    assert f"name: {ENV}.replay" in text and "sqlite:////" in text


def test_a_rebuild_needs_a_sink_that_drops_tables_and_a_start(plane: ControlPlane) -> None:
    message = refused(
        400, create, plane, "r1", rebuildTables=["app.orders"], startFrom={"timestampMillis": 1}
    )
    assert "cannot drop tables" in message


def test_a_topic_with_its_own_start_keeps_it_and_only_topics_read_by_name_inherit(
    plane: ControlPlane,
) -> None:
    stopped_with_savepoint(plane, "v1")
    [savepoint] = plane.store.savepoints(ENV, "v1")
    offsets = {"orders": {"0": 42}, "payments": {"0": 7}, "refunds": {"0": 3}}
    text = job(
        "orders;payments",
        source_extra="  tables:\n    - topic: payments\n      scan.startup.mode: latest-offset\n",
    )
    inherited = inherited_offsets(load_job_text(text), replace(savepoint, offsets=offsets))
    assert inherited == {("orders", 0): 42}
