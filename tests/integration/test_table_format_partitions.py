"""Flink CDC's ``partition.key`` of the Iceberg and Paimon sinks, and Paimon's
``commit.user-prefix``: the tables the sinks create, read back with pypaimon and pyiceberg."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog

from ferry.model.events import CreateTable
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DATE, STRING, TIMESTAMP
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.sinks.paimon.config import PaimonSinkConfig
from ferry.sinks.paimon.sink import PaimonSink
from tests.integration.helpers import Feed
from tests.integration.test_paimon_sink import read as paimon_rows

pytestmark = pytest.mark.integration

ORDERS = TableId(None, "shop", "orders")
ITEMS = TableId(None, "shop", "items")
SCHEMA = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("region", STRING().not_null()),
        Column("dt", DATE().not_null()),
        Column("note", STRING()),
    ],
    ["id", "region", "dt"],
)


def row(i: int, region: str, day: int, note: str = "n") -> dict[str, Any]:
    return {"id": i, "region": region, "dt": date(2026, 1, day), "note": note}


def paimon(warehouse: Path, **options: Any) -> PaimonSink:
    config = PaimonSinkConfig.model_validate(
        {"type": "paimon", "catalog.properties.warehouse": str(warehouse), **options}
    )
    return PaimonSink(config, pipeline="orders pipeline")


def test_paimon_partition_key_and_commit_user_prefix(tmp_path: Path) -> None:
    sink = paimon(
        tmp_path,
        **{"partition.key": "shop.orders:region,dt; shop.nowhere:x", "commit.user-prefix": "cdc"},
    )
    try:
        for table_id in (ORDERS, ITEMS):
            sink.apply_schema_change(CreateTable(table_id, SCHEMA), SCHEMA)
            feed = Feed(table_id)
            first, second = row(1, "eu", 1), row(2, "us", 2)
            sink.write(table_id, SCHEMA, [feed.insert(first), feed.insert(second)])
            sink.flush(feed.offsets())
            sink.write(table_id, SCHEMA, [feed.update(first, row(1, "eu", 1, "m")), feed.delete(second)])
            sink.flush(feed.offsets())
        orders, items = sink.load_table(ORDERS), sink.load_table(ITEMS)
        assert orders is not None and items is not None
        assert orders.partition_keys == ["region", "dt"]
        assert items.partition_keys == []  # not named: unpartitioned
        assert sorted(p.name for p in (tmp_path / "shop.db" / "orders").glob("region=*")) == [
            "region=eu",
            "region=us",
        ]
        assert [r["note"] for r in paimon_rows(sink, ORDERS)] == ["m"]
        assert paimon_rows(sink, ORDERS) == paimon_rows(sink, ITEMS)
        assert orders.snapshot_manager().get_latest_snapshot().commit_user == "cdc_orders pipeline"
    finally:
        sink.close()


def test_paimon_partition_key_of_no_column_is_refused_at_create(tmp_path: Path) -> None:
    sink = paimon(tmp_path, **{"partition.key": "shop.orders:day"})
    try:
        with pytest.raises(SinkTerminalError, match="partition key day is not a column of the table"):
            sink.apply_schema_change(CreateTable(ORDERS, SCHEMA), SCHEMA)
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"partition.key": "shop.orders"}, "is not table:column"),
        ({"partition.key": "a.b:x;a.b:y"}, "a.b is given twice"),
        ({"commit.user": "a", "commit.user-prefix": "b"}, "either commit.user or commit.user-prefix"),
    ],
)
def test_paimon_bad_values_are_refused(tmp_path: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PaimonSinkConfig.model_validate({"type": "paimon", **options})


EVENTS = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("region", STRING()),
        Column("at", TIMESTAMP(6)),
        Column("note", STRING()),
    ],
    ["id"],
)


def event(i: int, day: int, note: str = "n") -> dict[str, Any]:
    return {"id": i, "region": f"r{i % 2}", "at": datetime(2026, 1, day, 12), "note": note}


def test_iceberg_partition_key_with_transforms(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    config = IcebergSinkConfig.model_validate(
        {
            "type": "iceberg",
            "catalog.properties.warehouse": str(warehouse),
            "partition.key": "shop.orders:region,day(at),bucket[4](id);shop.other:truncate[2](note)",
        }
    )
    sink = IcebergSink(config, pipeline="p1")
    try:
        sink.apply_schema_change(CreateTable(ORDERS, EVENTS), EVENTS)
        feed = Feed(ORDERS)
        rows = [event(i, 1 + i % 3) for i in range(6)]
        sink.write(ORDERS, EVENTS, [feed.insert(r) for r in rows])
        sink.flush(feed.offsets())
        sink.write(ORDERS, EVENTS, [feed.update(rows[0], event(0, 1, "m")), feed.delete(rows[1])])
        sink.flush(feed.offsets())
    finally:
        sink.close()
    # read back by a catalog of pyiceberg's own, beside the sink's
    catalog = load_catalog(
        "ferry", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri()
    )
    table = catalog.load_table(("shop", "orders"))
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("region", "identity"),
        ("at_day", "day"),
        ("id_bucket", "bucket[4]"),
    ]
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        event(0, 1, "m"),
        *rows[2:],
    ]
    partitions = {tuple(f.partition) for task in table.scan().plan_files() for f in [task.file]}
    assert {p[0] for p in partitions} == {"r0", "r1"} and len(partitions) > 2, partitions


def test_iceberg_partition_keys_of_a_transform_are_identity_fields(tmp_path: Path) -> None:
    config = IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(tmp_path)}
    )
    sink = IcebergSink(config, pipeline="p1")
    try:
        schema = Schema.of(EVENTS.columns, ["id"], partition_keys=("region",))
        sink.apply_schema_change(CreateTable(ORDERS, schema), schema)
        table = sink.load_table(ORDERS)
        assert table is not None
        assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("region", "identity")]
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("partition_key", "message"),
    [
        ("shop.orders:day(nowhere)", "partition key nowhere is not a column of the table"),
        ("shop.orders:day(note)", "does not apply to note of type string"),
    ],
)
def test_iceberg_partition_fields_that_do_not_fit_are_refused_at_create(
    tmp_path: Path, partition_key: str, message: str
) -> None:
    config = IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(tmp_path), "partition.key": partition_key}
    )
    sink = IcebergSink(config, pipeline="p1")
    try:
        with pytest.raises(SinkTerminalError, match=message):
            sink.apply_schema_change(CreateTable(ORDERS, EVENTS), EVENTS)
    finally:
        sink.close()


@pytest.mark.parametrize("field", ["bucket[0](id)", "days(at)", "bucket(id)"])
def test_iceberg_partition_fields_iceberg_lacks_are_refused_at_validation(field: str) -> None:
    with pytest.raises(ValueError, match="is not a column, year|month|day|hour"):
        IcebergSinkConfig.model_validate({"type": "iceberg", "partition.key": f"shop.orders:{field}"})
