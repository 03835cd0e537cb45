"""Flink CDC job files as written: free-text pipeline names and a ``ferry run`` that gives up on a
start that cannot succeed (brokers unreachable, a worker that does not start) with a message and
exit code 1 instead of waiting, so that a supervisor restarts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ferry.config.names import kafka_name
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration


def ferry(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return python("-m", "ferry.cli.main", *args, cwd=cwd, timeout=timeout)


def python(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_pipeline_named_with_spaces_runs_in_a_group_named_after_it(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    table = orders_table(f"s{group_id[-8:]}")
    topic = topic_factory()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 4)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    name = f"MySQL to Kafka Pipeline {group_id}"
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic, tmp_path, f"'{name}'"))

    run = ferry("run", str(job), "--startup-timeout", "60", cwd=tmp_path)

    assert run.returncode == 0, run.stderr[-3000:]
    status = ferry("status", str(job), "--output", "json", cwd=tmp_path)
    [pipeline] = json.loads(status.stdout)
    assert pipeline["pipeline"] == name
    assert pipeline["metrics"]["rows_written"] == {"inventory.orders": 3}
    # the consumer group is the name made legal for Kafka, and it committed the offsets it read
    group = kafka_name(name)
    assert group.startswith("MySQL-to-Kafka-Pipeline-g-")
    offsets = python("-c", COMMITTED, kafka_bootstrap, group, topic, cwd=tmp_path)
    assert offsets.stdout.strip() == "3", offsets.stderr


#: Prints the offset group argv[2] committed on partition 0 of topic argv[3].
COMMITTED = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
    [tp] = consumer.committed([TopicPartition(sys.argv[3], 0)], timeout=10)
    print(tp.offset)
    consumer.close()
""")


def test_run_exits_when_the_brokers_cannot_be_reached(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml("127.0.0.1:9", "orders", tmp_path, "unreachable"))

    # a run that hung would outlast the subprocess's bound (which no slow machine comes near)
    run = ferry("run", str(job), "--startup-timeout", "2", cwd=tmp_path, timeout=300)

    # nothing listens on port 9: every broker refuses the connection, so the run ends at once
    # with one line naming the key to change, before the start-up timeout
    assert run.returncode == 1, run.stderr[-3000:]
    assert "error: cannot reach the Kafka brokers 127.0.0.1:9: every one refused the connection" in run.stderr
    assert "correct source.properties.bootstrap.servers" in run.stderr


#: Runs a worker of the job argv[1] whose faust app is named after the raw pipeline name (as ferry
#: once did), so that faust fails to create its topics; argv[2] is the startup timeout.
RAW_NAMES = textwrap.dedent("""
    import sys
    import ferry.worker
    from ferry.config import load_job
    from ferry.config.job import PipelineConfig
    PipelineConfig.kafka_name = property(lambda self: self.name)
    worker = ferry.worker.FerryWorker(load_job(sys.argv[1]), data_dir="faust", startup_timeout_s=float(sys.argv[2]))
    code = worker.run()
    print(f"{code} {type(worker.error).__name__}: {worker.error}")
""")


def test_a_worker_whose_app_fails_to_start_stops_with_the_reason(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic_factory(), tmp_path, f"'raw name {group_id}'"))

    # a worker that hung would outlast the subprocess's bound
    run = python("-c", RAW_NAMES, str(job), "60", cwd=tmp_path, timeout=300)

    assert run.stdout.splitlines()[-1].startswith("1 StartupError: the worker of pipeline"), run.stderr[
        -3000:
    ]
    assert "InvalidTopicError" in run.stdout


def test_a_worker_that_has_not_started_in_time_stops(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic_factory(), tmp_path, group_id))
    script = RAW_NAMES.replace("PipelineConfig.kafka_name = property(lambda self: self.name)", "")

    run = python("-c", script, str(job), "0.05", cwd=tmp_path, timeout=300)

    assert run.stdout.splitlines()[-1].startswith("1 StartupError: the worker of pipeline"), run.stderr[
        -3000:
    ]
    assert "did not start within 0.05 s" in run.stdout


def test_parallelism_starts_that_many_workers_in_the_pipeline_group(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    table = orders_table(f"s{group_id[-8:]}")
    topic = topic_factory(partitions=2)
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 7)]
    for partition in (0, 1):
        mine = records[partition::2]
        produce(kafka_bootstrap, topic, [v for _, v in mine], keys=[k for k, _ in mine], partition=partition)
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, pipeline_extra="  parallelism: 2"))

    run = ferry("run", str(job), "--worker-id", "w", cwd=tmp_path)

    assert run.returncode == 0, run.stderr[-3000:]
    # two worker processes, w-0 and w-1 (each with its faust app's folder), read the group's partitions
    assert sorted(p.name for p in (tmp_path / "var/faust" / group_id).iterdir()) == ["w-0", "w-1"]
    offsets = [
        python("-c", COMMITTED_ON, kafka_bootstrap, group_id, topic, str(p), cwd=tmp_path) for p in (0, 1)
    ]
    assert [o.stdout.strip() for o in offsets] == ["3", "3"], [o.stderr for o in offsets]


#: Prints the offset group argv[2] committed on partition argv[4] of topic argv[3].
COMMITTED_ON = COMMITTED.replace(
    "TopicPartition(sys.argv[3], 0)", "TopicPartition(sys.argv[3], int(sys.argv[4]))"
)
