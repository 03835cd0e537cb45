"""Runs of column changes (:mod:`ferry.model.columns`) hold exactly the changes the row decoder
gives: a decoder with ``columns`` on, its runs turned into rows, gives the generic path's events
for generated streams of plain-typed rows (every value type a plain typed decoder reads, nulls,
deletes, updates of a key within a batch, a key changed, the unavailable-value placeholder), and
the rows of a run are decoded as a run (not one by one)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_debezium_typed import _generic, _materialized, _same

from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.columns import as_rows
from ferry.model.events import ColumnChanges, DataChange

PLACEHOLDER = "__debezium_unavailable_value"


def _table(with_schema: bool) -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        "srv",
        "shop",
        "items",
        [
            dbz.ConnectColumn("id", dbz.INT64, optional=False),
            dbz.ConnectColumn("small", dbz.INT32),
            dbz.ConnectColumn("qty", dbz.INT64),
            dbz.ConnectColumn("amount", dbz.FLOAT64),
            dbz.ConnectColumn("note", dbz.STRING),
            dbz.ConnectColumn("active", dbz.BOOLEAN),
        ],
        with_schema=with_schema,
        ts_ms=1_700_000_000_000,
    )


_VALUES = st.fixed_dictionaries(
    {
        "small": st.none() | st.integers(-(2**31), 2**31 - 1),
        "qty": st.none() | st.integers(-(2**63), 2**63 - 1),
        "amount": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "note": st.none() | st.text(max_size=8) | st.just(PLACEHOLDER),
        "active": st.none() | st.booleans(),
    }
)
_STEPS = st.lists(
    st.tuples(
        st.integers(0, 1),  # partition
        st.integers(0, 5),  # key: few, so that a batch updates and deletes the same keys
        st.sampled_from(["insert", "update", "delete", "move key", "tombstone"]),
        _VALUES,
    ),
    min_size=1,
    max_size=50,
)


def _stream(with_schema: bool, steps: list[tuple[int, int, str, dict[str, Any]]]) -> list[Record]:
    table = _table(with_schema)
    live: dict[int, dict[str, Any]] = {}
    records = []
    # a first insert per partition makes its typed decoder and its run
    for partition in (0, 1):
        key, value = table.insert(
            {"id": 100 + partition, "small": 1, "qty": 1, "amount": 1.5, "note": "a", "active": True}
        )
        records.append(Record("srv.shop.items", partition, 0, key=key, value=value))
    for offset, (partition, key, kind, values) in enumerate(steps, start=1):
        row = {"id": key, **values}
        old = live.get(key, {**row, "note": "old"})
        pair: tuple[bytes | None, bytes | None]
        if kind == "insert":
            pair = table.insert(row)
            live[key] = row
        elif kind == "update":
            pair = table.update(old, row)
            live[key] = row
        elif kind == "delete":
            pair = table.delete(old)
            live.pop(key, None)
        elif kind == "move key":
            moved = {**row, "id": key + 10}
            pair = table.update(old, moved)
            live.pop(key, None)
            live[key + 10] = moved
        else:
            pair = (table.insert(row)[0], None)
        records.append(Record("srv.shop.items", partition, offset, key=pair[0], value=pair[1]))
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_schema=st.booleans(), steps=_STEPS, cuts=st.lists(st.integers(0, 52), max_size=4))
def test_runs_of_column_changes_are_the_row_decoders_changes(
    with_schema: bool, steps: list[tuple[int, int, str, dict[str, Any]]], cuts: list[int]
) -> None:
    records = _stream(with_schema, steps)
    columns = DebeziumJsonDecoder(raw_values=True, infer_types=True, columns=True)
    generic = _generic()
    bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
    for start, end in itertools.pairwise(bounds):
        batch = records[start:end]
        events = columns.decode(batch)
        _same(_materialized(as_rows(events)), generic.decode(batch))


def test_a_partitions_plain_rows_are_decoded_as_one_run() -> None:
    """After its first records (read one by one), a partition's plain rows are one run: a record
    that holds the placeholder in an update is read as a row, in its place."""
    for with_schema in (True, False):
        table = _table(with_schema)
        rows = [
            {"id": k, "small": k, "qty": k, "amount": k / 2, "note": f"n{k}", "active": k % 2 == 0}
            for k in range(20)
        ]
        pairs = [table.insert(row) for row in rows]
        pairs[12] = table.update(rows[3], {**rows[3], "note": PLACEHOLDER})
        records = [Record("srv.shop.items", 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)]
        events = DebeziumJsonDecoder(infer_types=True, columns=True).decode(records)
        shapes = [type(e).__name__ for e in events if isinstance(e, DataChange | ColumnChanges)]
        # the first record makes the typed decoder, the second (typed, one by one) the run
        first = 2
        assert shapes == ["DataChange"] * first + ["ColumnChanges", "DataChange", "ColumnChanges"]
        runs = [e for e in events if isinstance(e, ColumnChanges)]
        assert [r.offsets for r in runs] == [list(range(first, 12)), list(range(13, 20))]
        _same(as_rows(events), _generic().decode(records))
