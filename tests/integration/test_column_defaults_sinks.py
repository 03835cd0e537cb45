"""A column added with a default: the rows a sink held before read the default, read back with
the sink's own client (pyiceberg, pypaimon, psycopg, PyMySQL), and rows written after keep their
values, an explicit NULL included."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from ferry.model.events import AddColumn
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BOOLEAN, DATE, DECIMAL, INT, STRING, VARCHAR
from ferry.sinks.base import Sink
from ferry.sinks.base.table_format import TableFormatSink
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.sinks.paimon.sink import PaimonSink
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.sink import StarRocksSink
from tests.integration import test_iceberg_sink as iceberg
from tests.integration import test_paimon_sink as paimon
from tests.integration.helpers import Feed, create, write
from tests.support.mariadb import MariaDbServer
from tests.support.postgres import PostgresServer
from tests.support.stream_load import StreamLoadServer

pytestmark = pytest.mark.integration

T = TableId(None, "shop", "customers")
BASE = Schema.of([Column("id", BIGINT().not_null()), Column("name", STRING())], ["id"])
#: (column, its default's value) added in this order, NOT NULL and nullable
ADDED = (
    (Column("region", VARCHAR(10).not_null(), default="eu"), "eu"),
    (Column("score", INT(), default="7"), 7),
    (Column("credit", DECIMAL(10, 2).not_null(), default="12.50"), Decimal("12.50")),
    (Column("active", BOOLEAN(), default="true"), True),
    (Column("since", DATE(), default="2024-02-29"), dt.date(2024, 2, 29)),
)


def with_columns(schema: Schema, *columns: Column) -> Schema:
    return schema.with_columns([*schema.columns, *columns])


@pytest.fixture(params=["iceberg", "iceberg-copy-on-write", "paimon"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TableFormatSink]:
    sink: TableFormatSink
    if request.param.startswith("iceberg"):
        copy_on_write = {
            "table.properties.write.update.mode": "copy-on-write",
            "table.properties.write.delete.mode": "copy-on-write",
        }
        options = copy_on_write if request.param == "iceberg-copy-on-write" else {}
        sink = IcebergSink(iceberg.make_config(tmp_path / "warehouse", **options), pipeline="p1")
    else:
        sink = PaimonSink(paimon.make_config(tmp_path / "paimon"), pipeline="p1")
    try:
        yield sink
    finally:
        sink.close()


def read(sink: TableFormatSink) -> list[dict[str, Any]]:
    if isinstance(sink, IcebergSink):
        return iceberg.read(sink, T)
    assert isinstance(sink, PaimonSink)
    return paimon.read(sink, T)


def test_rows_written_before_read_the_default_of_each_column_added(lake: TableFormatSink) -> None:
    feed = Feed(T)
    create(lake, BASE, T)
    write(lake, BASE, feed, *(feed.insert({"id": i, "name": f"n{i}"}) for i in range(1, 5)))
    # an update and a delete leave files whose rows the backfill must not bring back
    write(lake, BASE, feed, feed.update({"id": 2, "name": "n2"}, {"id": 2, "name": "two"}))
    write(lake, BASE, feed, feed.delete({"id": 3, "name": "n3"}))
    schema = BASE
    expected = {i: {"id": i, "name": f"n{i}"} for i in (1, 2, 4)}
    expected[2]["name"] = "two"
    for column, value in ADDED:
        lake.apply_schema_change(AddColumn(T, column), None)
        schema = with_columns(schema, column)
        for row in expected.values():
            row[column.name] = value
        # rows after the change: values of their own, an explicit NULL kept NULL in nullable columns
        new = {"id": 10 + len(expected), "name": "new"} | {
            c.name: (None if c.type.nullable else v) for c, v in ADDED if c.name in schema
        }
        write(lake, schema, feed, feed.insert(dict(new)))
        expected[new["id"]] = new
    assert read(lake) == sorted(expected.values(), key=lambda r: r["id"])
    # the key index, built again after the files were written again, still finds every row
    written = lake.table_schema(T)
    assert written is not None
    upd = dict(expected[1], name="one")
    write(lake, written, feed, feed.update(expected[1], upd), feed.delete(expected[4]))
    expected[1] = upd
    del expected[4]
    assert read(lake) == sorted(expected.values(), key=lambda r: r["id"])
    # a change met again (a restart replaying it): the sink has the column, the rows stay as they are
    lake.apply_schema_change(AddColumn(T, ADDED[1][0]), None)
    assert read(lake) == sorted(expected.values(), key=lambda r: r["id"])


# ----------------------------------------------------------------------------------- SQL sinks


@pytest.fixture
def database(mariadb_server: MariaDbServer) -> Iterator[str]:
    name = f"shop_{uuid.uuid4().hex[:8]}"
    mariadb_server.admin_sql(f"CREATE DATABASE `{name}`")
    yield name
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS `{name}`")


def _fill_sql_sink(sink: Sink, table_id: TableId) -> list[dict[str, Any]]:
    """Rows written, then each column of ADDED added; the rows the table should hold, by id."""
    feed = Feed(table_id)
    create(sink, BASE, table_id)
    write(sink, BASE, feed, *(feed.insert({"id": i, "name": f"n{i}"}) for i in range(1, 4)))
    schema = BASE
    expected = {i: {"id": i, "name": f"n{i}"} for i in range(1, 4)}
    for column, value in ADDED:
        sink.apply_schema_change(AddColumn(table_id, column), None)
        schema = with_columns(schema, column)
        for row in expected.values():
            row[column.name] = value
        new = {"id": 10 + len(expected), "name": "new"} | {
            c.name: (None if c.type.nullable else v) for c, v in ADDED if c.name in schema
        }
        write(sink, schema, feed, feed.insert(dict(new)))
        expected[new["id"]] = new
    return sorted(expected.values(), key=lambda r: r["id"])


def test_hologres_rows_written_before_read_the_default(
    postgres_server: PostgresServer, group_id: str
) -> None:
    schema_name = f"shop_{uuid.uuid4().hex[:8]}"
    sink = HologresSink(
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
    try:
        expected = _fill_sql_sink(sink, TableId(None, schema_name, "customers"))
    finally:
        sink.close()
    with psycopg.connect(postgres_server.conninfo) as conn, conn.cursor() as cursor:
        try:
            cursor.execute(f'SELECT * FROM "{schema_name}"."customers" ORDER BY id')
            names = [d.name for d in cursor.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            cursor.execute(f'DROP SCHEMA "{schema_name}" CASCADE')
    assert rows == expected


def test_starrocks_rows_written_before_read_the_default(
    mariadb_server: MariaDbServer, database: str, group_id: str
) -> None:
    with StreamLoadServer(mysql_host=mariadb_server.host, mysql_port=mariadb_server.port) as load:
        sink = StarRocksSink(
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
        try:
            expected = _fill_sql_sink(sink, TableId(None, database, "customers"))
        finally:
            sink.close()
    connection = pymysql.connect(
        host=mariadb_server.host,
        port=mariadb_server.port,
        user=mariadb_server.user,
        password=mariadb_server.password,
        cursorclass=pymysql.cursors.DictCursor,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT * FROM `{database}`.`customers` ORDER BY id")
            rows = list(cursor.fetchall())
    finally:
        connection.close()
    # MariaDB's BOOLEAN is TINYINT(1): PyMySQL reads 1 and 0
    assert rows == [{k: (int(v) if isinstance(v, bool) else v) for k, v in r.items()} for r in expected]


# ----------------------------------------------------------------------------------- Paimon, stopped


class StoppedError(Exception):
    """The process stops here (a kill between two steps of a backfill)."""


def _backfills(sink: PaimonSink) -> int:
    table = sink.load_table(T)
    assert table is not None
    snapshots = table.snapshot_manager()
    snapshot, count = snapshots.get_latest_snapshot(), 0
    while snapshot is not None:
        count += (snapshot.properties or {}).get("ferry.backfilled") == "region"
        snapshot = snapshots.get_snapshot_by_id(snapshot.id - 1) if snapshot.id > 1 else None
    return count


@pytest.mark.parametrize("stop", ["before the backfill", "after the backfill"])
def test_paimon_finishes_a_backfill_a_stop_left(
    stop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = paimon.make_config(tmp_path / "paimon")
    feed = Feed(T)
    column = Column("region", VARCHAR(10).not_null(), default="eu")
    schema = with_columns(BASE, column)
    first = PaimonSink(config, pipeline="p1")
    try:
        create(first, BASE, T)
        write(first, BASE, feed, feed.insert({"id": 1, "name": "a"}), feed.insert({"id": 2, "name": "b"}))
        backfill = PaimonSink._backfill

        def stopping(self: PaimonSink, *args: Any) -> None:
            if stop == "after the backfill":
                backfill(self, *args)
            raise StoppedError(stop)

        monkeypatch.setattr(PaimonSink, "_backfill", stopping)
        with pytest.raises(Exception, match=stop):
            first.apply_schema_change(AddColumn(T, column), None)
        monkeypatch.undo()
    finally:
        first.close()
    # started again: the table has the column (a replay of the change is not applied again), and
    # its next commit finishes the backfill first
    again = PaimonSink(config, pipeline="p1")
    try:
        write(again, schema, feed, feed.insert({"id": 3, "name": "c", "region": "us"}))
        assert read(again) == [
            {"id": 1, "name": "a", "region": "eu"},
            {"id": 2, "name": "b", "region": "eu"},
            {"id": 3, "name": "c", "region": "us"},
        ]
        assert _backfills(again) == 1
        table = again.load_table(T)
        assert table is not None
        assert not [k for k in table.table_schema.options if k.startswith("ferry.backfill.")]
    finally:
        again.close()
