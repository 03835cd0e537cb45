import pytest

from ferry.model import types as T
from ferry.model.exceptions import TypeWideningError


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (T.TINYINT(), T.INT(), T.INT()),
        (T.INT(), T.BIGINT(), T.BIGINT()),
        (T.INT(), T.DECIMAL(5, 2), T.DECIMAL(12, 2)),
        (T.BIGINT(), T.DECIMAL(10, 0), T.DECIMAL(19, 0)),
        (T.DECIMAL(10, 2), T.DECIMAL(8, 4), T.DECIMAL(12, 4)),
        (T.FLOAT(), T.DOUBLE(), T.DOUBLE()),
        (T.INT(), T.FLOAT(), T.DOUBLE()),
        (T.CHAR(3), T.CHAR(5), T.VARCHAR(5)),
        (T.CHAR(3), T.VARCHAR(2), T.VARCHAR(3)),
        (T.VARCHAR(10), T.STRING(), T.STRING()),
        (T.BINARY(4), T.VARBINARY(8), T.VARBINARY(8)),
        (T.DATE(), T.TIMESTAMP(3), T.TIMESTAMP(3)),
        (T.TIMESTAMP(3), T.TIMESTAMP(6), T.TIMESTAMP(6)),
        (T.TIME(0), T.TIME(3), T.TIME(3)),
        (T.INT(), T.STRING(), T.STRING()),
        (T.BOOLEAN(), T.INT(), T.STRING()),
        (T.ARRAY(T.INT()), T.ARRAY(T.BIGINT()), T.ARRAY(T.BIGINT())),
        (T.MAP(T.STRING(), T.INT()), T.MAP(T.STRING(), T.DOUBLE()), T.MAP(T.STRING(), T.DOUBLE())),
    ],
)
def test_widen_is_the_narrowest_common_supertype(a: T.DataType, b: T.DataType, expected: T.DataType) -> None:
    assert T.widen(a, b) == expected
    assert T.widen(b, a) == expected
    assert T.can_widen(a, expected) and T.can_widen(b, expected)


def test_widening_keeps_nullability_if_either_side_is_nullable() -> None:
    assert T.widen(T.INT().not_null(), T.INT().not_null()) == T.INT().not_null()
    assert T.widen(T.INT().not_null(), T.BIGINT()) == T.BIGINT()
    assert not T.can_widen(T.INT(), T.INT().not_null())
    assert T.can_widen(T.INT().not_null(), T.INT())


def test_narrowing_is_not_widening() -> None:
    assert not T.can_widen(T.BIGINT(), T.INT())
    assert not T.can_widen(T.STRING(), T.VARCHAR(10))
    assert not T.can_widen(T.DECIMAL(12, 4), T.DECIMAL(10, 2))


def test_row_types_widen_field_by_field_and_gain_fields() -> None:
    a = T.ROW(T.Field("x", T.INT()))
    b = T.ROW(T.Field("x", T.BIGINT()), T.Field("y", T.STRING().not_null()))
    assert T.widen(a, b) == T.ROW(T.Field("x", T.BIGINT()), T.Field("y", T.STRING()))


def test_nested_and_scalar_types_have_no_common_type() -> None:
    with pytest.raises(TypeWideningError, match="no common type"):
        T.widen(T.ARRAY(T.INT()), T.INT())


@pytest.mark.parametrize(
    "text",
    [
        "INT",
        "BIGINT NOT NULL",
        "DECIMAL(10, 2)",
        "VARCHAR(255) NOT NULL",
        "TIMESTAMP(3)",
        "TIMESTAMP_LTZ(6)",
        "ARRAY<INT NOT NULL>",
        "MAP<STRING, ARRAY<BIGINT>>",
        "ROW<`a` INT, `b c` STRING NOT NULL>",
        "ROW<`a``b` INT, ```` STRING>",
        "TIME(0)",
        "BYTES",
    ],
)
def test_render_and_parse_round_trip(text: str) -> None:
    assert str(T.parse(text)) == text


def test_parse_accepts_sql_aliases() -> None:
    assert T.parse("integer") == T.INT()
    assert T.parse("TIMESTAMP(3) WITH LOCAL TIME ZONE") == T.TIMESTAMP_LTZ(3)
    assert T.parse("numeric(5,1) not null") == T.DECIMAL(5, 1).not_null()
    with pytest.raises(TypeWideningError, match="unknown type"):
        T.parse("GEOMETRY")
