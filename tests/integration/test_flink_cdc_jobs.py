"""Flink CDC job files as written: free-text pipeline names and a ``ferry run`` that gives up on a
start that cannot succeed (brokers unreachable) with a message and exit code 1 instead of waiting, so that a supervisor restarts it."""

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
    # two worker processes, w-0 and w-1 (each says so in its first line), read the group's partitions
    workers = sorted(
        w for w in ("w-0", "w-1", "w-2") if f"pipeline '{group_id}' (worker {w}): reads" in run.stderr
    )
    assert workers == ["w-0", "w-1"], run.stderr[-3000:]
    offsets = [
        python("-c", COMMITTED_ON, kafka_bootstrap, group_id, topic, str(p), cwd=tmp_path) for p in (0, 1)
    ]
    assert [o.stdout.strip() for o in offsets] == ["3", "3"], [o.stderr for o in offsets]


#: Prints the offset group argv[2] committed on partition argv[4] of topic argv[3].
COMMITTED_ON = COMMITTED.replace(
    "TopicPartition(sys.argv[3], 0)", "TopicPartition(sys.argv[3], int(sys.argv[4]))"
)
