"""``ferry --log-format json run``: every line the process writes is one JSON object, the worker's
own and librdkafka's among them, none of them carrying the job's secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.helpers import orders_table

pytestmark = pytest.mark.integration

PASSWORD = "pw-of-the-sasl-user-4711"


def test_every_line_of_a_worker_run_is_json_in_ferrys_format(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 6)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    job = tmp_path / "job.yaml"
    job.write_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  # librdkafka's own debug lines of the consumer group: they reach the log through Python's logging
  properties.debug: cgrp
  topic: {topic}
  value.format: debezium-json
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: memory
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
""")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli.main",
            "--log-format",
            "json",
            "--log-level",
            "DEBUG",
            "run",
            str(job),
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in (run.stderr + run.stdout).splitlines() if line.strip()]
    assert lines
    records_logged = []
    for line in lines:
        try:
            records_logged.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"a line not in ferry's JSON format: {line!r}") from None
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records_logged)
    loggers = {r["logger"] for r in records_logged}
    # the worker's own lines: what it reads, where it writes, what it did
    worker = [r["message"] for r in records_logged if r["logger"] == "ferry.worker"]
    assert any(": reads debezium-json change events" in m for m in worker), worker
    assert any("stopped after" in m and "read 5 records, wrote 5 rows" in m for m in worker), worker
    # librdkafka's lines (facility, client name, text) arrive through the consumer's logger
    kafka = [r for r in records_logged if r["logger"] == "ferry.connectors.kafka.source"]
    assert any("CGRP" in r["message"] or "cgrp" in r["message"] for r in kafka), sorted(loggers)
