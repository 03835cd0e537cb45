"""Runs of column changes (:mod:`ferry.model.columns`) as Arrow data, collapsed by key with
Arrow's kernels: what :func:`ferry.sinks.base.rows.last_changes` and
:func:`ferry.sinks.base.arrow.rows_to_arrow` give for the same changes, without a Python object
per row.

Imported only by the sinks that write through pyarrow (Iceberg): pyarrow comes with their extras.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from operator import itemgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ferry.model.events import ColumnChanges, DataChange, Op

_astuple = msgspec.structs.astuple
_VALUE_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)
_NEW, _GONE = 0, 1


def _as_tuple(values: Any, width: int) -> tuple[Any, ...]:
    """``itemgetter``'s values as a tuple (one column's: the value alone)."""
    return values if width > 1 else (values,)


def _values(column: pa.ChunkedArray) -> list[Hashable]:
    """A key column's values as Python values (integers through NumPy: many times faster)."""
    if pa.types.is_integer(column.type) and not column.null_count:
        values: list[Hashable] = column.to_numpy().tolist()
        return values
    pylist: list[Hashable] = column.to_pylist()
    return pylist


def _key_type(arrow_type: pa.DataType) -> bool:
    """Whether Arrow's equality of values of this type is Python's (a key matched by either)."""
    return bool(
        pa.types.is_integer(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_boolean(arrow_type)
    )


def collapse_runs(
    changes: Sequence[DataChange | ColumnChanges], arrow_schema: pa.Schema, keys: tuple[str, ...]
) -> tuple[pa.Table, list[Hashable]] | None:
    """The last state of every key ``changes`` (row changes and runs of column changes, in order)
    touch: the rows of the keys whose last change leaves a row (an Arrow table of ``arrow_schema``,
    in the order the keys were first touched), and every key touched (a value, or a tuple for a
    composite key), as :func:`~ferry.sinks.base.rows.last_changes` gives them (an update that changes
    its key deletes the old one). None where they must be collapsed as rows: the runs' columns are
    not the schema's, a row lacks one, a key column is of a type whose equality Arrow and Python do
    not share, a value does not fit its column (the row path names it, or sets its row aside), or a
    NOT NULL column has a null."""
    names = tuple(arrow_schema.names)
    runs = [c for c in changes if type(c) is ColumnChanges]
    if not runs or any(run.names != names for run in runs):
        return None
    if not keys or not all(_key_type(arrow_schema.field(k).type) for k in keys):
        return None
    row_type = pa.struct(list(arrow_schema))
    astuple = _astuple
    values = itemgetter(*names)
    every_op: list[Op] = []
    after_rows: list[Any] = []
    before_keys_of: list[list[Any]] = [[] for _ in keys]
    try:
        for item in changes:
            if type(item) is ColumnChanges:
                every_op.extend(item.ops)
                after_rows.extend([None if a is None else astuple(a) for a in item.afters])
                for k, out in zip(keys, before_keys_of, strict=True):
                    out.extend([None if b is None else getattr(b, k) for b in item.befores])
            else:
                change: DataChange = item  # type: ignore[assignment]
                every_op.append(change.op)
                after, before = change.after, change.before
                after_rows.append(None if after is None else _as_tuple(values(after), len(names)))
                for k, out in zip(keys, before_keys_of, strict=True):
                    out.append(None if before is None else before.get(k))
        ops_of = np.array(every_op, dtype=object)
        ops = np.where(ops_of == Op.DELETE, 2, np.where(ops_of == Op.UPDATE, 1, 0)).astype(np.int8)
        afters = pa.array(after_rows, type=row_type)
        before_keys = [
            pa.array(out, type=arrow_schema.field(k).type)
            for k, out in zip(keys, before_keys_of, strict=True)
        ]
    except (*_VALUE_ERRORS, KeyError):
        return None
    after_keys = [afters.field(k) for k in keys]
    has_after = np.asarray(afters.is_valid())
    has_before = np.asarray(before_keys[0].is_valid())
    # the entries of the changes by their keys, in order: seq 2i for an update's old key that goes
    # (before its new key), 2i+1 for the change's own key
    deleted = (ops == 2) & has_before
    changed = np.zeros(len(ops), dtype=bool)
    updated = (ops == 1) & has_before & has_after
    if updated.any():
        differs = np.zeros(len(ops), dtype=bool)
        for old, new in zip(before_keys, after_keys, strict=True):
            differs |= np.asarray(pc.fill_null(pc.not_equal(old, new), False))
        changed = updated & differs
    kept = (ops != 2) & has_after
    gone_rows = np.flatnonzero(deleted | changed)
    new_rows = np.flatnonzero(kept)
    gone_seq = np.where(deleted[gone_rows], 2 * gone_rows + 1, 2 * gone_rows)
    gone_index, new_index = pa.array(gone_rows), pa.array(new_rows)
    entries = pa.table(
        {
            **{
                f"k{i}": pa.concat_arrays([old.take(gone_index), new.take(new_index)])
                for i, (old, new) in enumerate(zip(before_keys, after_keys, strict=True))
            },
            "seq": np.concatenate([gone_seq, 2 * new_rows + 1]),
        }
    )
    kind_at = np.full(2 * len(ops), -1, dtype=np.int8)
    kind_at[gone_seq] = _GONE
    kind_at[2 * new_rows + 1] = _NEW
    groups = entries.group_by([f"k{i}" for i in range(len(keys))], use_threads=False).aggregate(
        [("seq", "max"), ("seq", "min")]
    )
    order = np.argsort(np.asarray(groups.column("seq_min")), kind="stable")
    last = np.asarray(groups.column("seq_max"))[order]
    kinds = kind_at[last]
    rows = afters.take(pa.array((last[kinds == _NEW] - 1) // 2))
    data = pa.Table.from_arrays(rows.flatten(), schema=arrow_schema)
    for field in arrow_schema:
        if not field.nullable and data.column(field.name).null_count:
            return None
    ordered = groups.take(pa.array(order))
    columns = [_values(ordered.column(f"k{i}")) for i in range(len(keys))]
    touched: list[Hashable] = columns[0] if len(keys) == 1 else list(zip(*columns, strict=True))
    return data, touched
