"""Every type reads back from the text ferry writes for it: Flink SQL (:func:`ferry.model.types.
render`), Fluss SQL (:func:`ferry.sinks.fluss.types.fluss_sql`) and MaxCompute's type names
(:func:`ferry.sinks.maxcompute.types.type_name`). These parsers are ferry's own (sqlglot has no
Flink, Fluss or MaxCompute dialect); the property holds them to their writers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.model import types as T
from ferry.model.types import DataType, TypeRoot
from ferry.sinks.fluss import types as fluss
from ferry.sinks.maxcompute import types as maxcompute

_PLAIN = (
    TypeRoot.BOOLEAN,
    TypeRoot.TINYINT,
    TypeRoot.SMALLINT,
    TypeRoot.INT,
    TypeRoot.BIGINT,
    TypeRoot.FLOAT,
    TypeRoot.DOUBLE,
    TypeRoot.STRING,
    TypeRoot.BYTES,
    TypeRoot.DATE,
    TypeRoot.VARIANT,
)
_LENGTHS = st.integers(1, T.MAX_LENGTH)
_PRECISIONS = st.integers(0, 9)


@st.composite
def _decimals(draw: st.DrawFn) -> DataType:
    precision = draw(st.integers(1, T.MAX_DECIMAL_PRECISION))
    return T.DECIMAL(precision, draw(st.integers(0, precision)))


_scalars = st.one_of(
    st.sampled_from(_PLAIN).map(DataType),
    _decimals(),
    st.builds(T.CHAR, _LENGTHS),
    st.builds(T.VARCHAR, _LENGTHS),
    st.builds(T.BINARY, _LENGTHS),
    st.builds(T.VARBINARY, _LENGTHS),
    st.builds(T.TIME, _PRECISIONS),
    st.builds(T.TIMESTAMP, _PRECISIONS),
    st.builds(T.TIMESTAMP_LTZ, _PRECISIONS),
    st.builds(T.TIMESTAMP_TZ, _PRECISIONS),
)
#: Field names with the characters a quoted name must escape or keep: backquotes, spaces, commas.
_field_names = st.text(alphabet="ab`, <>:é", min_size=1, max_size=6)


def _nested(inner: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
    return st.one_of(
        st.builds(T.ARRAY, inner),
        st.builds(T.MAP, inner, inner),
        st.lists(st.builds(T.Field, _field_names, inner), min_size=1, max_size=3).map(lambda f: T.ROW(*f)),
    )


data_types = st.builds(DataType.with_nullable, st.recursive(_scalars, _nested, max_leaves=6), st.booleans())


@given(data_types)
def test_flink_sql_reads_back_as_the_type_it_was_written_from(t: DataType) -> None:
    assert T.parse(T.render(t)) == t


@given(data_types)
def test_fluss_sql_reads_back_as_the_type_fluss_stores(t: DataType) -> None:
    assert fluss.parse_fluss_type(fluss.fluss_sql(t)) == fluss.sink_type(t)


@given(data_types)
def test_maxcompute_type_names_read_back_as_the_type_maxcompute_stores(t: DataType) -> None:
    # a MaxCompute type name says nothing of nullability: the column's NOT NULL does
    stored = maxcompute.sink_type(t).with_nullable(True)
    assert maxcompute.from_type_name(maxcompute.type_name(t)) == stored
    assert maxcompute.from_type_name(maxcompute.type_name(t).lower()) == stored
