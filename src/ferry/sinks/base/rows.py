"""Row helpers shared by the sinks that write by primary key."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from operator import itemgetter

from ferry.model.events import DataChange, Op, Row
from ferry.model.unavailable import fill, unavailable_reason
from ferry.sinks.base.exceptions import SinkTerminalError


def last_changes(
    changes: Sequence[DataChange], keys: tuple[str, ...], sink: str
) -> dict[Hashable, tuple[Op, Row]]:
    """The last change of every key the changes touch: its op and row (for a delete, the old row),
    keyed by the primary key's value (a tuple for a composite key). An update that changes the
    key deletes the old key. A row without a value for a key column is a terminal error naming it.

    One loop with no Python call per change: a sink's hottest per-row step.
    """
    get = itemgetter(*keys)
    delete, update = Op.DELETE, Op.UPDATE
    state: dict[Hashable, tuple[Op, Row]] = {}
    try:
        for _table, op, before, after, _position, _ts in changes:
            if op is delete:
                if before is not None:
                    state[get(before)] = (delete, before)
                continue
            if after is None:
                continue
            new_key = get(after)
            if op is update and before is not None:
                old_key = get(before)
                if old_key != new_key:
                    state[old_key] = (delete, before)
            state[new_key] = (op, after)
    except KeyError as e:
        raise SinkTerminalError(f"a row has no value for primary key column {e}", sink=sink) from None
    return state


def collapse(changes: Sequence[DataChange], keys: tuple[str, ...], sink: str) -> dict[Hashable, Row | None]:
    """The last state of every key the changes touch: its row, or ``None`` when it is deleted."""
    delete = Op.DELETE
    return {k: None if op is delete else row for k, (op, row) in last_changes(changes, keys, sink).items()}


def complete_from_versions(
    changes: Sequence[DataChange],
    partial: Sequence[int],
    keys: tuple[str, ...],
    buffered: Sequence[DataChange],
    sink: str,
) -> tuple[list[int], list[int]]:
    """Fill, in place, the unavailable values of the partial rows among ``changes`` (at the
    indexes ``partial``) from their key's last version before them: in ``buffered`` (the changes
    the sink holds, not written yet) or earlier in ``changes``. Returns the indexes still partial
    (their key has no version there: the sink's table holds it) and those whose key was deleted
    before them (no value to keep)."""
    get = itemgetter(*keys)
    latest: dict[Hashable, Row | None] = {
        key: None if op is Op.DELETE else row for key, (op, row) in last_changes(buffered, keys, sink).items()
    }
    wanted = set(partial)
    still: list[int] = []
    deleted: list[int] = []
    delete, update = Op.DELETE, Op.UPDATE
    try:
        for index, (_table, op, before, after, _position, _ts) in enumerate(changes):
            if op is delete:
                if before is not None:
                    latest[get(before)] = None
                continue
            if after is None:
                continue
            key = get(after)
            if index in wanted:
                old_key = get(before) if before is not None else key
                known = latest.get(old_key, _UNKNOWN)
                if known is None:
                    deleted.append(index)
                elif known is _UNKNOWN or not fill(after, known):
                    still.append(index)
            if op is update and before is not None:
                old_key = get(before)
                if old_key != key:
                    latest[old_key] = None
            latest[key] = after
    except KeyError as e:
        raise SinkTerminalError(f"a row has no value for primary key column {e}", sink=sink) from None
    return still, deleted


def complete_before_reading(
    changes: Sequence[DataChange],
    partial: Sequence[int],
    keys: tuple[str, ...],
    buffered: Sequence[DataChange],
    sink: str,
) -> tuple[list[int], list[tuple[int, str]]]:
    """What every sink's ``complete_rows`` does first: the partial rows completed from their key's
    versions before them (:func:`complete_from_versions`); returns the indexes still partial (the
    sink's table holds their values) and those that cannot be completed, with the reason (a table
    without a primary key, a key deleted before)."""
    if not keys:
        return [], [(i, f"{unavailable_reason(changes[i])}; the table has no primary key") for i in partial]
    still, deleted = complete_from_versions(changes, partial, keys, buffered, sink)
    return still, [(i, f"{unavailable_reason(changes[i])}; its row was deleted before") for i in deleted]


#: A key without a version among the changes.
_UNKNOWN: Row = {}


def one_change_per_key(changes: Sequence[DataChange], keys: tuple[str, ...], sink: str) -> list[DataChange]:
    """The changes as one change per primary key, its last state (a delete of the old row, or an
    insert of the new one), each the change that left it so (its position kept); every change as
    it is without a key. Writing them one at a time writes what the whole batch writes."""
    if not keys:
        return list(changes)
    by_row: dict[int, DataChange] = {}
    for change in changes:
        for row in (change.before, change.after):
            if row is not None:
                by_row[id(row)] = change
    out = []
    for op, row in last_changes(changes, keys, sink).values():
        change = by_row[id(row)]
        if op is Op.DELETE:
            out.append(change._replace(op=Op.DELETE, before=row, after=None))
        else:
            out.append(change._replace(op=Op.INSERT, before=None, after=row))
    return out
