"""What the status says is true while a pipeline retries and after it stopped: a sink database that
refuses connections and a broker that is away are shown (detail, ``ferry pipeline get``, the web
page, ``/metrics``: what is retried, the attempt, the next one); the lag after a failure counts the
records a restart reads again; a worker killed without a word is not shown RUNNING. On the
session's real broker."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from ferry.api.app import create_app
from ferry.api.status import health, readiness, registry_for
from ferry.config.loader import load_job_text
from ferry.control.config import TokenConfig
from ferry.local.kafka_broker import KafkaBroker, TopicFactory, produce
from ferry.local.ports import free_ports
from ferry.pipeline.phase import Phase
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import ENV, running_control, wait_for
from tests.integration.helpers import job_yaml, orders_table
from tests.integration.outages import RETRIES, running

pytestmark = pytest.mark.integration

VIEWER = "retries-viewer-token-0123456789"
ATTEMPT = re.compile(r"reading the schema of inventory\.orders: attempt (\d+) of 100 failed \(.*refused")


def get(app: Any, url: str, token: str | None = None) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ferry") as client:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            return await client.get(url, headers=headers)

    return asyncio.run(send())


def test_a_sink_refusing_connections_is_shown_by_pipeline_get_the_page_and_the_metrics(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    table = orders_table("shop")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 9)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    [closed] = free_ports(1)
    job = f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  scan.startup.mode: earliest-offset
sink:
  type: hologres
  endpoint: 127.0.0.1:{closed}
  dbname: ods_db
  username: ferry
  password: not-shown
pipeline:
  checkpoint.interval: 200ms
{RETRIES}"""
    with running_control(tmp_path) as control:
        control.create("orders", job)

        def attempt() -> int | None:
            status = control.plane.get_pipeline(ENV, "orders").document()["status"]
            found = ATTEMPT.search(status.get("detail", ""))
            return int(found[1]) if found and int(found[1]) >= 2 else None

        wait_for(
            attempt,
            120,
            lambda: (
                f"the retry in the pipeline's status: {control.plane.get_pipeline(ENV, 'orders').document()}"
            ),
        )
        status = control.plane.get_pipeline(ENV, "orders").document()["status"]
        assert status["phase"] == "RUNNING"
        retry = status["metrics"]["retry"]
        assert retry["what"] == "reading the schema of inventory.orders" and retry["attempts"] == 100
        assert retry["operation"] == "sink.schema.read"
        assert retry["attempt"] >= 2 and retry["next_attempt_ms"] <= retry["gives_up_ms"]

        tokens = [TokenConfig.model_validate({"name": "viewer", "token": VIEWER, "roles": {"*": "viewer"}})]
        app = create_app(control.plane, tokens)
        page = get(app, "/", VIEWER)
        assert page.status_code == 200
        assert re.search(
            r'<div class="retry">retrying reading the schema of inventory\.orders: attempt \d+ of 100',
            page.text,
        )
        metrics = get(app, "/metrics").text
        # the kind of call retried is the label, not the text naming the table
        labels = 'environment="default",operation="sink.schema.read",pipeline="orders"'
        assert re.search(r'ferry_retrying\{environment="default",pipeline="orders"\} 1\.0', metrics), metrics
        assert not re.search(r"ferry_retr\w*\{[^}]*inventory", metrics), metrics
        assert re.search(rf"ferry_retries_total\{{{re.escape(labels)}\}} [1-9]", metrics), metrics
        assert re.search(rf"ferry_retry_attempt\{{{re.escape(labels)}\}} [2-9]", metrics) or re.search(
            rf"ferry_retry_attempt\{{{re.escape(labels)}\}} \d\d", metrics
        ), metrics
        row = control.plane.store.pipeline(ENV, "orders")
        assert row is not None
        control.plane.store.update_pipeline(row, phase="DELETED")  # its process is killed


def test_a_broker_away_is_shown_until_it_is_back(
    kafka_broker: KafkaBroker, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 6)]
    produce(bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    text = job_yaml(bootstrap, topic, tmp_path, group_id, bounded="unbounded", pipeline_extra=RETRIES)
    runner = build_runner(load_job_text(text), sink=MemorySink())
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        with running(runner) as errors:
            wait_for(
                lambda: runner.metrics.records_read == 5 or bool(errors), 60, lambda: f"reading, {errors}"
            )
            with kafka_broker.stopped():

                def shown() -> bool:
                    retry = runner.status.retry
                    return retry is not None and retry.attempt >= 2 and "Kafka brokers" in retry.what

                wait_for(shown, 60, lambda: f"the outage in the status ({runner.status.detail!r}, {errors})")
                assert runner.status.phase is Phase.RUNNING
                saved = store.get_status(group_id)
                assert saved is not None and "reading from the Kafka brokers" in saved["detail"]
                assert saved["metrics"]["retry"]["attempt"] >= 1
                scraped = generate_latest(registry_for(runner)).decode()
                assert f'ferry_retrying{{pipeline="{group_id}"}} 1.0' in scraped
                assert readiness(runner)[0] == 503 and health(runner)[0] == 200  # waiting, not ready
            wait_for(
                lambda: runner.status.retry is None or bool(errors),
                120,
                lambda: f"the outage to end in the status ({runner.status.detail!r})",
            )
            assert runner.status.detail == "reading" and not errors
            assert readiness(runner)[0] == 200
    finally:
        store.close()


class RefusingSink(MemorySink):
    """Refuses the first rows it is to commit, for good."""

    def flush(self, offsets: Any) -> None:
        if any(self.pending.values()):
            raise SinkTerminalError("the table refuses the rows", sink=self.type)
        super().flush(offsets)


def test_the_lag_after_a_failure_counts_the_records_a_restart_reads_again(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 9)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    sink = RefusingSink()
    text = job_yaml(kafka_bootstrap, topic, tmp_path, group_id, bounded="unbounded")
    runner = build_runner(load_job_text(text), sink=sink)
    with pytest.raises(SinkTerminalError):
        runner.run()
    assert runner.status.phase is Phase.FAILED
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        saved = store.get_status(group_id)
        assert saved is not None and saved["phase"] == Phase.FAILED
        assert saved["metrics"]["lag"] == {topic: {"0": 8}}, saved["metrics"]
        assert saved["metrics"]["records_behind"] == 8
    finally:
        store.close()


def test_ferry_status_of_a_killed_worker_does_not_say_running(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, bounded="unbounded"))
    worker = subprocess.Popen(
        [sys.executable, "-m", "ferry.cli.main", "run", str(job), "--no-worker"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:

        def reading() -> bool:
            status = store.get_status(group_id)
            return status is not None and status["phase"] == Phase.RUNNING

        wait_for(reading, 120, lambda: f"the worker to run ({store.get_status(group_id)})")
    finally:
        store.close()
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    result = subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", "status", str(job)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"pipeline {group_id}: FAILED — its worker "), result.stdout
    assert f":{worker.pid}:" in first and "ended without a final status" in first
    assert "it last said RUNNING: reading" in first
