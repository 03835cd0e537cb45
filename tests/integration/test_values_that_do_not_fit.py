"""A value its sink column cannot hold goes to the dead-letter topic with the reason, before the
write; a row the database refuses anyway (a constraint ferry knows nothing of) is found by writing
the batch again row by row and dead-lettered with the database's message. Either way the other
rows of the batch are written and the run goes on.

Each sink is real: PostgreSQL for Hologres, MariaDB behind the Stream Load stand-in for StarRocks
and SelectDB. Rows are read back with the database's own client (psycopg, pymysql), dead letters
with a Kafka consumer.

The stream: ``orders(id, item VARCHAR(20), qty)`` made with one row in a first run; then, in a
second run, ``item`` widened to VARCHAR(100) (a change StarRocks and Hologres skip under LENIENT)
and four rows: one fits, one has 60 characters, one has a negative quantity, one fits.
"""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import produce
from ferry.pipeline.runner import PipelineRunner
from ferry.sinks.base import Sink
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.sink import SelectDbSink
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.sink import StarRocksSink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, read_all
from tests.support.mariadb import MariaDbServer
from tests.support.postgres import PostgresServer
from tests.support.stream_load import StreamLoadServer

pytestmark = pytest.mark.integration

Records = list[tuple[bytes | None, bytes]]
#: The rows of the second run by offset in the data topic (the first run's row is offset 0).
LONG_ITEM_OFFSET, NEGATIVE_QTY_OFFSET = 2, 3
LONG_ITEM = "x" * 60


def widened_stream(server: str, database: str) -> tuple[Records, Records]:
    """The schema-change records and the rows (see the module documentation)."""
    table = dbz.DebeziumTable(
        server,
        database,
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.VARCHAR(20)),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )
    ddl: Records = [
        table.schema_change("CREATE TABLE `orders` (`id` INT PRIMARY KEY, `item` VARCHAR(20), `qty` INT)")
    ]
    rows = [table.insert({"id": 1, "item": "short", "qty": 1})]
    ddl.append(table.schema_change(table.change_type("item", dbz.VARCHAR(100))))
    rows += [
        table.insert({"id": 2, "item": "still short", "qty": 2}),
        table.insert({"id": 3, "item": LONG_ITEM, "qty": 3}),
        table.insert({"id": 4, "item": "negative", "qty": -4}),
        table.insert({"id": 5, "item": "after them", "qty": 5}),
    ]
    return ddl, rows


def run_twice(
    bootstrap: str,
    tmp_path: Path,
    name: str,
    database: str,
    make_sink: Callable[[], Sink],
    between: Callable[[], None] = lambda: None,
) -> tuple[PipelineRunner, str]:
    """The first run makes the table; ``between`` runs; the second run reads the rest. Returns
    the second run's runner and the data topic."""
    server = f"srv{uuid.uuid4().hex[:8]}"
    ddl, rows = widened_stream(server, database)
    topic = f"{server}.{database}.orders"
    job = load_job_text(
        job_yaml(
            bootstrap,
            topic,
            tmp_path,
            name,
            source_extra=f"  schema-change.topic: {server}",
            pipeline_extra="  schema.change.behavior: LENIENT",
        )
    )
    produce(bootstrap, server, [ddl[0][1]], keys=[ddl[0][0]])
    produce(bootstrap, topic, [rows[0][1]], keys=[rows[0][0]])
    sink = make_sink()
    try:
        build_runner(job, sink=sink).run()
    finally:
        sink.close()
    between()
    produce(bootstrap, server, [ddl[1][1]], keys=[ddl[1][0]])
    produce(bootstrap, topic, [v for _, v in rows[1:]], keys=[k for k, _ in rows[1:]])
    sink = make_sink()
    try:
        runner = build_runner(job, sink=sink)
        runner.run()
    finally:
        sink.close()
    return runner, topic


def dead_letters(bootstrap: str, name: str, topic: str, expected: int) -> dict[int, str]:
    """The reasons of the dead letters by source offset; each names the data topic and partition."""
    letters = read_all(bootstrap, f"{name}.dlq", expected=expected)
    out: dict[int, str] = {}
    for letter in letters:
        headers = dict(letter.headers())
        assert headers["ferry.topic"].decode() == topic and headers["ferry.partition"] == b"0"
        offset = int(headers["ferry.offset"])
        assert offset not in out, f"offset {offset} dead-lettered twice"
        out[offset] = headers["ferry.reason"].decode()
    assert len(letters) == expected
    return out


def assert_long_item_reason(reason: str, table: str) -> None:
    assert f"sink table {table}" in reason and "column 'item'" in reason, reason
    assert "VARCHAR(20)" in reason and "60 characters long, longer than 20" in reason, reason


# ------------------------------------------------------------------------------------------ Hologres


@pytest.fixture
def pg_schema(postgres_server: PostgresServer) -> Iterator[str]:
    name = f"s_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def hologres(server: PostgresServer, name: str) -> Callable[[], Sink]:
    config = HologresSinkConfig.model_validate(
        {
            "type": "hologres",
            "endpoint": f"{server.host}:{server.port}",
            "dbname": server.database,
            "username": server.user,
            "password": server.password,
            "sink.type-normalize-strategy": "standard",
        }
    )
    return lambda: HologresSink(config, pipeline=name, hologres_only_statements=False)


def pg_rows(server: PostgresServer, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(server.conninfo) as conn:
        return conn.execute(f'SELECT id, item, qty FROM "{schema}"."orders" ORDER BY id').fetchall()


def test_hologres_a_string_longer_than_its_column_after_a_skipped_widening(
    kafka_bootstrap: str, tmp_path: Path, group_id: str, postgres_server: PostgresServer, pg_schema: str
) -> None:
    runner, topic = run_twice(
        kafka_bootstrap, tmp_path, group_id, pg_schema, hologres(postgres_server, group_id)
    )

    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 1
    with psycopg.connect(postgres_server.conninfo) as conn:
        [(length,)] = conn.execute(
            "SELECT character_maximum_length FROM information_schema.columns "
            "WHERE table_schema = %s AND column_name = 'item'",
            (pg_schema,),
        ).fetchall()
    assert length == 20  # the widening was skipped
    assert pg_rows(postgres_server, pg_schema) == [
        (1, "short", 1),
        (2, "still short", 2),
        (4, "negative", -4),
        (5, "after them", 5),
    ]
    reasons = dead_letters(kafka_bootstrap, group_id, topic, expected=1)
    assert_long_item_reason(reasons[LONG_ITEM_OFFSET], f"{pg_schema}.orders")


def test_hologres_a_row_the_database_refuses_is_found_and_set_aside(
    kafka_bootstrap: str, tmp_path: Path, group_id: str, postgres_server: PostgresServer, pg_schema: str
) -> None:
    def add_check() -> None:  # the table's owner adds a rule ferry cannot know of
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{pg_schema}"."orders" ADD CONSTRAINT qty_positive CHECK (qty > 0)')

    runner, topic = run_twice(
        kafka_bootstrap, tmp_path, group_id, pg_schema, hologres(postgres_server, group_id), add_check
    )

    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 2
    assert pg_rows(postgres_server, pg_schema) == [
        (1, "short", 1),
        (2, "still short", 2),
        (5, "after them", 5),
    ]
    reasons = dead_letters(kafka_bootstrap, group_id, topic, expected=2)
    assert_long_item_reason(reasons[LONG_ITEM_OFFSET], f"{pg_schema}.orders")
    refused = reasons[NEGATIVE_QTY_OFFSET]
    assert f"table {pg_schema}.orders" in refused and "qty_positive" in refused, refused


# ------------------------------------------------------------------------------- StarRocks, SelectDB


@pytest.fixture
def database(mariadb_server: MariaDbServer) -> Iterator[str]:
    name = f"shop_{uuid.uuid4().hex[:8]}"
    mariadb_server.admin_sql(f"CREATE DATABASE `{name}`")
    yield name
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def load_server(mariadb_server: MariaDbServer) -> Iterator[StreamLoadServer]:
    with StreamLoadServer(mysql_host=mariadb_server.host, mysql_port=mariadb_server.port) as server:
        yield server


def mysql_protocol_sink(
    sink_type: str, server: MariaDbServer, database: str, load: StreamLoadServer, name: str
) -> Callable[[], Sink]:
    options = {
        "type": sink_type,
        "jdbc-url": f"jdbc:mysql://{server.host}:{server.port}/{database}",
        "username": server.user,
        "password": server.password,
        "load-url" if sink_type == "starrocks" else "fenodes": load.url,
    }
    if sink_type == "starrocks":
        starrocks = StarRocksSinkConfig.model_validate(options)
        return lambda: StarRocksSink(starrocks, pipeline=name, vendor_only_statements=False)
    selectdb = SelectDbSinkConfig.model_validate(options)
    return lambda: SelectDbSink(selectdb, pipeline=name, vendor_only_statements=False)


def mariadb_rows(server: MariaDbServer, database: str) -> list[tuple[Any, ...]]:
    connection = pymysql.connect(
        host=server.host, port=server.port, user=server.user, password=server.password
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, item, qty FROM `{database}`.`orders` ORDER BY id")
            return [tuple(row) for row in cursor.fetchall()]
    finally:
        connection.close()


def test_starrocks_a_string_longer_than_its_column_after_a_skipped_widening(
    kafka_bootstrap: str,
    tmp_path: Path,
    group_id: str,
    mariadb_server: MariaDbServer,
    database: str,
    load_server: StreamLoadServer,
) -> None:
    make = mysql_protocol_sink("starrocks", mariadb_server, database, load_server, group_id)
    runner, topic = run_twice(kafka_bootstrap, tmp_path, group_id, database, make)

    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 1
    assert mariadb_rows(mariadb_server, database) == [
        (1, "short", 1),
        (2, "still short", 2),
        (4, "negative", -4),
        (5, "after them", 5),
    ]
    reasons = dead_letters(kafka_bootstrap, group_id, topic, expected=1)
    assert_long_item_reason(reasons[LONG_ITEM_OFFSET], f"{database}.orders")


@pytest.mark.parametrize("sink_type", ["starrocks", "selectdb"])
def test_a_row_the_stream_load_filters_is_found_and_set_aside(
    kafka_bootstrap: str,
    tmp_path: Path,
    group_id: str,
    mariadb_server: MariaDbServer,
    database: str,
    load_server: StreamLoadServer,
    sink_type: str,
) -> None:
    def add_check() -> None:  # the table's owner adds a rule ferry cannot know of
        mariadb_server.admin_sql(
            f"ALTER TABLE `{database}`.`orders` ADD CONSTRAINT qty_positive CHECK (qty > 0)"
        )

    make = mysql_protocol_sink(sink_type, mariadb_server, database, load_server, group_id)
    runner, topic = run_twice(kafka_bootstrap, tmp_path, group_id, database, make, add_check)

    found = mariadb_rows(mariadb_server, database)
    expected_rows = [(1, "short", 1), (2, "still short", 2), (5, "after them", 5)]
    if sink_type == "selectdb":  # SelectDB widens the column (it can): the long item is written
        expected_rows.insert(2, (3, LONG_ITEM, 3))
    assert runner.status.phase == "STOPPED"
    assert found == expected_rows
    reasons = dead_letters(kafka_bootstrap, group_id, topic, expected=4 - len(expected_rows) + 1)
    assert runner.metrics.bad_records == len(reasons)
    if sink_type == "starrocks":
        assert_long_item_reason(reasons[LONG_ITEM_OFFSET], f"{database}.orders")
    refused = reasons[NEGATIVE_QTY_OFFSET]
    assert f"{sink_type} sink, table {database}.orders" in refused and "filtered" in refused, refused


# ------------------------------------------------------------------------------------ Iceberg, Paimon


def iceberg_rows(warehouse: Path, name: str) -> list[dict[str, Any]]:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    return sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def paimon_rows(warehouse: Path, name: str) -> list[dict[str, Any]]:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table(name)
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


TABLE_ROWS = {"iceberg": iceberg_rows, "paimon": paimon_rows}


@pytest.mark.parametrize("sink_type", sorted(TABLE_ROWS))
def test_a_decimal_with_more_digits_than_its_column_is_set_aside(
    kafka_bootstrap: str, tmp_path: Path, group_id: str, sink_type: str
) -> None:
    """A producer whose records break their own declared schema: a DECIMAL(5,2) value of eight
    digits, which the table's decimal(5, 2) cannot hold, among rows that fit, in one batch."""
    server = f"srv{uuid.uuid4().hex[:8]}"
    table = dbz.DebeziumTable(
        server,
        "shop",
        "prices",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("price", dbz.DECIMAL(5, 2))],
    )
    records = [
        table.insert({"id": 1, "price": decimal.Decimal("1.50")}),
        table.insert({"id": 2, "price": decimal.Decimal("123456.78")}),
        table.insert({"id": 3, "price": decimal.Decimal("3.25")}),
        table.update(
            {"id": 1, "price": decimal.Decimal("1.50")}, {"id": 1, "price": decimal.Decimal("999999.99")}
        ),
    ]
    produce(kafka_bootstrap, table.topic, [v for _, v in records], keys=[k for k, _ in records])
    warehouse = tmp_path / "warehouse"
    job = load_job_text(
        job_yaml(
            kafka_bootstrap,
            table.topic,
            tmp_path,
            group_id,
            sink=f"type: {sink_type}\ncatalog.properties.warehouse: {warehouse}",
        )
    )
    runner = build_runner(job)
    runner.run()

    assert runner.status.phase == "STOPPED" and runner.metrics.bad_records == 2
    # id 1's last state in the batch (the update) was set aside: the table has no row for it, as
    # before the batch (its insert was folded into that update)
    assert TABLE_ROWS[sink_type](warehouse, "shop.prices") == [{"id": 3, "price": decimal.Decimal("3.25")}]
    reasons = dead_letters(kafka_bootstrap, group_id, table.topic, expected=2)
    assert sorted(reasons) == [1, 3]
    for offset, value in ((1, "123456.78"), (3, "999999.99")):
        assert f"{sink_type} sink, table shop.prices" in reasons[offset], reasons[offset]
        assert f"column price: value Decimal('{value}') does not fit decimal128(5, 2)" in reasons[offset]
