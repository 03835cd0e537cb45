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
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, read_all
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


def widened_stream(server: str, database: str) -> tuple[list[tuple[bytes | None, bytes]], list[tuple[bytes | None, bytes]]]:
    """Schema-change records and rows: ``item`` VARCHAR(20) widened to VARCHAR(100), then rows
    of which one is longer than 20 characters."""
    table = dbz.DebeziumTable(
        server,
        database,
        "orders",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("item", dbz.VARCHAR(20))],
    )
    ddl = [table.schema_change(f"CREATE TABLE `orders` (`id` INT PRIMARY KEY, `item` VARCHAR(20))")]
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


def test_hologres_a_string_longer_than_its_column_after_a_skipped_widening(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str,
    postgres_server: PostgresServer, pg_schema: str,
) -> None:
    server = f"srv{uuid.uuid4().hex[:8]}"
    ddl, rows = widened_stream(server, pg_schema)
    topic = f"{server}.{pg_schema}.orders"
    produce(kafka_bootstrap, server, [ddl[0][1]], keys=[ddl[0][0]])
    produce(kafka_bootstrap, topic, [rows[0][1]], keys=[rows[0][0]])
    sink = (
        "type: hologres\n"
        f"endpoint: {postgres_server.host}:{postgres_server.port}\n"
        f"dbname: {postgres_server.database}\n"
        f"username: {postgres_server.user}\n"
        f"password: '{postgres_server.password}'\n"
        "sink.type-normalize-strategy: standard\n"
    )
    job = load_job_text(
        job_yaml(kafka_bootstrap, topic, tmp_path, group_id, sink=sink,
                 source_extra=f"  schema-change.topic: {server}",
                 pipeline_extra="  schema.change.behavior: LENIENT")
    )
    runner = build_runner(job)
    runner.run()
    produce(kafka_bootstrap, server, [ddl[1][1]], keys=[ddl[1][0]])
    produce(kafka_bootstrap, topic, [v for _, v in rows[1:]], keys=[k for k, _ in rows[1:]])
    runner = build_runner(job)
    runner.run()
    with psycopg.connect(postgres_server.conninfo) as conn:
        found = conn.execute(f'SELECT id, item FROM "{pg_schema}"."orders" ORDER BY id').fetchall()
        typ = conn.execute("SELECT character_maximum_length FROM information_schema.columns WHERE table_schema=%s AND column_name='item'", (pg_schema,)).fetchall()
    print(found, typ)
    [dead] = read_all(kafka_bootstrap, f"{group_id}.dlq", expected=1)
    print(dict(dead.headers()))
