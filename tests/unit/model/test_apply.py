import pytest

from ferry.model import events as E
from ferry.model import types as T
from ferry.model.apply import _apply, apply_schema_change, is_applied
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId

TID = TableId.parse("db.orders")
BASE = Schema.of(
    [Column("id", T.INT().not_null()), Column("name", T.STRING()), Column("qty", T.INT())], ["id"]
)


def names(schema: Schema | None) -> list[str]:
    assert schema is not None
    return list(schema.names)


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (E.LAST, ["id", "name", "qty", "x"]),
        (E.FIRST, ["x", "id", "name", "qty"]),
        (E.after("id"), ["id", "x", "name", "qty"]),
        (E.before("qty"), ["id", "name", "x", "qty"]),
    ],
)
def test_add_column_honours_position(position: E.ColumnPosition, expected: list[str]) -> None:
    after = apply_schema_change(BASE, E.AddColumn(TID, Column("x", T.BIGINT()), position))
    assert names(after) == expected
    assert after is not None and after.column("x").type == T.BIGINT()


def test_drop_rename_alter_and_comments() -> None:
    s = apply_schema_change(BASE, E.DropColumn(TID, "name"))
    assert names(s) == ["id", "qty"]
    s = apply_schema_change(s, E.RenameColumn(TID, "qty", "quantity"))
    assert names(s) == ["id", "quantity"]
    s = apply_schema_change(s, E.AlterColumnType(TID, "quantity", T.BIGINT()))
    assert s is not None and s.column("quantity").type == T.BIGINT()
    s = apply_schema_change(s, E.AlterColumnComment(TID, "quantity", "units"))
    assert s is not None and s.column("quantity").comment == "units"
    s = apply_schema_change(s, E.AlterTableComment(TID, "orders"))
    assert s is not None and s.comment == "orders"


def test_renaming_a_key_column_renames_the_key() -> None:
    s = apply_schema_change(BASE, E.RenameColumn(TID, "id", "order_id"))
    assert s is not None and s.primary_keys == ("order_id",)


def test_table_level_changes() -> None:
    assert apply_schema_change(BASE, E.DropTable(TID)) is None
    assert apply_schema_change(BASE, E.TruncateTable(TID)) == BASE
    assert apply_schema_change(None, E.CreateTable(TID, BASE)) == BASE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (E.AddColumn(TID, Column("qty", T.INT())), "already exists"),
        (E.DropColumn(TID, "nope"), "no column 'nope'"),
        (E.DropColumn(TID, "id"), "primary key"),
        (E.RenameColumn(TID, "name", "qty"), "already exists"),
        (E.AlterColumnType(TID, "nope", T.INT()), "no column"),
        (E.AddColumn(TID, Column("x", T.INT()), E.after("nope")), "no column 'nope'"),
    ],
)
def test_impossible_changes_fail_with_a_reason(change: E.SchemaChange, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        apply_schema_change(BASE, change)


def test_changes_to_a_missing_table_fail() -> None:
    with pytest.raises(SchemaError, match="does not exist"):
        apply_schema_change(None, E.DropColumn(TID, "x"))


def test_every_schema_change_type_has_a_rule() -> None:
    registered = set(_apply.registry)
    assert set(E.SCHEMA_CHANGE_TYPES) <= registered
    assert len({t.tag for t in E.SCHEMA_CHANGE_TYPES}) == len(E.SCHEMA_CHANGE_TYPES)


@pytest.mark.parametrize(
    "change",
    [
        E.AddColumn(TID, Column("x", T.INT())),
        E.DropColumn(TID, "name"),
        E.RenameColumn(TID, "name", "title"),
        E.AlterColumnType(TID, "qty", T.BIGINT()),
        E.AlterColumnComment(TID, "qty", "c"),
        E.AlterTableComment(TID, "t"),
        E.DropTable(TID),
    ],
)
def test_is_applied_is_false_before_and_true_after(change: E.SchemaChange) -> None:
    assert not is_applied(BASE, change)
    assert is_applied(apply_schema_change(BASE, change), change)
