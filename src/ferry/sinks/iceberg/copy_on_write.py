"""Copy-on-write deletes in Iceberg: the data files holding keys rewritten without their rows."""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, In, LessThanOrEqual
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction

_ROW = "__ferry_row"
#: pyiceberg skips files by an ``IN`` only up to this many values.
_IN_PRUNING_LIMIT = 200


def _bounds(column: str, values: list[Any]) -> BooleanExpression | None:
    try:
        low, high = min(values), max(values)
    except (TypeError, ValueError):  # no values, or values of mixed types: no order
        return None
    return And(GreaterThanOrEqual(column, low), LessThanOrEqual(column, high))  # type: ignore[call-arg]


def delete_keys(
    table: Table, tx: Transaction, keys: tuple[str, ...], values: list[Hashable], properties: dict[str, str]
) -> None:
    """Rewrite, in ``tx``, the data files holding any of these keys without those rows (copy-on-write).

    ``values`` are tuples for a composite key. The files are pruned with each key column's bounds
    (and its values, when few), then each file is read and its matching rows found with one hash
    join on the key columns.
    """
    columns = [values] if len(keys) == 1 else [[parts(v)[i] for v in values] for i in range(len(keys))]
    schema = table.schema()
    arrow_schema = schema.as_arrow()
    wanted = pa.table(
        {k: pa.array(vals, type=arrow_schema.field(k).type) for k, vals in zip(keys, columns, strict=True)}
    )
    prune = [prune_filter(k, vals) for k, vals in zip(keys, columns, strict=True)]
    rewritten: list[tuple[DataFile, pa.Table]] = []
    for task in table.scan(row_filter=prune[0] if len(prune) == 1 else And(*prune)).plan_files():
        data = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
        positions = pa.array(range(data.num_rows), type=pa.int64())
        index = pa.table({**{k: data[k] for k in keys}, _ROW: positions})
        hits = index.join(wanted, keys=list(keys), join_type="left semi")[_ROW]
        if len(hits):
            gone = pc.is_in(positions, value_set=hits.combine_chunks())
            rewritten.append((task.file, data.filter(pc.invert(gone))))
    if not rewritten:
        return
    counter = itertools.count()
    with tx.update_snapshot(snapshot_properties=properties).overwrite() as rewrite:
        for old_file, kept in rewritten:
            rewrite.delete_data_file(old_file)
            if kept.num_rows:
                for new_file in _dataframe_to_data_files(
                    tx.table_metadata, kept, table.io, write_uuid=rewrite.commit_uuid, counter=counter
                ):
                    rewrite.append_data_file(new_file)


def prune_filter(column: str, values: list[Any]) -> BooleanExpression:
    """What the key values of one column tell about the files that may hold them."""
    bounds = _bounds(column, values)
    if len(set(values)) <= _IN_PRUNING_LIMIT:
        exact: BooleanExpression = In(term=column, literals=values)
        return exact if bounds is None else And(exact, bounds)
    return AlwaysTrue() if bounds is None else bounds


def parts(value: Hashable) -> tuple[Any, ...]:
    assert isinstance(value, tuple)
    return value
