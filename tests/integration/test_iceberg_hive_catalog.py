"""The Iceberg sink's ``hive`` catalog against a real Hive Metastore (Hive's standalone metastore,
Java, on this machine): a pipeline writes into it, each commit under the metastore's table lock, and
pyiceberg's Hive client, opened apart from the sink, reads the rows back."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.phase import Phase
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table
from tests.support.hive_metastore import HiveMetastore

pytestmark = pytest.mark.integration


def test_a_pipeline_writes_through_the_hive_catalog(
    hive_metastore: HiveMetastore,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
) -> None:
    table = orders_table(f"s{group_id[-8:]}")
    rows = {i: {"id": i, "item": f"i{i}", "qty": i} for i in range(1, 6)}
    records = [table.insert(row) for row in rows.values()]
    records.append(table.update(rows[2], {**rows[2], "qty": 20}))
    records.append(table.delete(rows[3]))
    topic = topic_factory()
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    sink = f"type: iceberg\ncatalog.properties.type: hive\ncatalog.properties.uri: {hive_metastore.uri}\n"
    job = load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, sink=sink))

    runner = build_runner(job)
    runner.run()

    assert runner.status.phase is Phase.STOPPED, runner.status.detail
    reader = load_catalog("reader", type="hive", uri=hive_metastore.uri)
    written = reader.load_table(("inventory", "orders"))
    assert sorted(written.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        rows[1],
        {**rows[2], "qty": 20},
        rows[4],
        rows[5],
    ]
    # the table is in the metastore's warehouse (the database location the metastore gave it)
    assert written.metadata_location.startswith(
        hive_metastore.warehouse.as_uri().replace("file:///", "file:/")
    )
    summary = written.current_snapshot().summary
    assert summary is not None and any(k.startswith("ferry.offsets.") for k in summary.additional_properties)
