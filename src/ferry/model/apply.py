"""Applying a schema change to a schema: pure functions, no I/O.

:func:`apply_schema_change` is what every part of ferry uses to know the schema after a change
(the schema tracker, the memory sink, the check that a change is already applied at a sink).
:func:`is_applied` tells whether a sink's schema already reflects a change, which makes replays
and restarts idempotent; :func:`diff_schemas` gives the changes from one schema to another.
"""

from __future__ import annotations

from dataclasses import replace
from functools import singledispatch

from ferry.model import events as E
from ferry.model.events import ColumnPositionKind, SchemaChange
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId


def apply_schema_change(schema: Schema | None, change: SchemaChange) -> Schema | None:
    """The schema after ``change``; ``None`` means the table does not exist."""
    if schema is None and not isinstance(change, E.CreateTable | E.DropTable):
        raise SchemaError(f"table does not exist, cannot apply {change.tag}", table=str(change.table_id))
    return _apply(change, schema)


@singledispatch
def _apply(change: SchemaChange, schema: Schema | None) -> Schema | None:
    raise TypeError(f"no schema rule for {type(change).__name__}")


@_apply.register
def _(change: E.CreateTable, schema: Schema | None) -> Schema | None:
    return change.schema


@_apply.register
def _(change: E.DropTable, schema: Schema | None) -> Schema | None:
    return None


@_apply.register
def _(change: E.TruncateTable, schema: Schema | None) -> Schema | None:
    return schema


@_apply.register
def _(change: E.AddColumn, schema: Schema | None) -> Schema | None:
    assert schema is not None
    if change.column.name in schema:
        raise SchemaError(
            f"column {change.column.name!r} already exists", table=str(change.table_id), change=change.tag
        )
    columns = list(schema.columns)
    kind, ref = change.position.kind, change.position.reference
    if kind is ColumnPositionKind.FIRST:
        index = 0
    elif kind is ColumnPositionKind.LAST:
        index = len(columns)
    else:
        assert ref is not None
        index = schema.position(ref) + (1 if kind is ColumnPositionKind.AFTER else 0)
    columns.insert(index, change.column)
    return schema.with_columns(columns)


@_apply.register
def _(change: E.DropColumn, schema: Schema | None) -> Schema | None:
    assert schema is not None
    schema.column(change.column_name)
    if change.column_name in schema.primary_keys:
        raise SchemaError(
            f"cannot drop primary key column {change.column_name!r}",
            table=str(change.table_id),
            change=change.tag,
        )
    return schema.with_columns(c for c in schema.columns if c.name != change.column_name)


@_apply.register
def _(change: E.RenameColumn, schema: Schema | None) -> Schema | None:
    assert schema is not None
    schema.column(change.old_name)
    if change.new_name in schema:
        raise SchemaError(
            f"cannot rename {change.old_name!r}: {change.new_name!r} already exists",
            table=str(change.table_id),
            change=change.tag,
        )
    columns = [replace(c, name=change.new_name) if c.name == change.old_name else c for c in schema.columns]
    keys = tuple(change.new_name if k == change.old_name else k for k in schema.primary_keys)
    parts = tuple(change.new_name if k == change.old_name else k for k in schema.partition_keys)
    return Schema(tuple(columns), keys, parts, schema.comment)


@_apply.register
def _(change: E.AlterColumnType, schema: Schema | None) -> Schema | None:
    assert schema is not None
    schema.column(change.column_name)
    return schema.with_columns(
        replace(c, type=change.new_type) if c.name == change.column_name else c for c in schema.columns
    )


@_apply.register
def _(change: E.AlterColumnComment, schema: Schema | None) -> Schema | None:
    assert schema is not None
    schema.column(change.column_name)
    return schema.with_columns(
        replace(c, comment=change.comment) if c.name == change.column_name else c for c in schema.columns
    )


@_apply.register
def _(change: E.AlterTableComment, schema: Schema | None) -> Schema | None:
    assert schema is not None
    return replace(schema, comment=change.comment)


def is_applied(schema: Schema | None, change: SchemaChange) -> bool:
    """True when ``schema`` (a sink's current schema) already shows the effect of ``change``.

    Used before applying a change so that a replay or a restart never applies it twice. For a
    ``create.table`` it is true when the table exists (compatibility is checked separately).
    """
    match change:
        case E.CreateTable():
            return schema is not None
        case E.DropTable():
            return schema is None
        case E.TruncateTable():
            return False
        case E.AddColumn(column=Column(name=name)):
            return schema is not None and name in schema
        case E.DropColumn(column_name=name):
            return schema is not None and name not in schema
        case E.RenameColumn(old_name=old, new_name=new):
            return schema is not None and new in schema and old not in schema
        case E.AlterColumnType(column_name=name, new_type=new_type):
            col = None if schema is None else schema.find(name)
            return col is not None and col.type == new_type
        case E.AlterColumnComment(column_name=name, comment=comment):
            col = None if schema is None else schema.find(name)
            return col is not None and col.comment == comment
        case E.AlterTableComment(comment=comment):
            return schema is not None and schema.comment == comment
    raise TypeError(f"no rule for {type(change).__name__}")


def diff_schemas(table_id: TableId, old: Schema, new: Schema) -> list[SchemaChange]:
    """The changes that turn ``old`` into ``new``: drops, then adds (positioned), then type changes.

    A column that is gone and a column that appeared are a drop and an add: only DDL can say that
    they are a rename. Nullability tightening is not a change (it never reaches the sink).
    """
    changes: list[SchemaChange] = [E.DropColumn(table_id, c.name) for c in old.columns if c.name not in new]
    names = [c.name for c in old.columns if c.name in new]
    for index, col in enumerate(new.columns):
        if col.name in old:
            continue
        if index == len(new.columns) - 1 or all(c.name not in old for c in new.columns[index:]):
            position = E.LAST
        elif index == 0:
            position = E.FIRST
        else:
            position = E.after(new.columns[index - 1].name)
        changes.append(E.AddColumn(table_id, col, position))
        names.insert(index, col.name)
    for col in old.columns:
        new_col = new.find(col.name)
        if new_col is None:
            continue
        if new_col.type != col.type and not (
            new_col.type.same_ignoring_nullability(col.type) and not new_col.type.nullable
        ):
            changes.append(E.AlterColumnType(table_id, col.name, new_col.type, col.type))
        if new_col.comment != col.comment and new_col.comment is not None:
            changes.append(E.AlterColumnComment(table_id, col.name, new_col.comment))
    if new.comment != old.comment and new.comment is not None:
        changes.append(E.AlterTableComment(table_id, new.comment))
    return changes
