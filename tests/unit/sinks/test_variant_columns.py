"""What each sink stores for a VARIANT column: Paimon its VARIANT type (a nested one its JSON text),
the others the JSON text in their string type, Kafka's Debezium envelope Debezium's Json string."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.types import StringType
from pypaimon.schema.data_types import ArrayType, AtomicType

from ferry.model import types as T
from ferry.model.schema import Column, Schema
from ferry.sinks.base.sql.dialect import SqlDialect
from ferry.sinks.base.sql.sink import SqlTable
from ferry.sinks.fluss.types import sink_type as fluss_type
from ferry.sinks.fluss.types import to_arrow_type as fluss_arrow
from ferry.sinks.hologres.types import TypeNormalizeStrategy, hologres_type
from ferry.sinks.iceberg.types import sink_type as iceberg_sink_type
from ferry.sinks.iceberg.types import to_iceberg_schema
from ferry.sinks.kafka.sink import connect_schema
from ferry.sinks.maxcompute.types import type_name as maxcompute_type
from ferry.sinks.paimon.types import sink_type as paimon_sink_type
from ferry.sinks.paimon.types import to_paimon_type
from ferry.sinks.starrocks.sink import StarRocksSink, load_value
from ferry.transform.variant_functions import parse_json


def test_paimon_stores_a_columns_variant_as_its_variant_type() -> None:
    assert to_paimon_type(T.VARIANT()) == AtomicType("VARIANT", True)
    assert paimon_sink_type(T.VARIANT().not_null()) == T.VARIANT().not_null()
    nested = to_paimon_type(T.ARRAY(T.VARIANT()))
    assert isinstance(nested, ArrayType) and nested.element == AtomicType("STRING", True)


@pytest.mark.parametrize("strategy", list(TypeNormalizeStrategy))
def test_the_other_sinks_store_json_text(strategy: TypeNormalizeStrategy) -> None:
    assert hologres_type(T.VARIANT(), strategy) == T.STRING()
    assert iceberg_sink_type(T.VARIANT()) == T.STRING()
    [field] = to_iceberg_schema(Schema((Column("v", T.VARIANT()),), (), ())).fields
    assert field.field_type == StringType()
    assert fluss_type(T.VARIANT()) == T.STRING() and fluss_arrow(T.VARIANT()) == pa.string()
    assert maxcompute_type(T.VARIANT()) == "STRING"
    assert connect_schema(T.VARIANT()) == {
        "type": "string",
        "name": "io.debezium.data.Json",
        "version": 1,
        "optional": True,
    }
    starrocks = object.__new__(StarRocksSink)
    assert starrocks.sink_type(T.VARIANT().not_null()) == T.STRING().not_null()
    create = SqlDialect().create_table(SqlTable("db", "t"), Schema((Column("v", T.VARIANT()),), (), ()))
    assert '"v" TEXT' in create


def test_a_variant_value_is_written_as_its_json_text() -> None:
    variant = parse_json('{"b": [1, "x"], "a": null}')
    assert load_value(variant, T.STRING()) == '{"a":null,"b":[1,"x"]}'
    assert pa.array([variant]).to_pylist() == ['{"a":null,"b":[1,"x"]}']
