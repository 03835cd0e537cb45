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

A column that both schemas have can only have moved by being dropped and added again
(``DROP COLUMN a; ADD COLUMN a``, the same type or another): PostgreSQL never reorders columns, so a
kept column that now stands after a column it stood before has a number above every old one (see
:func:`readded_by_position`). The last column dropped and added again keeps its place: nothing
tells it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise

from ferry.model.events import AddColumn, DropColumn, RenameColumn, SchemaChange
from ferry.model.schema import Schema, TableId

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


def readded_by_position(old: Schema, new: Schema) -> tuple[list[str], tuple[str, str] | None]:
    """The columns of both schemas that the step from ``old`` to ``new`` proves dropped and added
    again, and the first move that proves it: (the first such column, a column it stood before
    and stands after now). A record shows the move when its columns have the two in that order.

    The first such column (in ``new``'s order) has a number above every old column; so has every
    column after it in ``new``."""
    names = [name for name in new.names if name in old]
    for index, name in enumerate(names):
        passed = next((n for n in names[:index] if old.position(n) > old.position(name)), None)
        if passed is not None:
            return names[index:], (name, passed)
    return [], None


def shows_move(names: Sequence[str], move: tuple[str, str]) -> bool | None:
    """Whether a schema whose columns are ``names`` shows ``move`` (see :func:`readded_by_position`):
    the column after the one it passed; None when it lacks one of them (older than the column,
    or newer than its drop: the columns do not tell)."""
    column, passed = move
    if column not in names or passed not in names:
        return None
    return list(names).index(column) > list(names).index(passed)


def position_note(
    by_position: Mapping[str, str],
    unproved: Collection[str],
    change: SchemaChange,
    readded: Collection[str] = (),
) -> str | None:
    """What the schema-change history says of a change of a table whose columns were matched by
    position: a rename the positions proved (``by_position``: old → new name, through one step or
    several), a drop or an add of a column no position proved renamed (``unproved``), or the drop
    and the add of a column that moved last (``readded``)."""
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
    if column in readded:
        return "the column moved after columns it stood before: dropped and added again"
    return "no column position proves a rename: a drop and an add" if column in unproved else None


def chained_by_order(
    table_id: TableId, renames: list[RenameColumn], old_name: str, named: Mapping[str, tuple[str, int, int]]
) -> list[RenameColumn] | None:
    """``renames`` with the renames out of ``old_name`` (two or more, each new name shown at a known
    place in the log) made one chain in that order: ``c → c_r3`` and ``c → c_r1`` become ``c → c_r1
    → c_r3``. None when there is nothing to chain."""
    out = [r for r in renames if r.old_name == old_name]
    if len(out) < 2 or any(r.new_name not in named for r in out):
        return None
    names = [old_name, *sorted({r.new_name for r in out}, key=lambda n: named[n])]
    links = [RenameColumn(table_id, a, b) for a, b in pairwise(names)]
    chained: list[RenameColumn] = []
    for rename in renames:  # the chain where the first of them was (the renames keep DDL's order)
        if rename.old_name == old_name:
            chained += [] if links[0] in chained else links
        elif rename not in links:
            chained.append(rename)
    return chained
