"""Rows as Arrow tables, for the sinks that write through pyarrow (Iceberg, Paimon).

Imported only by those sinks: pyarrow comes with their extras.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import pyarrow as pa

from ferry.pipeline.events import Row
from ferry.pipeline.schema import TableId
from ferry.sinks.exceptions import SinkTerminalError

_VALUE_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


def rows_to_arrow(arrow_schema: pa.Schema, rows: list[Row], *, sink: str, table_id: TableId) -> pa.Table:
    """The rows as an Arrow table of the sink table's schema; a value that does not fit its column,
    or a missing value of a NOT NULL column, is a terminal error naming the column."""
    try:
        data = _columns(arrow_schema, rows)
    except _VALUE_ERRORS as e:
        raise SinkTerminalError(
            _explain_bad_value(arrow_schema, rows, e), sink=sink, table=str(table_id)
        ) from e
    for field in arrow_schema:
        if not field.nullable and data.column(field.name).null_count:
            raise SinkTerminalError(
                f"column {field.name} is required (NOT NULL or primary key) but a row has no value for it",
                sink=sink,
                table=str(table_id),
            )
    return data


def _columns(arrow_schema: pa.Schema, rows: list[Row]) -> pa.Table:
    """``pa.Table.from_pylist``: the rows' values gathered a row at a time by one ``itemgetter``
    call and turned into columns by ``zip`` (a third less time than pyarrow's gathering of one
    column at a time); rows that lack a column (``None`` there) go through pyarrow's."""
    names = arrow_schema.names
    if not rows or len(names) < 2:
        return pa.Table.from_pylist(rows, schema=arrow_schema)
    try:
        columns = list(zip(*map(itemgetter(*names), rows), strict=True))
    except KeyError:
        return pa.Table.from_pylist(rows, schema=arrow_schema)
    return pa.Table.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, arrow_schema, strict=True)],
        schema=arrow_schema,
    )


def _explain_bad_value(arrow_schema: Any, rows: list[Row], error: Exception) -> str:
    for field in arrow_schema:
        for row in rows:
            value = row.get(field.name)
            try:
                pa.array([value], type=field.type)
            except _VALUE_ERRORS as e:
                return f"column {field.name}: value {value!r} does not fit {field.type} ({e})"
    return f"rows do not fit the table's schema ({error})"
