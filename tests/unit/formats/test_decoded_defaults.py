"""Column defaults as the decoders read them, from records shaped as the real connectors write
them: the Debezium envelope's field ``default`` (Kafka Connect's JSON converter writes it in the
type's own encoding), the MySQL DDL on the schema-change topic, and its table definitions'
``defaultValueExpression``; each read back as a value of its column (``default_value``)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import orjson
import pytest
from tests.unit.formats.test_debezium_schema_change import column, mysql_message
from tests.unit.formats.test_debezium_schema_change import decode as decode_schema_change

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.ddl import parse_ddl
from ferry.connectors.record import Record
from ferry.model.defaults import default_value
from ferry.model.events import AddColumn, SchemaObserved
from ferry.model.schema import Schema


def envelope(fields: list[dict[str, Any]], after: dict[str, Any], connector: str) -> bytes:
    """A change event as Debezium 3 writes it with the JSON converter (``schemas.enable`` true)."""
    value = {"type": "struct", "fields": fields, "optional": True, "name": "dbz.shop.customers.Value"}
    source = {
        "version": "3.6.1.Final",
        "connector": connector,
        "name": "dbz",
        "ts_ms": 1704164645000,
        "snapshot": "false",
        "db": "shop",
        "table": "customers",
    }
    return orjson.dumps(
        {
            "schema": {
                "type": "struct",
                "name": "dbz.shop.customers.Envelope",
                "version": 2,
                "optional": False,
                "fields": [
                    {**value, "field": "before"},
                    {**value, "field": "after"},
                    {"type": "struct", "fields": [], "optional": False, "field": "source"},
                    {"type": "string", "optional": False, "field": "op"},
                    {"type": "int64", "optional": True, "field": "ts_ms"},
                ],
            },
            "payload": {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 1704164645100},
        }
    )


def observed_schema(value: bytes) -> Schema:
    events = decoder_for("debezium-json").decode([Record("dbz.shop.customers", 0, 0, value=value)])
    (observed,) = [e for e in events if isinstance(e, SchemaObserved)]
    return observed.schema


def defaults(schema: Schema) -> dict[str, Any]:
    return {c.name: default_value(c) for c in schema.columns}


#: The fields the MySQL connector writes after ``ALTER TABLE customers ADD COLUMN ...`` with a
#: default each (decimal.handling.mode=precise, time.precision.mode=adaptive_time_microseconds).
MYSQL_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "string", "optional": False, "default": "eu", "field": "region"},
    {"type": "int32", "optional": True, "default": 7, "field": "score"},
    {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "default": "BOI=",
        "field": "credit",
    },
    {"type": "int16", "optional": True, "default": 1, "field": "active"},
    {
        "type": "int32",
        "optional": True,
        "name": "io.debezium.time.Date",
        "version": 1,
        "default": 19782,
        "field": "since",
    },
    {
        "type": "int64",
        "optional": True,
        "name": "io.debezium.time.Timestamp",
        "version": 1,
        "default": 1704164645000,
        "field": "seen",
    },
    {
        "type": "string",
        "optional": False,
        "name": "io.debezium.time.ZonedTimestamp",
        "version": 1,
        "default": "1970-01-01T00:00:00Z",
        "field": "changed",
    },
    {"type": "string", "optional": True, "default": "it's new", "field": "note"},
]


def test_the_mysql_connectors_field_defaults_read_as_values_of_their_columns() -> None:
    row = {
        "id": 1,
        "name": "a",
        "region": "us",
        "score": None,
        "credit": "AA==",
        "active": 0,
        "since": None,
        "seen": None,
        "changed": "2024-01-02T03:04:05Z",
        "note": None,
    }
    assert defaults(observed_schema(envelope(MYSQL_FIELDS, row, "mysql"))) == {
        "id": None,
        "name": None,
        "region": "eu",
        "score": 7,
        "credit": Decimal("12.50"),
        "active": 1,
        "since": dt.date(2024, 2, 29),
        "seen": dt.datetime(2024, 1, 2, 3, 4, 5),
        "changed": None,  # DEFAULT CURRENT_TIMESTAMP: Debezium's placeholder, the epoch
        "note": "it's new",
    }


def test_the_postgres_connectors_field_defaults_read_as_values_of_their_columns() -> None:
    fields = [
        {"type": "int32", "optional": False, "default": 0, "field": "id"},
        {"type": "string", "optional": False, "default": "eu", "field": "region"},
        {"type": "boolean", "optional": True, "default": True, "field": "active"},
        {
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "default": "BOI=",
            "field": "credit",
        },
        {
            "type": "int32",
            "optional": True,
            "name": "io.debezium.time.Date",
            "version": 1,
            "default": 19782,
            "field": "since",
        },
    ]
    row = {"id": 1, "region": "eu", "active": None, "credit": "BOI=", "since": 19782}
    assert defaults(observed_schema(envelope(fields, row, "postgresql"))) == {
        "id": 0,
        "region": "eu",
        "active": True,
        "credit": Decimal("12.50"),
        "since": dt.date(2024, 2, 29),
    }


@pytest.mark.parametrize(
    ("definition", "value"),
    [
        ("region VARCHAR(10) NOT NULL DEFAULT 'eu'", "eu"),
        ("score INT DEFAULT 7", 7),
        ("score INT DEFAULT -1", -1),
        ("credit DECIMAL(10, 2) NOT NULL DEFAULT 12.50", Decimal("12.50")),
        ("credit DECIMAL(10, 2) DEFAULT '12.5'", Decimal("12.50")),
        ("active BOOLEAN DEFAULT TRUE", True),
        ("since DATE DEFAULT '2024-02-29'", dt.date(2024, 2, 29)),
        ("seen DATETIME DEFAULT '2024-01-02 03:04:05'", dt.datetime(2024, 1, 2, 3, 4, 5)),
        ("note VARCHAR(20) DEFAULT 'it''s new'", "it's new"),
        # not constants: every row gets its own value, no default to backfill
        ("seen DATETIME DEFAULT CURRENT_TIMESTAMP", None),
        ("seen TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)", None),
        ("code VARCHAR(36) DEFAULT (UUID())", None),
        ("note VARCHAR(20) DEFAULT NULL", None),
    ],
)
def test_mysql_ddl_defaults(definition: str, value: Any) -> None:
    (change,) = parse_ddl(f"ALTER TABLE customers ADD COLUMN {definition}", default_database="shop")
    assert isinstance(change, AddColumn)
    assert default_value(change.column) == value
    if value is None:
        assert change.column.default is None


def test_the_schema_change_topics_ddl_and_table_definitions_carry_the_defaults() -> None:
    ddl = "ALTER TABLE customers ADD COLUMN region VARCHAR(10) NOT NULL DEFAULT 'eu', ADD COLUMN seen TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)"
    columns = [
        column("id", 1, "INT", 4, 11, optional=False),
        column(
            "region", 2, "VARCHAR", 12, 10, optional=False, defaultValueExpression="eu", hasDefaultValue=True
        ),
        column("score", 3, "INT", 4, 11, defaultValueExpression="7", hasDefaultValue=True),
        column(
            "credit",
            4,
            "DECIMAL",
            3,
            10,
            scale=2,
            optional=False,
            defaultValueExpression="12.50",
            hasDefaultValue=True,
        ),
        column("since", 5, "DATE", 91, defaultValueExpression="2024-02-29", hasDefaultValue=True),
        # the body of the DDL's literal, as the MySQL connector gives it ('it''s new')
        column("note", 7, "VARCHAR", 12, 20, defaultValueExpression="it''s new", hasDefaultValue=True),
        column(
            "seen",
            6,
            "TIMESTAMP",
            93,
            3,
            optional=False,
            defaultValueExpression="1970-01-01 00:00:00",  # the MySQL connector's CURRENT_TIMESTAMP(3)
            hasDefaultValue=True,
        ),
    ]
    (observed,) = decode_schema_change(mysql_message(ddl, columns))
    assert isinstance(observed, SchemaObserved)
    changes = parse_ddl(ddl, default_database="inventory")
    added = {c.column.name: default_value(c.column) for c in changes if isinstance(c, AddColumn)}
    assert added == {"region": "eu", "seen": None}
    assert defaults(observed.schema) == {
        "id": None,
        "region": "eu",
        "score": 7,
        "credit": Decimal("12.50"),
        "since": dt.date(2024, 2, 29),
        "seen": None,
        "note": "it's new",
    }
