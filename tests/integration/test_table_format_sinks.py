"""What the Iceberg and Paimon sinks do alike, each against its real library (a local catalog in a
temporary directory): the behaviour of :class:`ferry.sinks.base.table_format.TableFormatSink`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ferry.model.events import AlterColumnType, DataChange, DropTable, TruncateTable
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT, STRING, VARCHAR
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.table_format import TableFormatSink
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.sinks.paimon.sink import PaimonSink
from tests.integration import test_iceberg_sink as iceberg
from tests.integration import test_paimon_sink as paimon
from tests.integration.helpers import ORDERS, ORDERS_TABLE, Feed, create, write

pytestmark = pytest.mark.integration

T = ORDERS_TABLE
order = iceberg.order


@dataclass
class Lake:
    """A table-format sink, how to open it again (a restart) and how a reader sees a table's rows."""

    sink: TableFormatSink
    reopen: Callable[[], TableFormatSink]
    rows: Callable[[TableFormatSink, TableId], list[dict[str, Any]]]

    def create(self, schema: Schema, table_id: TableId = T, sink: TableFormatSink | None = None) -> None:
        create(sink or self.sink, schema, table_id)

    def write(self, schema: Schema, feed: Feed, *changes: DataChange) -> None:
        write(self.sink, schema, feed, *changes)

    def read(self, table_id: TableId = T, sink: TableFormatSink | None = None) -> list[dict[str, Any]]:
        return self.rows(sink or self.sink, table_id)


def _iceberg_rows(sink: TableFormatSink, table_id: TableId) -> list[dict[str, Any]]:
    assert isinstance(sink, IcebergSink)
    return iceberg.read(sink, table_id)


def _paimon_rows(sink: TableFormatSink, table_id: TableId) -> list[dict[str, Any]]:
    assert isinstance(sink, PaimonSink)
    return paimon.read(sink, table_id)


@pytest.fixture(params=["iceberg", "paimon"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lake]:
    opened: list[TableFormatSink] = []

    def open_sink() -> TableFormatSink:
        sink: TableFormatSink
        if request.param == "iceberg":
            sink = IcebergSink(iceberg.make_config(tmp_path / "warehouse"), pipeline="p1")
        else:
            sink = PaimonSink(paimon.make_config(tmp_path / "paimon"), pipeline="p1")
        opened.append(sink)
        return sink

    rows = _iceberg_rows if request.param == "iceberg" else _paimon_rows
    yield Lake(open_sink(), open_sink, rows)
    for sink in opened:
        sink.close()


def test_a_repeated_create_table_is_a_no_op(lake: Lake) -> None:
    feed = Feed(T)
    lake.create(ORDERS)
    lake.write(ORDERS, feed, feed.insert(order(1)))
    lake.create(ORDERS)
    # a create from a narrower source schema that the table can still take is fine too
    narrower = Schema.of([Column("id", INT().not_null()), Column("customer", VARCHAR(20))], ["id"])
    lake.create(narrower)
    assert lake.sink.table_schema(T) == ORDERS
    assert lake.read() == [order(1)]
    # a fresh sink (a restart) sees the same table
    again = lake.reopen()
    lake.create(ORDERS, sink=again)
    assert again.table_schema(T) == ORDERS
    assert lake.read(sink=again) == [order(1)]


def test_insert_update_delete_read_back_exactly(lake: Lake) -> None:
    feed = Feed(T)
    lake.create(ORDERS)
    lake.write(ORDERS, feed, *(feed.insert(order(i)) for i in range(1, 6)))
    assert lake.read() == [order(i) for i in range(1, 6)]

    lake.write(
        ORDERS,
        feed,
        feed.update(order(1), order(1, qty=2)),
        feed.update(order(1, qty=2), order(1, qty=3, price="1.50")),  # the last state of a key wins
        feed.delete(order(2)),
        feed.insert(order(6, "grace")),
        feed.insert(order(7)),
        feed.delete(order(7)),  # inserted and deleted in one flush: never visible
        feed.delete(order(3)),
        feed.insert(order(3, "edsger")),  # deleted, then inserted again
        feed.update(order(4), order(40, "moved")),  # the key changes: the old key goes
    )
    assert lake.read() == [
        order(1, qty=3, price="1.50"),
        order(3, "edsger"),
        order(5),
        order(6, "grace"),
        order(40, "moved"),
    ]


def test_a_table_without_primary_key_is_append_only(lake: Lake) -> None:
    events = TableId(None, "app", "events")
    schema = Schema.of([Column("id", BIGINT().not_null()), Column("payload", STRING())])
    feed = Feed(events)
    lake.create(schema, events)
    assert lake.sink.table_schema(events) == schema
    lake.write(schema, feed, feed.insert({"id": 1, "payload": "a"}), feed.insert({"id": 2, "payload": "b"}))
    lake.write(schema, feed, feed.delete({"id": 1, "payload": "a"}), feed.insert({"id": 3, "payload": "c"}))
    assert [r["id"] for r in lake.read(events)] == [1, 2, 3]
    assert lake.sink.skipped_deletes == {events: 1}


def test_relax_nullability(lake: Lake) -> None:
    feed = Feed(T)
    schema = Schema.of([Column("id", INT().not_null()), Column("code", STRING().not_null())], ["id"])
    lake.create(schema)
    lake.write(schema, feed, feed.insert({"id": 1, "code": "a"}))
    lake.sink.apply_schema_change(AlterColumnType(T, "code", STRING(), STRING().not_null()), None)
    relaxed = lake.sink.table_schema(T)
    assert relaxed is not None and relaxed.column("code").type == STRING()
    lake.write(relaxed, feed, feed.insert({"id": 2, "code": None}))
    assert lake.read() == [{"id": 1, "code": "a"}, {"id": 2, "code": None}]
    # the primary key stays required; a NOT NULL the source asks for is not applied (the sink stays nullable)
    lake.sink.apply_schema_change(AlterColumnType(T, "id", INT(), INT().not_null()), None)
    lake.sink.apply_schema_change(AlterColumnType(T, "code", STRING().not_null(), STRING()), None)
    assert lake.sink.table_schema(T) == relaxed


def test_drop_and_truncate_table_are_refused(lake: Lake) -> None:
    lake.create(ORDERS)
    for change in (DropTable(T), TruncateTable(T)):
        with pytest.raises(SinkTerminalError, match="not supported: the sink never drops or truncates"):
            lake.sink.apply_schema_change(change, None)
    assert lake.sink.table_schema(T) == ORDERS


def test_a_table_dropped_for_a_replay_is_gone(lake: Lake) -> None:
    assert lake.sink.drop_table(T) is False
    lake.create(ORDERS)
    assert lake.sink.drop_table(T) is True
    assert lake.sink.table_schema(T) is None
    assert lake.sink.load_table(T) is None
