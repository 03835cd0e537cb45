import datetime as dt
import decimal
import re

import pytest

from ferry.model import types as T
from ferry.model.events import DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.adapt import CastError, RowAdapter


def identity(t: T.DataType) -> T.DataType:
    return t


def test_same_schema_is_identity() -> None:
    s = Schema.of([Column("id", T.INT())], ["id"])
    assert RowAdapter(s, s, identity).identity


def test_missing_columns_are_null_and_extra_columns_are_dropped() -> None:
    source = Schema.of([Column("id", T.INT()), Column("new", T.STRING())], ["id"])
    sink = Schema.of([Column("id", T.INT()), Column("old", T.STRING())], ["id"])
    adapter = RowAdapter(source, sink, identity)
    assert adapter.dropped == ("new",) and adapter.missing == ("old",)
    change = DataChange(TableId.parse("t"), Op.INSERT, None, {"id": 1, "new": "x"})
    assert adapter.adapt(change).after == {"id": 1, "old": None}


@pytest.mark.parametrize(
    ("source", "sink", "value", "expected"),
    [
        (T.BIGINT(), T.INT(), 5, 5),
        (T.STRING(), T.INT(), "42", 42),
        (T.INT(), T.DOUBLE(), 3, 3.0),
        (T.DOUBLE(), T.DECIMAL(10, 2), 1.5, decimal.Decimal("1.50")),
        (T.INT(), T.STRING(), 7, "7"),
        (T.DATE(), T.TIMESTAMP(6), dt.date(2024, 1, 2), dt.datetime(2024, 1, 2)),
        (T.TIMESTAMP(6), T.DATE(), dt.datetime(2024, 1, 2), dt.date(2024, 1, 2)),
    ],
)
def test_lossless_casts(source: T.DataType, sink: T.DataType, value: object, expected: object) -> None:
    adapter = RowAdapter(Schema.of([Column("v", source)]), Schema.of([Column("v", sink)]), identity)
    assert adapter.adapt_row({"v": value}) == {"v": expected}


@pytest.mark.parametrize(
    ("source", "sink", "value", "why"),
    [
        (T.BIGINT(), T.INT(), 2**40, "out of range"),
        (T.STRING(), T.INT(), "4.5", "v"),
        (T.DOUBLE(), T.INT(), 4.5, "fraction"),
        (T.DOUBLE(), T.DECIMAL(10, 1), 1.25, "digits after"),
        (T.TIMESTAMP(6), T.DATE(), dt.datetime(2024, 1, 2, 3), "time of day"),
    ],
)
def test_lossy_casts_fail_naming_the_column(
    source: T.DataType, sink: T.DataType, value: object, why: str
) -> None:
    adapter = RowAdapter(Schema.of([Column("v", source)]), Schema.of([Column("v", sink)]), identity)
    with pytest.raises(CastError, match=f"column 'v'.*{why}"):
        adapter.adapt_row({"v": value})


@pytest.mark.parametrize(
    ("source", "sink", "fits", "too_long", "why"),
    [
        (T.VARCHAR(100), T.VARCHAR(20), "x" * 20, "x" * 21, "21 characters long, longer than 20"),
        (T.STRING(), T.CHAR(3), "abc", "abcd", "4 characters long, longer than 3"),
        (T.BIGINT(), T.VARCHAR(2), 42, 420, "3 characters long, longer than 2"),
        (T.BYTES(), T.VARBINARY(4), b"\x00" * 4, b"\x00" * 5, "5 bytes long, longer than 4"),
        (T.STRING(), T.VARCHAR(2), "éé", "ééé", "3 characters long, longer than 2"),
    ],
)
def test_a_value_longer_than_its_sink_column_is_refused_naming_its_length(
    source: T.DataType, sink: T.DataType, fits: object, too_long: object, why: str
) -> None:
    adapter = RowAdapter(Schema.of([Column("v", source)]), Schema.of([Column("v", sink)]), identity)
    change = DataChange(TableId.parse("t"), Op.INSERT, None, {"v": fits})
    assert adapter.adapt(change).after == {"v": fits if not isinstance(fits, int) else str(fits)}
    with pytest.raises(CastError, match=f"column 'v': .* cannot be cast to {re.escape(str(sink))}.*{why}"):
        adapter.adapt(change._replace(after={"v": too_long}))


def test_a_column_at_least_as_long_as_the_source_is_not_checked() -> None:
    for source, sink in (
        (T.VARCHAR(20), T.VARCHAR(20)),
        (T.VARCHAR(20), T.VARCHAR(100)),
        (T.CHAR(5), T.STRING()),
    ):
        assert RowAdapter(Schema.of([Column("v", source)]), Schema.of([Column("v", sink)]), identity).identity


def test_a_long_value_is_cut_in_the_reason() -> None:
    adapter = RowAdapter(
        Schema.of([Column("v", T.STRING())]), Schema.of([Column("v", T.VARCHAR(5))]), identity
    )
    with pytest.raises(CastError) as caught:
        adapter.adapt(DataChange(TableId.parse("t"), Op.INSERT, None, {"v": "y" * 10_000}))
    assert len(str(caught.value)) < 300 and "10000 characters long" in str(caught.value)
