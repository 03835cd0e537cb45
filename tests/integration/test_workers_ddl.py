"""Two workers of one pipeline each read the whole schema-change topic (assigned, in no group), so
a rename seen in both workers' partitions is recognised by both without waiting, and applied once."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.helpers import iceberg_rows, start_run
from tests.integration.test_workers import Pipeline, wait_for

pytestmark = pytest.mark.integration

ROWS = 50


def test_each_worker_reads_every_ddl_hint(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic, ddl_topic = topic_factory(2), topic_factory(1)
    table = dbz.DebeziumTable(
        "s",
        "app",
        "events",
        [dbz.ConnectColumn("id", dbz.INT64, optional=False), dbz.ConnectColumn("payload", dbz.STRING)],
        key=(),
    )

    def send(start: int, column: str) -> None:
        for partition in (0, 1):
            ids = range(start + partition * 10_000, start + partition * 10_000 + ROWS)
            produce(
                kafka_bootstrap,
                topic,
                [table.insert({"id": i, column: f"v{i}"})[1] for i in ids],
                partition=partition,
            )

    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  schema-change.topic: {ddl_topic}
  scan.startup.mode: earliest-offset
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse}
pipeline:
  name: {group_id}
  schema.change.behavior: EVOLVE
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 100ms
  schema.operator.rpc-timeout: 30s
""")
    pipeline = Pipeline(f"sqlite:///{tmp_path}/state.db", group_id)
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [
        start_run(job, tmp_path, log, "--worker-id", worker_id)
        for log, worker_id in zip(logs, ("w1", "w2"), strict=True)
    ]
    try:
        wait_for(
            "both workers to have a partition each",
            lambda: sorted(len(p) for p in pipeline.assigned().values() if p) == [1, 1],
            workers,
        )
        send(0, "payload")
        wait_for("the rows before the rename", lambda: sum(pipeline.offsets().values()) == 2 * ROWS, workers)
        key, value = table.schema_change(table.rename_column("payload", "body"))
        produce(kafka_bootstrap, ddl_topic, [value], keys=[key])
        send(ROWS, "body")
        wait_for(
            "both workers to see the rename", lambda: len(pipeline.history("rename.column")) == 2, workers, 25
        )
        wait_for("the rows after the rename", lambda: sum(pipeline.offsets().values()) == 4 * ROWS, workers)
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        assert [worker.wait(timeout=300) for worker in workers] == [0, 0]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)
    for log in logs:
        assert "not read to its end" not in log.read_text(), log.read_text()[-2000:]
    assert pipeline.history("rename.column") == [
        ("apply", "supported"),
        ("skip", "already applied at the sink"),
    ]
    rows = iceberg_rows(warehouse, "app.events")
    assert len(rows) == 4 * ROWS
    assert all(r["body"] == f"v{r['id']}" for r in rows)
    pipeline.state.close()
