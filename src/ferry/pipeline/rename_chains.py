"""Columns followed through the renames DDL named, and placed where a statement describes them.

A table's pending renames (``RenameColumn``, in statement order) are the names each column had:
a sink table may know a column by an older name than a statement's description of the table, and
rows read again may carry an older name than the table's schema. A column a statement added (again)
goes where the statement describes it, after the nearest column before it the table has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ferry.model.events import FIRST, ColumnPosition, RenameColumn, after
from ferry.model.schema import Schema


def chain_of(renames: list[RenameColumn], name: str) -> list[str]:
    """The names a column had through successive renames, starting at ``name``."""
    names = [name]
    for rename in renames:
        if rename.old_name == names[-1] and rename.new_name not in names:
            names.append(rename.new_name)
    return names


def rename_aliases(
    renames: list[RenameColumn], table: Schema, new: Schema, aliases: dict[str, str]
) -> dict[str, str]:
    """``aliases`` and, for each table column ``new`` lacks under a name DDL renamed it to (through
    one rename or several), that name → the table's name."""
    out = dict(aliases)
    for col in table.columns:
        if col.name in new or col.name in out.values():
            continue
        for name in reversed(chain_of(renames, col.name)[1:]):
            if name in new and name not in table and name not in out:
                out[name] = col.name
                break
    # the other way: rows older than the table's schema carry a name it renamed since
    for col in new.columns:
        if col.name in table or col.name in out:
            continue
        for name in reversed(chain_of(renames, col.name)[1:]):
            if name in table and name not in new and name not in out.values():
                out[col.name] = name
                break
    return out


def renamed_columns(schema: Schema, aliases: Mapping[str, str]) -> Schema:
    if not aliases:
        return schema
    return Schema(
        tuple(replace(c, name=aliases.get(c.name, c.name)) for c in schema.columns),
        tuple(aliases.get(k, k) for k in schema.primary_keys),
        tuple(aliases.get(k, k) for k in schema.partition_keys),
        schema.comment,
    )


def placed_as(
    schema: Schema, described: Schema, names: Mapping[str, str], renames: list[RenameColumn]
) -> Schema:
    """``schema`` with each column of ``names`` (its name → the name ``described`` has for it)
    moved where ``described`` has it: after the nearest column before it there that ``schema`` has
    (first when none; a column of ``schema`` renamed since is known by its later names), with the
    default ``described`` gives it (a column added again: the rows older than its drop read it)."""
    moving = {n: d for n, d in names.items() if d in described and n not in schema.primary_keys}
    if not moving:
        return schema
    columns = [c for c in schema.columns if c.name not in moving]
    for name, at_name in sorted(moving.items(), key=lambda item: described.position(item[1])):
        before = {c.name for c in described.columns[: described.position(at_name)]}
        at = max(
            (i + 1 for i, c in enumerate(columns) if before.intersection(chain_of(renames, c.name))),
            default=0,
        )
        columns.insert(at, replace(schema.column(name), default=described.column(at_name).default))
    return schema.with_columns(columns)


def names_renamed_into(renames: list[RenameColumn], names: set[str]) -> tuple[str, ...]:
    """``names`` and every name renamed into one of them (through one rename or several)."""
    older = {r.old_name for r in renames} | {r.new_name for r in renames}
    return tuple(sorted(names | {n for n in older if names & set(chain_of(renames, n))}))


def position_in(described: Schema, index: int, table: Schema) -> ColumnPosition:
    """Where a column the DDL describes at ``index`` goes in ``table``: after the nearest column
    before it that the table has (first when none)."""
    for column in reversed(described.columns[:index]):
        if column.name in table:
            return after(column.name)
    return FIRST
