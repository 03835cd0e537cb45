"""``sink.auto-create-tables: false``: rows for a sink table that does not exist go to the
dead-letter topic with the reason; the tables that exist are written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model import types as T
from ferry.model.events import CreateTable
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.router import Action
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table, read_all

pytestmark = pytest.mark.integration

ORDERS, CUSTOMERS = TableId.parse("inventory.orders"), TableId.parse("inventory.customers")


def test_rows_of_a_table_not_at_the_sink_are_dead_lettered_when_tables_are_not_created(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    orders = orders_table()
    customers = dbz.DebeziumTable(
        "shop", "inventory", "customers", [dbz.ConnectColumn("id", dbz.INT32, optional=False)]
    )
    records = [
        orders.insert({"id": 1, "item": "a", "qty": 1}),
        customers.insert({"id": 7}),
        orders.insert({"id": 2, "item": "b", "qty": 2}),
    ]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    sink = MemorySink()
    made = Schema.of(
        [Column("id", T.INT().not_null()), Column("item", T.STRING()), Column("qty", T.INT())], ["id"]
    )
    sink.apply_schema_change(CreateTable(ORDERS, made), made)  # made by its owner
    text = job_yaml(
        kafka_bootstrap, topic, tmp_path, group_id, sink="type: memory\nauto-create-tables: false"
    )
    runner = build_runner(load_job_text(text), sink=sink)
    runner.run()

    assert sink.table_schema(CUSTOMERS) is None
    assert sorted(r["id"] for r in sink.rows(ORDERS)) == [1, 2]
    [dead] = read_all(kafka_bootstrap, f"{group_id}.dlq", expected=1)
    headers = dict(dead.headers())
    assert headers["ferry.offset"] == b"1"
    assert headers["ferry.reason"] == b"sink table inventory.customers does not exist"
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        history = [h for h in store.schema_history(group_id) if h.sink_table == str(CUSTOMERS)]
    finally:
        store.close()
    assert history and all(h.outcome == Action.SKIP.value for h in history)
    assert all("sink.auto-create-tables is false" in h.reason for h in history)
