"""A sink's database stopped and started again: waited for during a run and at start-up, losing and
repeating nothing; a refused login fails at once. Hologres is the real PostgreSQL server here."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.phase import Phase
from ferry.pipeline.runner import PipelineRunner
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import job_yaml
from tests.integration.outages import RETRIES, hold_outage, running
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    """The source database's name: the sink writes into a schema of that name, dropped afterwards."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def orders(database: str) -> dbz.DebeziumTable:
    columns = [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("item", dbz.STRING)]
    return dbz.DebeziumTable("shop", database, "orders", columns)


def hologres(server: PostgresServer, pipeline: str, password: str | None = None) -> HologresSink:
    config = {
        "type": "hologres",
        "endpoint": f"{server.host}:{server.port}",
        "dbname": server.database,
        "username": server.user,
        "password": password or server.password,
    }
    return HologresSink(
        HologresSinkConfig.model_validate(config), pipeline=pipeline, hologres_only_statements=False
    )


def runner_for(
    sink: HologresSink, bootstrap: str, topic: str, tmp_path: Path, name: str, bounded: str
) -> PipelineRunner:
    text = job_yaml(bootstrap, topic, tmp_path, name, bounded=bounded, pipeline_extra=RETRIES)
    return build_runner(load_job_text(text), sink=sink)


def rows_in(server: PostgresServer, database: str) -> list[dict[str, Any]]:
    with psycopg.connect(server.conninfo) as conn, conn.cursor() as cursor:
        cursor.execute(f'SELECT * FROM "{database}"."orders" ORDER BY id')
        names = [d.name for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def waiting_for_the_sink(runner: PipelineRunner) -> bool:
    """The pipeline has tried the sink at least twice and waits to try again."""
    return re.search(r": attempt ([2-9]|\d\d+) of \d+ failed \(Sink", runner.status.detail) is not None


def test_a_sink_database_stopped_during_a_run_is_waited_for(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    database: str,
) -> None:
    topic = topic_factory(1)
    table = orders(database)
    first = [table.insert({"id": i, "item": f"i{i}"}) for i in range(1, 11)]
    produce(kafka_bootstrap, topic, [v for _, v in first], keys=[k for k, _ in first])
    sink = hologres(postgres_server, group_id)
    runner = runner_for(sink, kafka_bootstrap, topic, tmp_path, group_id, "unbounded")
    store = StateStore(f"sqlite:///{tmp_path}/state.db")

    def checkpointed() -> dict[tuple[str, int], int] | None:
        checkpoint = store.latest_checkpoint(group_id)
        return None if checkpoint is None else checkpoint.offsets

    # rows, then a column added (the sink's schema read and changed), then rows, during the outage
    second = [table.insert({"id": i, "item": f"i{i}"}) for i in range(11, 14)]
    table.add_column("note", dbz.STRING)
    second += [table.insert({"id": i, "item": f"i{i}", "note": f"n{i}"}) for i in range(14, 21)]
    try:
        with running(runner) as errors:
            wait_for(
                lambda: checkpointed() == {(topic, 0): 10}, 30, lambda: f"the first checkpoint, {errors}"
            )
            with postgres_server.stopped():
                began = time.monotonic()
                produce(kafka_bootstrap, topic, [v for _, v in second], keys=[k for k, _ in second])
                wait_for(
                    lambda: waiting_for_the_sink(runner),
                    30,
                    lambda: f"the pipeline to wait for the sink (detail {runner.status.detail!r}, {errors})",
                )
                hold_outage(runner, errors, began)
            wait_for(lambda: checkpointed() == {(topic, 0): 20}, 60, lambda: f"the last checkpoint, {errors}")
            assert not errors
        assert not errors and runner.status.phase is Phase.STOPPED, (runner.status.detail, errors)
    finally:
        store.close()
    expected = [{"id": i, "item": f"i{i}", "note": f"n{i}" if i >= 14 else None} for i in range(1, 21)]
    assert rows_in(postgres_server, database) == expected


def test_a_sink_database_down_at_start_up_is_waited_for(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    database: str,
) -> None:
    topic = topic_factory(1)
    table = orders(database)
    records = [table.insert({"id": i, "item": f"i{i}"}) for i in range(1, 11)]
    produce(kafka_bootstrap, topic, [v for _, v in records[:5]], keys=[k for k, _ in records[:5]])
    first = runner_for(
        hologres(postgres_server, group_id), kafka_bootstrap, topic, tmp_path, group_id, "latest-offset"
    )
    first.run()
    produce(kafka_bootstrap, topic, [v for _, v in records[5:]], keys=[k for k, _ in records[5:]])
    # started again from its checkpoint (the table's schema known, the sink's read first) while the
    # database is down
    runner = runner_for(
        hologres(postgres_server, group_id), kafka_bootstrap, topic, tmp_path, group_id, "latest-offset"
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run, name="pipeline")
    try:
        with postgres_server.stopped():
            thread.start()
            wait_for(
                lambda: waiting_for_the_sink(runner) or errors,
                30,
                lambda: f"the pipeline to wait for the sink (detail {runner.status.detail!r}, {errors})",
            )
    finally:
        thread.join(60)  # a bounded read: it ends once the sink is back (or the policy gives up)
    assert not thread.is_alive() and not errors, errors
    assert runner.status.phase is Phase.STOPPED
    assert rows_in(postgres_server, database) == [{"id": i, "item": f"i{i}"} for i in range(1, 11)]


def test_a_refused_login_fails_at_once_and_names_no_password(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(1)
    key, value = orders(database).insert({"id": 1, "item": "i1"})
    produce(kafka_bootstrap, topic, [value], keys=[key])
    wrong = "wrong-password-not-to-be-seen"
    runner = runner_for(
        hologres(postgres_server, group_id, wrong),
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        "latest-offset",
    )
    with pytest.raises(SinkTerminalError, match="authentication failed") as refused:
        runner.run()
    assert wrong not in str(refused.value) and wrong not in runner.status.detail
    assert runner.status.phase is Phase.FAILED
    assert not [r for r in caplog.records if "attempt" in r.getMessage()], "not retried"
    assert wrong not in caplog.text
