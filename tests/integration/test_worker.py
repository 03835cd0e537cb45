"""``ferry run`` as a worker: the schema-change topic's DDL names a rename the records show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, create_topic, produce
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
    from ferry.pipeline.events import DataChange

    table = dbz.DebeziumTable("s", "db", "t", [dbz.ConnectColumn("id", dbz.INT32, optional=False)])
    key, value = table.insert({"id": 7})
    events = decoder_for("debezium-json").decode([Record("s.db.t", 0, 0, key=key, value=value)])
    assert isinstance(events[-1], DataChange) and events[-1].after == {"id": 7}
