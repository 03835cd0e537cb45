"""``ferry run`` on payload-only PostgreSQL change events (the JSON converter with
``schemas.enable=false``) that nothing types: the run stops at the first record with exit code 2
and one line saying what to change; with ``debezium-json.infer-types`` it runs."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from ferry.local.kafka_broker import create_topic, delete_topic, produce

pytestmark = pytest.mark.integration


def payload_only_insert(server: str, id: int) -> tuple[bytes, bytes]:
    """A PostgreSQL connector's insert as Debezium 3.6 writes it without schemas (key and value)."""
    source = {
        "version": "3.6.1.Final",
        "connector": "postgresql",
        "name": server,
        "ts_ms": 1765000000000,
        "snapshot": "false",
        "db": "shop",
        "sequence": '[null,"26794376"]',
        "ts_us": 1765000000000000,
        "ts_ns": 1765000000000000000,
        "schema": "inventory",
        "table": "accounts",
        "txId": 750,
        "lsn": 26794376,
        "xmin": None,
    }
    # NUMERIC(12,2) 20607631.94 as base64 of its unscaled value, DATE as days, TIMESTAMP as micros
    after = {"id": id, "balance": "etTAOg==", "opened": 20429, "seen": 1765000000123456}
    value = {
        "before": None,
        "after": after,
        "source": source,
        "transaction": None,
        "op": "c",
        "ts_ms": 1765000000100,
        "ts_us": 1765000000100000,
        "ts_ns": 1765000000100000000,
    }
    return orjson.dumps({"id": id}), orjson.dumps(value)


def job(bootstrap: str, topic: str, tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "job.yaml"
    lines = "".join(f"  {line}\n" for line in extra)
    path.write_text(
        "source:\n"
        "  type: kafka\n"
        f"  properties.bootstrap.servers: {bootstrap}\n"
        f"  topic: {topic}\n"
        "  value.format: debezium-json\n"
        "  scan.startup.mode: earliest-offset\n"
        "  scan.bounded.mode: latest-offset\n"
        f"{lines}"
        "sink:\n"
        "  type: memory\n"
        "pipeline:\n"
        f"  name: {topic}\n"
        f"  state.url: sqlite:///{tmp_path}/state.db\n",
        encoding="utf-8",
    )
    return path


def ferry_run(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", "run", str(path)],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_payload_only_postgres_records_stop_the_run_with_what_to_change(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = f"pg{uuid.uuid4().hex[:10]}"
    topic = f"{server}.inventory.accounts"
    create_topic(kafka_bootstrap, topic)
    try:
        records = [payload_only_insert(server, i) for i in (1, 2)]
        produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
        result = ferry_run(job(kafka_bootstrap, topic, tmp_path), tmp_path)
        assert result.returncode == 2, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr[-3000:]
        (error,) = errors
        assert f"topic {topic}, partition 0, offset 0" in error
        assert "value.converter.schemas.enable=true" in error and "debezium-json.infer-types: true" in error
        # the user accepts types inferred from the values: the same records are read
        (tmp_path / "accepted").mkdir()
        accepted = job(kafka_bootstrap, topic, tmp_path / "accepted", "debezium-json.infer-types: true")
        result = ferry_run(accepted, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        delete_topic(kafka_bootstrap, topic)
