"""``ferry run`` as a worker: the schema-change topic's DDL names a rename the records show; a run
creates no topic or group of its own on the source's cluster and logs its own lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, create_topic, delete_topic, produce
from tests.integration.helpers import orders_table

pytestmark = pytest.mark.integration


def ferry(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_worker_reads_ddl_hints_and_stops_at_the_end_of_a_bounded_read(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    server = f"s{group_id[-8:]}"
    table = orders_table(server)
    create_topic(kafka_bootstrap, table.topic)
    create_topic(kafka_bootstrap, server)
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 4)]
    schema_changes = [table.schema_change(table.rename_column("qty", "quantity"))]
    records += [table.insert({"id": i, "item": f"i{i}", "quantity": i}) for i in range(4, 6)]
    produce(kafka_bootstrap, server, [v for _, v in schema_changes], keys=[k for k, _ in schema_changes])
    produce(kafka_bootstrap, table.topic, [v for _, v in records], keys=[k for k, _ in records])
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {table.topic}
  schema-change.topic: {server}
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: memory
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
""")
    run = ferry("run", str(job), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    status = ferry("status", str(job), "--output", "json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    [pipeline] = json.loads(status.stdout)
    assert pipeline["phase"] == "STOPPED"
    assert pipeline["metrics"]["rows_written"] == {"inventory.orders": 5}
    assert pipeline["metrics"]["columns_dropped"] == {}
    changes = [h["change"] for h in pipeline["schema_history"]]
    assert changes[0].startswith("create.table inventory.orders")
    assert changes[1:] == ["rename.column inventory.orders qty -> quantity"]
    text = ferry("status", str(job), cwd=tmp_path).stdout
    assert f"{table.topic}[0]  5 / 0" in text
    assert "rename.column inventory.orders qty -> quantity  → apply" in text


def test_validate_names_the_misspelt_key_and_its_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "source:\n  type: kafka\n  properties.bootstrap.servers: x:1\n  topic: t\n"
        "  scan.startup.mod: earliest-offset\nsink:\n  type: memory\n"
    )
    result = ferry("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2
    assert "job.yaml:5:3: source.scan.startup.mod" in result.stderr
    assert "scan.startup.mode" in result.stderr


def test_debezium_generator_round_trips_through_the_decoder() -> None:
    from ferry.connectors.formats import decoder_for
    from ferry.connectors.record import Record
    from ferry.model.events import DataChange

    table = dbz.DebeziumTable("s", "db", "t", [dbz.ConnectColumn("id", dbz.INT32, optional=False)])
    key, value = table.insert({"id": 7})
    events = decoder_for("debezium-json").decode([Record("s.db.t", 0, 0, key=key, value=value)])
    assert isinstance(events[-1], DataChange) and events[-1].after == {"id": 7}


def _cluster(bootstrap: str) -> tuple[set[str], set[str]]:
    """The topics (but the broker's own, ``__consumer_offsets``, which it creates at the first
    group's commit) and the consumer groups of the broker at ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")}
    groups = {g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(timeout=60).valid}
    return topics, groups


#: A log line of ferry's text format: time, level, logger, message.
LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)$"
)


def test_a_run_creates_only_the_topics_its_job_names_and_logs_its_own_lines(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    table = orders_table(f"s{group_id[-8:]}")
    topic, ddl_topic = topic_factory(2), topic_factory(1)
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 7)]
    produce(
        kafka_bootstrap, topic, [v for _, v in records[:3]], keys=[k for k, _ in records[:3]], partition=0
    )
    produce(
        kafka_bootstrap, topic, [v for _, v in records[3:]], keys=[k for k, _ in records[3:]], partition=1
    )
    produce(kafka_bootstrap, topic, [b"{not json"], keys=[b"k"], partition=1)  # a dead letter
    sink_topic = f"out-{group_id}"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  schema-change.topic: {ddl_topic}
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {sink_topic}
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
""")
    topics_before, groups_before = _cluster(kafka_bootstrap)
    try:
        run = ferry("run", str(job), cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        topics_after, groups_after = _cluster(kafka_bootstrap)
        # the Kafka sink's topic and the dead-letter topic, nothing else; no group but the pipeline's
        assert topics_after - topics_before == {sink_topic, f"{group_id}.dlq"}
        assert groups_after - groups_before == {group_id}
    finally:
        for created in (sink_topic, f"{group_id}.dlq"):
            delete_topic(kafka_bootstrap, created)
    lines = [LINE.match(line) for line in run.stderr.splitlines() if line.strip()]
    assert all(lines), run.stderr[-3000:]
    # ferry's own lines only: what it reads, where it writes, where it starts, ..., what it did
    assert {m["logger"].split(".")[0] for m in lines if m} == {"ferry"}, run.stderr[-3000:]
    # librdkafka's own lines ("FACILITY [rdkafka#consumer-1] ...") are DEBUG unless warnings
    assert not [
        m for m in lines if m and re.match(r"[A-Z]+ \[rdkafka#", m["message"]) and m["level"] == "INFO"
    ]
    first, second, third = (m["message"] for m in lines[:3] if m)
    assert first.startswith(f"pipeline '{group_id}': reads debezium-json change events from topic {topic}")
    assert second.startswith(f"pipeline '{group_id}': writes to the kafka sink")
    assert "no checkpoint yet" in third
    last = lines[-1]
    assert last is not None and last["logger"] == "ferry.worker", run.stderr[-3000:]
    assert "stopped after" in last["message"]
    assert "read 7 records, wrote 6 rows (inventory.orders 6), 1 bad record" in last["message"]
    assert f"last checkpoint at {topic}[0]@3, [1]@4" in last["message"]
