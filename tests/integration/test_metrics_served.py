"""Every pipeline a worker runs, on ``ferry serve``'s one ``/metrics``, labelled with its environment
and name; a bounded replay's progress moving on the API, the CLI's rendering and the metrics; the
Grafana dashboard's queries against what is exposed; ``promtool check metrics`` on the exposition.
All on the real broker, with pipelines run as ``ferry run`` processes by the supervisor."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ferry.api.app import create_app
from ferry.cli.output import render_pipeline
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.control_helpers import (
    ENV,
    Control,
    events_table,
    job_text,
    running_control,
    wait_for,
    wait_rows,
)

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "ferry-pipelines.json"
#: The records the pipeline reads, then those its replay reads (more than a batch per partition).
RECORDS, REPLAYED = 20_000, 60_000


def produce_events(bootstrap: str, topic: str, ids: range, added_at: int | None = None) -> None:
    """Debezium's events of rows ``ids``, even ids to partition 0, odd ones to 1; with ``added_at``,
    a column ``note`` added before that row (an ALTER TABLE: the rows after it carry it)."""
    table = events_table()
    values: list[list[bytes]] = [[], []]
    for i in ids:
        if i == added_at:
            table.add_column("note", dbz.STRING)
        row = (
            {"id": i, "payload": f"p{i}"}
            if added_at is None or i < added_at
            else {"id": i, "payload": f"p{i}", "note": f"n{i}"}
        )
        values[i % 2].append(table.insert(row)[1])
    for partition, batch in enumerate(values):
        produce(bootstrap, topic, batch, partition=partition, timeout=120)


@contextmanager
def catalog_locked(warehouse: Path) -> Iterator[None]:
    """The Iceberg SQL catalog's database held by another writer (SQLite's RESERVED lock: readers
    read, a writer's commit fails with "database is locked" until it is let go)."""
    connection = sqlite3.connect(warehouse / "catalog.db", isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
    finally:
        connection.rollback()
        connection.close()


def scrape(app: Any) -> str:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ferry") as client:
            return await client.get("/metrics")

    response = asyncio.run(send())
    assert response.status_code == 200, response.text
    return response.text


def samples(text: str, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name`` with these labels: their other labels → value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and labels.items() <= s.labels.items():
                out[tuple(sorted((k, v) for k, v in s.labels.items() if k not in labels))] = s.value
    return out


def check_metrics(text: str) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:  # parsed strictly instead
        list(text_string_to_metric_families(text))
        return ""
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    return (done.stdout + done.stderr).strip() if done.returncode else ""


def progress_of(control: Control, name: str) -> dict[str, Any]:
    return control.plane.get_pipeline(ENV, name).document()


def test_a_workers_pipelines_and_a_replays_progress_on_one_metrics_endpoint(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(2)
    warehouse = tmp_path / "warehouse"
    produce_events(kafka_bootstrap, topic, range(RECORDS))
    with running_control(tmp_path) as control:
        app = create_app(control.plane, [])
        live = {"environment": ENV, "pipeline": "orders"}
        control.create("orders", job_text(kafka_bootstrap, topic, warehouse))

        def caught_up() -> str | None:
            text = scrape(app)
            read = samples(text, "ferry_records_read_total", **live)
            lag = samples(text, "ferry_consumer_lag_records", **live)
            partitions = {(("partition", "0"), ("topic", topic)), (("partition", "1"), ("topic", topic))}
            done = read == {(): RECORDS} and set(lag) == partitions and not any(lag.values())
            return text if done else None

        text = wait_for(caught_up, 300, lambda: f"orders caught up on /metrics:\n{scrape(app)}")
        assert samples(text, "ferry_rows_written_total", **live) == {(("table", "app.events"),): RECORDS}
        assert samples(text, "ferry_pipeline_phase", **live, phase="RUNNING") == {(): 1.0}
        changes = samples(text, "ferry_schema_changes_total", **live)  # the table created
        assert {k: v for k, v in changes.items() if v} == {(("outcome", "apply"),): 1.0}
        assert set(changes) == {(("outcome", o),) for o in ("apply", "ignored", "skip", "fail")}
        assert not any(samples(text, "ferry_dead_letters_total", **live).values())
        assert samples(text, "ferry_checkpoint_duration_seconds_count", **live)[()] >= 1
        assert check_metrics(text) == ""
        control.plane.set_stopped(ENV, "orders", True)
        control.wait_phase("orders", "STOPPED")

        [savepoint] = [r.document() for r in control.plane.list_savepoints(ENV, "orders")]

        # what came after: a column added three quarters of the way, the rows after it with it
        later = range(RECORDS, RECORDS + REPLAYED)
        produce_events(kafka_bootstrap, topic, later, added_at=RECORDS + REPLAYED * 3 // 4)
        replay = {"environment": ENV, "pipeline": "orders-replay"}
        seen: list[int] = []

        def reading() -> tuple[dict[str, Any], str] | None:
            resource = progress_of(control, "orders-replay")
            progress = resource["status"].get("progress")
            assert resource["status"]["phase"] != "COMPLETED", f"completed before it was seen reading: {seen}"
            if progress is None or progress["state"] != "READING":
                return None
            seen.append(progress["recordsDone"])
            if not 0 < progress["recordsDone"] < progress["recordsTotal"] or progress["etaSeconds"] is None:
                return None
            return resource, scrape(app)

        # the catalog held by another writer: the barrier before the added column waits for it,
        # after the replay read at least a batch and before it read its end
        with catalog_locked(warehouse):
            control.create(
                "orders-replay",
                job_text(kafka_bootstrap, topic, warehouse),
                startFrom={"savepoint": savepoint["metadata"]["uid"]},
                bounded={"mode": "latest-offset"},
            )
            resource, text = wait_for(reading, 300, lambda: f"the replay reading: {seen}")
        progress = resource["status"]["progress"]
        assert progress["recordsTotal"] == REPLAYED and progress["percent"] < 100
        assert [p["recordsTotal"] for p in progress["partitions"]] == [REPLAYED // 2, REPLAYED // 2]
        assert sum(p["recordsDone"] for p in progress["partitions"]) == progress["recordsDone"]
        # the metrics: as far as the status row, a status update at most behind the API
        to_read = samples(text, "ferry_replay_records_to_read", **replay)
        read = samples(text, "ferry_replay_records_read", **replay)
        assert sorted(to_read.values()) == [REPLAYED // 2, REPLAYED // 2]
        assert 0 < sum(read.values()) < REPLAYED
        assert samples(text, "ferry_replay_eta_seconds", **replay)[()] > 0
        rendered = render_pipeline(resource)
        assert re.search(
            rf"progress: \d+ of {REPLAYED} records \(\d+\.\d%\), [\d.,]+ records/s, ETA \d", rendered
        )
        assert f"    {topic}[0]: " in rendered and f"    {topic}[1]: " in rendered

        def moved() -> int | None:
            done = progress_of(control, "orders-replay")["status"]["progress"]["recordsDone"]
            return done if done > progress["recordsDone"] else None

        wait_for(moved, 300, lambda: f"the replay's progress moving past {progress['recordsDone']}")
        done = control.wait_phase("orders-replay", "COMPLETED", "FAILED", timeout=300)
        final = done["status"]["progress"]
        assert (final["state"], final["recordsDone"], final["recordsTotal"]) == (
            "COMPLETED",
            REPLAYED,
            REPLAYED,
        )
        assert (final["recordsRead"], final["rowsWritten"], final["etaSeconds"]) == (REPLAYED, REPLAYED, 0.0)
        assert f"COMPLETED: {REPLAYED} of {REPLAYED} records (100.0%)" in render_pipeline(done)
        # the oracle: the table, read with pyiceberg, holds each produced id once, and the column
        # added holds what the rows after it carried
        rows = wait_rows(warehouse, "app.events", RECORDS + REPLAYED)
        assert sorted(r["id"] for r in rows) == list(range(RECORDS + REPLAYED))
        added = {r["id"]: r["note"] for r in rows if r["note"] is not None}
        assert added == {i: f"n{i}" for i in range(RECORDS + REPLAYED * 3 // 4, RECORDS + REPLAYED)}

        text = scrape(app)
        assert samples(text, "ferry_pipeline_phase", **replay, phase="COMPLETED") == {(): 1.0}
        # the locked catalog: the sink's flush retried, counted by its kind
        assert samples(text, "ferry_retries_total", **replay, operation="sink.flush")[()] >= 1
        assert samples(text, "ferry_replay_records_read", **replay) == to_read
        assert check_metrics(text) == ""
        exposed = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        for query in dashboard_queries():
            named = set(re.findall(r"\b(ferry_[a-z_]+)\b", query))
            assert named and named <= exposed, (query, named - exposed)


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the Grafana dashboard (its panels' targets and its variables)."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", ())]
    queries += [v["query"]["query"] for v in board["templating"]["list"] if v.get("type") == "query"]
    return queries
