"""Iceberg tables from Flink CDC job files: a transform's ``table-options`` become the table's
properties (written by ``ferry run`` from Debezium records on a real broker, read back with
pyiceberg), and ``catalog.properties.io-impl`` chooses pyiceberg's FileIO."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.io.fsspec import FsspecFileIO

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import INT, STRING
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import Feed, create, job_yaml, run_ferry, write

pytestmark = pytest.mark.integration

TRANSFORM = """
transform:
  - source-table: inventory.orders
    table-options: comment=web order|write.parquet.compression-codec=snappy|write.metadata.previous-versions-max=5
    table-options.delimiter: "|"
"""


def test_table_options_of_a_transform_are_the_iceberg_tables_properties(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    table = dbz.DebeziumTable(
        f"s{group_id[-8:]}",
        "inventory",
        "orders",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("item", dbz.STRING)],
    )
    topic = topic_factory()
    rows = {i: {"id": i, "item": f"item-{i}"} for i in range(1, 6)}
    records: list[tuple[bytes | None, bytes | None]] = [table.insert(r) for r in rows.values()]
    records.append(table.update(rows[2], {"id": 2, "item": "changed"}))
    key, value = table.delete(rows[4])
    records += [(key, value), (key, None)]  # the delete and its tombstone, as Debezium writes them
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    expected = [rows[1], {"id": 2, "item": "changed"}, rows[3], rows[5]]
    warehouse = tmp_path / "warehouse"
    sink = f"type: iceberg\ncatalog.properties.warehouse: {warehouse}"
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, sink=sink, top_extra=TRANSFORM))

    run_ferry("run", job, cwd=tmp_path)

    catalog = load_catalog(
        "ferry", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri()
    )
    written = catalog.load_table(("inventory", "orders"))
    properties = written.properties
    assert properties["write.parquet.compression-codec"] == "snappy"
    assert properties["write.metadata.previous-versions-max"] == "5"
    assert properties["comment"] == "web order"
    assert sorted(written.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    # the data files are written as the property says
    files = [task.file.file_path for task in written.scan().plan_files()]
    assert files
    for path in files:
        metadata = pq.read_metadata(path.removeprefix("file://"))
        assert metadata.row_group(0).column(0).compression == "SNAPPY"


def test_io_impl_of_iceberg_is_pyicebergs_fileio_for_the_same_storage(tmp_path: Path) -> None:
    config = IcebergSinkConfig.model_validate(
        {
            "type": "iceberg",
            "catalog.properties.warehouse": str(tmp_path / "warehouse"),
            "catalog.properties.io-impl": "org.apache.iceberg.azure.adlsv2.ADLSFileIO",
        }
    )
    sink = IcebergSink(config, pipeline="p1")
    try:
        schema = Schema.of([Column("id", INT().not_null()), Column("item", STRING())], ["id"])
        table_id = TableId(None, "inventory", "orders")
        create(sink, schema, table_id)
        feed = Feed(table_id)
        write(sink, schema, feed, feed.insert({"id": 1, "item": "a"}))
        table: Any = sink.load_table(table_id)
        assert isinstance(table.io, FsspecFileIO)
        assert table.scan().to_arrow().to_pylist() == [{"id": 1, "item": "a"}]
    finally:
        sink.close()
