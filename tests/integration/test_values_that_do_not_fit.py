"""A value its sink column cannot hold (after a widening the sink skipped) goes to the dead-letter
topic with the reason, before the write; the other rows of the batch are written and the run goes
on. Each sink is real (PostgreSQL for Hologres, MariaDB behind the Stream Load stand-in for
StarRocks and SelectDB, Iceberg and Paimon tables on disk); rows are read back with its own client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import produce
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, read_all
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


Records = list[tuple[bytes | None, bytes]]


def widened_stream(server: str, database: str) -> tuple[Records, Records]:
    """Schema-change records and rows: ``item`` VARCHAR(20) widened to VARCHAR(100), then rows
    of which one is longer than 20 characters."""
    table = dbz.DebeziumTable(
        server,
        database,
        "orders",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("item", dbz.VARCHAR(20))],
    )
    ddl: Records = [table.schema_change("CREATE TABLE `orders` (`id` INT PRIMARY KEY, `item` VARCHAR(20))")]
    rows = [table.insert({"id": 1, "item": "short"})]
    ddl.append(table.schema_change(table.change_type("item", dbz.VARCHAR(100))))
    rows += [
        table.insert({"id": 2, "item": "still short"}),
        table.insert({"id": 3, "item": "x" * 60}),
        table.insert({"id": 4, "item": "after it"}),
    ]
    return ddl, rows


@pytest.fixture
def pg_schema(postgres_server: PostgresServer) -> Iterator[str]:
    name = f"s_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def hologres_sink(server: PostgresServer) -> str:
    return (
        "type: hologres\n"
        f"endpoint: {server.host}:{server.port}\n"
        f"dbname: {server.database}\n"
        f"username: {server.user}\n"
        f"password: '{server.password}'\n"
        "sink.type-normalize-strategy: standard\n"
    )


def run_widened(bootstrap: str, tmp_path: Path, name: str, sink: str, database: str) -> tuple[Any, str]:
    """Two runs: the table made with ``item`` VARCHAR(20) and a row; then the widening (skipped
    by the sink under LENIENT) and three rows, the second of them longer than 20 characters.
    Returns the second run's runner and the data topic."""
    server = f"srv{uuid.uuid4().hex[:8]}"
    ddl, rows = widened_stream(server, database)
    topic = f"{server}.{database}.orders"
    job = load_job_text(
        job_yaml(
            bootstrap,
            topic,
            tmp_path,
            name,
            sink=sink,
            source_extra=f"  schema-change.topic: {server}",
            pipeline_extra="  schema.change.behavior: LENIENT",
        )
    )
    produce(bootstrap, server, [ddl[0][1]], keys=[ddl[0][0]])
    produce(bootstrap, topic, [rows[0][1]], keys=[rows[0][0]])
    build_runner(job).run()
    produce(bootstrap, server, [ddl[1][1]], keys=[ddl[1][0]])
    produce(bootstrap, topic, [v for _, v in rows[1:]], keys=[k for k, _ in rows[1:]])
    runner = build_runner(job)
    runner.run()
    return runner, topic


def assert_dead_lettered_once(bootstrap: str, name: str, topic: str, table: str, column_type: str) -> None:
    [dead] = read_all(bootstrap, f"{name}.dlq", expected=1)
    headers = dict(dead.headers())
    assert headers["ferry.topic"].decode() == topic
    assert (headers["ferry.partition"], headers["ferry.offset"]) == (b"0", b"2")
    reason = headers["ferry.reason"].decode()
    assert f"sink table {table}" in reason and "column 'item'" in reason, reason
    assert column_type in reason and "60 characters long, longer than 20" in reason, reason


def test_hologres_a_string_longer_than_its_column_after_a_skipped_widening(
    kafka_bootstrap: str,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    pg_schema: str,
) -> None:
    runner, topic = run_widened(
        kafka_bootstrap, tmp_path, group_id, hologres_sink(postgres_server), pg_schema
    )

    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 1
    with psycopg.connect(postgres_server.conninfo) as conn:
        found = conn.execute(f'SELECT id, item FROM "{pg_schema}"."orders" ORDER BY id').fetchall()
        [(length,)] = conn.execute(
            "SELECT character_maximum_length FROM information_schema.columns "
            "WHERE table_schema = %s AND column_name = 'item'",
            (pg_schema,),
        ).fetchall()
    assert length == 20  # the widening was skipped
    assert found == [(1, "short"), (2, "still short"), (4, "after it")]
    assert_dead_lettered_once(kafka_bootstrap, group_id, topic, f"{pg_schema}.orders", "VARCHAR(20)")
