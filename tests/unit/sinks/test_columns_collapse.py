"""Runs of column changes collapsed by key with Arrow's kernels (:func:`ferry.sinks.base.columns.collapse_runs`)
give what the row path gives for the same changes: :func:`ferry.sinks.base.rows.last_changes`'s rows
that stay (as :func:`ferry.sinks.base.arrow.rows_to_arrow` builds them, in the order their keys were
first touched) and the keys touched; where the row path would fail or set a row aside, None."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferry.model.columns import all_changes
from ferry.model.events import ColumnChanges, Op, SourcePosition
from ferry.model.schema import TableId
from ferry.sinks.base.arrow import rows_to_arrow
from ferry.sinks.base.columns import collapse_runs
from ferry.sinks.base.rows import last_changes

TABLE = TableId(None, "shop", "items")
Row = msgspec.defstruct(
    "Row", [("id", int), ("part", str | None), ("qty", int | None), ("note", str | None)], gc=False
)
NAMES = ("id", "part", "qty", "note")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("part", pa.large_string()),
        pa.field("qty", pa.int32()),
        pa.field("note", pa.large_string()),
    ]
)

_ROW = st.builds(
    Row,
    st.integers(0, 4),
    st.sampled_from(["a", "b"]),
    st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.text(max_size=3),
)
_CHANGE = st.one_of(
    st.tuples(st.just(Op.INSERT), st.none(), _ROW),
    st.tuples(st.just(Op.READ), st.none(), _ROW),
    st.tuples(st.just(Op.UPDATE), st.none() | _ROW, _ROW),
    st.tuples(st.just(Op.DELETE), _ROW, st.none()),
)


def _runs(changes: list[tuple[Op, Any, Any]], cut: int) -> list[ColumnChanges]:
    runs = []
    for part in (changes[:cut], changes[cut:]):
        if part:
            offsets = list(range(len(part)))
            runs.append(
                ColumnChanges(
                    TABLE,
                    NAMES,
                    [c[0] for c in part],
                    [c[1] for c in part],
                    [c[2] for c in part],
                    offsets,
                    [None] * len(part),
                    SourcePosition("t", 0, offsets[-1]),
                )
            )
    return runs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(_CHANGE, min_size=1, max_size=40),
    cut=st.integers(0, 40),
    composite=st.booleans(),
    first_as_rows=st.booleans(),
)
def test_collapsed_by_arrow_as_by_rows(
    changes: list[tuple[Op, Any, Any]], cut: int, composite: bool, first_as_rows: bool
) -> None:
    """Runs, and row changes before a run (the first part as rows, as a runner buffers them)."""
    keys = ("id", "part") if composite else ("id",)
    runs: list[Any] = _runs(changes, cut)
    if first_as_rows and len(runs) == 2:
        runs = [*all_changes(runs[:1]), runs[1]]
    last = last_changes(all_changes(runs), keys, "test")
    rows = [row for op, row in last.values() if op is not Op.DELETE]
    collapsed = collapse_runs(runs, SCHEMA, keys)
    assert collapsed is not None
    data, touched = collapsed
    expected = rows_to_arrow(SCHEMA, rows, sink="test", table_id=TABLE)
    assert data.equals(expected)
    assert data.schema == SCHEMA
    assert touched == list(last)


def test_what_the_row_path_names_or_sets_aside_is_not_collapsed_by_arrow() -> None:
    """A value out of its column's range (even in a row that does not stay), a null in a NOT NULL
    column, a key column whose equality Arrow does not share, or other columns: None."""
    fits = Row(1, "a", 5, "x")
    too_big = Row(2, "a", 2**40, "x")
    assert collapse_runs(_runs([(Op.INSERT, None, fits)], 0), SCHEMA, ("id",)) is not None
    assert (
        collapse_runs(_runs([(Op.INSERT, None, too_big), (Op.DELETE, too_big, None)], 0), SCHEMA, ("id",))
        is None
    )
    required = SCHEMA.set(1, pa.field("part", pa.large_string(), nullable=False))
    assert collapse_runs(_runs([(Op.INSERT, None, Row(1, None, 1, "x"))], 0), required, ("id",)) is None
    floats = SCHEMA.set(2, pa.field("qty", pa.float64()))
    assert collapse_runs(_runs([(Op.INSERT, None, fits)], 0), floats, ("qty",)) is None
    renamed = SCHEMA.set(3, pa.field("comment", pa.large_string()))
    assert collapse_runs(_runs([(Op.INSERT, None, fits)], 0), renamed, ("id",)) is None
