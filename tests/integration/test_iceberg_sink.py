"""The Iceberg sink against real pyiceberg: a SQLite catalog and a warehouse in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    DataChange,
    DropColumn,
    Op,
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
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.sinks.iceberg.types import sink_schema
from tests.integration.helpers import ORDERS, ORDERS_TABLE, Feed, Gate, create, write
from tests.integration.helpers import SINK_TEST_TOPIC as TOPIC

pytestmark = pytest.mark.integration

T = ORDERS_TABLE


def make_config(warehouse: Path, **options: Any) -> IcebergSinkConfig:
    return IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(warehouse), **options}
    )


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def sink(warehouse: Path) -> Iterator[IcebergSink]:
    s = IcebergSink(make_config(warehouse), pipeline="p1")
    yield s
    s.close()


def read(sink: IcebergSink, table_id: TableId = T, order_by: str = "id") -> list[dict[str, Any]]:
    table = sink.load_table(table_id)
    assert table is not None
    rows: list[dict[str, Any]] = table.scan().to_arrow().sort_by(order_by).to_pylist()
    return rows


def order(i: int, customer: str = "ada", qty: int = 1, price: str = "9.99") -> dict[str, Any]:
    return {"id": i, "customer": customer, "qty": qty, "price": Decimal(price)}


# ----------------------------------------------------------------------------------- create


def test_create_table_with_a_primary_key(sink: IcebergSink) -> None:
    assert sink.table_schema(T) is None
    create(sink, ORDERS)
    schema = sink.table_schema(T)
    assert schema == ORDERS
    table = sink.load_table(T)
    assert table is not None
    assert table.name() == ("shop", "orders")
    assert [table.schema().find_column_name(i) for i in table.schema().identifier_field_ids] == ["id"]
    assert table.schema().find_field("id").required
    assert not table.schema().find_field("qty").required
    assert table.properties["comment"] == "orders of the shop"


def test_created_tables_give_up_a_parquet_dictionary_past_64_kib_unless_the_job_says_otherwise(
    warehouse: Path,
) -> None:
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    for options, expected in (
        ({}, 65536),
        ({"table.properties.write.parquet.dict-size-bytes": "2097152"}, 2097152),
    ):
        sink = IcebergSink(make_config(warehouse / str(expected), **options), pipeline="p1")
        try:
            create(sink, ORDERS)
            table = sink.load_table(T)
            assert table is not None
            # what pyiceberg's Parquet writer (the one ferry's data files are written with) takes
            assert _get_parquet_writer_kwargs(table.properties)["dictionary_pagesize_limit"] == expected
        finally:
            sink.close()


def test_a_nullable_primary_key_column_becomes_required(sink: IcebergSink) -> None:
    create(sink, Schema.of([Column("id", INT()), Column("v", STRING())], ["id"]))
    assert sink.table_schema(T) == Schema.of([Column("id", INT().not_null()), Column("v", STRING())], ["id"])


def test_a_table_without_schema_part_goes_to_the_configured_namespace(warehouse: Path) -> None:
    sink = IcebergSink(make_config(warehouse, namespace="ods"), pipeline="p1")
    try:
        bare = TableId(None, None, "events")
        create(sink, Schema.of([Column("id", INT().not_null())], ["id"]), bare)
        table = sink.load_table(bare)
        assert table is not None and table.name() == ("ods", "events")
    finally:
        sink.close()


def test_an_incompatible_existing_table_is_refused_showing_both_schemas(sink: IcebergSink) -> None:
    create(sink, ORDERS)
    other = Schema.of([Column("id", STRING().not_null()), Column("total", DOUBLE())], ["id"])
    with pytest.raises(SinkTerminalError) as e:
        create(sink, other)
    message = str(e.value)
    assert "shop.orders" in message
    assert "existing: (`id` BIGINT NOT NULL, `customer` STRING" in message
    assert "wanted: (`id` STRING NOT NULL, `total` DOUBLE, PRIMARY KEY (id))" in message
    assert "no column total" in message


# ----------------------------------------------------------------------------------- rows


def test_snapshot_rows_and_replays_are_idempotent(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    snapshot = [DataChange(T, Op.READ, None, order(i), None) for i in range(3)]
    write(sink, ORDERS, feed, *snapshot)
    write(sink, ORDERS, feed, *snapshot)  # a replay after a restart writes the same rows again
    assert read(sink) == [order(i) for i in range(3)]


def test_a_composite_primary_key(sink: IcebergSink) -> None:
    lines = TableId(None, "shop", "order_lines")
    schema = Schema.of(
        [Column("order_id", BIGINT()), Column("line", INT()), Column("sku", STRING()), Column("qty", INT())],
        ["order_id", "line"],
    )
    feed = Feed(lines)
    create(sink, schema, lines)
    assert sink.table_schema(lines) == sink_schema(schema)

    def line(o: int, n: int, sku: str, qty: int = 1) -> dict[str, Any]:
        return {"order_id": o, "line": n, "sku": sku, "qty": qty}

    write(sink, schema, feed, *(feed.insert(line(o, n, f"s{o}{n}")) for o in (1, 2) for n in (1, 2, 3)))
    write(
        sink,
        schema,
        feed,
        feed.update(line(1, 2, "s12"), line(1, 2, "s12", qty=5)),
        feed.delete(line(2, 1, "s21")),
        feed.insert(line(2, 4, "s24")),
        feed.insert(line(1, 1, "other")),  # same line number, other order: (1, 1) is replaced
    )
    rows = sorted(read(sink, lines, "order_id"), key=lambda r: (r["order_id"], r["line"]))
    assert rows == [
        line(1, 1, "other"),
        line(1, 2, "s12", qty=5),
        line(1, 3, "s13"),
        line(2, 2, "s22"),
        line(2, 3, "s23"),
        line(2, 4, "s24"),
    ]


def test_keys_of_string_date_and_decimal_columns(sink: IcebergSink) -> None:
    prices = TableId(None, "shop", "prices")
    schema = Schema.of(
        [
            Column("sku", STRING()),
            Column("day", DATE()),
            Column("band", DECIMAL(5, 2)),
            Column("price", DOUBLE()),
        ],
        ["sku", "day", "band"],
    )
    feed = Feed(prices)
    create(sink, schema, prices)

    def price(sku: str, day: int, band: str, value: float) -> dict[str, Any]:
        return {"sku": sku, "day": date(2024, 1, day), "band": Decimal(band), "price": value}

    write(sink, schema, feed, *(feed.insert(price(s, d, "1.00", 1.0)) for s in ("a", "b") for d in (1, 2)))
    write(
        sink,
        schema,
        feed,
        feed.update(price("a", 2, "1.00", 1.0), price("a", 2, "1.00", 2.0)),
        feed.delete(price("b", 1, "1.00", 1.0)),
        feed.insert(price("b", 1, "1.50", 3.0)),  # the same sku and day in another band is another key
    )
    rows = sorted(read(sink, prices, "sku"), key=lambda r: (r["sku"], r["day"], r["band"]))
    assert rows == [
        price("a", 1, "1.00", 1.0),
        price("a", 2, "1.00", 2.0),
        price("b", 1, "1.50", 3.0),
        price("b", 2, "1.00", 1.0),
    ]


def test_a_required_column_without_value_is_refused_naming_it(sink: IcebergSink) -> None:
    feed = Feed(T)
    schema = Schema.of([Column("id", INT().not_null()), Column("code", STRING().not_null())], ["id"])
    create(sink, schema)
    sink.write(T, schema, [feed.insert({"id": 1, "code": None})])
    with pytest.raises(SinkTerminalError, match="column code is required"):
        sink.flush(feed.offsets())


def test_a_value_of_the_wrong_type_is_refused_naming_the_column(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    sink.write(T, ORDERS, [feed.insert({"id": 1, "qty": "many"})])
    with pytest.raises(SinkTerminalError, match="column qty: value 'many'"):
        sink.flush(feed.offsets())


# ----------------------------------------------------------------------------------- offsets


def test_committed_offsets_are_those_of_the_last_flush(warehouse: Path, sink: IcebergSink) -> None:
    assert isinstance(sink, OffsetCommitting)
    feed = Feed(T)
    create(sink, ORDERS)
    assert sink.committed_offsets(T) == {}
    write(sink, ORDERS, feed, feed.insert(order(1)), feed.insert(order(2)))
    assert sink.committed_offsets(T) == {(TOPIC, 0): 2}
    sink.write(T, ORDERS, [feed.insert(order(3)), feed.delete(order(1))])
    sink.flush({(TOPIC, 0): 4, (TOPIC, 1): 17, ("other", 3): 5})
    assert sink.committed_offsets(T) == {(TOPIC, 0): 4, (TOPIC, 1): 17, ("other", 3): 5}

    # an empty flush commits nothing
    table = sink.load_table(T)
    assert table is not None
    before_flush = len(table.snapshots())
    sink.flush({(TOPIC, 0): 99})
    table = sink.load_table(T)
    assert table is not None and len(table.snapshots()) == before_flush
    assert sink.committed_offsets(T) == {(TOPIC, 0): 4, (TOPIC, 1): 17, ("other", 3): 5}

    # a restarted sink reads them back; another pipeline has none in this table
    restarted = IcebergSink(make_config(warehouse), pipeline="p1")
    other = IcebergSink(make_config(warehouse), pipeline="p2")
    try:
        assert restarted.committed_offsets(T) == {(TOPIC, 0): 4, (TOPIC, 1): 17, ("other", 3): 5}
        assert other.committed_offsets(T) == {}
        assert restarted.committed_offsets(TableId(None, "shop", "missing")) == {}
    finally:
        restarted.close()
        other.close()


def test_committed_offsets_walk_back_past_other_writers(warehouse: Path, sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    write(sink, ORDERS, feed, feed.insert(order(1)))
    other = IcebergSink(make_config(warehouse), pipeline="p2")
    try:
        other.write(T, ORDERS, [DataChange(T, Op.INSERT, None, order(2), None)])
        other.flush({("elsewhere", 0): 10})
        assert other.committed_offsets(T) == {("elsewhere", 0): 10}
    finally:
        other.close()
    assert sink.committed_offsets(T) == {(TOPIC, 0): 1}


def test_old_snapshots_are_expired(warehouse: Path) -> None:
    sink = IcebergSink(make_config(warehouse, **{"snapshot.retain": 3}), pipeline="p1")
    try:
        feed = Feed(T)
        create(sink, ORDERS)
        for i in range(8):
            write(sink, ORDERS, feed, feed.insert(order(i)), feed.update(order(0), order(0, qty=i)))
        table = sink.load_table(T)
        assert table is not None
        assert len(table.snapshots()) <= 3 + 2  # the retained ones, and those the last commit added
        assert read(sink) == [order(0, qty=7), *(order(i) for i in range(1, 8))]
        assert sink.committed_offsets(T) == {(TOPIC, 0): feed.offset}
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("mode", "background"), [("merge-on-read", False), ("merge-on-read", True), ("copy-on-write", False)]
)
def test_files_only_expired_snapshots_used_are_deleted(warehouse: Path, mode: str, background: bool) -> None:
    options = {
        "snapshot.retain": 3,
        "sink.compaction.commit-interval": 5,
        "sink.compaction.min-input-files": 2,
        "sink.compaction.background": background,
        "table.properties.write.update.mode": mode,
        "table.properties.write.delete.mode": mode,
    }
    sink = IcebergSink(make_config(warehouse, **options), pipeline="p1")
    gate = sink.compaction_executor = Gate()  # a compaction in the background is written at once
    try:
        feed = Feed(T)
        create(sink, ORDERS)
        for i in range(20):
            # each flush rewrites the file holding row 0 (copy-on-write) or adds a position delete
            # file for it (merge-on-read), and adds one
            write(sink, ORDERS, feed, feed.insert(order(i + 1)), feed.update(order(0), order(0, qty=i)))
            gate.open()  # in the background: the compactions of commits 5, 11 and 17 commit at 6, 12, 18
        table = sink.load_table(T)
        assert table is not None
        io, snapshots = table.io, table.snapshots()
        assert len(snapshots) <= 5
        tasks = [t for s in snapshots for t in table.scan(snapshot_id=s.snapshot_id).plan_files()]
        data_files = {t.file.file_path for t in tasks} | {d.file_path for t in tasks for d in t.delete_files}
        assert any(t.delete_files for t in tasks) == (mode == "merge-on-read")
        metadata_files = {s.manifest_list for s in snapshots} | {
            m.manifest_path for s in snapshots for m in s.manifests(io)
        }
        location = Path(table.location().removeprefix("file://"))
        assert {p.as_uri() for p in location.rglob("*.parquet")} == {
            Path(f.removeprefix("file://")).as_uri() for f in data_files
        }
        assert {p.as_uri() for p in location.rglob("*.avro")} == {
            Path(f.removeprefix("file://")).as_uri() for f in metadata_files
        }
        for snapshot in snapshots:  # every snapshot kept can still be read
            table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert read(sink) == [order(0, qty=19), *(order(i) for i in range(1, 21))]
    finally:
        sink.close()


def test_small_files_are_compacted(warehouse: Path) -> None:
    options = {
        "sink.compaction.commit-interval": 4,
        "sink.compaction.min-input-files": 3,
        "sink.compaction.background": False,  # in the background: test_iceberg_background_compaction.py
    }
    sink = IcebergSink(make_config(warehouse, **options), pipeline="p1")
    try:
        feed = Feed(T)
        create(sink, ORDERS)
        for i in range(3):
            write(sink, ORDERS, feed, feed.insert(order(i)))
        table = sink.load_table(T)
        assert table is not None and len(list(table.scan().plan_files())) == 3
        write(sink, ORDERS, feed, feed.insert(order(3)))  # the fourth commit compacts
        table = sink.load_table(T)
        assert table is not None and len(list(table.scan().plan_files())) == 1
        assert read(sink) == [order(i) for i in range(4)]
        assert sink.committed_offsets(T) == {(TOPIC, 0): 4}
    finally:
        sink.close()


# ----------------------------------------------------------------------------------- schema changes


def test_add_columns_first_after_before_and_last(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    write(sink, ORDERS, feed, feed.insert(order(1)))
    changes = [
        AddColumn(T, Column("region", STRING()), FIRST),
        AddColumn(T, Column("note", STRING(), comment="free text"), after("customer")),
        AddColumn(T, Column("channel", STRING()), before("qty")),
        AddColumn(T, Column("ts", TIMESTAMP(3).not_null())),  # last; NOT NULL cannot hold old rows
    ]
    for change in changes:
        sink.apply_schema_change(change, None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.names == ("region", "id", "customer", "note", "channel", "qty", "price", "ts")
    assert schema.column("note").comment == "free text"
    assert schema.column("ts").type == TIMESTAMP(6)
    new = {**order(2), "region": "eu", "note": "n", "channel": "web", "ts": datetime(2024, 5, 1, 12, 0)}
    write(sink, schema, feed, feed.insert(new))
    nulls = {"region": None, "note": None, "channel": None, "ts": None}
    assert read(sink) == [{**order(1), **nulls}, new]
    # applying the same change again (a replay) changes nothing
    sink.apply_schema_change(changes[0], None)
    assert sink.table_schema(T) == schema
    # after a column the sink lacks (its add was skipped): last
    sink.apply_schema_change(AddColumn(T, Column("x", INT()), after("nowhere")), None)
    schema = sink.table_schema(T)
    assert schema is not None and schema.names[-1] == "x"


def test_rename_column_keeps_rows_before_and_after(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    write(sink, ORDERS, feed, feed.insert(order(1, "ada")))
    sink.apply_schema_change(RenameColumn(T, "customer", "buyer"), None)
    schema = sink.table_schema(T)
    assert schema is not None and schema.names == ("id", "buyer", "qty", "price")
    renamed = {"id": 2, "buyer": "grace", "qty": 1, "price": Decimal("1.00")}
    write(sink, schema, feed, feed.insert(renamed))
    assert read(sink) == [{"id": 1, "buyer": "ada", "qty": 1, "price": Decimal("9.99")}, renamed]
    # renaming the primary key keeps it the key
    sink.apply_schema_change(RenameColumn(T, "id", "order_id"), None)
    schema = sink.table_schema(T)
    assert schema is not None and schema.primary_keys == ("order_id",)
    sink.apply_schema_change(RenameColumn(T, "id", "order_id"), None)  # a replay is a no-op


def test_drop_column(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ORDERS)
    write(sink, ORDERS, feed, feed.insert(order(1)))
    sink.apply_schema_change(DropColumn(T, "qty"), None)
    schema = sink.table_schema(T)
    assert schema is not None and schema.names == ("id", "customer", "price")
    assert read(sink) == [{"id": 1, "customer": "ada", "price": Decimal("9.99")}]
    with pytest.raises(SinkTerminalError, match="shop.orders"):
        sink.apply_schema_change(DropColumn(T, "id"), None)


def test_widen_int_float_and_decimal_keeps_values(sink: IcebergSink) -> None:
    feed = Feed(T)
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
    old = {"id": 1, "n": 2_000_000_000, "f": 1.5, "d": Decimal("12345678.91")}
    write(sink, schema, feed, feed.insert(old))
    for change in (
        AlterColumnType(T, "n", BIGINT(), INT()),
        AlterColumnType(T, "f", DOUBLE(), FLOAT()),
        AlterColumnType(T, "d", DECIMAL(12, 2), DECIMAL(10, 2)),
        AlterColumnType(T, "id", BIGINT().not_null(), INT().not_null()),  # the key may widen too
    ):
        sink.apply_schema_change(change, None)
    widened = sink.table_schema(T)
    assert widened is not None
    assert [c.type for c in widened.columns] == [BIGINT().not_null(), BIGINT(), DOUBLE(), DECIMAL(12, 2)]
    new = {"id": 2**40, "n": 2**62, "f": 1e300, "d": Decimal("1234567890.12")}
    write(sink, widened, feed, feed.insert(new))
    assert read(sink) == [old, new]


def test_a_type_change_iceberg_stores_alike_is_a_no_op(sink: IcebergSink) -> None:
    schema = Schema.of(
        [Column("id", INT().not_null()), Column("s", VARCHAR(10)), Column("t", SMALLINT())], ["id"]
    )
    create(sink, schema)
    before_change = sink.table_schema(T)
    sink.apply_schema_change(AlterColumnType(T, "s", STRING(), VARCHAR(10)), None)
    sink.apply_schema_change(AlterColumnType(T, "t", INT(), SMALLINT()), None)
    assert sink.table_schema(T) == before_change


@pytest.mark.parametrize(
    ("column", "old", "new", "why"),
    [
        ("n", BIGINT(), INT(), "long → int"),
        ("d", DECIMAL(12, 2), DECIMAL(10, 2), "cannot narrow a decimal"),
        ("d", DECIMAL(12, 2), DECIMAL(12, 4), "cannot change a decimal's scale"),
        ("s", STRING(), INT(), "string → int"),
        ("n", BIGINT(), DOUBLE(), "long → double"),
    ],
)
def test_an_illegal_type_change_names_table_column_and_types(
    sink: IcebergSink, column: str, old: DataType, new: DataType, why: str
) -> None:
    schema = Schema.of(
        [
            Column("id", INT().not_null()),
            Column("n", BIGINT()),
            Column("d", DECIMAL(12, 2)),
            Column("s", STRING()),
        ],
        ["id"],
    )
    create(sink, schema)
    with pytest.raises(SinkTerminalError) as e:
        sink.apply_schema_change(AlterColumnType(T, column, new, old), None)
    message = str(e.value)
    assert "table shop.orders" in message
    assert f"column {column} from {old} to {new}" in message
    assert why in message
    assert sink.table_schema(T) == schema  # nothing changed


def test_nested_types_widen_inside(sink: IcebergSink) -> None:
    feed = Feed(T)
    point = ROW(Field("x", INT()), Field("y", INT()))
    schema = Schema.of(
        [
            Column("id", INT().not_null()),
            Column("tags", ARRAY(INT())),
            Column("p", point),
            Column("m", MAP(STRING(), FLOAT())),
        ],
        ["id"],
    )
    create(sink, schema)
    write(sink, schema, feed, feed.insert({"id": 1, "tags": [1], "p": {"x": 1, "y": 2}, "m": {"a": 0.5}}))
    wider_point = ROW(Field("x", BIGINT()), Field("y", INT()), Field("z", STRING()))
    for change in (
        AlterColumnType(T, "tags", ARRAY(BIGINT()), ARRAY(INT())),
        AlterColumnType(T, "p", wider_point, point),
        AlterColumnType(T, "m", MAP(STRING(), DOUBLE()), MAP(STRING(), FLOAT())),
    ):
        sink.apply_schema_change(change, None)
    widened = sink.table_schema(T)
    assert widened is not None
    assert widened.column("tags").type == ARRAY(BIGINT())
    assert widened.column("p").type == wider_point
    assert widened.column("m").type == MAP(STRING().not_null(), DOUBLE())
    write(
        sink,
        widened,
        feed,
        feed.insert({"id": 2, "tags": [2**40], "p": {"x": 2**40, "y": 0, "z": "q"}, "m": None}),
    )
    assert read(sink) == [
        {"id": 1, "tags": [1], "p": {"x": 1, "y": 2, "z": None}, "m": [("a", 0.5)]},
        {"id": 2, "tags": [2**40], "p": {"x": 2**40, "y": 0, "z": "q"}, "m": None},
    ]


def test_comments(sink: IcebergSink) -> None:
    create(sink, ORDERS)
    sink.apply_schema_change(AlterColumnComment(T, "qty", "how many"), None)
    sink.apply_schema_change(AlterTableComment(T, "all orders"), None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.column("qty").comment == "how many" and schema.comment == "all orders"
    sink.apply_schema_change(AlterColumnComment(T, "qty", None), None)
    sink.apply_schema_change(AlterTableComment(T, None), None)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.column("qty").comment is None and schema.comment is None


def test_capabilities() -> None:
    caps = IcebergSink.capabilities
    applied = {
        ChangeKind.CREATE_TABLE,
        ChangeKind.ADD_COLUMN_LAST,
        ChangeKind.ADD_COLUMN_POSITIONED,
        ChangeKind.ADD_COLUMN_DEFAULT,
        ChangeKind.DROP_COLUMN,
        ChangeKind.RENAME_COLUMN,
        ChangeKind.ALTER_COLUMN_TYPE,
        ChangeKind.RELAX_NULLABILITY,
    }
    assert {k for k in ChangeKind if caps.support(k) is Support.APPLY} == applied
    assert caps.support(ChangeKind.DROP_TABLE) is Support.UNSUPPORTED
    assert caps.support(ChangeKind.TRUNCATE_TABLE) is Support.UNSUPPORTED
    assert caps.support(ChangeKind.ALTER_COLUMN_COMMENT) is Support.NOT_SYNCED
    assert caps.support(ChangeKind.ALTER_TABLE_COMMENT) is Support.NOT_SYNCED
    assert sink_class("iceberg") is IcebergSink


# ----------------------------------------------------------------------------------- types


ALL_TYPES = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("b", BOOLEAN()),
        Column("i8", TINYINT()),
        Column("i16", SMALLINT()),
        Column("i32", INT()),
        Column("f32", FLOAT()),
        Column("f64", DOUBLE()),
        Column("dec", DECIMAL(20, 4)),
        Column("c", CHAR(3)),
        Column("vc", VARCHAR(40)),
        Column("s", STRING()),
        Column("bin", BINARY(4)),
        Column("vbin", VARBINARY(10)),
        Column("bytes", BYTES()),
        Column("d", DATE()),
        Column("t", TIME(3)),
        Column("ts", TIMESTAMP(6)),
        Column("ts_ltz", TIMESTAMP_LTZ(3)),
        Column("arr", ARRAY(STRING().not_null())),
        Column("map", MAP(STRING(), BIGINT())),
        Column("row", ROW(Field("a", INT().not_null()), Field("b", ARRAY(DOUBLE())))),
    ],
    ["id"],
)

STORED = {
    "i8": INT(),
    "i16": INT(),
    "c": STRING(),
    "vc": STRING(),
    "bin": BYTES(),
    "vbin": BYTES(),
    "t": TIME(6),
    "ts_ltz": TIMESTAMP_LTZ(6),
    "map": MAP(STRING().not_null(), BIGINT()),
}


def test_every_type_round_trips(sink: IcebergSink) -> None:
    feed = Feed(T)
    create(sink, ALL_TYPES)
    schema = sink.table_schema(T)
    assert schema is not None
    assert schema.names == ALL_TYPES.names
    for column in ALL_TYPES.columns:
        stored = schema.column(column.name).type
        assert stored == STORED.get(column.name, column.type), column.name
        assert sink.sink_type(column.type) == stored, column.name
    row = {
        "id": 1,
        "b": True,
        "i8": -128,
        "i16": 32767,
        "i32": -(2**31),
        "f32": 0.5,
        "f64": 1e-300,
        "dec": Decimal("1234567890123456.7890"),
        "c": "abc",
        "vc": "varchar",
        "s": "ünïcödé",
        "bin": b"\x00\x01\x02\x03",
        "vbin": b"\xff",
        "bytes": b"",
        "d": date(1999, 12, 31),
        "t": time(23, 59, 58, 123000),
        "ts": datetime(2024, 2, 29, 1, 2, 3, 456789),
        "ts_ltz": datetime(2024, 2, 29, 1, 2, 3, 456000, tzinfo=UTC),
        "arr": ["x", "y"],
        "map": {"k": 2**40},
        "row": {"a": 7, "b": [1.5, None]},
    }
    empty = {"id": 2, **{c: None for c in ALL_TYPES.names if c != "id"}}
    write(sink, schema, feed, feed.insert(row), feed.insert(empty))
    assert read(sink) == [{**row, "map": [("k", 2**40)]}, empty]


def test_sink_types_are_what_iceberg_stores(sink: IcebergSink) -> None:
    assert sink.sink_type(TINYINT()) == INT()
    assert sink.sink_type(SMALLINT().not_null()) == INT().not_null()
    assert sink.sink_type(VARCHAR(255)) == STRING()
    assert sink.sink_type(CHAR(1)) == STRING()
    assert sink.sink_type(BINARY(16)) == BYTES()
    assert sink.sink_type(TIMESTAMP(3)) == TIMESTAMP(6)
    assert sink.sink_type(TIMESTAMP(9)) == TIMESTAMP(6)
    assert sink.sink_type(TIMESTAMP_TZ(3)) == TIMESTAMP_LTZ(6)
    assert sink.sink_type(TIME(0)) == TIME(6)
    assert sink.sink_type(DECIMAL(38, 10)) == DECIMAL(38, 10)
    assert sink.sink_type(ARRAY(SMALLINT())) == ARRAY(INT())


# ----------------------------------------------------------------------------------- config


def test_config_folds_flink_cdc_options_and_defaults_to_a_local_sqlite_catalog(tmp_path: Path) -> None:
    config = IcebergSinkConfig.model_validate(
        {
            "type": "iceberg",
            "catalog.properties.warehouse": str(tmp_path / "lake"),
            "table.properties.write.parquet.compression-codec": "snappy",
            "snapshot.retain": 5,
        }
    )
    assert config.catalog_properties == {"warehouse": str(tmp_path / "lake")}
    assert config.resolved_catalog_properties() == {
        "type": "sql",
        "warehouse": (tmp_path / "lake").as_uri(),
        "uri": f"sqlite:///{tmp_path / 'lake'}/catalog.db",
    }
    assert config.table_properties == {"write.parquet.compression-codec": "snappy"}
    assert config.new_table_properties()["write.parquet.compression-codec"] == "snappy"
    assert config.snapshot_retain == 5 and config.namespace == "default"
    remote = IcebergSinkConfig.model_validate({"type": "iceberg", "catalog.properties.type": "rest"})
    assert remote.resolved_catalog_properties() == {"type": "rest"}
    with pytest.raises(ValueError, match=r"catalog\.properties\.uri is required"):
        IcebergSinkConfig.model_validate(
            {"type": "iceberg", "catalog.properties.warehouse": "s3://bucket/lake"}
        )
