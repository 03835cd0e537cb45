"""The state store on a real PostgreSQL server (SQLite is the default; PostgreSQL is for deployments)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import TableId
from ferry.pipeline.checkpoints import SchemaHistoryEntry
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


def test_checkpoints_status_and_history_round_trip(postgres_server: PostgresServer) -> None:
    store = StateStore(postgres_server.sqlalchemy_url)
    name = "pg-round-trip"
    first = store.save_checkpoint(name, {("orders", 0): 10, ("orders", 1): 7}, {"tables": {}})
    second = store.save_checkpoint(
        name, {("orders", 0): 12, ("orders", 1): 9}, {"tables": {"db.t": {"v": 1}}}
    )
    assert second > first
    checkpoint = store.latest_checkpoint(name)
    assert checkpoint is not None and checkpoint.offsets == {("orders", 0): 12, ("orders", 1): 9}
    assert checkpoint.schemas == {"tables": {"db.t": {"v": 1}}}
    store.set_status(name, "RUNNING", "reading", {"records_read": 5})
    store.set_status(name, "STOPPED", "done", {"records_read": 9})
    status = store.get_status(name)
    assert status is not None and (status["phase"], status["metrics"]) == ("STOPPED", {"records_read": 9})
    entry = SchemaHistoryEntry("db.t", "db.t", "add.column db.t `x` INT LAST", "apply", "supported", None, 1)
    store.add_schema_history(name, [entry])
    assert store.schema_history(name) == [entry]
    assert name in store.pipelines()
    store.close()


def test_a_pipeline_keeps_its_state_in_postgresql(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 6)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    text = job_yaml(kafka_bootstrap, topic, tmp_path, group_id).replace(
        f"state.url: sqlite:///{tmp_path}/state.db", f"state.url: '{postgres_server.sqlalchemy_url}'"
    )
    sink = MemorySink()
    build_runner(load_job_text(text), sink=sink).run()
    assert len(sink.rows(TableId.parse("inventory.orders"))) == 5
    store = StateStore(postgres_server.sqlalchemy_url)
    checkpoint = store.latest_checkpoint(group_id)
    assert checkpoint is not None and checkpoint.offsets == {(topic, 0): 5}
    assert checkpoint.schemas["tables"]["inventory.orders"]["version"] == 1
    assert store.get_status(group_id)["phase"] == "STOPPED"  # type: ignore[index]
    store.close()
