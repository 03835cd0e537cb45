"""Rows whose epoch and decimal columns are raw (as Debezium wrote them) build the same Arrow table
as the same rows converted first, for every Arrow type such a column may have at the sink; a value
that does not fit fails the same way, naming the value the source sent."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.connectors.formats.connect_types import column_reader, connect_field
from ferry.local import debezium as dbz
from ferry.model.raw_values import materialize_column
from ferry.model.schema import TableId
from ferry.sinks.base.arrow import rows_to_arrow
from ferry.sinks.base.exceptions import SinkTerminalError

TABLE = TableId(None, "db", "t")
MILLIS_TIMESTAMP = {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}
NANOS_TIMESTAMP = {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "version": 1}


def form_of(spec: dict[str, Any]) -> Any:
    reader = column_reader(connect_field({**spec, "optional": True, "field": "v"}))
    assert reader is not None
    return reader


#: Connect schema → the raw values its reader takes (within the bounds the parser checks)
MICROS = st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999)
EPOCHS = {
    "micros": (dbz.TIMESTAMP_MICROS, MICROS),
    "millis": (MILLIS_TIMESTAMP, st.integers(-62_135_596_800_000, 253_402_300_799_999)),
    "nanos": (NANOS_TIMESTAMP, st.integers(-(2**63), 2**63 - 1)),
    "days": (dbz.DATE, st.integers(-719_162, 2_932_896)),
}
TIMESTAMP_TYPES = [pa.timestamp("us"), pa.timestamp("us", tz="UTC"), pa.timestamp("ms"), pa.timestamp("ns")]


def unscaled_bytes(number: int) -> bytes:
    return number.to_bytes(max(1, (number.bit_length() + 8) // 8), "big", signed=True)


def build(arrow_type: pa.DataType, rows: list[dict[str, Any]], raw: dict[str, Any] | None) -> pa.Table | str:
    """The table, or the error's message."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", arrow_type)])
    try:
        return rows_to_arrow(schema, rows, sink="test", table_id=TABLE, raw=raw)
    except SinkTerminalError as e:
        return str(e)


def assert_same_as_converted(arrow_type: pa.DataType, values: list[Any], form: Any) -> None:
    rows = [{"id": i, "v": v} for i, v in enumerate(values)]
    converted = copy.deepcopy(rows)
    materialize_column(converted, "v", form)
    expected = build(arrow_type, converted, None)
    got = build(arrow_type, copy.deepcopy(rows), {"v": form})
    if isinstance(expected, str):
        assert got == expected
    else:
        assert isinstance(got, pa.Table) and got.equals(expected), (got, expected)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(EPOCHS)),
    arrow_type=st.sampled_from([*TIMESTAMP_TYPES, pa.date32(), pa.string()]),
    data=st.data(),
)
def test_raw_epoch_counts_build_what_their_converted_values_build(
    kind: str, arrow_type: pa.DataType, data: st.DataObject
) -> None:
    spec, counts = EPOCHS[kind]
    form = form_of(spec)
    values = data.draw(st.lists(st.none() | counts, max_size=8))
    # some rows converted already (the decoder's generic path), the others raw
    converted_at = data.draw(st.sets(st.integers(0, max(0, len(values) - 1))))
    for i in converted_at:
        if i < len(values) and values[i] is not None:
            values[i] = form.convert([values[i]])[0]
    assert_same_as_converted(arrow_type, values, form)


@settings(max_examples=300, deadline=None)
@given(
    precision=st.integers(1, 38),
    target_scale=st.integers(0, 10),
    data=st.data(),
)
def test_raw_decimals_build_what_their_converted_values_build(
    precision: int, target_scale: int, data: st.DataObject
) -> None:
    scale = data.draw(st.integers(0, min(precision, 10)))
    form = form_of(dbz.DECIMAL(precision, scale))
    target_precision = data.draw(st.integers(max(1, target_scale), 38))
    arrow_type = pa.decimal128(target_precision, target_scale)
    # unscaled integers within and beyond the precision; a few JSON numbers (Debezium's numeric mode)
    unscaled = st.integers(-(10 ** (precision + 1)), 10 ** (precision + 1))
    values = data.draw(
        st.lists(st.none() | unscaled.map(unscaled_bytes) | st.integers(-999, 999), max_size=8)
    )
    # some rows converted already (the decoder's generic path), the others raw
    for i in data.draw(st.sets(st.integers(0, max(0, len(values) - 1)))):
        if i < len(values) and values[i] is not None:
            values[i] = form.convert([values[i]])[0]
    assert_same_as_converted(arrow_type, values, form)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_raw_columns_with_a_few_converted_values_are_built_from_the_raw_ones(data: st.DataObject) -> None:
    # bytes decimals only (no JSON numbers): the column is built from the raw values, and the
    # converted ones are put in their places
    form = form_of(dbz.DECIMAL(12, 3))
    values: list[Any] = data.draw(
        st.lists(st.none() | st.integers(-(10**11), 10**11).map(unscaled_bytes), min_size=1)
    )
    converted_at = data.draw(st.sets(st.integers(0, len(values) - 1), max_size=2))
    for i in converted_at:
        if values[i] is not None:
            values[i] = form.convert([values[i]])[0]
    assert_same_as_converted(pa.decimal128(12, 3), values, form)


def test_a_raw_decimal_beyond_the_precision_is_named_as_the_decimal_it_is() -> None:
    form = form_of(dbz.DECIMAL(10, 2))
    message = build(pa.decimal128(4, 2), [{"id": 1, "v": unscaled_bytes(123456)}], {"v": form})
    assert isinstance(message, str) and "column v" in message and "1234.56" in message


def test_raw_values_are_built_without_being_converted_first() -> None:
    # the rows keep their raw values: the column was built from them as they are
    form = form_of(dbz.TIMESTAMP_MICROS)
    rows: list[dict[str, Any]] = [{"id": 1, "v": 1_700_000_000_000_000}, {"id": 2, "v": None}]
    table = build(pa.timestamp("us"), rows, {"v": form})
    assert isinstance(table, pa.Table)
    assert rows[0]["v"] == 1_700_000_000_000_000
    assert table.column("v").to_pylist()[0] == form.convert([1_700_000_000_000_000])[0]
    # a value converted already (read the generic way) among raw ones: still built from the raw
    mixed: list[dict[str, Any]] = [{"id": 1, "v": form.convert([5])[0]}, {"id": 2, "v": 7}]
    table = build(pa.timestamp("us"), mixed, {"v": form})
    assert isinstance(table, pa.Table) and mixed[1]["v"] == 7
    assert table.column("v").to_pylist() == form.convert([5, 7])
    decimals: list[dict[str, Any]] = [{"id": 1, "v": unscaled_bytes(-12345)}]
    table = build(pa.decimal128(10, 2), decimals, {"v": form_of(dbz.DECIMAL(10, 2))})
    assert isinstance(table, pa.Table) and table.column("v").to_pylist() == [Decimal("-123.45")]
    assert type(decimals[0]["v"]) is bytes


@pytest.mark.parametrize("arrow_type", [pa.timestamp("us"), pa.date32()])
def test_a_required_column_left_empty_is_named(arrow_type: pa.DataType) -> None:
    spec = dbz.TIMESTAMP_MICROS if pa.types.is_timestamp(arrow_type) else dbz.DATE
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("v", arrow_type, nullable=False)]
    )
    with pytest.raises(SinkTerminalError, match="column v is required"):
        rows_to_arrow(schema, [{"id": 1, "v": None}], sink="test", table_id=TABLE, raw={"v": form_of(spec)})


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_several_raw_columns_of_one_row_set_build_what_their_converted_values_build(
    data: st.DataObject,
) -> None:
    # the columns read out of the rows together; a value converted already in one of them, or a
    # JSON number among decimal bytes, sends that pass back to a column at a time
    columns = {
        "at": (form_of(dbz.TIMESTAMP_MICROS), pa.timestamp("us"), MICROS),
        "day": (form_of(dbz.DATE), pa.date32(), EPOCHS["days"][1]),
        "price": (
            form_of(dbz.DECIMAL(12, 3)),
            pa.decimal128(12, 3),
            st.integers(-(10**12), 10**12).map(unscaled_bytes) | st.integers(-9, 9),
        ),
    }
    count = data.draw(st.integers(0, 8))
    rows: list[dict[str, Any]] = [{"id": i} for i in range(count)]
    for name, (form, _type, values) in columns.items():
        for row in rows:
            value = data.draw(st.none() | values)
            if value is not None and data.draw(st.integers(0, 9)) == 0:
                value = form.convert([value])[0]
            row[name] = value
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False)] + [pa.field(n, t) for n, (_, t, _) in columns.items()]
    )
    converted = copy.deepcopy(rows)
    for name, (form, _type, _values) in columns.items():
        materialize_column(converted, name, form)

    def table(of: list[dict[str, Any]], raw: dict[str, Any] | None) -> pa.Table | str:
        try:
            return rows_to_arrow(schema, of, sink="test", table_id=TABLE, raw=raw)
        except SinkTerminalError as e:
            return str(e)

    expected = table(converted, None)
    got = table(rows, {n: form for n, (form, _t, _v) in columns.items()})
    if isinstance(expected, str):
        assert got == expected
    else:
        assert isinstance(got, pa.Table) and got.equals(expected), (got, expected)
