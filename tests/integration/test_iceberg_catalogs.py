"""The Iceberg sink's ``rest`` and ``hive`` catalogs against real catalog servers on this machine
(Iceberg's own ``RESTCatalogServer``; Hive's standalone metastore, each commit under its table
lock): a pipeline writes into each, and pyiceberg's client of that catalog, opened apart from the
sink, reads the rows back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.phase import Phase
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table
from tests.support.iceberg_rest import IcebergRestCatalog
from tests.support.jvm_server import JvmServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rest_catalog() -> Iterator[IcebergRestCatalog]:
    with IcebergRestCatalog() as catalog:
        yield catalog


@pytest.mark.parametrize(("catalog_type", "server"), [("rest", "rest_catalog"), ("hive", "hive_metastore")])
def test_a_pipeline_writes_through_the_catalog(
    catalog_type: str,
    server: str,
    request: pytest.FixtureRequest,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
) -> None:
    catalog: JvmServer = request.getfixturevalue(server)
    uri = catalog.uri
    table = orders_table(f"s{group_id[-8:]}")
    rows = {i: {"id": i, "item": f"i{i}", "qty": i} for i in range(1, 6)}
    records = [table.insert(row) for row in rows.values()]
    records.append(table.update(rows[2], {**rows[2], "qty": 20}))
    records.append(table.delete(rows[3]))
    topic = topic_factory()
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    sink = f"type: iceberg\ncatalog.properties.type: {catalog_type}\ncatalog.properties.uri: {uri}\n"
    job = load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, sink=sink))

    runner = build_runner(job)
    runner.run()

    assert runner.status.phase is Phase.STOPPED, runner.status.detail
    reader = load_catalog("reader", type=catalog_type, uri=uri)
    written = reader.load_table(("inventory", "orders"))
    assert sorted(written.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        rows[1],
        {**rows[2], "qty": 20},
        rows[4],
        rows[5],
    ]
    # the table's files are in the server's warehouse (the location the catalog gave it)
    assert written.metadata_location.startswith(catalog.warehouse.as_uri().replace("file:///", "file:/"))
    summary = written.current_snapshot().summary
    assert summary is not None and any(k.startswith("ferry.offsets.") for k in summary.additional_properties)
