"""Debezium events with schema changes reach the open table formats (Iceberg, Paimon), rows before
and after each change correct."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import create_topic, produce
from tests.integration.helpers import job_yaml, run_ferry

pytestmark = pytest.mark.integration

Row = dict[str, Any]


def iceberg_table(warehouse: Path, name: str) -> tuple[list[str], list[Row]]:
    """The table's schema checked as Iceberg types; its identifier fields and rows."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DecimalType, IntegerType, LongType, StringType

    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    table = catalog.load_table(name)
    assert [(f.name, f.field_type, f.required) for f in table.schema().fields] == [
        ("id", IntegerType(), True),
        ("item", StringType(), False),
        ("price", DecimalType(10, 2), False),
        ("quantity", LongType(), False),
    ]
    return sorted(table.schema().identifier_field_names()), table.scan().to_arrow().to_pylist()


def paimon_table(warehouse: Path, name: str) -> tuple[list[str], list[Row]]:
    """The table's schema checked as Paimon types (with the row kind ferry keeps); its primary
    keys and rows."""
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table(name)
    assert [(f.name, str(f.type)) for f in table.table_schema.fields] == [
        ("id", "INT NOT NULL"),
        ("item", "STRING"),
        ("price", "DECIMAL(10, 2)"),
        ("quantity", "BIGINT"),
    ]
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return list(table.primary_keys), rows


READ: dict[str, Callable[[Path, str], tuple[list[str], list[Row]]]] = {
    "iceberg": iceberg_table,
    "paimon": paimon_table,
}


@pytest.mark.parametrize("sink_type", sorted(READ))
def test_add_column_rename_widening_and_delete_reach_the_table(
    sink_type: str, kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    server = f"s{group_id[-8:]}"
    orders = dbz.DebeziumTable(
        server,
        "shop",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )
    create_topic(kafka_bootstrap, orders.topic)
    create_topic(kafka_bootstrap, server)
    records = [orders.insert({"id": i, "item": f"item-{i}", "qty": i}) for i in (1, 2, 3)]
    records.append(
        orders.update({"id": 2, "item": "item-2", "qty": 2}, {"id": 2, "item": "item-2", "qty": 20})
    )
    ddl = [orders.add_column("price", dbz.DECIMAL(10, 2), after="item")]
    records += [orders.insert({"id": 4, "item": "item-4", "price": decimal.Decimal("4.40"), "qty": 4})]
    records.append(
        orders.update(
            {"id": 1, "item": "item-1", "price": None, "qty": 1},
            {"id": 1, "item": "item-1", "price": decimal.Decimal("1.10"), "qty": 1},
        )
    )
    ddl.append(orders.change_type("qty", dbz.INT64))
    records.append(
        orders.insert({"id": 5, "item": "item-5", "price": decimal.Decimal("5.50"), "qty": 5_000_000_000})
    )
    ddl.append(orders.rename_column("qty", "quantity"))
    records.append(
        orders.insert({"id": 6, "item": "item-6", "price": decimal.Decimal("6.60"), "quantity": 6})
    )
    records.append(orders.delete({"id": 3, "item": "item-3", "price": None, "quantity": 3}))
    schema_changes = [orders.schema_change(d) for d in ddl]
    produce(kafka_bootstrap, server, [v for _, v in schema_changes], keys=[k for k, _ in schema_changes])
    produce(kafka_bootstrap, orders.topic, [v for _, v in records], keys=[k for k, _ in records])

    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(
        job_yaml(
            kafka_bootstrap,
            orders.topic,
            tmp_path,
            group_id,
            sink=f"type: {sink_type}\ncatalog.properties.warehouse: {warehouse}",
            source_extra=f"  schema-change.topic: {server}",
            pipeline_extra="  schema.change.behavior: EVOLVE",
        )
    )
    run_ferry("run", job, cwd=tmp_path)

    keys, rows = READ[sink_type](warehouse, "shop.orders")
    assert keys == ["id"]
    assert sorted(rows, key=lambda r: r["id"]) == [
        # written before the add column; updated after it
        {"id": 1, "item": "item-1", "price": decimal.Decimal("1.10"), "quantity": 1},
        # written before every change: the old values survive the widening and the rename
        {"id": 2, "item": "item-2", "price": None, "quantity": 20},
        {"id": 4, "item": "item-4", "price": decimal.Decimal("4.40"), "quantity": 4},
        {"id": 5, "item": "item-5", "price": decimal.Decimal("5.50"), "quantity": 5_000_000_000},
        {"id": 6, "item": "item-6", "price": decimal.Decimal("6.60"), "quantity": 6},
    ]
