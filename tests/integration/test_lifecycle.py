"""Pipelines run by the control plane on the real broker: stop with a savepoint, carry the offsets
over to a new version, wait for a running reference, retention loss, replays (SPEC §3, §4)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.control.exceptions import ControlError
from ferry.control.models import INITIAL_OFFSET_FROM
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.control_helpers import (
    ENV,
    events_table,
    iceberg_rows,
    job_text,
    running_control,
    wait_for,
    wait_rows,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


def produce_events(bootstrap: str, topic: str, ids: range, partitions: int = 2) -> None:
    table = events_table()
    for partition in range(partitions):
        values = [table.insert({"id": i, "payload": f"p{i}"})[1] for i in ids if i % partitions == partition]
        produce(bootstrap, topic, values, partition=partition)


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.sqlalchemy_url


def test_a_new_version_inherits_the_offsets_of_a_stopped_one(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, state_url: str
) -> None:
    topic = topic_factory(2)
    warehouse = tmp_path / "warehouse"
    n, m = 300, 200
    produce_events(kafka_bootstrap, topic, range(n))
    with running_control(tmp_path, state_url=state_url) as control:
        control.create("orders-v1", job_text(kafka_bootstrap, topic, warehouse))
        control.wait_phase("orders-v1", "RUNNING")
        wait_rows(warehouse, "app.events", n)

        control.plane.set_stopped(ENV, "orders-v1", True)
        stopped = control.wait_phase("orders-v1", "STOPPED", "FAILED")
        assert stopped["status"]["phase"] == "STOPPED", stopped["status"]
        savepoints = [r.document() for r in control.plane.list_savepoints(ENV, "orders-v1")]
        assert [(s["spec"]["source"], s["status"]["state"]) for s in savepoints] == [("UPGRADE", "COMPLETED")]
        assert savepoints[0]["metadata"]["uid"] in stopped["status"]["detail"]

        produce_events(kafka_bootstrap, topic, range(n, n + m))
        # the new version projects differently: the payload is upper-cased, the rest is kept
        v2_job = job_text(
            kafka_bootstrap,
            topic,
            warehouse,
            extra="""transform:
  - source-table: app.events
    projection: id, UPPER(payload) AS payload
""",
        )
        control.create("orders-v2", v2_job, properties={INITIAL_OFFSET_FROM: "orders-v1"})
        running = control.wait_phase("orders-v2", "RUNNING", "FAILED")
        assert running["status"]["phase"] == "RUNNING", running["status"]
        rows = wait_rows(warehouse, "app.events", n + m)
        time.sleep(1.0)  # anything written twice would show up by now
        rows = iceberg_rows(warehouse, "app.events")
        ids = sorted(r["id"] for r in rows)
        assert ids == list(range(n + m)), "rows lost or written twice"
        payloads = {r["id"]: r["payload"] for r in rows}
        assert payloads[0] == "p0" and payloads[n + m - 1] == f"P{n + m - 1}"

        v2 = control.plane.get_pipeline(ENV, "orders-v2").document()
        assert v2["status"]["traits"]["inheritedOffsetTopics"] == [topic]
        v1 = control.plane.get_pipeline(ENV, "orders-v1").document()
        assert v1["status"]["latestOffsets"] == {
            topic: f"partition:0,offset:{n // 2};partition:1,offset:{n // 2}"
        }

        control.plane.set_stopped(ENV, "orders-v2", True)
        control.wait_phase("orders-v2", "STOPPED")


def test_a_new_version_waits_for_a_running_reference_to_stop(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(2)
    warehouse = tmp_path / "warehouse"
    produce_events(kafka_bootstrap, topic, range(100))
    with running_control(tmp_path) as control:
        control.create("v1", job_text(kafka_bootstrap, topic, warehouse))
        control.wait_phase("v1", "RUNNING")
        wait_rows(warehouse, "app.events", 100)

        control.create(
            "v2", job_text(kafka_bootstrap, topic, warehouse), properties={INITIAL_OFFSET_FROM: "v1"}
        )
        time.sleep(1.5)
        pending = control.plane.get_pipeline(ENV, "v2").document()
        assert pending["status"]["phase"] == "PENDING"
        assert "waiting" in pending["status"]["detail"] and "'v1'" in pending["status"]["detail"]
        assert pending["status"]["deadline"] in pending["status"]["detail"]
        # while it waits, only spec.stopped may change
        changed = {**pending["spec"], "upgradeMode": "stateless"}
        with pytest.raises(ControlError) as refused:
            control.plane.update_pipeline(ENV, "v2", {"metadata": {"name": "v2"}, "spec": changed})
        assert refused.value.status == 422 and "only spec.stopped" in refused.value.message

        produce_events(kafka_bootstrap, topic, range(100, 150))
        wait_rows(warehouse, "app.events", 150)
        control.plane.set_stopped(ENV, "v1", True)
        control.wait_phase("v1", "STOPPED")
        control.wait_phase("v2", "RUNNING")
        produce_events(kafka_bootstrap, topic, range(150, 200))
        wait_rows(warehouse, "app.events", 200)
        time.sleep(1.0)
        ids = sorted(r["id"] for r in iceberg_rows(warehouse, "app.events"))
        assert ids == list(range(200))


def test_offsets_lost_to_retention_are_reported_and_reading_starts_at_the_earliest(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse = tmp_path / "warehouse"
    produce_events(kafka_bootstrap, topic, range(50), partitions=1)
    with running_control(tmp_path) as control:
        control.create("v1", job_text(kafka_bootstrap, topic, warehouse))
        wait_rows(warehouse, "app.events", 50)
        control.plane.set_stopped(ENV, "v1", True)
        control.wait_phase("v1", "STOPPED")
        produce_events(kafka_bootstrap, topic, range(50, 100), partitions=1)
        # retention deletes offsets 50..69 before the new version reads them
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        futures = admin.delete_records([TopicPartition(topic, 0, 70)])
        for future in futures.values():
            future.result(30)
        control.create(
            "v2", job_text(kafka_bootstrap, topic, warehouse), properties={INITIAL_OFFSET_FROM: "v1"}
        )
        wait_rows(warehouse, "app.events", 80)
        status = wait_for(
            lambda: (
                s
                if (s := control.plane.get_pipeline(ENV, "v2").document()["status"]).get("lostOffsets")
                else None
            ),
            30,
            lambda: "lostOffsets in the status",
        )
        assert status["lostOffsets"] == [{"topic": topic, "partition": 0, "wanted": 50, "earliest": 70}]
        time.sleep(1.0)
        ids = sorted(r["id"] for r in iceberg_rows(warehouse, "app.events"))
        assert ids == list(range(50)) + list(range(70, 100))


def test_a_pending_pipeline_fails_at_its_deadline(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse = tmp_path / "warehouse"
    with running_control(tmp_path, timeout=timedelta(seconds=3)) as control:
        control.create("v1", job_text(kafka_bootstrap, topic, warehouse))
        control.wait_phase("v1", "RUNNING")
        control.create(
            "v2", job_text(kafka_bootstrap, topic, warehouse), properties={INITIAL_OFFSET_FROM: "v1"}
        )
        assert control.phase("v2") == "PENDING"
        failed = control.wait_phase("v2", "FAILED", timeout=180)
        assert "timed out" in failed["status"]["detail"] and "'v1'" in failed["status"]["detail"]
        assert control.phase("v1") == "RUNNING"


def test_a_replay_from_a_timestamp_rebuilds_a_table(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(2)
    warehouse = tmp_path / "warehouse"
    produce_events(kafka_bootstrap, topic, range(100))
    time.sleep(0.3)
    middle = int(time.time() * 1000)
    time.sleep(0.3)
    produce_events(kafka_bootstrap, topic, range(100, 160))
    with running_control(tmp_path) as control:
        control.create("live", job_text(kafka_bootstrap, topic, warehouse))
        wait_rows(warehouse, "app.events", 160)
        control.plane.set_stopped(ENV, "live", True)
        control.wait_phase("live", "STOPPED")

        control.create(
            "rebuild",
            job_text(kafka_bootstrap, topic, warehouse),
            startFrom={"timestampMillis": middle},
            bounded={"mode": "latest-offset"},
            rebuildTables=["app.events"],
        )
        done = control.wait_phase("rebuild", "COMPLETED", "FAILED", timeout=90)
        assert done["status"]["phase"] == "COMPLETED", done["status"]
        assert "bounded read reached its end" in done["status"]["detail"]
        progress = done["status"]["progress"]
        done_of_total = {k: progress[k] for k in ("recordsDone", "recordsTotal", "percent")}
        assert done_of_total == {"recordsDone": 60, "recordsTotal": 60, "percent": 100.0}, progress
        assert progress.get("etaSeconds") in (None, 0.0), progress
        ids = sorted(r["id"] for r in iceberg_rows(warehouse, "app.events"))
        assert ids == list(range(100, 160))


def test_manual_and_scheduled_savepoints_record_the_offsets_of_a_running_pipeline(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse = tmp_path / "warehouse"
    produce_events(kafka_bootstrap, topic, range(40), partitions=1)
    with running_control(tmp_path) as control:
        control.create("v1", job_text(kafka_bootstrap, topic, warehouse), savepointInterval="2 s")
        wait_rows(warehouse, "app.events", 40)

        def request_manual() -> dict[str, Any] | None:
            try:
                return control.plane.create_savepoint(ENV, "v1").document()
            except ControlError as e:  # a scheduled one is being recorded: 409, try again
                assert e.status == 409, e.message
                return None

        manual = wait_for(request_manual, 30, lambda: "a MANUAL savepoint accepted")

        def completed(source: str) -> dict[str, Any] | None:
            # one requested after the manual one: the rows were read by then
            found = [
                s
                for s in [r.document() for r in control.plane.list_savepoints(ENV, "v1", source)]
                if s["status"]["state"] == "COMPLETED"
                and s["metadata"]["creationTimestamp"] >= manual["metadata"]["creationTimestamp"]
            ]
            return found[-1] if found else None

        done = wait_for(lambda: completed("MANUAL"), 30, lambda: "a completed MANUAL savepoint")
        assert done["metadata"]["uid"] == manual["metadata"]["uid"]
        assert done["status"]["offsets"] == {topic: "partition:0,offset:40"}
        assert done["status"]["sinkCommit"]["sink"] == "iceberg"
        scheduled = wait_for(lambda: completed("SCHEDULE"), 30, lambda: "a completed SCHEDULE savepoint")
        assert scheduled["status"]["offsets"] == {topic: "partition:0,offset:40"}
        assert control.phase("v1") == "RUNNING"


def test_a_pipeline_whose_process_fails_is_failed_with_the_reason(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    produce_events(kafka_bootstrap, topic, range(5), partitions=1)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the warehouse should be")
    with running_control(tmp_path) as control:
        control.create("broken", job_text(kafka_bootstrap, topic, blocked / "warehouse"))
        failed = control.wait_phase("broken", "FAILED")
        detail = failed["status"]["detail"]
        assert "exited with code" in detail and str(tmp_path / "pipelines") not in detail


def test_a_replay_from_a_savepoint_reads_what_came_after_it(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse, rebuilt = tmp_path / "warehouse", tmp_path / "rebuilt"
    produce_events(kafka_bootstrap, topic, range(60), partitions=1)
    with running_control(tmp_path) as control:
        control.create("live", job_text(kafka_bootstrap, topic, warehouse))
        wait_rows(warehouse, "app.events", 60)
        control.plane.set_stopped(ENV, "live", True)
        control.wait_phase("live", "STOPPED")
        [savepoint] = [r.document() for r in control.plane.list_savepoints(ENV, "live")]
        produce_events(kafka_bootstrap, topic, range(60, 100), partitions=1)

        control.create(
            "after-savepoint",
            job_text(kafka_bootstrap, topic, rebuilt),
            startFrom={"savepoint": savepoint["metadata"]["uid"]},
            bounded={"mode": "latest-offset"},
        )
        done = control.wait_phase("after-savepoint", "COMPLETED", "FAILED", timeout=90)
        assert done["status"]["phase"] == "COMPLETED", done["status"]
        assert done["status"]["progress"]["recordsDone"] == 40
        assert sorted(r["id"] for r in iceberg_rows(rebuilt, "app.events")) == list(range(60, 100))
