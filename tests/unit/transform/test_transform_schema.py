"""Transforms per table: projected schemas, filtered and projected rows, schema changes through a
projection, and what is refused when a job is validated."""

from __future__ import annotations

import textwrap
from decimal import Decimal
from typing import Any

import pytest

from ferry.config import ConfigError, load_job_text
from ferry.config.job import TransformConfig
from ferry.model import types as T
from ferry.model.events import (
    LAST,
    AddColumn,
    AlterColumnType,
    CreateTable,
    DataChange,
    DropColumn,
    DropTable,
    Op,
    RenameColumn,
    SchemaChange,
    SourcePosition,
    TruncateTable,
    after,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.transform.blocks import TableTransforms, TransformError, stateful_reason, unsupported_reason
from ferry.worker import UnsupportedOptionError, check_supported

ORDERS = TableId.parse("shop.orders")
OTHER = TableId.parse("shop.customers")
SCHEMA = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("name", T.STRING()),
        Column("price", T.DECIMAL(10, 2)),
        Column("qty", T.INT()),
        Column("region", T.STRING()),
    ],
    ["id"],
)


def transforms(*blocks: dict[str, str]) -> TableTransforms:
    return TableTransforms([TransformConfig.model_validate(b) for b in blocks])


def one(projection: str | None = None, filter: str | None = None, **more: str) -> TableTransforms:
    block = {"source-table": r"shop.orders", **more}
    if projection is not None:
        block["projection"] = projection
    if filter is not None:
        block["filter"] = filter
    return transforms(block)


def described(schema: Schema) -> str:
    return schema.describe()


class Failures(list[tuple[DataChange, str]]):
    def __call__(self, change: DataChange, reason: str) -> None:
        self.append((change, reason))


def insert(offset: int, **row: Any) -> DataChange:
    return DataChange(ORDERS, Op.INSERT, None, row, SourcePosition("t", 0, offset))


def update(offset: int, before: dict[str, Any], after_row: dict[str, Any]) -> DataChange:
    return DataChange(ORDERS, Op.UPDATE, before, after_row, SourcePosition("t", 0, offset))


def delete(offset: int, **row: Any) -> DataChange:
    return DataChange(ORDERS, Op.DELETE, row, None, SourcePosition("t", 0, offset))


def row(
    id: int, name: str | None = "a", price: str | None = "20.00", qty: int | None = 2, region: str = "us"
) -> dict[str, Any]:
    return {
        "id": id,
        "name": name,
        "price": None if price is None else Decimal(price),
        "qty": qty,
        "region": region,
    }


# --------------------------------------------------------------------------------------------------
# Projected schemas


def test_star_expands_to_the_source_columns_and_computed_columns_follow() -> None:
    schema = one("*, UPPER(name) AS name_upper, price * qty AS total").schema(ORDERS, SCHEMA)
    assert described(schema) == (
        "(`id` INT NOT NULL, `name` STRING, `price` DECIMAL(10, 2), `qty` INT, `region` STRING, "
        "`name_upper` STRING, `total` DECIMAL(20, 2), PRIMARY KEY (id))"
    )


def test_an_explicit_projection_keeps_its_columns_in_its_order_with_their_types() -> None:
    schema = one("qty, id AS order_id, CAST(price AS DOUBLE) AS p, region = 'eu' AS in_eu").schema(
        ORDERS, SCHEMA
    )
    # the key follows its column through a plain alias
    assert described(schema) == (
        "(`qty` INT, `order_id` INT NOT NULL, `p` DOUBLE, `in_eu` BOOLEAN, PRIMARY KEY (order_id))"
    )


def test_a_computed_column_named_like_a_source_column_replaces_it_in_place() -> None:
    schema = one("*, UPPER(name) AS name").schema(ORDERS, SCHEMA)
    assert schema.names == SCHEMA.names
    changes = one("*, UPPER(name) AS name").rows(ORDERS, SCHEMA, [insert(0, **row(1, "ada"))], Failures())
    assert changes[0].after == {**row(1, "ADA")}


@pytest.mark.parametrize(
    ("projection", "names", "name"),
    [
        # Flink CDC: an item named like an earlier one replaces it where the earlier one stands
        ("UPPER(name) AS name, *", ("name", "id", "price", "qty", "region"), "Ada"),
        ("*, UPPER(name) AS name", SCHEMA.names, "ADA"),
        ("id, UPPER(name) AS name, LOWER(name) AS name", ("id", "name"), "ada"),
        ("id, name, name", ("id", "name"), "Ada"),
        ("*, *", SCHEMA.names, "Ada"),
    ],
)
def test_a_name_given_again_replaces_the_earlier_item_in_its_place(
    projection: str, names: tuple[str, ...], name: str
) -> None:
    config = job(f'- source-table: shop.orders\n  projection: "{projection}"\n')
    assert unsupported_reason(config) is None  # validation and the run agree
    tt = TableTransforms(config.transform)
    assert tt.schema(ORDERS, SCHEMA).names == names
    [change] = tt.rows(ORDERS, SCHEMA, [insert(0, **row(1, "Ada"))], Failures())
    assert change.after is not None and change.after["name"] == name


@pytest.mark.parametrize(
    ("projection", "condition"),
    [("UPPER(name) AS name, *", "name = 'Ada'"), ("*, UPPER(name) AS name", "name = 'ADA'")],
)
def test_a_filter_reads_the_value_a_name_has_in_the_projection(projection: str, condition: str) -> None:
    tt = one(projection, filter=condition)
    kept = tt.rows(ORDERS, SCHEMA, [insert(0, **row(1, "Ada")), insert(1, **row(2, "bob"))], Failures())
    assert [c.after["id"] for c in kept if c.after] == [1]


def test_primary_keys_override_the_key_and_make_its_columns_not_null() -> None:
    tt = one("*, UPPER(region) AS uid", **{"primary-keys": "uid"})
    schema = tt.schema(ORDERS, SCHEMA)
    assert schema.primary_keys == ("uid",) and str(schema.column("uid").type) == "STRING NOT NULL"
    failures = Failures()
    kept = tt.rows(ORDERS, SCHEMA, [insert(0, **row(1)), insert(1, **{**row(2), "region": None})], failures)
    assert [c.after["uid"] for c in kept if c.after] == ["US"]
    assert [r for _, r in failures] == [
        "transform[0] (source-table shop.orders) on table shop.orders: primary key column 'uid' is NULL"
    ]


def test_partition_keys_are_set_on_the_projected_schema() -> None:
    schema = one("*", **{"partition-keys": "region"}).schema(ORDERS, SCHEMA)
    assert schema.partition_keys == ("region",)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"projection": "name, price"},
            "transform[0] (source-table shop.orders): the projection drops primary key column 'id' "
            "of table shop.orders: keep it, or give the transform primary-keys",
        ),
        (
            {"projection": "id, name", "primary-keys": "price"},
            "primary-keys names 'price', which the projection of table shop.orders does not have "
            "(its columns: id, name)",
        ),
        (
            {"projection": "*, qty * weight AS w"},
            "column 'weight' does not exist in table shop.orders (its columns: id, name, price, qty, region)",
        ),
        ({"projection": "*, name + 1 AS n"}, "name is a STRING, not a number (table shop.orders)"),
        ({"filter": "qty"}, "qty is a INT, not a condition"),
    ],
)
def test_a_transform_that_does_not_fit_the_schema_fails_naming_transform_and_table(
    block: dict[str, str], message: str
) -> None:
    tt = transforms({"source-table": r"shop.orders", "description": "shop view", **block})
    with pytest.raises(TransformError) as error:
        tt.schema(ORDERS, SCHEMA)
    assert str(error.value).startswith("transform[0] 'shop view' (source-table shop.orders): ")
    assert message.removeprefix("transform[0] (source-table shop.orders): ") in str(error.value)
    assert error.value.table == "shop.orders"


def test_the_first_matching_transform_applies_and_other_tables_are_left_alone() -> None:
    tt = transforms(
        {"source-table": r"shop.ord\.*", "projection": "id, qty"},
        {"source-table": r"shop.\.*", "projection": "id"},
    )
    assert tt.schema(ORDERS, SCHEMA).names == ("id", "qty")
    assert tt.schema(OTHER, SCHEMA).names == ("id",)
    unmatched = TableId.parse("billing.invoices")
    changes = [insert(0, **row(1))._replace(table_id=unmatched)]
    assert tt.rows(unmatched, SCHEMA, changes, Failures()) is changes
    assert tt.schema(unmatched, SCHEMA) is SCHEMA


def test_a_star_alone_without_filter_passes_rows_unchanged() -> None:
    changes = [insert(0, **row(1))]
    assert one("\\*").rows(ORDERS, SCHEMA, changes, Failures()) is changes


# --------------------------------------------------------------------------------------------------
# Rows


def test_the_filter_keeps_rows_where_it_is_true_using_the_row_each_op_has() -> None:
    tt = one("id, UPPER(name) AS name", "price > 10 AND region <> 'eu'")
    changes = [
        insert(0, **row(1)),
        insert(1, **row(2, region="eu")),
        insert(2, **row(3, price=None)),  # NULL > 10 is not true
        update(3, row(4, price="5.00"), row(4, price="50.00")),  # the new row passes
        update(4, row(5), row(5, price="1.00")),  # the new row does not
        delete(5, **row(6)),  # a delete is judged by the row that goes
        delete(6, **row(7, region="eu")),
    ]
    kept = tt.rows(ORDERS, SCHEMA, changes, Failures())
    assert [(c.op, c.row["id"]) for c in kept] == [(Op.INSERT, 1), (Op.UPDATE, 4), (Op.DELETE, 6)]
    assert kept[1].before == {"id": 4, "name": "A"} and kept[1].after == {"id": 4, "name": "A"}
    assert kept[2].before == {"id": 6, "name": "A"} and kept[2].after is None
    assert kept[0].position == SourcePosition("t", 0, 0)


def test_a_filter_may_name_a_computed_column_of_the_projection() -> None:
    tt = one("id, price * qty AS total", "total >= 40")
    kept = tt.rows(ORDERS, SCHEMA, [insert(0, **row(1)), insert(1, **row(2, qty=1))], Failures())
    assert [c.after for c in kept] == [{"id": 1, "total": Decimal("40.00")}]


def test_a_filter_alone_keeps_the_rows_as_they_are() -> None:
    changes = [insert(0, **row(1)), insert(1, **row(2, qty=9))]
    kept = one(filter="qty > 5").rows(ORDERS, SCHEMA, changes, Failures())
    assert kept == [changes[1]] and kept[0] is changes[1]


def test_a_row_an_expression_fails_on_goes_to_on_error_with_the_reason_and_others_go_on() -> None:
    tt = one("id, CAST(name AS INT) AS n")
    failures = Failures()
    kept = tt.rows(
        ORDERS,
        SCHEMA,
        [insert(0, **row(1, "12")), insert(1, **row(2, "x")), insert(2, **row(3, "7"))],
        failures,
    )
    assert [c.after for c in kept] == [{"id": 1, "n": 12}, {"id": 3, "n": 7}]
    [(change, reason)] = failures
    assert change.position == SourcePosition("t", 0, 1)
    assert reason == (
        "transform[0] (source-table shop.orders) on table shop.orders: "
        "CAST(name AS INT) AS n: cannot cast 'x' to INT: not a number"
    )


def test_a_filter_that_fails_on_a_row_sends_it_to_on_error() -> None:
    failures = Failures()
    kept = one(filter="qty / (qty - 2) > 0").rows(
        ORDERS, SCHEMA, [insert(0, **row(1)), insert(1, **row(2, qty=3))], failures
    )
    assert [c.row["id"] for c in kept] == [2]
    assert [r for _, r in failures] == [
        "transform[0] (source-table shop.orders) on table shop.orders: filter qty / (qty - 2) > 0: "
        "division by zero"
    ]


def test_a_changed_source_schema_recompiles_the_transform() -> None:
    tt = one("*, qty * 2 AS double_qty")
    wider = Schema.of([*SCHEMA.columns[:3], Column("qty", T.BIGINT()), SCHEMA.columns[4]], ["id"])
    assert str(tt.schema(ORDERS, SCHEMA).column("double_qty").type) == "INT"
    assert str(tt.schema(ORDERS, wider).column("double_qty").type) == "BIGINT"
    [change] = tt.rows(ORDERS, wider, [insert(0, **row(1, qty=2**40))], Failures())
    assert change.after is not None and change.after["double_qty"] == 2**41


# --------------------------------------------------------------------------------------------------
# Schema changes through a projection


def changed(tt: TableTransforms, *changes: SchemaChange, start: Schema | None = SCHEMA) -> list[str]:
    sources = {} if start is None else {ORDERS: start}
    return [str(c) for c in tt.schema_changes(list(changes), sources)]


def test_create_table_gives_the_projected_schema() -> None:
    assert changed(one("id, UPPER(name) AS n"), CreateTable(ORDERS, SCHEMA), start=None) == [
        "create.table shop.orders (`id` INT NOT NULL, `n` STRING, PRIMARY KEY (id))"
    ]


def test_an_added_column_flows_through_a_star_only() -> None:
    add = AddColumn(ORDERS, Column("note", T.STRING()), LAST)
    assert changed(one("*, qty * 2 AS q2"), add) == ["add.column shop.orders `note` STRING AFTER region"]
    assert changed(one("*"), add) == ["add.column shop.orders `note` STRING LAST"]
    assert changed(one("id, qty"), add) == []
    positioned = AddColumn(ORDERS, Column("note", T.STRING()), after("id"))
    assert changed(one("*"), positioned) == ["add.column shop.orders `note` STRING AFTER id"]


def test_a_dropped_column_goes_from_a_star_projection() -> None:
    assert changed(one("*, UPPER(name) AS n"), DropColumn(ORDERS, "region")) == [
        "drop.column shop.orders region"
    ]
    assert changed(one("id, name"), DropColumn(ORDERS, "region")) == []


@pytest.mark.parametrize(
    ("projection", "filter", "change", "column"),
    [
        ("*, price * qty AS total", None, DropColumn(ORDERS, "qty"), "qty"),
        ("*, price * qty AS total", None, RenameColumn(ORDERS, "qty", "quantity"), "qty"),
        ("id, name", None, RenameColumn(ORDERS, "name", "full_name"), "name"),
        ("*", "region <> 'eu'", DropColumn(ORDERS, "region"), "region"),
    ],
)
def test_a_change_that_removes_a_column_an_expression_uses_fails_naming_it(
    projection: str, filter: str | None, change: SchemaChange, column: str
) -> None:
    with pytest.raises(TransformError) as error:
        changed(one(projection, filter), change)
    message = str(error.value)
    assert message.startswith("transform[0] (source-table shop.orders): ")
    assert f"column {column!r} does not exist in table shop.orders" in message
    assert message.endswith(f", after {change}")
    assert (error.value.column, error.value.table) == (column, "shop.orders")


def test_a_rename_through_a_star_is_a_rename() -> None:
    rename = RenameColumn(ORDERS, "region", "area")
    assert changed(one("*, UPPER(name) AS n"), rename) == ["rename.column shop.orders region -> area"]


def test_a_type_change_changes_the_column_and_the_computed_columns_that_use_it() -> None:
    widen = AlterColumnType(ORDERS, "qty", T.BIGINT(), T.INT())
    assert changed(one("*, qty + 1 AS next_qty, UPPER(name) AS n"), widen) == [
        "alter.column.type shop.orders qty INT -> BIGINT",
        "alter.column.type shop.orders next_qty INT -> BIGINT",
    ]
    assert changed(one("id, qty * price AS total"), widen) == [
        "alter.column.type shop.orders total DECIMAL(20, 2) -> DECIMAL(29, 2)"
    ]


def test_changes_are_projected_one_after_another() -> None:
    steps: list[SchemaChange] = [
        AddColumn(ORDERS, Column("note", T.STRING()), LAST),
        RenameColumn(ORDERS, "note", "remark"),
        AlterColumnType(ORDERS, "qty", T.BIGINT(), T.INT()),
    ]
    assert changed(one("*, qty * 2 AS q2"), *steps) == [
        "add.column shop.orders `note` STRING AFTER region",
        "rename.column shop.orders note -> remark",
        "alter.column.type shop.orders qty INT -> BIGINT",
        "alter.column.type shop.orders q2 INT -> BIGINT",
    ]


def test_table_drops_truncates_and_other_tables_pass_unchanged() -> None:
    tt = one("id")
    drop, truncate = DropTable(ORDERS), TruncateTable(ORDERS)
    assert tt.schema_changes([truncate, drop], {ORDERS: SCHEMA}) == [truncate, drop]
    other = AddColumn(OTHER, Column("x", T.INT()))
    assert tt.schema_changes([other], {}) == [other]


# --------------------------------------------------------------------------------------------------
# Validation


SOURCE_AND_SINK = """\
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: orders
sink:
  type: memory
"""


def job(transform: str) -> Any:
    return load_job_text(SOURCE_AND_SINK + "transform:\n" + textwrap.indent(transform, "  "), env={})


def test_a_stateless_transform_is_accepted() -> None:
    config = job(
        "- source-table: shop.orders\n"
        "  projection: \\*, UPPER(name) AS name_upper, price * qty AS total\n"
        "  filter: price > 10 AND region <> 'eu'\n"
        "  primary-keys: id\n"
    )
    assert stateful_reason(config) is None
    check_supported(config)


@pytest.mark.parametrize(
    ("projection", "filter", "construct"),
    [
        ("id, SUM(price) AS s", None, "SUM(price) is an aggregate, which keeps state across rows"),
        ("id, COUNT(*) AS n", None, "COUNT(*) is an aggregate"),
        (
            "id, LAG(price) OVER (PARTITION BY id ORDER BY qty) AS prev",
            None,
            "LAG(price) OVER (PARTITION BY id ORDER BY qty) is a window function (OVER)",
        ),
        ("id, LEAD(price, 1) AS next", None, "LEAD(price, 1) reads other rows (LAG/LEAD)"),
        (
            "id, ROW_NUMBER() OVER (ORDER BY id) AS n",
            None,
            "ROW_NUMBER() OVER (ORDER BY id) is a window function (OVER)",
        ),
        ("region GROUP BY region", None, "GROUP BY region groups rows"),
        ("TUMBLE_START(at, INTERVAL '1' MINUTE) AS w", None, "is a TUMBLE window"),
        ("HOP_END(at, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS w", None, "is a HOP window"),
        ("SESSION_START(at, INTERVAL '1' MINUTE) AS w", None, "is a SESSION window"),
        ("id", "CUMULATE(at, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) IS NOT NULL", "is a CUMULATE window"),
        ("id", "price > AVG(price)", "AVG(price) is an aggregate"),
        (
            "* FROM t MATCH_RECOGNIZE (PARTITION BY id ORDER BY at MEASURES A.qty AS q "
            "PATTERN (A B) DEFINE A AS A.qty > 1)",
            None,
            "MATCH_RECOGNIZE is pattern matching over rows",
        ),
    ],
)
def test_a_stateful_transform_is_refused_naming_the_construct(
    projection: str, filter: str | None, construct: str
) -> None:
    block = f'- source-table: shop.orders\n  projection: "{projection}"\n'
    if filter:
        block += f'  filter: "{filter}"\n'
    config = job("- source-table: shop.customers\n  projection: id, name\n" + block)
    reason = stateful_reason(config)
    assert reason is not None and reason.startswith("transform[1] (source-table shop.orders): ")
    assert construct in reason
    assert reason.endswith(
        "a transform is evaluated row by row, so only projections and filters are supported"
    )
    with pytest.raises(UnsupportedOptionError) as error:
        check_supported(config)
    assert str(error.value) == reason


def test_the_reason_comes_from_the_stateful_operators_ferry_check_plans() -> None:
    config = job("- source-table: shop.orders\n  projection: id, SUM(price) AS s\n")
    assert "(a group aggregate keeps one accumulator per group)" in (stateful_reason(config) or "")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            "projection: id, price * 2",
            "the projection item price * 2 needs a name: write price * 2 AS <name>",
        ),
        ("projection: id, name FROM customers", "FROM has no place in it"),
        ("projection: id, name AS __table_name__", "__table_name__ is a metadata column"),
        # what only ferry check's planner knows to be stateful is named by its operator
        ("projection: id ORDER BY id", "ORDER BY id is a sort operator, which keeps state across rows"),
    ],
)
def test_what_transforms_cannot_evaluate_is_refused_before_start(block: str, message: str) -> None:
    config = job(f"- source-table: shop.orders\n  {block}\n")
    with pytest.raises(UnsupportedOptionError) as error:
        check_supported(config)
    assert str(error.value).startswith("transform[0] (source-table shop.orders): ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("block", "key", "message"),
    [
        (
            "projection: id,, name",
            "transform[0].projection",
            "the projection has an empty item between commas",
        ),
        ("projection: UPPER(name", "transform[0].projection", "cannot parse the projection"),
        ("filter: qty >", "transform[0].filter", "cannot parse the filter"),
        ("filter: qty > 1, id", "transform[0].filter", "the filter is one condition"),
    ],
)
def test_a_transform_that_does_not_parse_is_a_config_error_at_its_key(
    block: str, key: str, message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        job(f"- source-table: shop.orders\n  {block}\n")
    assert error.value.key_path == key and error.value.line == 9
    assert message in str(error.value)
