"""The Fluss sink against a real Apache Fluss cluster (ZooKeeper, CoordinatorServer, TabletServer),
started from the Maven artifacts once per session; columns are added through the real Java client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import fluss
import pytest

from ferry.model import types as T
from ferry.model.events import AddColumn, CreateTable, DataChange, DropTable, RenameColumn, after
from ferry.model.schema import Column, Schema, TableId
from ferry.model.unavailable import UNAVAILABLE, PartialRow
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.registry import sink_class
from ferry.sinks.fluss.config import FlussSinkConfig
from ferry.sinks.fluss.sink import FlussSink
from ferry.sinks.fluss.types import sink_schema
from tests.integration.helpers import Feed
from tests.support.fluss import FlussCluster, client_classpath, drop_database, read_rows, with_connection

pytestmark = pytest.mark.integration

ORDERS = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("customer", T.VARCHAR(20)),
        Column("price", T.DECIMAL(10, 2)),
        Column("placed", T.TIMESTAMP(3)),
    ],
    ["id"],
)


def order(i: int, customer: str = "ada") -> dict[str, Any]:
    return {"id": i, "customer": customer, "price": Decimal(f"{i}.50"), "placed": datetime(2024, 5, i, 12)}


@pytest.fixture
def database(fluss_cluster: FlussCluster) -> Iterator[str]:
    name = f"it_{uuid.uuid4().hex[:12]}"
    yield name
    drop_database(fluss_cluster.bootstrap_servers, name)


def make_sink(cluster: FlussCluster, **options: Any) -> FlussSink:
    config = FlussSinkConfig.model_validate(
        {
            "type": "fluss",
            "bootstrap.servers": cluster.bootstrap_servers,
            "alter-table.classpath": [str(jar) for jar in client_classpath()],
            **options,
        }
    )
    return FlussSink(config, pipeline="p1")


@pytest.fixture
def sink(fluss_cluster: FlussCluster) -> Iterator[FlussSink]:
    s = make_sink(fluss_cluster)
    yield s
    s.close()


def rows(cluster: FlussCluster, table: TableId) -> list[dict[str, Any]]:
    assert table.schema_name is not None
    return sorted(
        read_rows(cluster.bootstrap_servers, table.schema_name, table.table_name), key=lambda r: r["id"]
    )


def write(sink: FlussSink, table: TableId, feed: Feed, *changes: DataChange) -> None:
    schema = sink.table_schema(table)
    assert schema is not None
    sink.write(table, schema, changes)
    sink.flush(feed.offsets())


def test_the_sink_loads_through_the_registry(fluss_cluster: FlussCluster) -> None:
    assert sink_class("fluss") is FlussSink


def test_primary_key_table_takes_upserts_and_deletes(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "orders")
    assert sink.table_schema(table) is None
    sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    schema = sink.table_schema(table)
    # the database was created; VARCHAR is stored as STRING
    assert schema == sink_schema(ORDERS)
    assert schema.column("customer").type == T.STRING()
    feed = Feed(table)
    write(
        sink,
        table,
        feed,
        feed.insert(order(1)),
        feed.insert(order(2)),
        feed.insert(order(3)),
        feed.update(order(2), order(2, "bob")),
        feed.delete(order(3)),
        feed.update(order(1), order(10)),  # the key changes: 1 is gone, 10 is there
    )
    assert rows(fluss_cluster, table) == [order(2, "bob"), order(10)]
    # a replay after a restart writes the same rows again: nothing changes
    write(sink, table, feed, feed.insert(order(2, "bob")), feed.insert(order(10)), feed.delete(order(3)))
    assert rows(fluss_cluster, table) == [order(2, "bob"), order(10)]
    write(sink, table, feed, feed.delete(order(10)))
    assert rows(fluss_cluster, table) == [order(2, "bob")]


DOCUMENTS = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("title", T.STRING().not_null()),
        Column("body", T.STRING()),
        Column("data", T.BYTES()),
    ],
    ["id"],
)


def test_a_partial_row_keeps_the_values_the_table_holds(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    # Debezium's PostgreSQL connector leaves an unchanged TOASTed value out of an update: the row
    # is partial, and takes body (and data) as the table holds them (title is NOT NULL: Fluss's
    # own partial update refuses such a table)
    table = TableId(None, database, "documents")
    sink.apply_schema_change(CreateTable(table, DOCUMENTS), DOCUMENTS)
    schema = sink.table_schema(table)
    assert schema is not None
    feed = Feed(table)
    body, data = "x" * 3000, b"\x01" * 3000
    first = [{"id": i, "title": f"t{i}", "body": f"{body}{i}", "data": data} for i in range(1, 4)]
    write(sink, table, feed, *(feed.insert(row) for row in first))

    def partial(i: int, title: str, **values: Any) -> PartialRow:
        return PartialRow({"id": i, "title": title, "body": UNAVAILABLE, "data": UNAVAILABLE, **values})

    changes = [
        feed.update(first[0], partial(1, "one")),  # body and data unchanged
        feed.update(first[1], partial(2, "two", data=b"new")),  # body unchanged, data set
        feed.insert({"id": 4, "title": "t4", "body": "b4", "data": None}),
        feed.update({"id": 4}, partial(4, "four")),  # completed from the row written before it
        feed.update({"id": 9}, partial(9, "nine")),  # no row of key 9: refused
    ]
    rejected = sink.complete_rows(table, schema, changes, [0, 1, 3, 4])
    assert [index for index, _ in rejected] == [4]
    assert "the table has no row of its key" in rejected[0][1]
    write(sink, table, feed, *(c for i, c in enumerate(changes) if i != 4))
    assert rows(fluss_cluster, table) == [
        {"id": 1, "title": "one", "body": f"{body}1", "data": data},
        {"id": 2, "title": "two", "body": f"{body}2", "data": b"new"},
        {"id": 3, "title": "t3", "body": f"{body}3", "data": data},
        {"id": 4, "title": "four", "body": "b4", "data": None},
    ]


def test_log_table_appends_and_counts_the_deletes_it_cannot_apply(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "events")
    schema = Schema.of([Column("id", T.BIGINT()), Column("what", T.STRING())])
    sink.apply_schema_change(CreateTable(table, schema), schema)
    assert sink.table_schema(table) == schema
    feed = Feed(table)
    write(
        sink,
        table,
        feed,
        feed.insert({"id": 1, "what": "a"}),
        feed.update({"id": 1, "what": "a"}, {"id": 1, "what": "b"}),
        feed.delete({"id": 1, "what": "b"}),
    )
    assert rows(fluss_cluster, table) == [{"id": 1, "what": "a"}, {"id": 1, "what": "b"}]
    assert sink.skipped_deletes == {table: 1}


EVERY_TYPE = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("b", T.BOOLEAN()),
        Column("i8", T.TINYINT()),
        Column("i16", T.SMALLINT()),
        Column("i64", T.BIGINT().not_null()),
        Column("f", T.FLOAT()),
        Column("d", T.DOUBLE()),
        Column("dec", T.DECIMAL(38, 10)),
        Column("c", T.CHAR(2)),
        Column("v", T.VARCHAR(9)),
        Column("s", T.STRING()),
        Column("bin", T.BINARY(2)),
        Column("vbin", T.VARBINARY(9)),
        Column("day", T.DATE()),
        Column("t0", T.TIME(0)),
        Column("t6", T.TIME(6)),
        Column("ts3", T.TIMESTAMP(3)),
        Column("ts6", T.TIMESTAMP(6)),
        Column("ts9", T.TIMESTAMP(9)),
        Column("ltz", T.TIMESTAMP_LTZ(3)),
        Column("tz", T.TIMESTAMP_TZ(6)),
        Column("arr", T.ARRAY(T.INT())),
        Column("m", T.MAP(T.STRING(), T.BIGINT())),
        Column("r", T.ROW(T.Field("x", T.INT()), T.Field("y", T.STRING()))),
    ],
    ["id"],
)
EVERY_VALUE: dict[str, Any] = {
    "id": 1,
    "b": True,
    "i8": -8,
    "i16": 300,
    "i64": 2**40,
    "f": 1.5,
    "d": 2.25,
    "dec": Decimal("12345.6789012345"),
    "c": "ab",
    "v": "varying",
    "s": "text",
    "bin": b"\x00\x01",
    "vbin": b"bytes",
    "day": date(2024, 2, 29),
    "t0": time(1, 2, 3),
    "t6": time(1, 2, 3, 456789),  # Fluss keeps milliseconds
    "ts3": datetime(2024, 1, 2, 3, 4, 5, 678000),
    "ts6": datetime(2024, 1, 2, 3, 4, 5, 678901),
    "ts9": datetime(2024, 1, 2, 3, 4, 5, 678901),
    "ltz": datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    "tz": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    "arr": [1, None, 3],
    "m": {"k": 7},
    "r": {"x": 1, "y": "z"},
}


def test_every_type_is_stored_as_declared_and_read_back(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "types")
    sink.apply_schema_change(CreateTable(table, EVERY_TYPE), EVERY_TYPE)
    stored = sink.table_schema(table)
    # what the server reports is what the sink declares for each source type
    assert stored == sink_schema(EVERY_TYPE)
    assert all(stored.column(c.name).type == sink.sink_type(c.type) for c in EVERY_TYPE)
    feed = Feed(table)
    write(sink, table, feed, feed.insert(EVERY_VALUE))
    [row] = rows(fluss_cluster, table)
    assert row == {**EVERY_VALUE, "t6": time(1, 2, 3, 456000), "m": [("k", 7)]}


def test_columns_are_added_last_through_the_java_client(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "orders")
    sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    feed = Feed(table)
    write(sink, table, feed, feed.insert(order(1)))
    added = [
        Column("note", T.VARCHAR(40), "what: it is = #1"),
        Column("tags", T.MAP(T.STRING(), T.ARRAY(T.DECIMAL(5, 1)))),
        Column("seen", T.TIMESTAMP_TZ(3)),
        Column("where", T.ROW(T.Field("lat", T.DOUBLE()), T.Field("lon", T.DOUBLE()))),
    ]
    for column in added:
        # a position Fluss cannot honour was turned into LAST by the router; the sink always appends
        sink.apply_schema_change(AddColumn(table, column, after("id")), None)
    sink.apply_schema_change(AddColumn(table, added[0]), None)  # replayed: already there
    schema = sink.table_schema(table)
    assert schema is not None
    assert schema.names == (*ORDERS.names, "note", "tags", "seen", "where")
    assert [schema.column(c.name).type for c in added] == [sink.sink_type(c.type) for c in added]
    new = {
        **order(2),
        "note": "fragile",
        "tags": {"a": [Decimal("1.5"), None]},
        "seen": datetime(2024, 6, 1, tzinfo=UTC),
        "where": {"lat": 1.0, "lon": 2.0},
    }
    write(sink, table, feed, feed.insert(new))
    nothing = {"note": None, "tags": None, "seen": None, "where": None}
    assert rows(fluss_cluster, table) == [
        {**order(1), **nothing},
        {**new, "tags": [("a", [Decimal("1.5"), None])]},
    ]


def test_a_change_fluss_refuses_names_the_table_and_the_reason(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "orders")
    sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    with pytest.raises(SinkTerminalError, match=rf"{database}\.orders.*Column must_have must be nullable"):
        sink.apply_schema_change(AddColumn(table, Column("must_have", T.INT().not_null())), None)
    with pytest.raises(SinkTerminalError, match="rename.column is not supported"):
        sink.apply_schema_change(RenameColumn(table, "customer", "client"), None)
    without_java = make_sink(fluss_cluster, **{"alter-table.classpath": []})
    try:
        with pytest.raises(SinkTerminalError, match="set alter-table.classpath"):
            without_java.apply_schema_change(AddColumn(table, Column("note", T.STRING())), None)
    finally:
        without_java.close()
    assert sink.table_schema(table) == sink_schema(ORDERS)


def test_an_existing_table_is_checked_and_a_dropped_one_is_gone(
    fluss_cluster: FlussCluster, sink: FlussSink, database: str
) -> None:
    table = TableId(None, database, "orders")
    sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    # created again (a restart): compatible, nothing happens
    sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    other_key = Schema.of(ORDERS.columns, ["customer"])
    with pytest.raises(SinkTerminalError, match=r"primary key \(id\) is not \(customer\)"):
        sink.apply_schema_change(CreateTable(table, other_key), other_key)
    sink.apply_schema_change(DropTable(table), None)
    assert sink.table_schema(table) is None
    sink.apply_schema_change(DropTable(table), None)  # dropping a table that is gone is fine


def test_new_tables_get_the_configured_buckets_and_properties(
    fluss_cluster: FlussCluster, database: str
) -> None:
    table = TableId(None, database, "orders")
    sink = make_sink(
        fluss_cluster,
        **{
            "bucket.num": 3,
            "bucket.key": f"{database}.orders:id",
            "properties.table.table.log.ttl": "2d",
        },
    )
    try:
        sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
        feed = Feed(table)
        write(sink, table, feed, *(feed.insert(order(i)) for i in range(1, 7)))
    finally:
        sink.close()
    assert [r["id"] for r in rows(fluss_cluster, table)] == [1, 2, 3, 4, 5, 6]

    async def describe(connection: Any) -> Any:
        return await connection.get_admin().get_table_info(fluss.TablePath(database, "orders"))

    info = with_connection(fluss_cluster.bootstrap_servers, describe, 30)
    assert info.num_buckets == 3
    assert info.get_bucket_keys() == ["id"]
    assert info.get_properties()["table.log.ttl"] == "2d"


def test_bucket_num_per_table_as_flink_cdc_writes_it(fluss_cluster: FlussCluster, database: str) -> None:
    orders, items = TableId(None, database, "orders"), TableId(None, database, "items")
    sink = make_sink(fluss_cluster, **{"bucket.num": f"{database}.orders:2;{database}.items:5"})
    try:
        for table in (orders, items):
            sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
    finally:
        sink.close()

    async def buckets(connection: Any) -> list[int]:
        admin = connection.get_admin()
        return [
            (await admin.get_table_info(fluss.TablePath(database, name))).num_buckets
            for name in ("orders", "items")
        ]

    assert with_connection(fluss_cluster.bootstrap_servers, buckets, 30) == [2, 5]
    with pytest.raises(ValueError, match="is not written table:number"):
        FlussSinkConfig.model_validate(
            {"type": "fluss", "bootstrap.servers": "f:9123", "bucket.num": "a.b:x"}
        )


def test_credentials_reach_both_clients_and_never_a_message(
    fluss_cluster: FlussCluster, database: str
) -> None:
    [(user, password)] = fluss_cluster.sasl_users.items()
    table = TableId(None, database, "orders")
    secured = {"bootstrap.servers": fluss_cluster.sasl_bootstrap_servers, "username": user}
    sink = make_sink(fluss_cluster, **secured, password=password)
    try:
        sink.apply_schema_change(CreateTable(table, ORDERS), ORDERS)
        # the Java client signs in too
        sink.apply_schema_change(AddColumn(table, Column("note", T.STRING())), None)
        feed = Feed(table)
        write(sink, table, feed, feed.insert({**order(1), "note": "signed in"}))
    finally:
        sink.close()
    assert rows(fluss_cluster, table) == [{**order(1), "note": "signed in"}]
    wrong = f"not-{password}"
    with pytest.raises(SinkTerminalError, match="Authentication failed") as refused:
        make_sink(fluss_cluster, **secured, password=wrong, **{"request.timeout": 20})
    assert wrong not in str(refused.value) and password not in str(refused.value)


def test_an_unreachable_cluster_is_named(fluss_cluster: FlussCluster) -> None:
    with pytest.raises(SinkTerminalError, match=r"cannot connect to 127\.0\.0\.1:9"):
        make_sink(fluss_cluster, **{"bootstrap.servers": "127.0.0.1:9", "request.timeout": 20})
