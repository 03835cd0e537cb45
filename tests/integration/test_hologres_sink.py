"""The Hologres sink against a real PostgreSQL server (Hologres speaks its protocol and DDL).

The Hologres-only statements (``set_table_property``) are left out here: PostgreSQL has no such
procedure. Rows are read back with psycopg, apart from the sink.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnType,
    CreateTable,
    DataChange,
    DropColumn,
    DropTable,
    RenameColumn,
    TruncateTable,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import ARRAY, BIGINT, DATE, DECIMAL, INT, STRING, TIMESTAMP_LTZ, VARCHAR
from ferry.sinks.base.exceptions import SinkTerminalError, SinkTransientError
from ferry.sinks.base.registry import sink_class
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from tests.integration.helpers import Feed
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration

PASSWORD_MARK = "pw-not-to-be-seen"


def make_config(server: PostgresServer, **options: Any) -> HologresSinkConfig:
    return HologresSinkConfig.model_validate(
        {
            "type": "hologres",
            "endpoint": f"{server.host}:{server.port}",
            "dbname": server.database,
            "username": server.user,
            "password": server.password,
            **options,
        }
    )


@pytest.fixture
def schema_name(postgres_server: PostgresServer) -> Iterator[str]:
    """A schema of its own for each test, dropped afterwards."""
    name = f"s_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def sink(postgres_server: PostgresServer, schema_name: str) -> Iterator[HologresSink]:
    s = HologresSink(
        make_config(postgres_server, schema=schema_name), pipeline="p1", hologres_only_statements=False
    )
    yield s
    s.close()


T = TableId(None, None, "orders")
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


def read(server: PostgresServer, schema: str, table: str, order_by: str = "id") -> list[dict[str, Any]]:
    with psycopg.connect(server.conninfo) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(
            sql.SQL("SELECT * FROM {}.{} ORDER BY {}").format(
                sql.Identifier(schema), sql.Identifier(table), sql.Identifier(order_by)
            )
        )
        return cur.fetchall()


def apply(sink: HologresSink, change: Any) -> None:
    sink.apply_schema_change(change, None)


def write(sink: HologresSink, schema: Schema, feed: Feed, *changes: DataChange) -> None:
    sink.write(feed.table_id, schema, list(changes))
    sink.flush(feed.offsets())


# ----------------------------------------------------------------------------------- create


def test_registered_and_create_table_reads_back(sink: HologresSink) -> None:
    assert sink_class("hologres") is HologresSink
    assert sink.table_schema(T) is None
    apply(sink, CreateTable(T, ORDERS))
    assert sink.table_schema(T) == ORDERS
    apply(sink, CreateTable(T, ORDERS))  # a repeated create is a no-op
    other = Schema.of([Column("id", STRING().not_null()), Column("total", INT())], ["id"])
    with pytest.raises(SinkTerminalError, match="no column total"):
        apply(sink, CreateTable(T, other))


def test_types_are_stored_as_sink_type_says(postgres_server: PostgresServer, schema_name: str) -> None:
    schema = Schema.of(
        [
            Column("id", INT().not_null()),
            Column("d", DATE()),
            Column("ts", TIMESTAMP_LTZ(3)),
            Column("tags", ARRAY(STRING())),
        ],
        ["id"],
    )
    for strategy in ("standard", "broaden", "only-bigint-or-text"):
        config = make_config(
            postgres_server, schema=schema_name, **{"sink.type-normalize-strategy": strategy}
        )
        sink = HologresSink(config, pipeline="p1", hologres_only_statements=False)
        table = TableId(None, None, f"t_{strategy.replace('-', '_')}")
        try:
            apply(sink, CreateTable(table, schema))
            stored = sink.table_schema(table)
            assert stored is not None
            assert [c.type for c in stored] == [sink.sink_type(c.type) for c in schema], strategy
            row = {
                "id": 1,
                "d": date(2024, 1, 2),
                "ts": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                "tags": ["a"],
            }
            write(sink, schema, Feed(table), Feed(table).insert(row))
            assert len(read(postgres_server, schema_name, table.table_name)) == 1
        finally:
            sink.close()


# ----------------------------------------------------------------------------------- rows


def test_insert_update_delete_read_back(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    write(sink, ORDERS, feed, *(feed.insert(order(i)) for i in range(1, 6)))
    assert read(postgres_server, schema_name, "orders") == [order(i) for i in range(1, 6)]
    write(
        sink,
        ORDERS,
        feed,
        feed.update(order(1), order(1, qty=2)),
        feed.update(order(1, qty=2), order(1, qty=3, price="1.50")),
        feed.delete(order(2)),
        feed.insert(order(7)),
        feed.delete(order(7)),
        feed.delete(order(3)),
        feed.insert(order(3, "edsger")),
        feed.update(order(4), order(40, "moved")),
    )
    assert read(postgres_server, schema_name, "orders") == [
        order(1, qty=3, price="1.50"),
        order(3, "edsger"),
        order(5),
        order(40, "moved"),
    ]
    # a replay of the same changes after a restart leaves the same rows
    write(sink, ORDERS, feed, feed.insert(order(5)), feed.delete(order(2)))
    assert len(read(postgres_server, schema_name, "orders")) == 4


def test_a_table_without_key_is_append_only(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    log = TableId(None, None, "log")
    schema = Schema.of([Column("id", INT()), Column("msg", STRING())])
    feed = Feed(log)
    apply(sink, CreateTable(log, schema))
    write(sink, schema, feed, feed.insert({"id": 1, "msg": "a"}), feed.delete({"id": 1, "msg": "a"}))
    assert read(postgres_server, schema_name, "log") == [{"id": 1, "msg": "a"}]
    assert sink.skipped_deletes == {log: 1}


def test_truncate_and_drop_table(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    write(sink, ORDERS, feed, feed.insert(order(1)))
    apply(sink, TruncateTable(T))
    assert read(postgres_server, schema_name, "orders") == []
    apply(sink, DropTable(T))
    assert sink.table_schema(T) is None
    apply(sink, DropTable(T))  # replayed: nothing left to drop


# ----------------------------------------------------------------------------------- schema changes


def test_add_drop_rename_columns_with_rows_before_and_after(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    write(sink, ORDERS, feed, feed.insert(order(1)))

    # added NOT NULL and FIRST: Hologres adds it nullable, at the end
    apply(sink, AddColumn(T, Column("note", STRING().not_null()), FIRST))
    apply(sink, AddColumn(T, Column("note", STRING().not_null()), FIRST))  # replayed: applied once
    with_note = sink.table_schema(T)
    assert with_note is not None
    assert with_note.names == ("id", "customer", "qty", "price", "note")
    assert with_note.column("note").type == STRING()
    write(sink, with_note, feed, feed.insert({**order(2), "note": "fragile"}))
    assert [r["note"] for r in read(postgres_server, schema_name, "orders")] == [None, "fragile"]

    apply(sink, RenameColumn(T, "note", "remark"))
    apply(sink, RenameColumn(T, "note", "remark"))  # replayed
    renamed = sink.table_schema(T)
    assert renamed is not None and "remark" in renamed and "note" not in renamed
    write(sink, renamed, feed, feed.insert({**order(3), "remark": "late"}))
    assert [r["remark"] for r in read(postgres_server, schema_name, "orders")] == [None, "fragile", "late"]

    apply(sink, DropColumn(T, "qty"))
    dropped = sink.table_schema(T)
    assert dropped is not None and dropped.names == ("id", "customer", "price", "remark")
    write(
        sink,
        dropped,
        feed,
        feed.update({**order(1), "remark": None}, {"id": 1, "customer": "x", "price": None}),
    )
    rows = read(postgres_server, schema_name, "orders")
    assert rows[0] == {"id": 1, "customer": "x", "price": None, "remark": None}
    assert rows[2] == {"id": 3, "customer": "ada", "price": Decimal("9.99"), "remark": "late"}

    apply(sink, AlterColumnType(T, "customer", STRING(), VARCHAR(40)))
    altered = sink.table_schema(T)
    assert altered is not None and altered.column("customer").type == STRING()
    write(sink, altered, feed, feed.insert({"id": 4, "customer": "y" * 100, "price": None, "remark": None}))
    assert read(postgres_server, schema_name, "orders")[-1]["customer"] == "y" * 100


def test_changes_to_a_missing_table_are_refused(sink: HologresSink) -> None:
    with pytest.raises(SinkTerminalError, match="does not exist"):
        apply(sink, AddColumn(T, Column("x", INT())))


# ----------------------------------------------------------------------------------- names and secrets

INJECTION_TABLE = 'select"; DROP TABLE victim; --'
INJECTION_COLUMN = 'x"; DROP TABLE victim; --'


def test_keyword_and_quote_names_cannot_inject(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    victim = TableId(None, None, "victim")
    apply(sink, CreateTable(victim, Schema.of([Column("id", INT().not_null())], ["id"])))
    table = TableId(None, None, INJECTION_TABLE)
    schema = Schema.of(
        [
            Column("order", INT().not_null()),
            Column(INJECTION_COLUMN, STRING()),
            Column("user", STRING()),
            Column("it's", STRING()),
        ],
        ["order"],
    )
    feed = Feed(table)
    apply(sink, CreateTable(table, schema))
    assert sink.table_schema(table) == schema
    row = {"order": 1, INJECTION_COLUMN: "'; DROP TABLE victim; --", "user": "u", "it's": "v"}
    write(sink, schema, feed, feed.insert(row))
    apply(sink, AddColumn(table, Column('group"by', INT())))
    apply(sink, RenameColumn(table, INJECTION_COLUMN, 'y"; DELETE FROM victim; --'))
    apply(sink, DropColumn(table, "user"))
    after = sink.table_schema(table)
    assert after is not None
    assert after.names == ("order", 'y"; DELETE FROM victim; --', "it's", 'group"by')
    write(sink, after, feed, feed.delete({"order": 1}), feed.insert({"order": 2, "it's": "w"}))
    assert read(postgres_server, schema_name, INJECTION_TABLE, "order") == [
        {"order": 2, 'y"; DELETE FROM victim; --': None, "it's": "w", 'group"by': None}
    ]
    assert sink.table_schema(victim) is not None  # still there
    apply(sink, TruncateTable(table))
    apply(sink, DropTable(table))
    assert sink.table_schema(table) is None
    assert sink.table_schema(victim) is not None


def test_the_password_is_never_shown(postgres_server: PostgresServer, schema_name: str) -> None:
    config = make_config(postgres_server, schema=schema_name, password=PASSWORD_MARK)
    assert PASSWORD_MARK not in repr(config)
    assert PASSWORD_MARK not in str(config)
    sink = HologresSink(config, pipeline="p1", hologres_only_statements=False)
    try:
        with pytest.raises(SinkTerminalError) as e:
            sink.table_schema(T)
        assert "password authentication failed" in str(e.value)
        assert PASSWORD_MARK not in str(e.value)
        assert e.value.__cause__ is None and e.value.__suppress_context__
    finally:
        sink.close()


def test_an_unreachable_server_is_a_transient_error(postgres_server: PostgresServer) -> None:
    config = make_config(postgres_server, endpoint="127.0.0.1:1", password=PASSWORD_MARK)
    sink = HologresSink(config, pipeline="p1", hologres_only_statements=False)
    try:
        with pytest.raises(SinkTransientError) as e:
            sink.table_schema(T)
        assert PASSWORD_MARK not in str(e.value)
    finally:
        sink.close()


def test_a_percent_in_names_survives_bound_parameters(
    sink: HologresSink, postgres_server: PostgresServer, schema_name: str
) -> None:
    table = TableId(None, None, "t%s")
    schema = Schema.of([Column("id", INT().not_null()), Column("50%", STRING()), Column("%s", INT())], ["id"])
    feed = Feed(table)
    apply(sink, CreateTable(table, schema))
    write(sink, schema, feed, feed.insert({"id": 1, "50%": "a", "%s": 1}), feed.insert({"id": 2, "50%": "b"}))
    write(sink, schema, feed, feed.update({"id": 1}, {"id": 1, "50%": "c", "%s": 3}), feed.delete({"id": 2}))
    assert read(postgres_server, schema_name, "t%s") == [{"id": 1, "50%": "c", "%s": 3}]


# ----------------------------------------------------------------------------------- mutatetype


@pytest.mark.parametrize(
    ("mutatetype", "row_1", "row_3"),
    [
        # the row in the table stays as it was
        ("insertorignore", order(1), {**order(3, "cy"), "price": None}),
        # the written columns change; the column the write lacks (price) keeps its value
        ("insertorupdate", order(1, "bo", qty=2), {**order(3, "cy"), "price": None}),
        # the whole row is replaced: the column the write lacks becomes NULL
        ("insertorreplace", {**order(1, "bo", qty=2), "price": None}, {**order(3, "cy"), "price": None}),
    ],
)
def test_mutatetype_decides_what_a_write_does_to_an_existing_key(
    postgres_server: PostgresServer,
    schema_name: str,
    mutatetype: str,
    row_1: dict[str, Any],
    row_3: dict[str, Any],
) -> None:
    config = make_config(postgres_server, schema=schema_name, mutatetype=mutatetype)
    sink = HologresSink(config, pipeline="p1", hologres_only_statements=False)
    feed = Feed(T)
    try:
        apply(sink, CreateTable(T, ORDERS))
        write(sink, ORDERS, feed, feed.insert(order(1)), feed.insert(order(2)))
        # the source no longer sends price (a dropped column the table keeps): rows without it
        narrow = Schema.of([c for c in ORDERS if c.name != "price"], ["id"])
        write(
            sink,
            narrow,
            feed,
            feed.update({"id": 1, "customer": "ada", "qty": 1}, {"id": 1, "customer": "bo", "qty": 2}),
            feed.insert({"id": 3, "customer": "cy", "qty": 1}),
            feed.delete({"id": 2, "customer": "ada", "qty": 1}),
        )
        assert read(postgres_server, schema_name, "orders") == [row_1, row_3]
    finally:
        sink.close()
