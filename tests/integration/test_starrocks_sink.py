"""The StarRocks and SelectDB sinks against a real MariaDB server and the local Stream Load endpoint.

StarRocks and Doris do not run here: DDL and metadata go over the MySQL protocol to MariaDB
(without the vendor-only clauses), and rows go through Stream Load to
:class:`~tests.support.stream_load.StreamLoadServer`, which implements the documented protocol and
writes into the same MariaDB. Rows are read back with PyMySQL, apart from the sink.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pymysql
import pytest

from ferry.model.events import (
    FIRST,
    AddColumn,
    CreateTable,
    DataChange,
    DropColumn,
    DropTable,
    RenameColumn,
    TruncateTable,
    before,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BOOLEAN, BYTES, DECIMAL, INT, STRING, TIMESTAMP_LTZ, VARCHAR
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.registry import sink_class
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.sink import SelectDbSink
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.sink import MySqlProtocolSink, StarRocksSink
from ferry.sinks.starrocks.stream_load import stream_load
from tests.integration.helpers import Feed
from tests.support.mariadb import MariaDbServer
from tests.support.stream_load import StreamLoadFrontend, StreamLoadServer
from tests.support.waiting import Deadline, wait_for

pytestmark = pytest.mark.integration


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@pytest.fixture
def database(mariadb_server: MariaDbServer) -> Iterator[str]:
    """A database of its own for each test, dropped afterwards."""
    name = f"d_{uuid.uuid4().hex[:12]}"
    mariadb_server.admin_sql(f"CREATE DATABASE {q(name)}")
    yield name
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS {q(name)}")


@pytest.fixture
def load_server(mariadb_server: MariaDbServer) -> Iterator[StreamLoadServer]:
    with StreamLoadServer(mysql_host=mariadb_server.host, mysql_port=mariadb_server.port) as server:
        yield server


def make_config(
    server: MariaDbServer,
    database: str,
    load: StreamLoadServer | None,
    sink_type: str = "starrocks",
    **options: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "type": sink_type,
        "jdbc-url": f"jdbc:mysql://{server.host}:{server.port}/{database}",
        "username": server.user,
        "password": server.password,
        "sink.label-prefix": "t1",
        "schema.evolution.timeout": "5s",
        **options,
    }
    if load is not None:
        config["load-url" if sink_type == "starrocks" else "fenodes"] = load.url
    return config


def starrocks(
    server: MariaDbServer, database: str, load: StreamLoadServer | None, **options: Any
) -> StarRocksSink:
    config = StarRocksSinkConfig.model_validate(make_config(server, database, load, **options))
    return StarRocksSink(config, pipeline="p1", vendor_only_statements=False)


@pytest.fixture
def sink(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer
) -> Iterator[StarRocksSink]:
    s = starrocks(mariadb_server, database, load_server)
    yield s
    s.close()


ORDERS = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("customer", VARCHAR(40)),
        Column("qty", INT()),
        Column("price", DECIMAL(10, 2)),
    ],
    ["id"],
)


def order(i: int, customer: str = "ada", qty: int = 1, price: str = "9.99") -> dict[str, Any]:
    return {"id": i, "customer": customer, "qty": qty, "price": Decimal(price)}


def read(server: MariaDbServer, database: str, table: str, order_by: str = "id") -> list[dict[str, Any]]:
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
            cursor.execute(f"SELECT * FROM {q(table)} ORDER BY {q(order_by)}")
            return list(cursor.fetchall())
    finally:
        connection.close()


def write(sink: MySqlProtocolSink, schema: Schema, feed: Feed, *changes: DataChange) -> None:
    sink.write(feed.table_id, schema, list(changes))
    sink.flush(feed.offsets())


# ----------------------------------------------------------------------------------- create


def test_registered_and_create_table_reads_back(sink: StarRocksSink, database: str) -> None:
    assert sink_class("starrocks") is StarRocksSink
    assert sink_class("selectdb") is SelectDbSink
    t = TableId(None, database, "orders")
    assert sink.table_schema(t) is None
    sink.apply_schema_change(CreateTable(t, ORDERS), None)
    assert sink.table_schema(t) == ORDERS
    sink.apply_schema_change(CreateTable(t, ORDERS), None)  # a repeated create is a no-op
    other = Schema.of([Column("id", STRING().not_null()), Column("total", INT())], ["id"])
    with pytest.raises(SinkTerminalError, match="no column total"):
        sink.apply_schema_change(CreateTable(t, other), None)


def test_types_are_stored_as_sink_type_says(
    mariadb_server: MariaDbServer, sink: StarRocksSink, database: str
) -> None:
    t = TableId(None, database, "typed")
    schema = Schema.of(
        [
            Column("code", STRING().not_null()),
            Column("ok", BOOLEAN()),
            Column("at", TIMESTAMP_LTZ(3)),
            Column("blob", BYTES()),
        ],
        ["code"],
    )
    sink.apply_schema_change(CreateTable(t, schema), None)
    stored = sink.table_schema(t)
    assert stored is not None
    assert [str(c.type) for c in stored] == [str(c.type) for c in sink.sink_schema(schema)]
    at = datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC)
    write(sink, schema, Feed(t), Feed(t).insert({"code": "a", "ok": True, "at": at, "blob": b"\x00\xff"}))
    assert read(mariadb_server, database, "typed", "code") == [
        {"code": "a", "ok": 1, "at": datetime(2024, 5, 1, 10, 0, 0, 123000), "blob": "AP8="}
    ]


# ----------------------------------------------------------------------------------- rows


@pytest.mark.parametrize("through_stream_load", [True, False])
def test_insert_update_delete_read_back(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer, through_stream_load: bool
) -> None:
    sink = starrocks(mariadb_server, database, load_server if through_stream_load else None)
    t = TableId(None, database, "orders")
    feed = Feed(t)
    sink.apply_schema_change(CreateTable(t, ORDERS), None)
    write(sink, ORDERS, feed, feed.insert(order(1)), feed.insert(order(2)), feed.insert(order(3)))
    write(
        sink,
        ORDERS,
        feed,
        feed.update(order(1), order(1, customer="bob", qty=5)),
        feed.delete(order(2)),
        feed.insert(order(4, price="1.50")),
        feed.update(order(4, price="1.50"), order(4, price="2.50")),
    )
    assert read(mariadb_server, database, "orders") == [
        {"id": 1, "customer": "bob", "qty": 5, "price": Decimal("9.99")},
        {"id": 3, "customer": "ada", "qty": 1, "price": Decimal("9.99")},
        {"id": 4, "customer": "ada", "qty": 1, "price": Decimal("2.50")},
    ]
    if through_stream_load:
        assert [status for _, status in load_server.requests] == ["Success", "Success"]
        assert sink.last_loads[t]["NumberLoadedRows"] == 3
    else:
        assert load_server.requests == []
    sink.close()


def test_add_and_drop_column_with_rows_before_and_after(
    mariadb_server: MariaDbServer, sink: StarRocksSink, database: str
) -> None:
    t = TableId(None, database, "orders")
    feed = Feed(t)
    sink.apply_schema_change(CreateTable(t, ORDERS), None)
    write(sink, ORDERS, feed, feed.insert(order(1)))
    sink.apply_schema_change(AddColumn(t, Column("note", VARCHAR(20)), FIRST), None)
    sink.apply_schema_change(AddColumn(t, Column("flag", INT()), before("qty")), None)
    assert not sink.schema_change_pending(t)
    widened = sink.table_schema(t)
    assert widened is not None and list(widened.names) == ["note", "id", "customer", "flag", "qty", "price"]
    write(sink, widened, feed, feed.insert({**order(2), "note": "hi", "flag": 7}))
    assert read(mariadb_server, database, "orders") == [
        {"note": None, "id": 1, "customer": "ada", "flag": None, "qty": 1, "price": Decimal("9.99")},
        {"note": "hi", "id": 2, "customer": "ada", "flag": 7, "qty": 1, "price": Decimal("9.99")},
    ]
    sink.apply_schema_change(DropColumn(t, "qty"), None)
    sink.apply_schema_change(DropColumn(t, "qty"), None)  # a replayed drop is a no-op
    narrowed = sink.table_schema(t)
    assert narrowed is not None and "qty" not in narrowed.names
    write(
        sink, narrowed, feed, feed.insert({"id": 3, "customer": "cy", "note": None, "flag": 1, "price": None})
    )
    assert [r["id"] for r in read(mariadb_server, database, "orders")] == [1, 2, 3]
    assert "qty" not in read(mariadb_server, database, "orders")[0]
    sink.apply_schema_change(TruncateTable(t), None)
    assert read(mariadb_server, database, "orders") == []
    sink.apply_schema_change(DropTable(t), None)
    assert sink.table_schema(t) is None


def test_a_retried_batch_is_not_loaded_twice(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer
) -> None:
    # an append-only table: loading the same batch twice would duplicate its rows
    t = TableId(None, database, "events")
    schema = Schema.of([Column("id", INT()), Column("what", STRING())])
    first = starrocks(mariadb_server, database, load_server)
    first.apply_schema_change(CreateTable(t, schema), None)
    feed = Feed(t)
    batch = [feed.insert({"id": i, "what": f"e{i}"}) for i in range(3)]
    first.write(t, schema, batch)
    first.flush(feed.offsets())
    label = load_server.requests[-1][0]
    first.close()  # stopped before its checkpoint was recorded: the batch is replayed
    second = starrocks(mariadb_server, database, load_server)
    second.write(t, schema, batch)
    second.flush(feed.offsets())
    assert load_server.requests[-1] == (label, "Label Already Exists")
    assert len(read(mariadb_server, database, "events")) == 3
    # the next batch has a label of its own
    more = feed.insert({"id": 9, "what": "e9"})
    write(second, schema, feed, more)
    assert load_server.requests[-1][1] == "Success"
    assert len(read(mariadb_server, database, "events")) == 4
    second.close()


def test_stream_load_protocol_refusals(
    mariadb_server: MariaDbServer, sink: StarRocksSink, database: str, load_server: StreamLoadServer
) -> None:
    t = TableId(None, database, "orders")
    sink.apply_schema_change(CreateTable(t, ORDERS), None)

    def load(label: str, rows: list[Any], password: str = mariadb_server.password) -> dict[str, Any]:
        return stream_load(
            load_server.url,
            database,
            "orders",
            label=label,
            rows=rows,
            columns=["id", "qty", "__op"],
            username=mariadb_server.user,
            password=password,
            timeout=10,
            sink="starrocks",
        )

    with pytest.raises(SinkTerminalError, match="HTTP 401"):
        load("l0", [{"id": 1, "qty": 1, "__op": 0}], password="wrong")
    with pytest.raises(SinkTerminalError, match=r"too many filtered rows.*_load_error_log") as failed:
        load("l1", [{"id": 1, "qty": 1, "__op": 0}, {"id": 2, "qty": "not a number", "__op": 0}, [1, 2]])
    assert read(mariadb_server, database, "orders") == []  # a failed load keeps nothing
    error_url = str(failed.value).rsplit("errors: ", 1)[1].rstrip(")")
    with urllib.request.urlopen(error_url, timeout=10) as response:
        log = response.read().decode()
    assert "row 1" in log and "row 2: not a JSON object" in log
    status = load("l1", [{"id": 1, "qty": 1, "__op": 0}])  # a failed label may be used again
    assert status["Status"] == "Success" and status["NumberLoadedRows"] == 1
    assert load("l1", [{"id": 5, "qty": 1, "__op": 0}])["Status"] == "Label Already Exists"
    assert [r["id"] for r in read(mariadb_server, database, "orders")] == [1]


def test_stream_load_follows_the_frontends_redirect_to_a_backend_with_its_credentials(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer
) -> None:
    """A frontend redirects each load to a backend on another host and port: the load reaches it
    with the same Basic authorization, headers and body (the backend refuses it without them)."""
    with StreamLoadFrontend(load_server) as frontend:
        config = make_config(mariadb_server, database, None, **{"load-url": frontend.url})
        sink = StarRocksSink(
            StarRocksSinkConfig.model_validate(config), pipeline="p1", vendor_only_statements=False
        )
        try:
            t = TableId(None, database, "orders")
            sink.apply_schema_change(CreateTable(t, ORDERS), None)
            feed = Feed(t)
            write(sink, ORDERS, feed, feed.insert(order(1)), feed.insert(order(2, "bob", 3, "1.50")))
        finally:
            sink.close()
    assert len(frontend.redirects) == 1 and frontend.redirects[0].startswith("http://localhost:")
    assert [status for _, status in load_server.requests] == ["Success"]
    assert read(mariadb_server, database, "orders") == [order(1), order(2, "bob", 3, "1.50")]


# ----------------------------------------------------------------------------------- asynchronous ALTER


def test_schema_change_pending_while_another_alter_runs(
    mariadb_server: MariaDbServer, sink: StarRocksSink, database: str
) -> None:
    t = TableId(None, database, "orders")
    sink.apply_schema_change(CreateTable(t, ORDERS), None)

    def connect() -> Any:
        return pymysql.connect(
            host=mariadb_server.host,
            port=mariadb_server.port,
            user=mariadb_server.user,
            password=mariadb_server.password,
            database=database,
        )

    reader, alterer = connect(), connect()
    try:
        with reader.cursor() as cursor:  # an open transaction holds the table's metadata lock
            cursor.execute("BEGIN")
            cursor.execute("SELECT * FROM `orders`")
        altering = threading.Thread(
            target=lambda: alterer.cursor().execute(
                sink.dialect.add_column(sink.sql_table(t), Column("x", INT()))
            )
        )
        altering.start()
        deadline = Deadline(10)
        while not sink.schema_change_pending(t):
            assert not deadline.expired(), "the ALTER never showed as pending"
            time.sleep(0.05)
        reader.commit()
        altering.join(timeout=600)  # a guard against a hang: the ALTER ends once the lock is released
        assert not altering.is_alive(), "the ALTER did not end once the metadata lock was released"
        # the server answers the ALTER before its process list says the connection is idle again
        wait_for(
            lambda: not sink.schema_change_pending(t),
            30,
            lambda: "the finished ALTER to stop showing as pending",
        )
    finally:
        reader.close()
        alterer.close()
    sink.apply_schema_change(AddColumn(t, Column("y", INT())), None)
    sink.wait_for_schema_changes()  # nothing pending: returns at once
    schema = sink.table_schema(t)
    assert schema is not None and list(schema.names[-2:]) == ["x", "y"]


# ----------------------------------------------------------------------------------- identifiers

NASTY = ["select", "a`b", "50%", "x; DROP TABLE t; --", "é'\"\\"]


@pytest.mark.parametrize("through_stream_load", [True, False])
def test_identifiers_cannot_inject(
    mariadb_server: MariaDbServer, load_server: StreamLoadServer, through_stream_load: bool
) -> None:
    db = "db`;%' --"
    mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS {q(db)}")
    try:
        sink = starrocks(mariadb_server, "ferry", load_server if through_stream_load else None)
        for name in NASTY:
            t = TableId(None, db, name)
            schema = Schema.of(
                [Column(n, INT().not_null() if n == "select" else INT()) for n in NASTY], ["select"]
            )
            sink.apply_schema_change(CreateTable(t, schema), None)
            assert sink.table_schema(t) == schema
            feed = Feed(t)
            write(
                sink, schema, feed, feed.insert(dict.fromkeys(NASTY, 1)), feed.insert(dict.fromkeys(NASTY, 2))
            )
            write(sink, schema, feed, feed.delete(dict.fromkeys(NASTY, 1)))
            assert read(mariadb_server, db, name, "select") == [dict.fromkeys(NASTY, 2)]
            sink.apply_schema_change(RenameColumn(t, "a`b", "c`d"), None)
            assert "c`d" in (sink.table_schema(t) or Schema.of([])).names
        sink.close()
    finally:
        mariadb_server.admin_sql(f"DROP DATABASE IF EXISTS {q(db)}")


# ----------------------------------------------------------------------------------- SelectDB


def test_selectdb_deletes_with_the_doris_delete_sign_and_loads_each_write(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer
) -> None:
    config = SelectDbSinkConfig.model_validate(
        make_config(
            mariadb_server, database, load_server, sink_type="selectdb", **{"sink.enable-batch-mode": False}
        )
    )
    sink = SelectDbSink(config, pipeline="p1", vendor_only_statements=False)
    t = TableId(None, database, "orders")
    feed = Feed(t)
    sink.apply_schema_change(CreateTable(t, ORDERS), None)
    sink.write(t, ORDERS, [feed.insert(order(1)), feed.insert(order(2))])  # loaded at once
    assert [r["id"] for r in read(mariadb_server, database, "orders")] == [1, 2]
    sink.write(t, ORDERS, [feed.delete(order(1))])
    assert [r["id"] for r in read(mariadb_server, database, "orders")] == [2]
    sink.apply_schema_change(RenameColumn(t, "customer", "client"), None)
    renamed = sink.table_schema(t)
    assert renamed is not None and "client" in renamed.names
    sink.write(t, renamed, [feed.insert({"id": 3, "client": "zed", "qty": 1, "price": None})])
    assert read(mariadb_server, database, "orders")[-1]["client"] == "zed"
    assert all(status == "Success" for _, status in load_server.requests)
    sink.close()


# ----------------------------------------------------------------------------------- Flink CDC's options


@pytest.mark.parametrize("sink_type", ["starrocks", "doris"])
def test_sink_properties_are_headers_of_every_stream_load(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer, sink_type: str
) -> None:
    t = TableId(None, database, "orders")
    too_long = order(2, customer="x" * 60)  # longer than VARCHAR(40): the server filters the row

    def load_two(**options: Any) -> MySqlProtocolSink:
        config = make_config(mariadb_server, database, load_server, sink_type=sink_type, **options)
        sink: MySqlProtocolSink
        if sink_type == "starrocks":
            sink = StarRocksSink(
                StarRocksSinkConfig.model_validate(config), pipeline="p1", vendor_only_statements=False
            )
        else:
            config["type"] = "selectdb"
            sink = SelectDbSink(
                SelectDbSinkConfig.model_validate(config), pipeline="p1", vendor_only_statements=False
            )
        feed = Feed(t)
        sink.apply_schema_change(CreateTable(t, ORDERS), None)
        try:
            write(sink, ORDERS, feed, feed.insert(order(1)), feed.insert(too_long))
        finally:
            sink.close()
        return sink

    with pytest.raises(SinkTerminalError, match="too many filtered rows"):
        load_two()
    assert read(mariadb_server, database, "orders") == []
    sink = load_two(**{"sink.properties.max_filter_ratio": "0.5", "sink.label-prefix": "t2"})
    assert [r["id"] for r in read(mariadb_server, database, "orders")] == [1]
    assert sink.last_loads[t]["NumberFilteredRows"] == 1


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("sink.properties.format", "csv", "ferry loads format json"),
        ("sink.properties.strip_outer_array", "false", "ferry loads strip_outer_array true"),
        ("sink.properties.columns", "a,b", "sets the Stream Load header columns itself"),
        ("sink.properties.label", "x", "sets the Stream Load header label itself"),
    ],
)
def test_sink_properties_ferry_sets_itself_are_refused(key: str, value: str, message: str) -> None:
    base = {"jdbc-url": "jdbc:mysql://fe:9030", "username": "root", "sink.properties.format": "JSON"}
    assert StarRocksSinkConfig.model_validate(base).load_properties == {"format": "JSON"}
    with pytest.raises(ValueError, match=message):
        StarRocksSinkConfig.model_validate({**base, key: value})


def test_doris_auto_partition_column_is_not_null_and_loads_flink_cdcs_stand_in(
    mariadb_server: MariaDbServer, database: str, load_server: StreamLoadServer
) -> None:
    prefix = "table.create.auto-partition.properties."
    options = {prefix + "default-partition-key": "at", prefix + "default-partition-unit": "day"}
    config = SelectDbSinkConfig.model_validate(
        make_config(mariadb_server, database, load_server, sink_type="selectdb", **options)
    )
    sink = SelectDbSink(config, pipeline="p1", vendor_only_statements=False)
    t = TableId(None, database, "events")
    schema = Schema.of([Column("id", BIGINT().not_null()), Column("at", TIMESTAMP_LTZ(6))], ["id"])
    feed = Feed(t)
    try:
        sink.apply_schema_change(CreateTable(t, schema), None)
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        write(sink, schema, feed, feed.insert({"id": 1, "at": when}), feed.insert({"id": 2, "at": None}))
    finally:
        sink.close()
    assert [r["at"] for r in read(mariadb_server, database, "events")] == [
        datetime(2026, 1, 2, 3, 4, 5),
        datetime(1970, 1, 1),
    ]
    connection = pymysql.connect(
        host=mariadb_server.host,
        port=mariadb_server.port,
        user=mariadb_server.user,
        password=mariadb_server.password,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SHOW COLUMNS FROM `{database}`.`events` LIKE 'at'")
            assert cursor.fetchone()[2] == "NO"  # Null: the partition column is NOT NULL
    finally:
        connection.close()
