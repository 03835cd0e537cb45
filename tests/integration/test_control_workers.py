"""Two ``ferry worker`` processes run one pipeline: both are members of its consumer group, one is
killed with SIGKILL (its pipeline process dies with it), and the other carries on with every
partition; the table ends with every event exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ferry.control.service import ControlPlane, ControlSettings
from ferry.control.store import runtime_name
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.control_helpers import ENV, events_table, iceberg_rows, job_text, wait_for, wait_rows

pytestmark = pytest.mark.integration

PARTITIONS = 4


def start_worker(tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ferry.cli.main",
                "--log-level",
                "INFO",
                "worker",
                "--state-url",
                f"sqlite:///{tmp_path}/state.db",
                "--data-dir",
                str(tmp_path / "pipelines"),
                "--worker-id",
                name,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def group_members(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        description = admin.describe_consumer_groups([group])[group].result(10)
    except KafkaException:  # the group's coordinator is not there yet
        return 0
    return len(description.members)


def test_two_workers_share_a_pipeline_and_survive_a_sigkill(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(PARTITIONS)
    warehouse = tmp_path / "warehouse"
    table = events_table()
    next_id = 0

    def produce_round(count: int) -> None:
        nonlocal next_id
        for partition in range(PARTITIONS):
            values = [table.insert({"id": next_id + i, "payload": "x"})[1] for i in range(count)]
            produce(kafka_bootstrap, topic, values, partition=partition)
            next_id += count

    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    workers = {name: start_worker(tmp_path, name) for name in ("worker-a", "worker-b")}
    try:
        plane.create_pipeline(
            ENV,
            {"metadata": {"name": "orders"}, "spec": {"job": job_text(kafka_bootstrap, topic, warehouse)}},
        ).document()
        group = runtime_name(ENV, "orders")
        wait_for(
            lambda: group_members(kafka_bootstrap, group) == 2,
            90,
            lambda: f"both workers in the consumer group (members: {group_members(kafka_bootstrap, group)})",
        )
        produce_round(100)
        wait_rows(warehouse, "app.events", next_id, timeout=60)

        os.kill(workers["worker-a"].pid, signal.SIGKILL)
        workers["worker-a"].wait(10)
        for _ in range(5):  # events keep coming while the group rebalances
            produce_round(20)
            time.sleep(0.3)
        wait_for(
            lambda: group_members(kafka_bootstrap, group) == 1,
            60,
            lambda: "the killed worker's pipeline process gone from the group",
        )
        produce_round(50)
        wait_rows(warehouse, "app.events", next_id, timeout=90)
        time.sleep(1.5)  # a row written twice would show up by now
        ids = sorted(r["id"] for r in iceberg_rows(warehouse, "app.events"))
        assert ids == list(range(next_id)), "rows lost or written twice"
        assert plane.get_pipeline(ENV, "orders").status.phase == "RUNNING"

        plane.set_stopped(ENV, "orders", True)
        stopped = wait_for(
            lambda: (
                p
                if (p := plane.get_pipeline(ENV, "orders").document())["status"]["phase"] != "STOPPING"
                else None
            ),
            60,
            lambda: "the stop to finish",
        )
        assert stopped["status"]["phase"] == "STOPPED", stopped["status"]
        savepoint = [r.document() for r in plane.list_savepoints(ENV, "orders", "UPGRADE")][-1]
        offsets = savepoint["status"]["offsets"][topic]
        assert offsets == ";".join(f"partition:{p},offset:{next_id // PARTITIONS}" for p in range(PARTITIONS))
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        plane.close()
