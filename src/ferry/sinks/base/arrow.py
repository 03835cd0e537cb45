"""Rows as Arrow tables, for the sinks that write through pyarrow (Iceberg, Paimon).

Imported only by those sinks: pyarrow comes with their extras.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ferry.model.events import DataChange, Row
from ferry.model.raw_values import RAW_TYPES, ColumnForm, RawForms, materialize_column
from ferry.model.schema import TableId
from ferry.sinks.base import RefusedRow, RefusedRows
from ferry.sinks.base.exceptions import SinkRowError, SinkTerminalError

_VALUE_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)
#: An epoch count's unit → the Arrow type of the same counts.
_EPOCH_TYPES = {"us": pa.timestamp("us"), "ms": pa.timestamp("ms"), "D": pa.date32()}


def rows_to_arrow(
    arrow_schema: pa.Schema,
    rows: list[Row],
    *,
    sink: str,
    table_id: TableId,
    raw: RawForms | None = None,
) -> pa.Table:
    """The rows as an Arrow table of the sink table's schema; a value that does not fit its column,
    or a missing value of a NOT NULL column, is a terminal error naming the column.

    ``raw``: columns whose values may be raw in some rows (see :mod:`ferry.model.raw_values`),
    each in its form; such a column is built from the raw values at once where its Arrow type
    holds them as they are (an epoch count as a timestamp or a date, a decimal's unscaled
    integer), and converted to Python values first otherwise, with the same result."""
    deferred = {f.name: raw[f.name] for f in arrow_schema if f.name in raw} if raw else {}
    try:
        if not deferred:
            # one struct array from the row dicts (each key looked up in C++): half the cost of
            # ``Table.from_pylist``, which builds a Python list per column first; same values
            structs = pa.array(rows, type=pa.struct(list(arrow_schema)))
            data = pa.Table.from_arrays(structs.flatten(), schema=arrow_schema)
        else:
            plain = [f for f in arrow_schema if f.name not in deferred]
            columns = dict(
                zip([f.name for f in plain], pa.array(rows, type=pa.struct(plain)).flatten(), strict=True)
            )
            columns |= _raw_columns(rows, {n: (f, arrow_schema.field(n).type) for n, f in deferred.items()})
            data = pa.Table.from_arrays([columns[f.name] for f in arrow_schema], schema=arrow_schema)
    except _VALUE_ERRORS as e:
        for name, form in deferred.items():  # the message names the value the source sent
            materialize_column(rows, name, form)
        raise SinkRowError(_explain_bad_value(arrow_schema, rows, e), sink=sink, table=str(table_id)) from e
    for field in arrow_schema:
        if not field.nullable and data.column(field.name).null_count:
            raise SinkTerminalError(
                f"column {field.name} is required (NOT NULL or primary key) but a row has no value for it",
                sink=sink,
                table=str(table_id),
            )
    return data


def rows_to_arrow_setting_aside(
    arrow_schema: pa.Schema,
    rows: list[Row],
    changes: Sequence[DataChange],
    refuse: RefusedRows | None,
    *,
    sink: str,
    table_id: TableId,
    raw: RawForms | None = None,
) -> tuple[pa.Table, set[int]]:
    """:func:`rows_to_arrow`, but a row with a value that does not fit its column is set aside
    rather than failing the batch, when ``refuse`` is given: it goes to ``refuse`` (with the change
    of ``changes`` it comes from, and the reason) before anything is committed. Returns the table
    of the other rows and the indexes in ``rows`` of those set aside."""
    try:
        return rows_to_arrow(arrow_schema, rows, sink=sink, table_id=table_id, raw=raw), set()
    except SinkRowError:
        if refuse is None:
            raise
        unfit = _unfit_rows(arrow_schema, rows)
        by_row = {id(row): c for c in changes for row in (c.before, c.after) if row is not None}
        if not unfit or any(id(rows[i]) not in by_row for i in unfit):
            raise  # the rows at fault cannot be told apart, or not traced to their changes
    refuse(
        [
            RefusedRow(by_row[id(rows[i])], f"{sink} sink, table {table_id}: {reason}")
            for i, reason in sorted(unfit.items())
        ]
    )
    kept = [row for i, row in enumerate(rows) if i not in unfit]
    return rows_to_arrow(arrow_schema, kept, sink=sink, table_id=table_id, raw=raw), set(unfit)


def _unfit_rows(arrow_schema: pa.Schema, rows: list[Row]) -> dict[int, str]:
    """Per row index, why a value of it does not fit its column: a column at a time, then the
    values of a column that does not build one by one."""
    unfit: dict[int, str] = {}
    for field in arrow_schema:
        values = [row.get(field.name) for row in rows]
        try:
            pa.array(values, type=field.type)
            continue
        except _VALUE_ERRORS:
            pass
        for i, value in enumerate(values):
            if i in unfit:
                continue
            try:
                pa.array([value], type=field.type)
            except _VALUE_ERRORS as e:
                unfit[i] = f"column {field.name}: value {_shown(value)} does not fit {field.type} ({e})"
    return unfit


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _raw_columns(rows: list[Row], deferred: dict[str, tuple[ColumnForm, pa.DataType]]) -> dict[str, pa.Array]:
    """The raw columns of ``rows``, each an array of its Arrow type. Those whose every value is
    raw and that Arrow holds as they are (:func:`_held_type`) are read out of the rows in one
    pass (pyarrow reads each row's values in C++, refusing any value that is not raw: those
    columns then go :func:`_raw_column`'s way, a column at a time)."""
    held = {n: t for n, (form, arrow_type) in deferred.items() if (t := _held_type(form, arrow_type))}
    out: dict[str, pa.Array] = {}
    if held:
        try:
            children = pa.array(rows, type=pa.struct(list(held.items()))).flatten()
            for (name, _held), child in zip(held.items(), children, strict=True):
                form, arrow_type = deferred[name]
                out[name] = _from_held(child, form, arrow_type)
        except _VALUE_ERRORS:  # a value converted already, or out of the column's range
            out = {}
    for name, (form, arrow_type) in deferred.items():
        if name not in out:
            out[name] = _raw_column(rows, name, form, arrow_type)
    return out


def _held_type(form: ColumnForm, arrow_type: pa.DataType) -> pa.DataType | None:
    """The Arrow type of a column's raw values when Arrow builds the column from them as they are
    (an epoch count of the column's unit, a decimal's unscaled bytes of its scale), else None."""
    if form.input == "int":
        if form.divisor != 1 or form.unit not in _EPOCH_TYPES:
            return None
        timestamp = pa.types.is_timestamp(arrow_type) and form.unit != "D" and arrow_type.unit == "us"
        return pa.int64() if timestamp or (form.unit == "D" and pa.types.is_date32(arrow_type)) else None
    if pa.types.is_decimal128(arrow_type) and arrow_type.scale == form.scale:
        return pa.binary()
    return None


def _from_held(raw: pa.Array, form: ColumnForm, arrow_type: pa.DataType) -> pa.Array:
    """A column of ``arrow_type`` from its raw values read as :func:`_held_type`'s type; an Arrow
    error when one does not fit (out of range, more digits than the type's precision)."""
    if form.input == "int":
        if form.unit == "D":
            return raw.cast(pa.int32()).cast(pa.date32())
        return raw.cast(_EPOCH_TYPES[form.unit]).cast(arrow_type)
    return _decimals_of_unscaled_bytes(raw, arrow_type)


def _decimals_of_unscaled_bytes(raw: pa.BinaryArray, arrow_type: pa.Decimal128Type) -> pa.Array:
    """Decimal128 values from the big-endian two's complement bytes of their unscaled integers,
    laid out with NumPy: each value's bytes reversed into 16 little-endian ones, sign-extended.
    Written here because pyarrow builds decimals only from Python ``Decimal`` objects or text."""
    count = len(raw)
    offsets = np.frombuffer(raw.buffers()[1], dtype=np.int32)[raw.offset : raw.offset + count + 1]
    data_buffer = raw.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    ends = offsets[1:].astype(np.int64)
    lengths = ends - offsets[:-1]
    longest = int(lengths.max(initial=0))
    if longest > 16:
        raise pa.ArrowInvalid(f"an unscaled decimal of {longest} bytes does not fit 128 bits")
    out = np.zeros((count, 16), dtype=np.uint8)
    filled = lengths > 0
    negative = np.zeros(count, dtype=bool)
    negative[filled] = data[ends[filled] - lengths[filled]] >= 0x80
    out[negative] = 0xFF
    for byte in range(longest):
        has = lengths > byte
        out[has, byte] = data[ends[has] - 1 - byte]
    validity = raw.is_valid().buffers()[1] if raw.null_count else None
    wide = pa.Array.from_buffers(
        pa.decimal128(38, arrow_type.scale), count, [validity, pa.py_buffer(out.tobytes())]
    )
    return wide.cast(arrow_type)  # refuses a value with more digits than the column's precision


def _raw_column(rows: list[Row], name: str, form: ColumnForm, arrow_type: pa.DataType) -> pa.Array:
    """Column ``name`` of ``rows`` as an array of ``arrow_type``, its values raw in ``form`` in
    some rows (of their raw type) and converted in the others (the few rows the decoder read
    the generic way: those values are written by pyarrow as they are, in their places)."""
    values = [row.get(name) for row in rows]
    raw_types = RAW_TYPES[form.input]
    converted = [value is not None and type(value) not in raw_types for value in values]
    mixed = any(converted)
    raw = (
        [None if done else value for value, done in zip(values, converted, strict=True)] if mixed else values
    )
    built = _from_raw(raw, form, arrow_type)
    if built is None:
        materialize_column(rows, name, form)
        return pa.array([row.get(name) for row in rows], type=arrow_type)
    if mixed:
        replacements = pa.array(
            [v for v, done in zip(values, converted, strict=True) if done], type=arrow_type
        )
        built = pc.replace_with_mask(built, pa.array(converted, type=pa.bool_()), replacements)
    return built


def _from_raw(values: list[Any], form: ColumnForm, arrow_type: pa.DataType) -> pa.Array | None:
    """An array of ``arrow_type`` from raw values (or None), where Arrow holds them as they are:
    the same values the decoder's conversion gives, written by pyarrow. None when it does not (the
    caller converts them first)."""
    if form.input == "int":
        epoch = _EPOCH_TYPES.get(form.unit)
        if form.divisor != 1 or epoch is None:
            return None
        if pa.types.is_timestamp(arrow_type) and form.unit != "D" and arrow_type.unit == "us":
            # a naive datetime is written as its count of μs since the epoch (whatever the zone)
            return pa.array(values, type=pa.int64()).cast(epoch).cast(arrow_type)
        if form.unit == "D" and pa.types.is_date32(arrow_type):
            return pa.array(values, type=pa.int32()).cast(pa.date32())
        return None
    if (
        not pa.types.is_decimal128(arrow_type)
        or arrow_type.scale != form.scale
        or any(type(value) is not bytes for value in values if value is not None)
    ):
        return None
    return _unscaled_decimals(values, arrow_type)


def _unscaled_decimals(values: list[bytes | None], arrow_type: pa.Decimal128Type) -> pa.Array | None:
    """Decimal128 values from the big-endian two's complement bytes of their unscaled integers
    (Debezium's form of a decimal), or None when one has more digits than the type's precision
    (the caller's conversion then names it). pyarrow builds decimals only from Python ``Decimal``
    objects or text: the 16 little-endian bytes of each value are laid out here."""
    from_bytes, limit = int.from_bytes, 10**arrow_type.precision
    unscaled = [0 if value is None else from_bytes(value, "big", signed=True) for value in values]
    if any(not -limit < number < limit for number in unscaled):
        return None
    data = pa.py_buffer(b"".join(number.to_bytes(16, "little", signed=True) for number in unscaled))
    validity = None
    if None in values:
        validity = pa.array([value is not None for value in values], type=pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(arrow_type, len(values), [validity, data])


def _explain_bad_value(arrow_schema: Any, rows: list[Row], error: Exception) -> str:
    for field in arrow_schema:
        for row in rows:
            value = row.get(field.name)
            try:
                pa.array([value], type=field.type)
            except _VALUE_ERRORS as e:
                return f"column {field.name}: value {value!r} does not fit {field.type} ({e})"
    return f"rows do not fit the table's schema ({error})"
