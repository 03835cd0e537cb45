import pytest

from ferry.model import types as T
from ferry.sinks.hologres.types import TypeNormalizeStrategy as S
from ferry.sinks.hologres.types import hologres_type


@pytest.mark.parametrize(
    ("source", "standard", "broaden", "bigint_or_text"),
    [
        (T.TINYINT(), T.SMALLINT(), T.BIGINT(), T.BIGINT()),
        (T.INT(), T.INT(), T.BIGINT(), T.BIGINT()),
        (T.FLOAT(), T.FLOAT(), T.DOUBLE(), T.STRING()),
        (T.VARCHAR(20), T.VARCHAR(20), T.STRING(), T.STRING()),
        (T.CHAR(3), T.STRING(), T.STRING(), T.STRING()),
        (T.DECIMAL(10, 2), T.DECIMAL(10, 2), T.DECIMAL(38, 2), T.STRING()),
        (T.DATE(), T.DATE(), T.TIMESTAMP(6), T.STRING()),
        (T.TIMESTAMP(3), T.TIMESTAMP(6), T.TIMESTAMP(6), T.STRING()),
        (T.TIMESTAMP_TZ(3), T.TIMESTAMP_LTZ(6), T.TIMESTAMP_LTZ(6), T.STRING()),
        (T.BINARY(4), T.BYTES(), T.BYTES(), T.STRING()),
    ],
)
def test_strategies(
    source: T.DataType, standard: T.DataType, broaden: T.DataType, bigint_or_text: T.DataType
) -> None:
    assert hologres_type(source, S.STANDARD) == standard
    assert hologres_type(source, S.BROADEN) == broaden
    assert hologres_type(source, S.ONLY_BIGINT_OR_TEXT) == bigint_or_text


def test_nullability_is_kept() -> None:
    assert hologres_type(T.INT().not_null(), S.BROADEN) == T.BIGINT().not_null()


def test_broadening_makes_common_widenings_no_change() -> None:
    for a, b in [
        (T.SMALLINT(), T.BIGINT()),
        (T.VARCHAR(10), T.VARCHAR(200)),
        (T.FLOAT(), T.DOUBLE()),
        (T.DECIMAL(10, 2), T.DECIMAL(20, 2)),
    ]:
        assert hologres_type(a, S.BROADEN) == hologres_type(b, S.BROADEN)
        assert hologres_type(a, S.STANDARD) != hologres_type(b, S.STANDARD)
