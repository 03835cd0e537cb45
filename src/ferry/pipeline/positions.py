"""Renames proved by column positions, for sources that send no DDL (Debezium's PostgreSQL connector).

PostgreSQL numbers a table's columns (``attnum``) once: ``ALTER TABLE ... RENAME COLUMN`` keeps the
number, ``ADD COLUMN`` takes a number above every column the table ever had (dropped ones too),
``DROP COLUMN`` leaves a gap. pgoutput's relation message lists the live columns in that order, and
Debezium's PostgreSQL connector writes the envelope's fields in it. So between two schemas one
partition showed in turn (one *schema step*):

- the columns both have (*kept*) are in the same order;
- a column the new schema has and the old one not, standing before a kept column, is not new: its
  number is below that kept column's, so it is an old column under another name;
- a column after the last kept column may be new (added) or an old one renamed: nothing tells.

A rename is proved where, between two kept columns (or before the first), the old schema lost as
many columns as the new one gained there, each with the same type as its counterpart (nullability
aside): they pair in order. Everywhere else a column gone is a drop and a column new an add.

The last column is the case nothing proves: ``RENAME COLUMN b TO c`` of a table's last column and
``DROP COLUMN b; ADD COLUMN c`` give the same envelope (``c`` last), the same type or not. It is
taken as a drop and an add, which never moves a value into a column the source did not keep it in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ferry.model.events import AddColumn, DropColumn, RenameColumn, SchemaChange
from ferry.model.schema import Schema

#: The ``source.connector`` of Debezium's PostgreSQL connector, whose envelopes follow ``attnum``.
POSITIONAL_CONNECTORS = frozenset({"postgresql"})


def renames_by_position(old: Schema, new: Schema) -> list[tuple[str, str]]:
    """The renames (old name, new name) that the step from ``old`` to ``new`` proves (see the
    module documentation); none when the kept columns changed order (not a pgoutput step)."""
    kept = [name for name in new.names if name in old]
    if kept != [name for name in old.names if name in new]:
        return []
    renames: list[tuple[str, str]] = []
    gone: list[str] = []
    came: list[str] = []
    old_columns = iter(old.columns)
    for name in new.names:
        if name not in old:
            came.append(name)
            continue
        # ``name`` is kept: the old columns before it that the new schema lacks share its gap
        for column in old_columns:
            if column.name == name:
                break
            gone.append(column.name)
        if gone and len(gone) == len(came):
            pairs = list(zip(gone, came, strict=True))
            if all(old.column(a).type.same_ignoring_nullability(new.column(b).type) for a, b in pairs):
                renames += pairs
        gone, came = [], []
    return renames


def position_note(
    by_position: Mapping[str, str], unproved: Collection[str], change: SchemaChange
) -> str | None:
    """What the schema-change history says of a change of a table whose columns were matched by
    position: a rename the positions proved (``by_position``: old → new name, through one step or
    several), or a drop or an add of a column no position proved renamed (``unproved``)."""
    if isinstance(change, RenameColumn):
        names = [change.old_name]
        while names[-1] in by_position and by_position[names[-1]] not in names:
            names.append(by_position[names[-1]])
        if change.new_name in names[1:]:
            return "a rename proved by the column positions (the column kept its place)"
        return None
    if isinstance(change, DropColumn):
        column = change.column_name
    elif isinstance(change, AddColumn):
        column = change.column.name
    else:
        return None
    return "no column position proves a rename: a drop and an add" if column in unproved else None
