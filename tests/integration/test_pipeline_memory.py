"""The whole pipeline on a real broker into the in-package memory sink."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import TableId
from ferry.model.types import BIGINT, DECIMAL, INT, STRING
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration


def test_rows_and_schema_changes_reach_the_sink(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"item-{i}", "qty": i}) for i in range(1, 6)]
    records.append(
        table.update({"id": 2, "item": "item-2", "qty": 2}, {"id": 2, "item": "item-2b", "qty": 20})
    )
    records.append(table.delete({"id": 3, "item": "item-3", "qty": 3}))
    table.add_column("price", dbz.DECIMAL(10, 2), after="item")
    records.append(table.insert({"id": 6, "item": "six", "price": decimal.Decimal("6.50"), "qty": 6}))
    table.rename_column("qty", "quantity")  # no DDL: a drop and an add
    table.change_type("id", dbz.INT64)
    records.append(table.insert({"id": 7, "item": "seven", "price": decimal.Decimal("7.25"), "quantity": 7}))
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])

    sink = MemorySink()
    job = load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id))
    runner = build_runner(job, sink=sink)
    runner.run()

    tid = TableId.parse("inventory.orders")
    schema = sink.table_schema(tid)
    assert schema is not None
    assert schema.names == ("id", "item", "price", "quantity")
    assert schema.column("id").type == BIGINT().not_null()
    assert schema.column("price").type == DECIMAL(10, 2)
    assert schema.column("quantity").type == INT()
    rows = sorted(sink.rows(tid), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 2, 4, 5, 6, 7]
    assert rows[1] == {"id": 2, "item": "item-2b", "price": None, "quantity": None}
    assert rows[4] == {"id": 6, "item": "six", "price": decimal.Decimal("6.50"), "quantity": None}
    assert rows[5] == {"id": 7, "item": "seven", "price": decimal.Decimal("7.25"), "quantity": 7}
    assert schema.column("item").type == STRING() or schema.column("item").type.root.value in (
        "STRING",
        "VARCHAR",
    )
    history = [h.change for h in runner.state.schema_history(group_id)]
    assert history[0].startswith("create.table inventory.orders")
    assert "add.column inventory.orders `price` DECIMAL(10, 2) AFTER item" in history
    assert "drop.column inventory.orders qty" in history
    assert runner.status.phase == "STOPPED"
    checkpoint = runner.state.latest_checkpoint(group_id)
    assert checkpoint is not None and checkpoint.offsets == {(topic, 0): len(records)}
