"""Transforms through the whole pipeline: Debezium records decoded, projected and filtered, schema
changes projected, into the memory sink (memory source) and into Iceberg from a real broker."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ferry.config.checks import accepted_schema_changes, check_supported
from ferry.config.loader import load_job_text
from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import create_topic, produce
from ferry.model.schema import TableId
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.transform.blocks import TableTransforms, TransformError
from tests.integration.helpers import job_yaml, read_all, run_ferry

pytestmark = pytest.mark.integration

TRANSFORM = r"""
transform:
  - source-table: inventory.orders
    description: priced orders outside the EU
    projection: \*, UPPER(item) AS item_upper, price * qty AS total, CAST(code AS INT) AS code_no
    filter: qty > 0 AND region <> 'eu'
"""


def orders_table(server: str = "shop") -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        server,
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("price", dbz.DECIMAL(10, 2)),
            dbz.ConnectColumn("qty", dbz.INT32),
            dbz.ConnectColumn("region", dbz.STRING),
            dbz.ConnectColumn("code", dbz.STRING),
        ],
    )


def order(
    id: int, item: str, price: str, qty: int, region: str = "us", code: str = "7", **more: Any
) -> dict[str, Any]:
    return {
        "id": id,
        "item": item,
        "price": Decimal(price),
        "qty": qty,
        "region": region,
        "code": code,
        **more,
    }


class Stream:
    """Debezium records of several tables, with offsets, for the memory source."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, table: dbz.DebeziumTable, kv: tuple[bytes | None, bytes]) -> None:
        offset = sum(r.topic() == table.topic for r in self.records)
        self.records.append(Record(table.topic, 0, offset, key=kv[0], value=kv[1]))


def runner_for(
    job_text: str, records: list[Record], sink: MemorySink, dead_letter: MemoryDeadLetter, state: str
) -> PipelineRunner:
    job = load_job_text(job_text, env={})
    check_supported(job)
    return PipelineRunner(
        settings=RunnerSettings(name=job.pipeline.name, tune_gc=False, checkpoint_interval_s=0.05),
        source=MemorySource(records),
        decode=decoder_for("debezium-json").decode,
        sink=sink,
        state=StateStore(state),
        router=SchemaChangeRouter(
            sink, job.pipeline.schema_change_behavior, accepted_schema_changes(None, ())
        ),
        tables=TableRouter(),
        dead_letter=dead_letter,
        transforms=TableTransforms(job.transform),
    )


JOB = """
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: shop.inventory.orders
sink:
  type: memory
pipeline:
  name: transformed
  schema.change.behavior: EVOLVE
"""


def test_rows_and_schema_changes_go_through_the_transform_and_survive_a_restart(tmp_path: Path) -> None:
    orders = orders_table()
    customers = dbz.DebeziumTable(
        "shop",
        "inventory",
        "customers",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("name", dbz.STRING)],
    )
    first = Stream()
    first.add(orders, orders.insert(order(1, "apple", "2.50", 4, code="10")))
    first.add(orders, orders.insert(order(2, "pear", "1.25", 2, region="eu")))  # filtered out
    first.add(orders, orders.insert(order(3, "fig", "3.00", 0)))  # filtered out
    first.add(orders, orders.insert(order(4, "kiwi", "1.00", 1, code="x4")))  # the cast fails
    first.add(customers, customers.insert({"id": 1, "name": "ada"}))  # no transform: unchanged
    orders.add_column("note", dbz.STRING, after="code")
    first.add(orders, orders.insert(order(5, "plum", "2.00", 3, note="ripe")))
    first.add(
        orders,
        orders.update(
            order(1, "apple", "2.50", 4, code="10", note=None),
            order(1, "apple", "2.50", 6, code="10", note="more"),
        ),
    )

    sink, dead_letter, state = MemorySink(), MemoryDeadLetter(), f"sqlite:///{tmp_path}/state.db"
    runner_for(JOB + TRANSFORM, first.records, sink, dead_letter, state).run()

    tid = TableId.parse("inventory.orders")
    schema = sink.table_schema(tid)
    assert schema is not None
    assert schema.describe() == (
        "(`id` INT NOT NULL, `item` STRING, `price` DECIMAL(10, 2), `qty` INT, `region` STRING, "
        "`code` STRING, `note` STRING, `item_upper` STRING, `total` DECIMAL(20, 2), `code_no` INT, "
        "PRIMARY KEY (id))"
    )
    rows = sorted(sink.rows(tid), key=lambda r: r["id"])
    assert [(r["id"], r["item_upper"], r["total"], r["code_no"], r["note"]) for r in rows] == [
        (1, "APPLE", Decimal("15.00"), 10, "more"),
        (5, "PLUM", Decimal("6.00"), 7, "ripe"),
    ]
    assert sink.rows(TableId.parse("inventory.customers")) == [{"id": 1, "name": "ada"}]
    [bad] = dead_letter.records
    assert (bad.topic, bad.offset) == (orders.topic, 3)
    assert bad.reason == (
        "transform[0] 'priced orders outside the EU' (source-table inventory.orders) on table "
        "inventory.orders: CAST(code AS INT) AS code_no: cannot cast 'x4' to INT: not a number"
    )

    # a restart reads on from the checkpoint: the projected schema is derived again from the tracked
    # source schema, so a widening at the source widens the computed column once
    orders.change_type("qty", dbz.INT64)
    second = Stream()
    second.records = list(first.records)
    second.add(orders, orders.insert(order(6, "melon", "1.50", 4_000_000_000)))
    second.add(orders, orders.delete(order(5, "plum", "2.00", 3, note="ripe")))
    runner_for(JOB + TRANSFORM, second.records, sink, dead_letter, state).run()

    schema = sink.table_schema(tid)
    assert schema is not None
    assert [str(schema.column(c).type) for c in ("qty", "total")] == ["BIGINT", "DECIMAL(29, 2)"]
    rows = sorted(sink.rows(tid), key=lambda r: r["id"])
    assert [(r["id"], r["total"]) for r in rows] == [(1, Decimal("15.00")), (6, Decimal("6000000000.00"))]
    assert [str(c) for c in sink.applied if c.table_id == tid] == [
        "create.table inventory.orders (`id` INT NOT NULL, `item` STRING, `price` DECIMAL(10, 2), "
        "`qty` INT, `region` STRING, `code` STRING, `item_upper` STRING, `total` DECIMAL(20, 2), "
        "`code_no` INT, PRIMARY KEY (id))",
        "add.column inventory.orders `note` STRING AFTER code",
        "alter.column.type inventory.orders qty INT -> BIGINT",
        "alter.column.type inventory.orders total DECIMAL(20, 2) -> DECIMAL(29, 2)",
    ]
    assert len(dead_letter.records) == 1


def test_dropping_a_column_a_transform_uses_fails_the_pipeline_naming_it(tmp_path: Path) -> None:
    orders = orders_table()
    stream = Stream()
    stream.add(orders, orders.insert(order(1, "apple", "2.50", 4)))
    orders.drop_column("qty")
    stream.add(
        orders,
        orders.insert({"id": 2, "item": "pear", "price": Decimal("1.00"), "region": "us", "code": "1"}),
    )
    sink = MemorySink()
    runner = runner_for(
        JOB + TRANSFORM, stream.records, sink, MemoryDeadLetter(), f"sqlite:///{tmp_path}/s.db"
    )
    with pytest.raises(TransformError) as error:
        runner.run()
    message = str(error.value)
    assert message.startswith("transform[0] 'priced orders outside the EU' (source-table inventory.orders): ")
    assert "column 'qty' does not exist in table inventory.orders" in message
    assert message.endswith("after drop.column inventory.orders qty")
    assert runner.status.phase == "FAILED"
    # the row read before the change was written with the schema it was read with
    assert [r["id"] for r in sink.rows(TableId.parse("inventory.orders"))] == [1]


def test_a_transform_on_the_real_broker_into_iceberg(
    kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DecimalType, IntegerType, LongType, StringType

    server = f"s{group_id[-8:]}"
    orders = orders_table(server)
    create_topic(kafka_bootstrap, orders.topic)
    records = [
        orders.insert(order(1, "apple", "2.50", 4, code="10")),
        orders.insert(order(2, "pear", "1.25", 2, region="eu")),
        orders.insert(order(3, "kiwi", "1.00", 1, code="x3")),
        orders.insert(order(4, "fig", "3.00", 5)),
    ]
    orders.change_type("qty", dbz.INT64)
    records += [
        orders.insert(order(5, "melon", "1.50", 4_000_000_000)),
        orders.update(
            order(4, "fig", "3.00", 5), order(4, "fig", "3.00", 0)
        ),  # now filtered: the sink keeps the old row
        orders.delete(order(1, "apple", "2.50", 4, code="10")),
    ]
    produce(kafka_bootstrap, orders.topic, [v for _, v in records], keys=[k for k, _ in records])

    warehouse = tmp_path / "warehouse"
    job = tmp_path / "job.yaml"
    job.write_text(
        job_yaml(
            kafka_bootstrap,
            orders.topic,
            tmp_path,
            group_id,
            sink=f"type: iceberg\ncatalog.properties.warehouse: {warehouse}",
            pipeline_extra="  schema.change.behavior: EVOLVE",
            top_extra=TRANSFORM,
        )
    )
    run_ferry("validate", job, cwd=tmp_path, timeout=120)
    run_ferry("run", job, cwd=tmp_path)

    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    table = catalog.load_table("inventory.orders")
    fields = table.schema().fields
    assert [(f.name, f.field_type) for f in fields] == [
        ("id", IntegerType()),
        ("item", StringType()),
        ("price", DecimalType(10, 2)),
        ("qty", LongType()),
        ("region", StringType()),
        ("code", StringType()),
        ("item_upper", StringType()),
        ("total", DecimalType(29, 2)),
        ("code_no", IntegerType()),
    ]
    assert table.schema().identifier_field_names() == {"id"}
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["item_upper"], r["qty"], r["total"], r["code_no"]) for r in rows] == [
        (4, "FIG", 5, Decimal("15.00"), 7),
        (5, "MELON", 4_000_000_000, Decimal("6000000000.00"), 7),
    ]
    [bad] = read_all(kafka_bootstrap, f"{group_id}.dlq", 1)
    headers = dict(bad.headers() or [])
    assert headers["ferry.offset"] == b"2"
    assert (
        headers["ferry.reason"]
        .decode()
        .endswith("CAST(code AS INT) AS code_no: cannot cast 'x3' to INT: not a number")
    )
