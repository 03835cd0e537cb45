"""The route and transform examples of Flink CDC's documentation (core-concept/route.md and
transform.md, the quickstarts' sharding route), each job block as the page writes it, run on the
real broker over Debezium records of the tables it names (shards included). What each sink table
holds is read back with the sink's own client (the memory sink's tables; pyiceberg for Iceberg)
and compared with what Flink CDC's documentation and source say the example gives: the routed
table names, the transformed values and the keys. A job with a route or a transform that matches
none of the tables read fails its test.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ferry.cli.output import render_status
from ferry.config.loader import read_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import create_topic, delete_topic, produce
from ferry.model.schema import TableId
from ferry.pipeline.phase import Phase
from ferry.sinks.base import Sink
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner, build_sink
from tests.integration.helpers import job_yaml

pytestmark = pytest.mark.integration

KEY = dbz.ConnectColumn("id", dbz.INT32, optional=False)


def web_order_columns() -> list[dbz.ConnectColumn]:
    return [
        KEY,
        dbz.ConnectColumn("order_id", dbz.INT32),
        dbz.ConnectColumn("product_name", dbz.STRING),
        dbz.ConnectColumn("province", dbz.STRING),
    ]


def web_order(id: int, order_id: int, product: str = "beer", province: str = "shanghai") -> dict[str, Any]:
    return {"id": id, "order_id": order_id, "product_name": product, "province": province}


@dataclass
class Source:
    """Debezium records of tables of one server (a name of the test's own), on the broker."""

    bootstrap: str
    server: str

    def __post_init__(self) -> None:
        self.records: dict[str, list[tuple[bytes | None, bytes]]] = {}
        self.tables: dict[str, dbz.DebeziumTable] = {}
        self.produced = False

    def table(
        self, database: str, name: str, columns: list[dbz.ConnectColumn] | None = None
    ) -> dbz.DebeziumTable:
        table = dbz.DebeziumTable(self.server, database, name, columns or web_order_columns())
        self.tables[table.topic] = table
        self.records.setdefault(table.topic, [])
        return table

    def insert(self, table: dbz.DebeziumTable, *rows: dict[str, Any]) -> None:
        self.records[table.topic] += [table.insert(r) for r in rows]

    def delete(self, table: dbz.DebeziumTable, row: dict[str, Any]) -> None:
        self.records[table.topic].append(table.delete(row))

    def produce(self) -> str:
        """The records on their topics (once), and the topics as ``source.topic`` lists them."""
        if self.produced:
            return ";".join(self.records)
        self.produced = True
        for topic, records in self.records.items():
            create_topic(self.bootstrap, topic)
            produce(self.bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
        return ";".join(self.records)

    def close(self) -> None:
        for topic in self.records:
            delete_topic(self.bootstrap, topic, timeout=30.0)


@pytest.fixture
def source(kafka_bootstrap: str, group_id: str) -> Iterator[Source]:
    made = Source(kafka_bootstrap, f"s{group_id[-10:]}")
    yield made
    made.close()


def run(
    source: Source, tmp_path: Path, name: str, blocks: str, *, sink: str = "type: memory"
) -> tuple[Sink, Any]:
    """The job: the records' topics read to their end, the documentation's ``route`` and
    ``transform`` blocks as written; it must validate without warnings, stop cleanly, and every
    route and transform must match a table it read."""
    topics = source.produce()
    text = job_yaml(source.bootstrap, topics, tmp_path, name, sink=sink, top_extra=textwrap.dedent(blocks))
    job, warnings = read_job_text(text, env={})
    assert warnings == []
    made = MemorySink() if sink == "type: memory" else build_sink(job)
    runner = build_runner(job, sink=made)
    runner.run()
    assert runner.status.phase is Phase.STOPPED, runner.status.detail
    assert runner.metrics.bad_records == 0
    assert runner.metrics.unmatched_rules == []
    return made, runner


def rows(sink: Any, table: str, key: str = "id") -> list[dict[str, Any]]:
    return sorted(sink.rows(TableId.parse(table)), key=lambda r: r[key])


def tables(sink: Any) -> set[str]:
    return {str(t) for t in sink.tables}


# --------------------------------------------------------------------------------------------------
# route.md


def test_route_md_one_table_to_one_table(source: Source, tmp_path: Path, group_id: str) -> None:
    orders = source.table("mydb", "web_order")
    source.insert(orders, web_order(1, 101), web_order(2, 102))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        """
        route:
          - source-table: mydb.web_order
            sink-table: mydb.ods_web_order
            description: sync table to one destination table with given prefix ods_
        """,
    )
    assert tables(sink) == {"mydb.ods_web_order"}
    assert [r["order_id"] for r in rows(sink, "mydb.ods_web_order")] == [101, 102]


def test_route_md_sharded_tables_to_one_table(source: Source, tmp_path: Path, group_id: str) -> None:
    first, second = source.table("mydb", "web_order_1"), source.table("mydb", "web_order_2")
    source.insert(first, web_order(1, 101))
    source.insert(second, web_order(2, 202), web_order(3, 203))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        route:
          - source-table: mydb\.*
            sink-table: mydb.ods_web_order
            description: sync sharding tables to one destination table
        """,
    )
    assert tables(sink) == {"mydb.ods_web_order"}
    assert [(r["id"], r["order_id"]) for r in rows(sink, "mydb.ods_web_order")] == [
        (1, 101),
        (2, 202),
        (3, 203),
    ]
    assert sink.table_schema(TableId.parse("mydb.ods_web_order")).primary_keys == ("id",)


def test_route_md_complex_route_of_three_rules(source: Source, tmp_path: Path, group_id: str) -> None:
    for name in ("orders", "shipments", "products"):
        source.insert(source.table("mydb", name), web_order(1, 1), web_order(2, 2))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        """
        route:
          - source-table: mydb.orders
            sink-table: ods_db.ods_orders
            description: sync orders table to orders
          - source-table: mydb.shipments
            sink-table: ods_db.ods_shipments
            description: sync shipments table to ods_shipments
          - source-table: mydb.products
            sink-table: ods_db.ods_products
            description: sync products table to ods_products
        """,
    )
    assert tables(sink) == {"ods_db.ods_orders", "ods_db.ods_shipments", "ods_db.ods_products"}
    assert all(len(rows(sink, t)) == 2 for t in tables(sink))


def test_route_md_pattern_replacement(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(source.table("source_db", "orders"), web_order(1, 1))
    source.insert(source.table("source_db", "items"), web_order(2, 2), web_order(3, 3))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        route:
          - source-table: source_db.\.*
            sink-table: sink_db.<>
            replace-symbol: <>
            description: route all tables in source_db to sink_db
        """,
    )
    assert tables(sink) == {"sink_db.orders", "sink_db.items"}
    assert [r["id"] for r in rows(sink, "sink_db.items")] == [2, 3]


def test_route_md_capturing_groups(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(source.table("db_foo", "bar_tbl"), web_order(1, 1))
    source.insert(source.table("db_baz", "qux_tbl"), web_order(2, 2))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        route:
          - source-table: db_(\.*).(\.*)_tbl
            sink-table: sink_db_$1.sink_table_$2
        """,
    )
    assert tables(sink) == {"sink_db_foo.sink_table_bar", "sink_db_baz.sink_table_qux"}
    assert [r["id"] for r in rows(sink, "sink_db_foo.sink_table_bar")] == [1]


def test_the_quickstarts_sharding_route_into_iceberg(source: Source, tmp_path: Path, group_id: str) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    price = dbz.ConnectColumn("price", dbz.DECIMAL(10, 2))
    for i, name in enumerate(("order01", "order02", "order03"), start=1):
        shard = source.table("app_db", name, [KEY, price])
        source.insert(
            shard, {"id": i * 10, "price": Decimal("1.50")}, {"id": i * 10 + 1, "price": Decimal("2.50")}
        )
    source.insert(source.table("app_db", "products", [KEY, price]), {"id": 1, "price": Decimal("9.99")})
    warehouse = tmp_path / "warehouse"
    run(
        source,
        tmp_path,
        group_id,
        r"""
        route:
          - source-table: app_db.order\.*
            sink-table: ods_db.ods_orders
        """,
        sink=f"type: iceberg\ncatalog.properties.warehouse: {warehouse}",
    )
    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    orders = catalog.load_table("ods_db.ods_orders")
    assert sorted(orders.scan().to_arrow().column("id").to_pylist()) == [10, 11, 20, 21, 30, 31]
    assert [orders.schema().find_field(i).name for i in orders.schema().identifier_field_ids] == ["id"]
    # the table no route matches keeps its id
    assert catalog.load_table("app_db.products").scan().to_arrow().column("id").to_pylist() == [1]


# --------------------------------------------------------------------------------------------------
# transform.md


def test_transform_md_soft_delete(source: Source, tmp_path: Path, group_id: str) -> None:
    orders = source.table("mydb", "orders")
    source.insert(orders, web_order(1, 101), web_order(2, 102))
    source.delete(orders, web_order(1, 101))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        transform:
          - source-table: \.*.\.*
            projection: \*, __data_event_type__ AS op_type
            converter-after-transform: SOFT_DELETE
        """,
    )
    assert [(r["id"], r["op_type"]) for r in rows(sink, "mydb.orders")] == [(1, "-D"), (2, "+I")]


def test_transform_md_metadata_columns(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(source.table("mydb", "web_order"), web_order(1, 101))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        """
        transform:
          - source-table: mydb.web_order
            projection: id, order_id, __namespace_name__ || '.' || __schema_name__ || '.' || __table_name__ identifier_name
            description: access metadata columns from source table
        """,
    )
    # a MySQL table has no namespace: Flink CDC's || writes the NULL as null (its own tests' rows)
    assert rows(sink, "mydb.web_order") == [
        {"id": 1, "order_id": 101, "identifier_name": "null.mydb.web_order"}
    ]


def test_transform_md_metadata_fields_with_op_ts(source: Source, tmp_path: Path, group_id: str) -> None:
    customer = source.table("testdb", "customer", [KEY, dbz.ConnectColumn("name", dbz.STRING)])
    source.insert(customer, {"id": 1, "name": "ada"})
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        transform:
          - source-table: testdb.customer
            projection: \*, __namespace_name__ || '.' || __schema_name__ || '.' || __table_name__ AS identifier_name, __data_event_type__ AS type, op_ts AS opts
        """,
    )
    assert rows(sink, "testdb.customer") == [
        {
            "id": 1,
            "name": "ada",
            "identifier_name": "null.testdb.customer",
            "type": "+I",
            "opts": customer.ts_ms,
        }
    ]


def test_metadata_columns_of_a_postgresql_table(source: Source, tmp_path: Path, group_id: str) -> None:
    """Debezium's PostgreSQL records name the database and the schema: the table is
    ``schema.table``, as Flink CDC's PostgreSQL source gives it (without table-id.include-database)."""
    orders = source.table("public", "orders", [KEY, dbz.ConnectColumn("name", dbz.STRING)])
    key, value = orders.insert({"id": 1, "name": "ada"})
    envelope = json.loads(value)
    block = next(f for f in envelope["schema"]["fields"] if f["field"] == "source")
    block["name"] = "io.debezium.connector.postgresql.Source"
    block["fields"].append({"type": "string", "optional": False, "field": "schema"})
    envelope["payload"]["source"] |= {"connector": "postgresql", "db": "shop", "schema": "public"}
    source.records[orders.topic].append((key, json.dumps(envelope).encode()))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        transform:
          - source-table: public.orders
            projection: \*, __namespace_name__ || '.' || __schema_name__ || '.' || __table_name__ AS identifier_name
        """,
    )
    assert rows(sink, "public.orders") == [{"id": 1, "name": "ada", "identifier_name": "null.public.orders"}]


def test_transform_md_wildcard(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(source.table("mydb", "web_order"), web_order(1, 101, "beer"))
    source.insert(source.table("mydb", "app_order"), web_order(2, 202, "cap"))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        transform:
          - source-table: mydb.web_order
            projection: \*, UPPER(product_name) as product_name
            description: project fields with wildcard character from source table
          - source-table: mydb.app_order
            projection: UPPER(product_name) as product_name, *
            description: project fields with wildcard character from source table
        """,
    )
    web = sink.table_schema(TableId.parse("mydb.web_order"))
    assert web.names == ("id", "order_id", "product_name", "province")
    assert rows(sink, "mydb.web_order")[0]["product_name"] == "BEER"
    # Flink CDC: the * after it names product_name again, and a later item replaces an earlier one
    # in its place: the column stays first, with the source's value
    app = sink.table_schema(TableId.parse("mydb.app_order"))
    assert app.names == ("product_name", "id", "order_id", "province") and app.primary_keys == ("id",)
    assert rows(sink, "mydb.app_order")[0]["product_name"] == "cap"


def test_transform_md_computed_columns_and_filters(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(
        source.table("mydb", "web_order"),
        web_order(5, 500),
        web_order(11, 50),
        web_order(12, 120, province="beijing"),
        web_order(13, 130),
    )
    blocks = {
        "computed": """
            transform:
              - source-table: mydb.web_order
                projection: id, order_id, UPPER(product_name) as product_name, localtimestamp as new_timestamp
                description: append calculated columns based on source table
            """,
        "filter": """
            transform:
              - source-table: mydb.web_order
                filter: id > 10 AND order_id > 100
                description: filtering rows from source table
            """,
        "computed filter": """
            transform:
              - source-table: mydb.web_order
                projection: id, order_id, UPPER(province) as new_province
                filter: new_province = 'SHANGHAI'
                description: filtering rows based on computed columns
            """,
        "primary key": """
            transform:
              - source-table: mydb.web_order
                projection: id, order_id
                primary-keys: order_id
                description: reassign primary key example
            """,
    }
    results = {}
    for i, (what, block) in enumerate(blocks.items()):
        sink, _ = run(source, tmp_path / str(i), f"{group_id}-{i}", block)
        results[what] = sink
    computed = rows(results["computed"], "mydb.web_order")
    assert [(r["id"], r["product_name"]) for r in computed] == [
        (5, "BEER"),
        (11, "BEER"),
        (12, "BEER"),
        (13, "BEER"),
    ]
    assert all(r["new_timestamp"] is not None for r in computed)
    assert [r["id"] for r in rows(results["filter"], "mydb.web_order")] == [12, 13]
    assert [(r["id"], r["new_province"]) for r in rows(results["computed filter"], "mydb.web_order")] == [
        (5, "SHANGHAI"),
        (11, "SHANGHAI"),
        (13, "SHANGHAI"),
    ]
    keyed = results["primary key"]
    assert keyed.table_schema(TableId.parse("mydb.web_order")).primary_keys == ("order_id",)
    assert sorted(r["order_id"] for r in keyed.rows(TableId.parse("mydb.web_order"))) == [50, 120, 130, 500]


def test_transform_md_classification_mapping(source: Source, tmp_path: Path, group_id: str) -> None:
    source.insert(source.table("mydb", "web_order"), web_order(1001, 1), web_order(1002, 2))
    source.insert(source.table("mydb", "app_order"), web_order(7, 70))
    sink, _ = run(
        source,
        tmp_path,
        group_id,
        r"""
        transform:
          - source-table: mydb.web_order
            projection: id, order_id
            filter: id > 1001
          - source-table: mydb.\.*
            projection: \*, 'fallback' AS FALLBACK
        """,
    )
    assert rows(sink, "mydb.web_order") == [{"id": 1002, "order_id": 2}]
    assert rows(sink, "mydb.app_order") == [{**web_order(7, 70), "FALLBACK": "fallback"}]


def test_a_route_that_matches_no_table_read_is_named(
    source: Source, tmp_path: Path, group_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The regular expression of old, mydb\\.orders, read as Flink CDC reads it: it validates, and
    the run names it in its status and log."""
    source.insert(source.table("mydb", "orders"), web_order(1, 1))
    topics = source.produce()
    text = job_yaml(
        source.bootstrap,
        topics,
        tmp_path,
        group_id,
        top_extra="route:\n  - source-table: mydb\\.order\n    sink-table: ods.orders\n",
    )
    job, _ = read_job_text(text, env={})
    sink = MemorySink()
    runner = build_runner(job, sink=sink)
    runner.run()
    assert tables(sink) == {"mydb.orders"}
    line = r"route[0] (source-table mydb\.order) matches none of the 1 table read so far (mydb.orders)"
    assert runner.metrics.unmatched_rules == [line]
    assert [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "route[0]" in r.getMessage()
    ] == [f"{line}: it selects no table (a table pattern is <database>.<table>)"]
    store = StateStore(job.pipeline.state_url)
    try:
        assert f"  warning: {line}" in render_status(store, [job.pipeline.name], "text").splitlines()
    finally:
        store.close()
