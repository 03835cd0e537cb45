"""The Paimon sink against real pypaimon: a filesystem catalog in a temporary directory."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pypaimon.write.native_write import NativeTableWrite

from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnType,
    DropColumn,
    RenameColumn,
    after,
    before,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    MAP,
    ROW,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TIMESTAMP_TZ,
    TINYINT,
    VARBINARY,
    VARCHAR,
    DataType,
    Field,
)
from ferry.sinks import OffsetCommitting
from ferry.sinks.base import ChangeKind, Support
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.registry import sink_class
from ferry.sinks.paimon.config import PaimonSinkConfig
from ferry.sinks.paimon.sink import PaimonSink
from tests.integration.helpers import ORDERS, ORDERS_TABLE, Feed, create, write
from tests.integration.helpers import SINK_TEST_TOPIC as TOPIC

pytestmark = pytest.mark.integration

T = ORDERS_TABLE


def make_config(warehouse: Path, **options: Any) -> PaimonSinkConfig:
    return PaimonSinkConfig.model_validate(
        {"type": "paimon", "catalog.properties.warehouse": str(warehouse), **options}
    )


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "paimon"


@pytest.fixture
def sink(warehouse: Path) -> Iterator[PaimonSink]:
    s = PaimonSink(make_config(warehouse), pipeline="p1")
    yield s
    s.close()


def read(sink: PaimonSink, table_id: TableId = T, order_by: str = "id") -> list[dict[str, Any]]:
    """The table's rows as a reader of the table sees them, without the row-kind column."""
    table = sink.load_table(table_id)
    assert table is not None
    builder = table.new_read_builder()
    data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    if data is None:
        return []
    rowkind = table.table_schema.options.get("rowkind.field")
    if rowkind in data.column_names:
        data = data.drop_columns([rowkind])
    rows: list[dict[str, Any]] = data.sort_by(order_by).to_pylist()
    return rows


def test_registry_and_capabilities_follow_the_matrix() -> None:
    assert sink_class("paimon") is PaimonSink
    caps = PaimonSink.capabilities
    for kind in (
        ChangeKind.CREATE_TABLE,
        ChangeKind.ADD_COLUMN_LAST,
        ChangeKind.ADD_COLUMN_POSITIONED,
        ChangeKind.ADD_COLUMN_DEFAULT,
        ChangeKind.DROP_COLUMN,
        ChangeKind.RENAME_COLUMN,
        ChangeKind.ALTER_COLUMN_TYPE,
        ChangeKind.RELAX_NULLABILITY,
    ):
        assert caps.support(kind) is Support.APPLY
    assert caps.support(ChangeKind.DROP_TABLE) is Support.UNSUPPORTED
    assert caps.support(ChangeKind.TRUNCATE_TABLE) is Support.UNSUPPORTED
    assert caps.support(ChangeKind.ALTER_COLUMN_COMMENT) is Support.NOT_SYNCED
    assert caps.support(ChangeKind.ALTER_TABLE_COMMENT) is Support.NOT_SYNCED
    assert caps.case_insensitive_columns


def test_config_defaults_and_flink_cdc_spelling(tmp_path: Path) -> None:
    config = PaimonSinkConfig.model_validate(
        {
            "type": "paimon",
            "catalog.properties.warehouse": (tmp_path / "w").as_uri(),
            "table.properties.bucket": 4,
            "commit.user": "loader",
        }
    )
    assert config.resolved_catalog_properties() == {
        "metastore": "filesystem",
        "warehouse": str(tmp_path / "w"),
    }
    assert config.new_table_properties(primary_key=True) == {"bucket": "4"}
    assert config.new_table_properties(primary_key=False) == {"bucket": "4"}
    assert config.resolved_commit_user("p1") == "loader"
    default = PaimonSinkConfig.model_validate({"type": "paimon"})
    assert default.warehouse_dir() == Path("var/paimon").resolve()
    assert default.new_table_properties(primary_key=True) == {"bucket": "1"}
    assert default.new_table_properties(primary_key=False) == {"bucket": "-1"}
    assert default.resolved_commit_user("p1") == "p1"


def test_create_table_with_primary_key_reads_back(sink: PaimonSink) -> None:
    assert sink.table_schema(T) is None
    create(sink, ORDERS)
    schema = sink.table_schema(T)
    assert schema == ORDERS
    table = sink.load_table(T)
    assert table is not None
    assert table.primary_keys == ["id"]
    assert table.table_schema.options["bucket"] == "1"


def test_delete_of_a_row_with_not_null_columns_needs_only_its_key(sink: PaimonSink) -> None:
    schema = Schema.of([Column("id", INT().not_null()), Column("name", STRING().not_null())], ["id"])
    create(sink, schema)
    feed = Feed(T)
    write(sink, schema, feed, feed.insert({"id": 1, "name": "a"}), feed.insert({"id": 2, "name": "b"}))
    write(sink, schema, feed, feed.delete({"id": 1}))
    assert read(sink) == [{"id": 2, "name": "b"}]


def test_add_column_first_after_before_last_with_old_rows_null(sink: PaimonSink) -> None:
    create(sink, ORDERS)
    feed = Feed(T)
    old = {"id": 1, "customer": "ann", "qty": 1, "price": Decimal("1.50")}
    write(sink, ORDERS, feed, feed.insert(old))
    changes = [
        AddColumn(T, Column("region", STRING()), FIRST),
        AddColumn(T, Column("status", STRING(), comment="order status"), after("customer")),
        AddColumn(T, Column("currency", CHAR(3)), before("price")),
        AddColumn(T, Column("note", STRING().not_null())),
    ]
    for change in changes:
        sink.apply_schema_change(change, None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.names == ("region", "id", "customer", "status", "qty", "currency", "price", "note")
    assert schema.column("status").comment == "order status"
    # added NOT NULL columns are nullable: the old rows have no value
    assert schema.column("note").type == STRING()
    new = {
        "region": "eu",
        "id": 2,
        "customer": "bob",
        "status": "new",
        "qty": 2,
        "currency": "EUR",
        "price": Decimal("2.00"),
        "note": "n",
    }
    write(sink, schema, feed, feed.insert(new))
    nulls = dict.fromkeys(("region", "status", "currency", "note"))
    assert read(sink) == [{**nulls, **old}, new]
    # applied once: a replay is a no-op
    sink.apply_schema_change(changes[0], None)
    assert sink.table_schema(T) == schema


def test_drop_and_rename_column_keep_rows(sink: PaimonSink) -> None:
    create(sink, ORDERS)
    feed = Feed(T)
    write(sink, ORDERS, feed, feed.insert({"id": 1, "customer": "ann", "qty": 1, "price": Decimal("1.50")}))
    sink.apply_schema_change(DropColumn(T, "customer"), None)
    sink.apply_schema_change(RenameColumn(T, "qty", "quantity"), None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.names == ("id", "quantity", "price")
    write(sink, schema, feed, feed.insert({"id": 2, "quantity": 2, "price": Decimal("2.50")}))
    assert read(sink) == [
        {"id": 1, "quantity": 1, "price": Decimal("1.50")},
        {"id": 2, "quantity": 2, "price": Decimal("2.50")},
    ]
    sink.apply_schema_change(RenameColumn(T, "qty", "quantity"), None)  # replay: no-op
    assert sink.table_schema(T) == schema


def test_widening_types_keeps_old_rows(sink: PaimonSink) -> None:
    schema = Schema.of(
        [
            Column("id", INT().not_null()),
            Column("n", INT()),
            Column("f", FLOAT()),
            Column("d", DECIMAL(10, 2)),
        ],
        ["id"],
    )
    create(sink, schema)
    feed = Feed(T)
    write(sink, schema, feed, feed.insert({"id": 1, "n": 7, "f": 1.5, "d": Decimal("12345678.91")}))
    for change in (
        AlterColumnType(T, "n", BIGINT()),
        AlterColumnType(T, "f", DOUBLE()),
        AlterColumnType(T, "d", DECIMAL(12, 2)),
    ):
        sink.apply_schema_change(change, None)
    widened = sink.table_schema(T)
    assert widened is not None
    assert [c.type for c in widened.columns] == [INT().not_null(), BIGINT(), DOUBLE(), DECIMAL(12, 2)]
    write(
        sink,
        widened,
        feed,
        feed.insert({"id": 2, "n": 5_000_000_000, "f": 0.1, "d": Decimal("1234567890.12")}),
    )
    assert read(sink) == [
        {"id": 1, "n": 7, "f": 1.5, "d": Decimal("12345678.91")},
        {"id": 2, "n": 5_000_000_000, "f": 0.1, "d": Decimal("1234567890.12")},
    ]


def test_narrowing_a_type_is_refused_naming_the_table(sink: PaimonSink) -> None:
    create(sink, ORDERS)
    with pytest.raises(SinkTerminalError, match=r"table shop\.orders.*qty.*INT.*TINYINT"):
        sink.apply_schema_change(AlterColumnType(T, "qty", TINYINT()), None)
    with pytest.raises(SinkTerminalError, match="customer"):
        sink.apply_schema_change(AlterColumnType(T, "customer", INT()), None)
    assert sink.table_schema(T) == ORDERS


def test_a_change_failing_on_case_is_retried_with_the_table_spelling(
    sink: PaimonSink, caplog: pytest.LogCaptureFixture
) -> None:
    create(sink, ORDERS)
    caplog.set_level(logging.INFO, logger="ferry.sinks.paimon.sink")
    feed = Feed(T)
    write(sink, ORDERS, feed, feed.insert({"id": 1, "customer": "ann", "qty": 1, "price": None}))
    sink.apply_schema_change(AlterColumnType(T, "Qty", BIGINT()), None)
    sink.apply_schema_change(AddColumn(T, Column("sku", STRING()), after("Qty")), None)
    sink.apply_schema_change(RenameColumn(T, "Qty", "quantity"), None)
    sink.apply_schema_change(DropColumn(T, "CUSTOMER"), None)
    # an added column the table has under another spelling is already there
    sink.apply_schema_change(AddColumn(T, Column("SKU", STRING())), None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert [(c.name, c.type) for c in schema.columns] == [
        ("id", BIGINT().not_null()),
        ("quantity", BIGINT()),
        ("sku", STRING()),
        ("price", DECIMAL(10, 2)),
    ]
    assert read(sink) == [{"id": 1, "quantity": 1, "sku": None, "price": None}]
    retried = [
        r.getMessage() for r in caplog.records if "retrying with the table's spelling" in r.getMessage()
    ]
    assert len(retried) == 4
    assert "Column Qty does not exist" in retried[0]


def test_existing_table_with_another_primary_key_is_refused_with_both_schemas(sink: PaimonSink) -> None:
    create(sink, ORDERS)
    other = Schema.of(
        [Column("id", BIGINT().not_null()), Column("customer", STRING().not_null())], ["customer"]
    )
    with pytest.raises(SinkTerminalError) as info:
        create(sink, other)
    message = str(info.value)
    assert "table shop.orders" in message
    assert "primary key (id) is not (customer)" in message
    assert f"existing: {ORDERS.describe()}" in message
    assert "wanted: (`id` BIGINT NOT NULL, `customer` STRING NOT NULL, PRIMARY KEY (customer))" in message


def test_committed_offsets_across_flushes_and_restarts(sink: PaimonSink) -> None:
    assert isinstance(sink, OffsetCommitting)
    create(sink, ORDERS)
    assert sink.committed_offsets(T) == {}
    feed = Feed(T)
    write(sink, ORDERS, feed, feed.insert({"id": 1, "customer": "a", "qty": 1, "price": None}))
    assert sink.committed_offsets(T) == {(TOPIC, 0): 1}
    sink.write(T, ORDERS, [feed.insert({"id": 2, "customer": "b", "qty": 2, "price": None})])
    sink.flush({(TOPIC, 0): feed.offset, (TOPIC, 1): 40})
    restarted = PaimonSink(sink.config, pipeline="p1")
    assert restarted.committed_offsets(T) == {(TOPIC, 0): 2, (TOPIC, 1): 40}
    # another pipeline's offsets are its own
    assert PaimonSink(sink.config, pipeline="p2").committed_offsets(T) == {}
    # a commit by another pipeline leaves this pipeline's offsets in an older snapshot, still found
    other = PaimonSink(sink.config, pipeline="p2")
    other.write(T, ORDERS, [feed.insert({"id": 3, "customer": "c", "qty": 3, "price": None})])
    other.flush({("elsewhere", 0): 7})
    assert restarted.committed_offsets(T) == {(TOPIC, 0): 2, (TOPIC, 1): 40}
    table = sink.load_table(T)
    assert table is not None
    assert table.snapshot_manager().get_latest_snapshot().commit_user == "p2"


def _order(i: int, customer: str, qty: int) -> dict[str, Any]:
    return {"id": i, "customer": customer, "qty": qty, "price": Decimal("1.25")}


def _upserts_over_three_commits(sink: PaimonSink) -> None:
    """Inserts, updates, deletes, a re-insert and a key change, in one commit and across commits."""
    create(sink, ORDERS)
    feed = Feed(T)
    write(
        sink,
        ORDERS,
        feed,
        *[feed.insert(_order(i, "first", i)) for i in range(1, 201)],
        feed.update(_order(1, "first", 1), _order(1, "same commit", 10)),
        feed.delete(_order(2, "first", 2)),
    )
    write(
        sink,
        ORDERS,
        feed,
        feed.update(_order(1, "same commit", 10), _order(1, "later commit", 11)),
        feed.insert(_order(2, "again", 20)),
        feed.delete(_order(3, "first", 3)),
        feed.update(_order(4, "first", 4), _order(400, "new key", 4)),
    )
    write(
        sink,
        ORDERS,
        feed,
        *[feed.update(_order(i, "first", i), _order(i, "third", -i)) for i in range(100, 201)],
    )


def _expected_upserts() -> list[dict[str, Any]]:
    rows = {i: _order(i, "first", i) for i in range(5, 100)}
    rows |= {i: _order(i, "third", -i) for i in range(100, 201)}
    rows[1] = _order(1, "later commit", 11)
    rows[2] = _order(2, "again", 20)
    rows[400] = _order(400, "new key", 4)
    return [rows[k] for k in sorted(rows)]


def test_rows_are_written_by_pypaimons_rust_writer(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with the row-kind column, each commit writes only its changes
    sink = PaimonSink(make_config(warehouse, **{"table.properties.rowkind.field": "_kind"}), pipeline="p1")
    try:
        batches: list[int] = []
        write_batch = NativeTableWrite.write_arrow_batch

        def counted(self: NativeTableWrite, data: Any, bucket: int | None = None) -> None:
            batches.append(data.num_rows)
            write_batch(self, data, bucket)

        monkeypatch.setattr(NativeTableWrite, "write_arrow_batch", counted)
        _upserts_over_three_commits(sink)
        # one Arrow batch per commit, each key's last change once (a key change: a delete and an insert)
        assert batches == [200, 5, 101]
        assert read(sink) == _expected_upserts()
        # the option is set on the copy a commit writes through, not stored in the table
        table = sink.load_table(T)
        assert table is not None
        assert "write.native.enabled" not in table.table_schema.options
    finally:
        sink.close()


def test_a_flush_on_another_thread_commits_what_write_buffered(sink: PaimonSink) -> None:
    create(sink, ORDERS)
    feed = Feed(T)
    for i in range(1, 4):
        sink.write(T, ORDERS, [feed.insert(_order(i, "written", i))])
        with ThreadPoolExecutor(1) as flusher:
            flusher.submit(sink.flush, feed.offsets()).result()
    assert read(sink) == [_order(i, "written", i) for i in range(1, 4)]
    assert sink.committed_offsets(T) == {(TOPIC, 0): 3}


def test_a_table_option_turning_the_rust_writer_off_is_kept(warehouse: Path) -> None:
    sink = PaimonSink(
        make_config(warehouse, **{"table.properties.write.native.enabled": "false"}), pipeline="p1"
    )
    try:
        _upserts_over_three_commits(sink)
        assert read(sink) == _expected_upserts()
        table = sink.load_table(T)
        assert table is not None
        assert table.table_schema.options["write.native.enabled"] == "false"
    finally:
        sink.close()


def test_a_table_without_primary_key_is_bucket_unaware(sink: PaimonSink) -> None:
    schema = Schema.of([Column("id", INT()), Column("name", STRING())])
    create(sink, schema)
    feed = Feed(T)
    write(sink, schema, feed, feed.insert({"id": 1, "name": "a"}), feed.insert({"id": 1, "name": "b"}))
    table = sink.load_table(T)
    assert table is not None
    assert table.table_schema.options["bucket"] == "-1"
    assert read(sink, order_by="name") == [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]


TYPES: list[tuple[DataType, Any]] = [
    (BOOLEAN(), True),
    (TINYINT(), -5),
    (SMALLINT(), 300),
    (INT(), 70_000),
    (BIGINT(), 5_000_000_000),
    (FLOAT(), 1.5),
    (DOUBLE(), 2.25),
    (DECIMAL(10, 2), Decimal("12.34")),
    (DECIMAL(38, 10), Decimal("1234567890123456789012345678.0123456789")),
    (CHAR(3), "abc"),
    (VARCHAR(20), "varchar"),
    (STRING(), "text ✓"),
    (BINARY(4), b"\x00\x01\x02\x03"),
    (VARBINARY(10), b"vb"),
    (BYTES(), b"\xff" * 40),
    (DATE(), date(2024, 2, 29)),
    (TIME(3), time(12, 30, 45, 123000)),
    (TIMESTAMP(3), datetime(2024, 1, 2, 3, 4, 5, 123000)),
    (TIMESTAMP(6), datetime(2024, 1, 2, 3, 4, 5, 123456)),
    (TIMESTAMP_LTZ(6), datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
    (ARRAY(INT()), [1, None, 3]),
    (MAP(STRING().not_null(), BIGINT()), [("k", 1), ("l", None)]),
    (ROW(Field("a", INT()), Field("b", STRING())), {"a": 1, "b": "x"}),
]


def test_every_paimon_type_round_trips(sink: PaimonSink) -> None:
    columns = [Column("id", INT().not_null())] + [Column(f"c{i}", t) for i, (t, _) in enumerate(TYPES)]
    schema = Schema.of(columns, ["id"])
    create(sink, schema)
    assert sink.table_schema(T) == schema
    assert all(sink.sink_type(t) == t for t, _ in TYPES)
    row = {"id": 1} | {f"c{i}": value for i, (_, value) in enumerate(TYPES)}
    empty = {"id": 2} | {f"c{i}": None for i in range(len(TYPES))}
    feed = Feed(T)
    write(sink, schema, feed, feed.insert(row), feed.insert(empty))
    assert read(sink) == [row, empty]


def test_sink_type_names_what_paimon_stores(sink: PaimonSink) -> None:
    assert sink.sink_type(TIME(6)) == TIME(3)
    assert sink.sink_type(TIME(0)) == TIME(0)
    assert sink.sink_type(TIMESTAMP_TZ(6)) == TIMESTAMP_LTZ(6)
    assert sink.sink_type(VARCHAR(5).not_null()) == VARCHAR(5).not_null()
