"""Partial rows (an update whose TOASTed values Debezium did not get: UNAVAILABLE) into the StarRocks
and SelectDB sinks: loaded as partial updates (Stream Load's ``partial_update`` / ``partial_columns``,
or the INSERT fallback's upsert of the columns it has), so the unavailable columns keep the table's
values; a partial row of a key the table does not hold is refused (the dead-letter destination's).
Against a real MariaDB and the local Stream Load endpoint (:mod:`tests.support.stream_load`, which,
as StarRocks and Doris do, writes NULL in the columns a load that is not partial does not name)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from ferry.model.events import CreateTable
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT, STRING
from ferry.model.unavailable import UNAVAILABLE, PartialRow, partial_changes
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.sink import SelectDbSink
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.sink import MySqlProtocolSink, StarRocksSink
from tests.integration.helpers import Feed
from tests.support.mariadb import MariaDbServer
from tests.support.stream_load import StreamLoadServer

pytestmark = pytest.mark.integration

DOCS = Schema.of([Column("id", BIGINT().not_null()), Column("n", INT()), Column("body", STRING())], ["id"])


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@pytest.fixture
def database(mariadb_server: MariaDbServer) -> Iterator[str]:
    name = f"d_{uuid.uuid4().hex[:12]}"
    mariadb_server.admin_sql(f"CREATE DATABASE {q(name)}")
    yield name
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS {q(name)}")


@pytest.fixture
def load_server(mariadb_server: MariaDbServer) -> Iterator[StreamLoadServer]:
    with StreamLoadServer(mysql_host=mariadb_server.host, mysql_port=mariadb_server.port) as server:
        yield server


def make_sink(
    server: MariaDbServer, database: str, load: StreamLoadServer | None, sink_type: str
) -> MySqlProtocolSink:
    config: dict[str, Any] = {
        "type": sink_type,
        "jdbc-url": f"jdbc:mysql://{server.host}:{server.port}/{database}",
        "username": server.user,
        "password": server.password,
        "sink.label-prefix": "t1",
        "schema.evolution.timeout": "5s",
    }
    if load is not None:
        config["load-url" if sink_type == "starrocks" else "fenodes"] = load.url
    if sink_type == "starrocks":
        return StarRocksSink(
            StarRocksSinkConfig.model_validate(config), pipeline="p1", vendor_only_statements=False
        )
    return SelectDbSink(
        SelectDbSinkConfig.model_validate(config), pipeline="p1", vendor_only_statements=False
    )


def read(server: MariaDbServer, database: str) -> list[dict[str, Any]]:
    connection = pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=database,
        cursorclass=pymysql.cursors.DictCursor,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, n, body FROM docs ORDER BY id")
            return list(cursor.fetchall())
    finally:
        connection.close()


@pytest.mark.parametrize("sink_type", ["starrocks", "selectdb"])
@pytest.mark.parametrize("through_stream_load", [True, False], ids=["stream-load", "insert"])
def test_partial_rows_keep_the_tables_values(
    mariadb_server: MariaDbServer,
    database: str,
    load_server: StreamLoadServer,
    sink_type: str,
    through_stream_load: bool,
) -> None:
    sink = make_sink(mariadb_server, database, load_server if through_stream_load else None, sink_type)
    try:
        t = TableId(None, database, "docs")
        feed = Feed(t)
        sink.apply_schema_change(CreateTable(t, DOCS), None)
        first = [
            feed.insert({"id": 1, "n": 0, "body": "a" * 3000}),
            feed.insert({"id": 2, "n": 0, "body": "b"}),
        ]
        sink.write(t, DOCS, first)
        sink.flush(feed.offsets())

        changes = [
            feed.update({"id": 1}, PartialRow({"id": 1, "n": 5, "body": UNAVAILABLE})),
            feed.update({"id": 9}, PartialRow({"id": 9, "n": 1, "body": UNAVAILABLE})),  # not in the table
            feed.update({"id": 2}, {"id": 2, "n": 1, "body": "c"}),
            feed.update(
                {"id": 2}, PartialRow({"id": 2, "n": 2, "body": UNAVAILABLE})
            ),  # its version just before
        ]
        rejected = sink.complete_rows(t, DOCS, changes, partial_changes(changes))
        assert [(i, "no row of its key" in reason) for i, reason in rejected] == [(1, True)]
        sink.write(t, DOCS, [c for i, c in enumerate(changes) if i != 1])
        sink.flush(feed.offsets())

        assert read(mariadb_server, database) == [
            {"id": 1, "n": 5, "body": "a" * 3000},
            {"id": 2, "n": 2, "body": "c"},
        ]
        if through_stream_load:
            assert [status for _, status in load_server.requests] == ["Success"] * 3
    finally:
        sink.close()
