"""A column added with a default: the rows a sink held before read the default, read back with
the sink's own client (pyiceberg, pypaimon, psycopg, PyMySQL), and rows written after keep their
values, an explicit NULL included."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ferry.pipeline.events import AddColumn, AlterColumnType, after
from ferry.pipeline.schema import Column, Schema, TableId
from ferry.pipeline.types import BIGINT, BOOLEAN, DATE, DECIMAL, INT, STRING, VARCHAR
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.sinks.paimon.sink import PaimonSink
from ferry.sinks.table_format import TableFormatSink
from tests.integration import test_iceberg_sink as iceberg
from tests.integration import test_paimon_sink as paimon
from tests.integration.helpers import Feed, create, write

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


def test_a_replayed_add_column_leaves_the_rows_as_they_are(lake: TableFormatSink) -> None:
    feed = Feed(T)
    create(lake, BASE, T)
    write(lake, BASE, feed, feed.insert({"id": 1, "name": "a"}))
    column = Column("region", VARCHAR(10), default="eu")
    lake.apply_schema_change(AddColumn(T, column, after("id")), None)
    schema = Schema.of([BASE.columns[0], column, BASE.columns[1]], ["id"])
    before, now = {"id": 1, "name": "a", "region": "eu"}, {"id": 1, "name": "a", "region": None}
    write(lake, schema, feed, feed.update(before, now))
    # the change met again (a restart replaying it): the sink has the column, the rows stay
    lake.apply_schema_change(AddColumn(T, column, after("id")), None)
    assert read(lake) == [{"id": 1, "region": None, "name": "a"}]
    lake.apply_schema_change(AlterColumnType(T, "name", STRING(), STRING()), None)
    assert read(lake) == [{"id": 1, "region": None, "name": "a"}]


def test_a_column_added_to_an_empty_table_needs_no_rows_written(lake: TableFormatSink) -> None:
    feed = Feed(T)
    create(lake, BASE, T)
    column = Column("region", VARCHAR(10).not_null(), default="eu")
    lake.apply_schema_change(AddColumn(T, column), None)
    schema = with_columns(BASE, column)
    write(lake, schema, feed, feed.insert({"id": 1, "name": "a", "region": "us"}))
    assert read(lake) == [{"id": 1, "name": "a", "region": "us"}]
