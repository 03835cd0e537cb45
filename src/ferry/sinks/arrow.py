"""Rows as Arrow tables, for the sinks that write through pyarrow (Iceberg, Paimon).

Imported only by those sinks: pyarrow comes with their extras.
"""

from __future__ import annotations

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
        data = pa.Table.from_pylist(rows, schema=arrow_schema)
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


def _explain_bad_value(arrow_schema: Any, rows: list[Row], error: Exception) -> str:
    for field in arrow_schema:
        for row in rows:
            value = row.get(field.name)
            try:
                pa.array([value], type=field.type)
            except _VALUE_ERRORS as e:
                return f"column {field.name}: value {value!r} does not fit {field.type} ({e})"
    return f"rows do not fit the table's schema ({error})"
