"""Paimon tables as Flink CDC's Paimon sink creates them, written by ``ferry run`` from Debezium
records on a real broker and read back with pypaimon (not through ferry): the partition keys of
a transform join the primary key, ``table-options`` reach the table, no column other than the
projection's, and deletes applied with and without the opt-in row-kind column."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pypaimon import CatalogFactory
from pypaimon import Schema as PaimonSchema
from pypaimon.schema.data_types import AtomicType, DataField

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import INT, STRING
from ferry.sinks.paimon.config import PaimonSinkConfig
from ferry.sinks.paimon.sink import PaimonSink
from tests.integration.helpers import Feed, create, job_yaml, run_ferry, write

pytestmark = pytest.mark.integration


def orders(server: str) -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        server,
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("region", dbz.STRING),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )


def paimon_table(warehouse: Path, identifier: str = "inventory.orders") -> Any:
    catalog = CatalogFactory.create({"metastore": "filesystem", "warehouse": str(warehouse)})
    return catalog.get_table(identifier)


def rows_of(table: Any) -> list[dict[str, Any]]:
    builder = table.new_read_builder()
    data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return [] if data is None else sorted(data.to_pylist(), key=lambda r: r["id"])


class Oracle:
    """The source table's rows after each change, keyed by ``id``."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}

    def apply(self, op: str, row: dict[str, Any]) -> None:
        if op == "d":
            del self.rows[row["id"]]
        else:
            self.rows[row["id"]] = row

    def sorted(self) -> list[dict[str, Any]]:
        return [self.rows[k] for k in sorted(self.rows)]


def produce_changes(bootstrap: str, topic: str, table: dbz.DebeziumTable, oracle: Oracle) -> None:
    """Inserts over two regions, updates (one moving a row to the other region), and deletes,
    the last of them emptying region ``eu``; each delete followed by its tombstone, as the
    Debezium MySQL connector writes them by default (``tombstones.on.delete``)."""
    rows = {
        i: {"id": i, "region": "eu" if i <= 3 else "us", "item": f"item-{i}", "qty": i} for i in range(1, 9)
    }
    records: list[tuple[bytes | None, bytes | None]] = []

    def change(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        if op == "c":
            assert after is not None
            records.append(table.insert(after))
        elif op == "u":
            assert before is not None and after is not None
            records.append(table.update(before, after))
        else:
            assert before is not None
            key, value = table.delete(before)
            records.extend([(key, value), (key, None)])
        oracle.apply(op, after if after is not None else before)  # type: ignore[arg-type]

    for row in rows.values():
        change("c", None, row)
    moved = {**rows[1], "region": "us", "qty": 11}
    change("u", rows[1], moved)
    change("u", rows[4], {**rows[4], "item": "renamed", "qty": 14})
    change("d", rows[2], None)
    change("d", rows[3], None)
    change("d", rows[5], None)
    produce(bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])


TRANSFORM = """
transform:
  - source-table: inventory.orders
    partition-keys: region
    table-options: bucket=2;file-index.bloom-filter.columns=item;changelog-producer=input
    table-options.delimiter: ";"
"""


def test_a_transform_partition_keys_join_the_primary_key_and_table_options_reach_the_table(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    table = orders(f"s{group_id[-8:]}")
    topic = topic_factory()
    oracle = Oracle()
    produce_changes(kafka_bootstrap, topic, table, oracle)
    warehouse = tmp_path / "paimon"
    job = tmp_path / "job.yaml"
    sink = f"type: paimon\ncatalog.properties.warehouse: {warehouse}"
    job.write_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, sink=sink, top_extra=TRANSFORM))

    run_ferry("run", job, cwd=tmp_path)

    written = paimon_table(warehouse)
    # Flink CDC's PaimonMetadataApplier: the primary key, then the partition keys it lacks
    assert written.primary_keys == ["id", "region"]
    assert written.partition_keys == ["region"]
    options = written.table_schema.options
    assert options["bucket"] == "2"
    assert options["file-index.bloom-filter.columns"] == "item"
    assert options["changelog-producer"] == "input"
    # the projection's columns and no other: no row-kind column by default
    assert [f.name for f in written.table_schema.fields] == ["id", "region", "item", "qty"]
    assert "rowkind.field" not in options
    # the update that moved row 1 to us removed it from eu; the deletes emptied eu
    assert rows_of(written) == oracle.sorted()
    assert {r["region"] for r in rows_of(written)} == {"us"}

    # a start without the pipeline's state (its offsets are in the table's snapshots) finds the
    # table keyed by (id, region), takes it, and goes on writing into it
    later = [
        table.insert({"id": 9, "region": "eu", "item": "item-9", "qty": 9}),
        table.update(oracle.rows[6], {**oracle.rows[6], "region": "eu", "qty": 16}),
        table.delete(oracle.rows[7]),
        (table.delete(oracle.rows[7])[0], None),  # the tombstone after it
    ]
    oracle.apply("c", {"id": 9, "region": "eu", "item": "item-9", "qty": 9})
    oracle.apply("u", {**oracle.rows[6], "region": "eu", "qty": 16})
    oracle.apply("d", oracle.rows[7])
    produce(kafka_bootstrap, topic, [v for _, v in later], keys=[k for k, _ in later])
    (tmp_path / "state.db").unlink()

    run_ferry("run", job, cwd=tmp_path)

    written = paimon_table(warehouse)
    assert written.primary_keys == ["id", "region"]
    assert rows_of(written) == oracle.sorted()
    assert {r["id"] for r in rows_of(written) if r["region"] == "eu"} == {6, 9}


def sink_schema() -> Schema:
    return Schema.of(
        [Column("id", INT().not_null()), Column("region", STRING()), Column("item", STRING())],
        ["id"],
        partition_keys=("region",),
    )


T = TableId(None, "inventory", "orders")


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "paimon"


def open_sink(warehouse: Path, **options: str) -> PaimonSink:
    config = PaimonSinkConfig.model_validate(
        {"type": "paimon", "catalog.properties.warehouse": str(warehouse), **options}
    )
    return PaimonSink(config, pipeline="p1")


@pytest.fixture
def sink(warehouse: Path) -> Iterator[PaimonSink]:
    s = open_sink(warehouse)
    yield s
    s.close()


def row(i: int, region: str, item: str) -> dict[str, Any]:
    return {"id": i, "region": region, "item": item}


def test_partition_key_option_of_flink_cdc_joins_the_key_and_makes_it_not_null(warehouse: Path) -> None:
    # Flink CDC's PaimonMetadataApplierTest: primary key col1, partition.key col3,col4
    sink = open_sink(warehouse, **{"partition.key": "test.table1:col3,col4", "table.properties.bucket": "-1"})
    try:
        schema = Schema.of(
            [Column(f"col{i}", STRING().not_null() if i == 1 else STRING()) for i in range(1, 5)], ["col1"]
        )
        create(sink, schema, TableId(None, "test", "table1"))
    finally:
        sink.close()
    table = paimon_table(warehouse, "test.table1")
    assert table.primary_keys == ["col1", "col3", "col4"]
    assert table.partition_keys == ["col3", "col4"]
    assert [(f.name, f.type.nullable) for f in table.table_schema.fields] == [
        ("col1", False),
        ("col2", True),
        ("col3", False),
        ("col4", False),
    ]
    assert table.table_schema.options["bucket"] == "-1"


def test_partitions_of_a_table_without_primary_key_make_no_key(sink: PaimonSink, warehouse: Path) -> None:
    # Flink CDC would make the partition keys the primary key of such a table, keeping one row per
    # partition; ferry keeps it an append table. A primary-key table beside it gets them in its key.
    schema = Schema.of([Column("id", INT()), Column("region", STRING())], partition_keys=("region",))
    create(sink, schema, T)
    create(sink, sink_schema(), TableId(None, "inventory", "keyed"))
    feed = Feed(T)
    write(sink, schema, feed, feed.insert({"id": 1, "region": "eu"}), feed.insert({"id": 1, "region": "eu"}))
    table = paimon_table(warehouse)
    assert table.primary_keys == [] and table.partition_keys == ["region"]
    assert len(rows_of(table)) == 2
    assert paimon_table(warehouse, "inventory.keyed").primary_keys == ["id", "region"]


def test_deletes_without_the_row_kind_column_leave_the_rest(sink: PaimonSink, warehouse: Path) -> None:
    schema = sink_schema()
    create(sink, schema, T)
    feed = Feed(T)
    write(sink, schema, feed, *[feed.insert(row(i, "eu" if i < 3 else "us", f"a{i}")) for i in range(1, 6)])
    write(
        sink,
        schema,
        feed,
        feed.delete(row(1, "eu", "a1")),
        feed.update(row(2, "eu", "a2"), row(2, "us", "moved")),
        feed.update(row(3, "us", "a3"), row(3, "us", "b3")),
        feed.insert(row(6, "eu", "a6")),
        feed.delete(row(6, "eu", "a6")),
    )
    table = paimon_table(warehouse)
    assert [f.name for f in table.table_schema.fields] == ["id", "region", "item"]
    assert rows_of(table) == [
        row(2, "us", "moved"),
        row(3, "us", "b3"),
        row(4, "us", "a4"),
        row(5, "us", "a5"),
    ]
    # region eu lost its last row: its partition holds nothing
    assert all(r["region"] == "us" for r in rows_of(table))
    assert sink.committed_offsets(T) == feed.offsets()


def test_the_row_kind_column_is_opt_in_and_named_by_rowkind_field(warehouse: Path) -> None:
    sink = open_sink(warehouse, **{"table.properties.rowkind.field": "_kind"})
    try:
        schema = sink_schema()
        create(sink, schema, T)
        feed = Feed(T)
        write(sink, schema, feed, feed.insert(row(1, "eu", "a")), feed.insert(row(2, "eu", "b")))
        write(sink, schema, feed, feed.delete(row(1, "eu", "a")))
        assert sink.table_schema(T).names == ("id", "region", "item")  # type: ignore[union-attr]
    finally:
        sink.close()
    table = paimon_table(warehouse)
    assert table.table_schema.options["rowkind.field"] == "_kind"
    # without the option, a primary-key table has none
    default = open_sink(warehouse)
    try:
        create(default, sink_schema(), TableId(None, "inventory", "plain"))
    finally:
        default.close()
    assert [f.name for f in paimon_table(warehouse, "inventory.plain").table_schema.fields] == [
        "id",
        "region",
        "item",
    ]
    assert [f.name for f in table.table_schema.fields] == ["id", "region", "item", "_kind"]
    assert [{k: v for k, v in r.items() if k != "_kind"} for r in rows_of(table)] == [row(2, "eu", "b")]


def test_a_table_written_with_the_row_kind_column_keeps_being_written_through_it(warehouse: Path) -> None:
    # a table as ferry created every primary-key table before the column became opt-in
    catalog = CatalogFactory.create({"metastore": "filesystem", "warehouse": str(warehouse)})
    catalog.create_database("inventory", True)
    fields = [
        DataField(0, "id", AtomicType("INT", nullable=False)),
        DataField(1, "item", AtomicType("STRING")),
        DataField(2, "_ferry_row_kind", AtomicType("STRING")),
    ]
    options = {"bucket": "1", "rowkind.field": "_ferry_row_kind"}
    catalog.create_table("inventory.orders", PaimonSchema(fields, [], ["id"], options), False)
    schema = Schema.of([Column("id", INT().not_null()), Column("item", STRING())], ["id"])
    sink = open_sink(warehouse)
    try:
        create(sink, schema, T)  # the existing table is compatible: the column is not the source's
        create(sink, schema, TableId(None, "inventory", "created"))
        assert sink.table_schema(T) == schema
        feed = Feed(T)
        write(sink, schema, feed, feed.insert({"id": 1, "item": "a"}), feed.insert({"id": 2, "item": "b"}))
        write(
            sink,
            schema,
            feed,
            feed.delete({"id": 1, "item": "a"}),
            feed.update({"id": 2, "item": "b"}, {"id": 2, "item": "c"}),
        )
    finally:
        sink.close()
    table = paimon_table(warehouse)
    assert rows_of(table) == [{"id": 2, "item": "c", "_ferry_row_kind": "+U"}]
    # merge-on-read: the second commit appended its changes, no rewrite of the first's rows
    snapshot = table.snapshot_manager().get_latest_snapshot()
    assert snapshot.commit_kind == "APPEND"
    # a table created now beside it has no such column
    assert "rowkind.field" not in paimon_table(warehouse, "inventory.created").table_schema.options


def test_ignore_delete_of_the_table_drops_deletes(warehouse: Path) -> None:
    sink = open_sink(warehouse, **{"table.properties.ignore-delete": "true"})
    try:
        schema = sink_schema()
        create(sink, schema, T)
        feed = Feed(T)
        write(sink, schema, feed, feed.insert(row(1, "eu", "a")))
        write(sink, schema, feed, feed.delete(row(1, "eu", "a")), feed.insert(row(2, "eu", "b")))
    finally:
        sink.close()
    assert rows_of(paimon_table(warehouse)) == [row(1, "eu", "a"), row(2, "eu", "b")]


#: One change of the source table: ("upsert" or "delete", id, region, item).
Step = tuple[str, int, str, str]

steps = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "upsert", "delete"]),
        st.integers(1, 6),
        st.sampled_from(["eu", "us", "ap"]),
        st.sampled_from(["a", "b", "c"]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flushes=st.lists(steps, min_size=1, max_size=4), row_kind_column=st.booleans())
def test_flushes_of_upserts_moves_and_deletes_read_back_as_the_model(
    flushes: list[list[Step]], row_kind_column: bool
) -> None:
    """Against a model of the source table: after each flush the Paimon table, keyed by (id,
    region) and partitioned by region, holds exactly the model's rows, with or without the
    row-kind column."""
    with tempfile.TemporaryDirectory() as directory:
        options = {"table.properties.rowkind.field": "_kind"} if row_kind_column else {}
        sink = open_sink(Path(directory), **options)
        try:
            schema = sink_schema()
            create(sink, schema, T)
            feed = Feed(T)
            model: dict[int, dict[str, Any]] = {}
            for flush in flushes:
                changes = []
                for op, i, region, item in flush:
                    old = model.get(i)
                    if op == "delete":
                        if old is not None:
                            changes.append(feed.delete(old))
                            del model[i]
                        continue
                    new = row(i, region, item)
                    changes.append(feed.insert(new) if old is None else feed.update(old, new))
                    model[i] = new
                if changes:
                    write(sink, schema, feed, *changes)
                table = paimon_table(Path(directory))
                read = [{k: v for k, v in r.items() if k != "_kind"} for r in rows_of(table)]
                assert read == [model[k] for k in sorted(model)]
        finally:
            sink.close()
