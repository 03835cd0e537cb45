"""The MaxCompute sink through pyodps against the local MaxCompute endpoint (``tests.support.maxcompute``).

pyodps runs unmodified: its REST client signs and sends the SQL instances and metadata requests, its
Tunnel client encodes and compresses the rows (upsert sessions for tables with a primary key, upload
sessions for the others). The endpoint stands in for the service. Rows are read back through pyodps,
apart from the sink, as another client of the project would read them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from odps import ODPS

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
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DECIMAL,
    DOUBLE,
    INT,
    MAP,
    ROW,
    STRING,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    VARCHAR,
    Field,
)
from ferry.sinks.base.exceptions import SinkTerminalError, SinkTransientError
from ferry.sinks.base.registry import sink_class
from ferry.sinks.maxcompute.config import MaxComputeSinkConfig
from ferry.sinks.maxcompute.sink import MaxComputeSink
from tests.integration.helpers import Feed
from tests.support.maxcompute import MaxComputeServer

pytestmark = pytest.mark.integration

KEY_MARK = "access-key-not-to-be-seen"


def make_config(server: MaxComputeServer, **options: Any) -> MaxComputeSinkConfig:
    return MaxComputeSinkConfig.model_validate(
        {
            "type": "maxcompute",
            "endpoint": server.endpoint,
            "project": server.project,
            "access-id": server.access_id,
            "access-key": server.access_key,
            **options,
        }
    )


@pytest.fixture
def server() -> Iterator[MaxComputeServer]:
    with MaxComputeServer(project="shop", access_key=KEY_MARK) as s:
        yield s


@pytest.fixture
def sink(server: MaxComputeServer) -> Iterator[MaxComputeSink]:
    s = MaxComputeSink(make_config(server), pipeline="p1")
    yield s
    s.close()


T = TableId.parse("inventory.orders")
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


def read(server: MaxComputeServer, table: str) -> list[dict[str, Any]]:
    """The table's rows through pyodps (a SELECT for a Delta table, a Tunnel download otherwise)."""
    odps = ODPS(server.access_id, server.access_key, server.project, endpoint=server.endpoint)
    handle = odps.get_table(table)
    names = [c.name for c in handle.table_schema.simple_columns]
    with handle.open_reader() as records:
        rows = [{name: record[name] for name in names} for record in records]
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def apply(sink: MaxComputeSink, change: Any) -> None:
    sink.apply_schema_change(change, None)


def write(sink: MaxComputeSink, schema: Schema, feed: Feed, *changes: DataChange) -> None:
    sink.write(feed.table_id, schema, list(changes))
    sink.flush(feed.offsets())


def current(sink: MaxComputeSink, table: TableId = T) -> Schema:
    schema = sink.table_schema(table)
    assert schema is not None
    return schema


# ----------------------------------------------------------------------------------- create


def test_registered_and_create_table_reads_back(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    assert sink_class("maxcompute") is MaxComputeSink
    assert sink.table_schema(T) is None
    apply(sink, CreateTable(T, ORDERS))
    assert current(sink) == Schema.of([Column(c.name, sink.sink_type(c.type)) for c in ORDERS], ["id"])
    created = server.table("orders")
    assert created is not None and created.transactional and created.buckets == 16
    apply(sink, CreateTable(T, ORDERS))  # a repeated create is a no-op
    assert len([s for s, _ in server.statements if s.startswith("CREATE")]) == 1
    other = Schema.of([Column("id", BIGINT().not_null()), Column("total", INT())], ["id"])
    with pytest.raises(SinkTerminalError, match="no column total") as e:
        apply(sink, CreateTable(T, other))
    assert "maxcompute sink, table inventory.orders" in str(e.value)


def test_every_type_round_trips_through_the_tunnel(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    table = TableId.parse("inventory.kinds")
    schema = Schema.of(
        [
            Column("id", INT().not_null()),
            Column("flag", BOOLEAN()),
            Column("ratio", DOUBLE()),
            Column("amount", DECIMAL(20, 4)),
            Column("day", DATE()),
            Column("local", TIMESTAMP(6)),
            Column("instant", TIMESTAMP_LTZ(3)),
            Column("blob", BYTES()),
            Column("tags", ARRAY(STRING())),
            Column("counts", MAP(STRING(), BIGINT())),
            Column("point", ROW(Field("x", INT()), Field("label", STRING()))),
            Column("doc", STRING()),
        ],
        ["id"],
    )
    apply(sink, CreateTable(table, schema))
    stored = current(sink, table)
    assert [c.type for c in stored] == [sink.sink_type(c.type) for c in schema]
    instant = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    row = {
        "id": 1,
        "flag": True,
        "ratio": 0.25,
        "amount": Decimal("12345.6789"),
        "day": date(2024, 5, 6),
        "local": datetime(2024, 5, 6, 7, 8, 9, 123456),
        "instant": instant,
        "blob": b"\x00\xff",
        "tags": ["a", "b"],
        "counts": {"x": 2},
        "point": {"x": 3, "label": "p"},
        "doc": {"nested": [1, 2]},  # a JSON value in a STRING column
    }
    feed = Feed(table)
    write(sink, stored, feed, feed.insert(row), feed.insert({"id": 2}))
    got, empty = read(server, "kinds")
    assert empty == {"id": 2, **{k: None for k in row if k != "id"}}
    assert {k: got[k] for k in ("id", "flag", "ratio", "amount", "day", "blob", "tags", "counts")} == {
        k: row[k] for k in ("id", "flag", "ratio", "amount", "day", "blob", "tags", "counts")
    }
    assert got["local"].to_pydatetime() == row["local"]
    # TIMESTAMP is an instant: pyodps gives it in the local time zone
    assert got["instant"].to_pydatetime() == instant.astimezone().replace(tzinfo=None)
    assert (got["point"].x, got["point"].label) == (3, "p")
    assert got["doc"] == '{"nested": [1, 2]}'


# ----------------------------------------------------------------------------------- rows


def test_insert_update_delete_through_the_upsert_session(
    sink: MaxComputeSink, server: MaxComputeServer
) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    schema = current(sink)
    write(sink, schema, feed, *(feed.insert(order(i)) for i in range(1, 21)))
    assert read(server, "orders") == sorted((order(i) for i in range(1, 21)), key=lambda r: str(r["id"]))
    write(
        sink,
        schema,
        feed,
        feed.update(order(1), order(1, qty=2)),
        feed.update(order(1, qty=2), order(1, qty=3, price="1.50")),
        feed.delete(order(2)),
        feed.insert(order(70)),
        feed.delete(order(70)),
        feed.delete(order(3)),
        feed.insert(order(3, "edsger")),
        feed.update(order(4), order(40, "moved")),
    )
    rows = {r["id"]: r for r in read(server, "orders")}
    assert sorted(rows) == [1, 3, *range(5, 21), 40]
    assert rows[1] == order(1, qty=3, price="1.50")
    assert rows[3] == order(3, "edsger")
    assert rows[40] == order(40, "moved")
    # a replay of the same changes after a restart leaves the same rows
    write(sink, schema, feed, feed.insert(order(5)), feed.delete(order(2)))
    assert len(read(server, "orders")) == 19


def test_a_table_without_key_is_append_only(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    log = TableId.parse("inventory.log")
    schema = Schema.of([Column("id", INT()), Column("msg", STRING())])
    feed = Feed(log)
    apply(sink, CreateTable(log, schema))
    assert not server.table("log").transactional  # type: ignore[union-attr]
    write(
        sink,
        current(sink, log),
        feed,
        feed.insert({"id": 1, "msg": "a"}),
        feed.update({"id": 1, "msg": "a"}, {"id": 1, "msg": "b"}),
        feed.delete({"id": 1, "msg": "b"}),
    )
    assert read(server, "log") == [{"id": 1, "msg": "a"}, {"id": 1, "msg": "b"}]
    assert sink.skipped_deletes == {log: 1}


def test_truncate_and_drop_table(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    write(sink, current(sink), feed, feed.insert(order(1)))
    apply(sink, TruncateTable(T))
    assert read(server, "orders") == []
    apply(sink, DropTable(T))
    assert sink.table_schema(T) is None and server.table("orders") is None
    apply(sink, DropTable(T))  # replayed: nothing left to drop
    apply(sink, TruncateTable(T))


# ----------------------------------------------------------------------------------- schema changes


def test_schema_changes_with_rows_before_and_after(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    write(sink, current(sink), feed, feed.insert(order(1)))

    # added NOT NULL and FIRST: MaxCompute adds it nullable, last
    apply(sink, AddColumn(T, Column("note", STRING().not_null()), FIRST))
    apply(sink, AddColumn(T, Column("note", STRING().not_null()), FIRST))  # replayed: applied once
    with_note = current(sink)
    assert with_note.names == ("id", "customer", "qty", "price", "note")
    assert with_note.column("note").type == STRING()
    write(sink, with_note, feed, feed.insert({**order(2), "note": "fragile"}))
    assert [r["note"] for r in read(server, "orders")] == [None, "fragile"]

    apply(sink, RenameColumn(T, "note", "remark"))
    apply(sink, RenameColumn(T, "note", "remark"))  # replayed
    renamed = current(sink)
    assert "remark" in renamed and "note" not in renamed
    write(sink, renamed, feed, feed.insert({**order(3), "remark": "late"}))
    assert [r["remark"] for r in read(server, "orders")] == [None, "fragile", "late"]

    apply(sink, AlterColumnType(T, "qty", BIGINT(), INT()))
    apply(sink, AlterColumnType(T, "qty", BIGINT(), INT()))  # replayed
    assert current(sink).column("qty").type == BIGINT()
    write(sink, current(sink), feed, feed.insert({**order(4, qty=2**40), "remark": None}))
    assert [r["qty"] for r in read(server, "orders")] == [1, 1, 1, 2**40]

    apply(sink, DropColumn(T, "customer"))
    dropped = current(sink)
    assert dropped.names == ("id", "qty", "price", "remark")
    write(sink, dropped, feed, feed.update({**order(1), "remark": None}, {"id": 1, "qty": 9, "price": None}))
    rows = read(server, "orders")
    assert rows[0] == {"id": 1, "qty": 9, "price": None, "remark": None}
    assert rows[2] == {"id": 3, "qty": 1, "price": Decimal("9.99"), "remark": "late"}
    assert [s for s, outcome in server.statements if outcome != "Success"] == []


def test_relaxing_not_null_lets_nulls_in(sink: MaxComputeSink, server: MaxComputeServer) -> None:
    schema = Schema.of([Column("id", INT().not_null()), Column("code", STRING().not_null())], ["id"])
    feed = Feed(T)
    apply(sink, CreateTable(T, schema))
    assert current(sink).column("code").type == STRING().not_null()
    with pytest.raises(SinkTerminalError, match="NOT NULL"):  # the service enforces it
        write(sink, current(sink), feed, feed.insert({"id": 1, "code": None}))
    apply(sink, AlterColumnType(T, "code", STRING(), STRING().not_null()))
    assert current(sink).column("code").type == STRING()
    write(sink, current(sink), feed, feed.insert({"id": 1, "code": None}))  # the failed batch, again
    assert read(server, "orders") == [{"id": 1, "code": None}]


def test_a_type_change_maxcompute_refuses_fails_naming_the_table(sink: MaxComputeSink) -> None:
    apply(sink, CreateTable(T, ORDERS))
    with pytest.raises(SinkTerminalError) as e:
        apply(sink, AlterColumnType(T, "customer", INT(), VARCHAR(40)))
    message = str(e.value)
    assert "table inventory.orders" in message and "applying alter.column.type" in message
    assert "ODPS-0130071" in message and "string to int" in message
    assert current(sink).column("customer").type == STRING()


def test_changes_to_a_missing_table_are_refused(sink: MaxComputeSink) -> None:
    with pytest.raises(SinkTerminalError, match="does not exist"):
        apply(sink, AddColumn(T, Column("x", INT())))


def test_a_table_changed_by_another_client_is_read_again(
    sink: MaxComputeSink, server: MaxComputeServer
) -> None:
    apply(sink, CreateTable(T, ORDERS))
    assert "extra" not in current(sink)
    server.execute("ALTER TABLE orders ADD COLUMNS (extra INT)")
    assert "extra" not in current(sink)  # cached
    sink.forget_schema(T)
    assert current(sink).names[-1] == "extra"


# ----------------------------------------------------------------------------------- names and secrets


def test_backquotes_and_keywords_in_names_cannot_inject(
    sink: MaxComputeSink, server: MaxComputeServer
) -> None:
    victim = TableId.parse("inventory.victim")
    apply(sink, CreateTable(victim, Schema.of([Column("id", INT().not_null())], ["id"])))
    table = TableId.parse("inventory.select` (a INT); DROP TABLE victim; --")
    schema = Schema.of(
        [Column("order", INT().not_null()), Column("x` INT); DROP TABLE victim; --", STRING())], ["order"]
    )
    feed = Feed(table)
    apply(sink, CreateTable(table, schema))
    stored = current(sink, table)
    assert stored.names == ("order", "x` int); drop table victim; --")  # MaxCompute keeps names in lower case
    write(sink, stored, feed, feed.insert({"order": 1, stored.names[1]: "v"}))
    apply(sink, RenameColumn(table, stored.names[1], "it's"))
    assert current(sink, table).names == ("order", "it's")
    apply(sink, DropTable(table))
    assert sink.table_schema(table) is None and sink.table_schema(victim) is not None


def test_a_wrong_key_is_refused_and_never_shown(server: MaxComputeServer) -> None:
    sink = MaxComputeSink(make_config(server, **{"access-key": "wrong-" + KEY_MARK}), pipeline="p1")
    try:
        with pytest.raises(SinkTerminalError) as e:
            sink.table_schema(T)
        assert "SignatureNotMatch" in str(e.value)
        assert KEY_MARK not in str(e.value)
        assert e.value.__cause__ is None and e.value.__suppress_context__
    finally:
        sink.close()


def test_an_unreachable_service_is_a_transient_error(server: MaxComputeServer) -> None:
    config = make_config(server, endpoint="http://127.0.0.1:1/api", **{"access-key": KEY_MARK})
    sink = MaxComputeSink(config, pipeline="p1")
    try:
        with pytest.raises(SinkTransientError) as e:
            sink.table_schema(T)
        assert "table inventory.orders" in str(e.value) and KEY_MARK not in str(e.value)
    finally:
        sink.close()


def test_rows_fail_and_stay_buffered_when_the_table_changed_under_the_session(
    sink: MaxComputeSink, server: MaxComputeServer
) -> None:
    feed = Feed(T)
    apply(sink, CreateTable(T, ORDERS))
    schema = current(sink)
    server.execute("DROP TABLE orders")
    with pytest.raises(SinkTerminalError, match="table inventory.orders"):
        write(sink, schema, feed, feed.insert(order(1)))
    apply(sink, CreateTable(T, ORDERS))
    sink.flush(feed.offsets())  # the buffered rows go to the new table
    assert read(server, "orders") == [order(1)]


def test_the_endpoint_refuses_a_session_whose_table_changed(server: MaxComputeServer) -> None:
    from odps.errors import SchemaModified
    from odps.tunnel import TableTunnel

    server.execute("CREATE TABLE log (id INT, msg STRING)")
    odps = ODPS(server.access_id, server.access_key, server.project, endpoint=server.endpoint)
    session = TableTunnel(odps).create_upload_session("log")
    with session.open_record_writer() as writer:
        writer.write(session.new_record([1, "a"]))
    server.execute("ALTER TABLE log ADD COLUMNS (extra INT)")
    with pytest.raises(SchemaModified, match="changed since the session opened"):
        session.commit(writer.get_blocks_written())
    assert read(server, "log") == []
