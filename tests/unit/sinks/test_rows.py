"""A batch of changes collapsed by primary key leaves a table as the changes applied one by one do."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.model.events import DataChange, Op
from ferry.model.schema import TableId
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.rows import collapse, last_changes

TABLE = TableId(None, "db", "t")
KEYS = ("region", "id")


def _row(region: str, key: int, version: int) -> dict[str, Any]:
    return {"region": region, "id": key, "v": version}


@st.composite
def _changes(draw: st.DrawFn) -> tuple[dict[tuple[str, int], dict[str, Any]], list[DataChange]]:
    """A table's rows by key, and changes to it as a source makes them (an update or a delete
    names the row as it is; an update may change the key)."""
    keys = st.tuples(st.sampled_from(["eu", "us"]), st.integers(0, 5))
    table = {k: _row(*k, 0) for k in draw(st.sets(keys, max_size=6))}
    live = dict(table)
    changes = []
    for version in range(1, draw(st.integers(0, 20)) + 1):
        key = draw(keys)
        old = live.get(key)
        if old is None:
            new = _row(*key, version)
            changes.append(DataChange(TABLE, draw(st.sampled_from([Op.INSERT, Op.READ])), None, new))
            live[key] = new
        elif draw(st.booleans()):
            changes.append(DataChange(TABLE, Op.DELETE, old, None))
            del live[key]
        else:
            moved = draw(keys)
            target = key if moved in live and moved != key else moved
            new = _row(*target, version)
            changes.append(DataChange(TABLE, Op.UPDATE, old, new))
            del live[key]
            live[target] = new
    return table, changes


def _applied_one_by_one(table: dict[Any, Any], changes: list[DataChange]) -> dict[Any, Any]:
    rows = dict(table)
    for change in changes:
        if change.before is not None:
            rows.pop((change.before["region"], change.before["id"]), None)
        if change.after is not None:
            rows[(change.after["region"], change.after["id"])] = change.after
    return rows


@given(_changes())
def test_the_collapsed_changes_leave_the_table_the_changes_one_by_one_leave(
    case: tuple[dict[Any, Any], list[DataChange]],
) -> None:
    table, changes = case
    after = dict(table)
    for key, row in collapse(changes, KEYS, "test").items():
        if row is None:
            after.pop(key, None)
        else:
            after[key] = row
    assert after == _applied_one_by_one(table, changes)
    # the last change of each key keeps its op, and a deleted key its old row
    for key, (op, row) in last_changes(changes, KEYS, "test").items():
        assert (row["region"], row["id"]) == key
        assert (op is Op.DELETE) == (key not in after)


def test_a_row_without_its_key_column_is_named() -> None:
    with pytest.raises(SinkTerminalError, match="primary key column 'region'"):
        collapse([DataChange(TABLE, Op.INSERT, None, {"id": 1})], KEYS, "test")
