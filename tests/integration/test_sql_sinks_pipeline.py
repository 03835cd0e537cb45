"""One Debezium stream with schema changes into Hologres (on PostgreSQL) and StarRocks (on MariaDB,
rows through the Stream Load endpoint): both final tables equal the source's final rows."""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.sinks.base import Sink
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.sink import StarRocksSink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml
from tests.support.mariadb import MariaDbServer
from tests.support.postgres import PostgresServer
from tests.support.stream_load import StreamLoadServer

pytestmark = pytest.mark.integration


def source_stream(database: str) -> tuple[list[tuple[bytes | None, bytes]], dict[int, dict[str, Any]]]:
    """The records, and the source table's final rows by id."""
    table = dbz.DebeziumTable(
        "shop",
        database,
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )
    final: dict[int, dict[str, Any]] = {}
    records = []

    def insert(row: dict[str, Any]) -> None:
        records.append(table.insert(row))
        final[row["id"]] = row

    def update(row: dict[str, Any]) -> None:
        records.append(table.update(final[row["id"]], row))
        final[row["id"]] = row

    for i in range(1, 21):
        insert({"id": i, "item": f"item-{i}", "qty": i})
    update({"id": 3, "item": "item-3", "qty": 30})
    records.append(table.delete(final.pop(4)))
    table.add_column("price", dbz.DECIMAL(10, 2))  # supported by both: applied
    for row in final.values():
        row["price"] = None
    for i in range(21, 26):
        insert({"id": i, "item": f"item-{i}", "qty": i, "price": decimal.Decimal(i) / 4})
    update({"id": 5, "item": "item-5b", "qty": 5, "price": decimal.Decimal("9.99")})
    table.change_type("qty", dbz.INT64)  # neither sink alters a type: skipped, values still fit
    insert({"id": 26, "item": "item-26", "qty": 26, "price": None})
    records.append(table.delete(final.pop(21)))
    return records, final


@pytest.fixture
def database(mariadb_server: MariaDbServer) -> Iterator[str]:
    name = f"shop_{uuid.uuid4().hex[:8]}"
    mariadb_server.admin_sql(f"CREATE DATABASE `{name}`")
    yield name
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS `{name}`")


def run(sink: Sink, bootstrap: str, topic: str, tmp_path: Path, name: str) -> None:
    job = load_job_text(job_yaml(bootstrap, topic, tmp_path, name))
    runner = build_runner(job, sink=sink)
    runner.run()
    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 0


def normalised(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {
        r["id"]: {k: (decimal.Decimal(v) if k == "price" and v is not None else v) for k, v in r.items()}
        for r in rows
    }


def test_the_same_stream_into_hologres_and_starrocks_equals_the_source(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    mariadb_server: MariaDbServer,
    database: str,
) -> None:
    topic = topic_factory(1)
    records, final = source_stream(database)
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])

    hologres = HologresSink(
        HologresSinkConfig.model_validate(
            {
                "type": "hologres",
                "endpoint": f"{postgres_server.host}:{postgres_server.port}",
                "dbname": postgres_server.database,
                "username": postgres_server.user,
                "password": postgres_server.password,
            }
        ),
        pipeline=group_id,
        hologres_only_statements=False,
    )
    run(hologres, kafka_bootstrap, topic, tmp_path / "h", f"{group_id}-h")
    with psycopg.connect(postgres_server.conninfo) as conn, conn.cursor() as cursor:
        cursor.execute(f'SELECT * FROM "{database}"."orders"')
        names = [d.name for d in cursor.description or ()]
        in_hologres = normalised([dict(zip(names, row, strict=True)) for row in cursor.fetchall()])
        cursor.execute(f'DROP SCHEMA "{database}" CASCADE')

    with StreamLoadServer(mysql_host=mariadb_server.host, mysql_port=mariadb_server.port) as load:
        starrocks = StarRocksSink(
            StarRocksSinkConfig.model_validate(
                {
                    "type": "starrocks",
                    "jdbc-url": f"jdbc:mysql://{mariadb_server.host}:{mariadb_server.port}/{database}",
                    "load-url": load.url,
                    "username": mariadb_server.user,
                    "password": mariadb_server.password,
                }
            ),
            pipeline=group_id,
            vendor_only_statements=False,
        )
        run(starrocks, kafka_bootstrap, topic, tmp_path / "s", f"{group_id}-s")
    connection = pymysql.connect(
        host=mariadb_server.host,
        port=mariadb_server.port,
        user=mariadb_server.user,
        password=mariadb_server.password,
        cursorclass=pymysql.cursors.DictCursor,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT * FROM `{database}`.`orders`")
            in_starrocks = normalised(list(cursor.fetchall()))
    finally:
        connection.close()

    assert in_hologres == final
    assert in_starrocks == final
    assert list(next(iter(in_hologres.values()))) == ["id", "item", "qty", "price"]
