"""Records shaped like Debezium 3.6's MySQL connector output for one table, ``inventory.prices``, in
each of the connector's value modes, with and without the schema envelope, and the message its
schema-change topic writes for the table.

The shapes follow Debezium's documentation of the MySQL connector's data types (``decimal.handling.mode``,
``time.precision.mode``, ``bigint.unsigned.handling.mode``) and the fixtures in
``/work/shared/fixtures/debezium`` (envelope, source block, ``tableChanges``).

    CREATE TABLE prices (
      id INT NOT NULL PRIMARY KEY, tiny TINYINT, flag TINYINT(1), price DECIMAL(10, 2),
      qty DECIMAL(6, 0), big_un BIGINT UNSIGNED, name VARCHAR(64), code CHAR(3), day DATE,
      at_time TIME, created DATETIME(3), updated DATETIME(6), seen TIMESTAMP, hash BINARY(4),
      bits BIT(16), ok BIT(1), color ENUM('red', 'blue'), ratio DOUBLE, pt POINT
    )
"""

from __future__ import annotations

import base64
import copy
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import orjson

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.record import Record
from ferry.model.events import SchemaObserved
from ferry.model.schema import Schema, TableId

TOPIC = "dbserver1.inventory.prices"
TABLE = TableId(None, "inventory", "prices")
WKB = "AQEAAAAAAAAAAADwPwAAAAAAAPA/"

# name, typeName, length, scale, optional, extra (enumValues)
_DDL_COLUMNS: list[tuple[str, str, int | None, int | None, bool, dict[str, Any]]] = [
    ("id", "INT", None, None, False, {}),
    ("tiny", "TINYINT", None, None, True, {}),
    ("flag", "TINYINT", 1, None, True, {}),
    ("price", "DECIMAL", 10, 2, True, {}),
    ("qty", "DECIMAL", 6, 0, True, {}),
    ("big_un", "BIGINT UNSIGNED", None, None, True, {}),
    ("name", "VARCHAR", 64, None, True, {}),
    ("code", "CHAR", 3, None, True, {}),
    ("day", "DATE", None, None, True, {}),
    ("at_time", "TIME", None, None, True, {}),
    ("created", "DATETIME", 3, None, True, {}),
    ("updated", "DATETIME", 6, None, True, {}),
    ("seen", "TIMESTAMP", None, None, True, {}),
    ("hash", "BINARY", 4, None, True, {}),
    ("bits", "BIT", 16, None, True, {}),
    ("ok", "BIT", 1, None, True, {}),
    ("color", "ENUM", 1, None, True, {"enumValues": ["'red'", "'blue'"]}),
    ("ratio", "DOUBLE", None, None, True, {}),
    ("pt", "POINT", None, None, True, {}),
]


def schema_change_message(columns: list[str] | None = None) -> dict[str, Any]:
    """The schema-change topic's message for the table (with ``columns`` only, when given)."""
    entries = [
        {
            "name": name,
            "jdbcType": 4,
            "nativeType": None,
            "typeName": type_name,
            "typeExpression": type_name,
            "charsetName": None,
            "length": length,
            "scale": scale,
            "position": position,
            "optional": optional,
            "autoIncremented": False,
            "generated": False,
            **extra,
        }
        for position, (name, type_name, length, scale, optional, extra) in enumerate(_DDL_COLUMNS, 1)
        if columns is None or name in columns
    ]
    return {
        "source": {
            "version": "3.6.0.Final",
            "connector": "mysql",
            "name": "dbserver1",
            "ts_ms": 1595008822000,
            "snapshot": "false",
            "db": "inventory",
            "table": "prices",
            "server_id": 223344,
            "file": "mysql-bin.000003",
            "pos": 570,
            "row": 0,
        },
        "ts_ms": 1595008822001,
        "databaseName": "inventory",
        "schemaName": None,
        "ddl": "CREATE TABLE prices (...)",
        "tableChanges": [
            {
                "type": "CREATE",
                "id": '"inventory"."prices"',
                "table": {
                    "defaultCharsetName": "utf8mb4",
                    "primaryKeyColumnNames": ["id"],
                    "columns": entries,
                    "attributes": [],
                },
                "comment": None,
            }
        ],
    }


def described_schema(columns: list[str] | None = None) -> Schema:
    """The table's schema as the schema-change topic's decoder reads it."""
    message = schema_change_message(columns)
    events = decoder_for("debezium-schema-change").decode(
        [Record("dbserver1", 0, 0, value=orjson.dumps(message))]
    )
    (observed,) = [e for e in events if isinstance(e, SchemaObserved)]
    assert observed.table_id == TABLE
    return observed.schema


def definitions(*schemas: Schema) -> TableDefinitions:
    found = TableDefinitions()
    for schema in schemas or (described_schema(),):
        found.add(TABLE, schema)
    return found


def _field(field: str, kind: str, /, optional: bool = True, **more: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, **more, "field": field}


def _decimal(name: str, precision: int, scale: int) -> dict[str, Any]:
    return _field(
        name,
        "bytes",
        name="org.apache.kafka.connect.data.Decimal",
        version=1,
        parameters={"scale": str(scale), "connect.decimal.precision": str(precision)},
    )


def value_fields(
    decimal_mode: str = "precise", time_mode: str = "adaptive_time_microseconds"
) -> list[dict[str, Any]]:
    """The row's Connect fields, as the connector writes them in these modes."""
    if decimal_mode == "precise":
        price, qty = _decimal("price", 10, 2), _decimal("qty", 6, 0)
    else:
        kind = "string" if decimal_mode == "string" else "double"
        price, qty = _field("price", kind), _field("qty", kind)
    if time_mode == "connect":
        day = _field("day", "int32", name="org.apache.kafka.connect.data.Date", version=1)
        at_time = _field("at_time", "int32", name="org.apache.kafka.connect.data.Time", version=1)
        created = _field("created", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
        updated = _field("updated", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
    else:
        day = _field("day", "int32", name="io.debezium.time.Date", version=1)
        at_time = (
            _field("at_time", "int32", name="io.debezium.time.Time", version=1)
            if time_mode == "adaptive"
            else _field("at_time", "int64", name="io.debezium.time.MicroTime", version=1)
        )
        created = _field("created", "int64", name="io.debezium.time.Timestamp", version=1)
        updated = _field("updated", "int64", name="io.debezium.time.MicroTimestamp", version=1)
    return [
        _field("id", "int32", optional=False),
        _field("tiny", "int16"),
        _field("flag", "int16"),
        price,
        qty,
        _field("big_un", "int64"),
        _field("name", "string"),
        _field("code", "string"),
        day,
        at_time,
        created,
        updated,
        _field("seen", "string", name="io.debezium.time.ZonedTimestamp", version=1),
        _field("hash", "bytes"),
        _field("bits", "bytes", name="io.debezium.data.Bits", version=1, parameters={"length": "16"}),
        _field("ok", "boolean"),
        _field(
            "color", "string", name="io.debezium.data.Enum", version=1, parameters={"allowed": "red,blue"}
        ),
        _field("ratio", "double"),
        _field(
            "pt",
            "struct",
            name="io.debezium.data.geometry.Point",
            version=1,
            doc="Geometry (POINT)",
            fields=[
                {"type": "double", "optional": False, "field": "x"},
                {"type": "double", "optional": False, "field": "y"},
                {"type": "bytes", "optional": True, "field": "wkb"},
                {"type": "int32", "optional": True, "field": "srid"},
            ],
        ),
    ]


def _unscaled(value: int) -> str:
    return base64.b64encode(value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)).decode()


def row_values(
    decimal_mode: str = "precise", time_mode: str = "adaptive_time_microseconds", **changes: Any
) -> dict[str, Any]:
    """One row's JSON values, as the connector writes them in these modes."""
    price: Any = {"precise": _unscaled(1250), "string": "12.50", "double": 12.5}[decimal_mode]
    qty: Any = {"precise": _unscaled(1234), "string": "1234", "double": 1234.0}[decimal_mode]
    at_time = 64822000000 if time_mode == "adaptive_time_microseconds" else 64822000
    updated = 1595008822123 if time_mode == "connect" else 1595008822123456
    row = {
        "id": 1,
        "tiny": -5,
        "flag": 1,
        "price": price,
        "qty": qty,
        "big_un": 42,
        "name": "Widget",
        "code": "abc",
        "day": 18460,
        "at_time": at_time,
        "created": 1595008822123,
        "updated": updated,
        "seen": "2020-07-17T18:00:22Z",
        "hash": "AQIDBA==",
        "bits": "BQA=",
        "ok": True,
        "color": "red",
        "ratio": 0.25,
        "pt": {"x": 1.0, "y": 1.0, "wkb": WKB, "srid": None},
    }
    row.update(changes)
    return row


#: What the row above is, read with the table's DDL.
DECODED: dict[str, Any] = {
    "id": 1,
    "tiny": -5,
    "flag": True,
    "price": Decimal("12.50"),
    "qty": Decimal(1234),
    "big_un": Decimal(42),
    "name": "Widget",
    "code": "abc",
    "day": date(2020, 7, 17),
    "at_time": time(18, 0, 22),
    "created": datetime(2020, 7, 17, 18, 0, 22, 123000),
    "updated": datetime(2020, 7, 17, 18, 0, 22, 123456),
    "seen": datetime(2020, 7, 17, 18, 0, 22, tzinfo=UTC),
    "hash": b"\x01\x02\x03\x04",
    "bits": b"\x05\x00",
    "ok": True,
    "color": "red",
    "ratio": 0.25,
    "pt": bytes(4) + base64.b64decode(WKB),
}

_SOURCE = {
    "version": "3.6.0.Final",
    "connector": "mysql",
    "name": "dbserver1",
    "ts_ms": 1595008822000,
    "ts_us": 1595008822000000,
    "ts_ns": 1595008822000000000,
    "snapshot": "false",
    "db": "inventory",
    "sequence": None,
    "table": "prices",
    "server_id": 223344,
    "gtid": None,
    "file": "mysql-bin.000003",
    "pos": 805,
    "row": 0,
    "thread": 7,
    "query": None,
}


def _source_schema() -> dict[str, Any]:
    return {
        "type": "struct",
        "optional": False,
        "name": "io.debezium.connector.mysql.Source",
        "version": 1,
        "field": "source",
        "fields": [
            _field(name, "int64" if name.startswith("ts_") or name in ("server_id", "pos") else "string")
            for name in _SOURCE
            if name not in ("row", "thread")
        ]
        + [_field("row", "int32"), _field("thread", "int64")],
    }


def change_event(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    envelope: bool,
    decimal_mode: str = "precise",
    time_mode: str = "adaptive_time_microseconds",
) -> bytes:
    """A change event's record value."""
    payload = {
        "before": before,
        "after": after,
        "source": copy.deepcopy(_SOURCE),
        "transaction": None,
        "op": op,
        "ts_ms": 1595008822456,
        "ts_us": 1595008822456789,
        "ts_ns": 1595008822456789000,
    }
    if not envelope:
        return orjson.dumps(payload)
    row = {
        "type": "struct",
        "fields": value_fields(decimal_mode, time_mode),
        "optional": True,
        "name": "dbserver1.inventory.prices.Value",
    }
    schema = {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            _source_schema(),
            {
                "type": "struct",
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
                "fields": [
                    _field("id", "string", optional=False),
                    _field("total_order", "int64", optional=False),
                    _field("data_collection_order", "int64", optional=False),
                ],
            },
            _field("op", "string", optional=False),
            _field("ts_ms", "int64"),
            _field("ts_us", "int64"),
            _field("ts_ns", "int64"),
        ],
        "optional": False,
        "name": "dbserver1.inventory.prices.Envelope",
        "version": 2,
    }
    return orjson.dumps({"schema": schema, "payload": payload})


def flattened(
    row: dict[str, Any],
    metadata: dict[str, Any],
    *,
    envelope: bool,
    decimal_mode: str = "precise",
    time_mode: str = "adaptive_time_microseconds",
) -> bytes:
    """An ``ExtractNewRecordState`` record value: the row and the metadata fields it adds."""
    payload = {**row, **metadata}
    if not envelope:
        return orjson.dumps(payload)
    kinds = {"__source_ts_ms": "int64", "__ts_ms": "int64"}
    schema = {
        "type": "struct",
        "fields": value_fields(decimal_mode, time_mode)
        + [_field(n, kinds.get(n, "string")) for n in metadata],
        "optional": False,
        "name": "dbserver1.inventory.prices.Value",
    }
    return orjson.dumps({"schema": schema, "payload": payload})


def key(*, envelope: bool, id: int = 1) -> bytes:
    if not envelope:
        return orjson.dumps({"id": id})
    schema = {
        "type": "struct",
        "fields": [_field("id", "int32", optional=False)],
        "optional": False,
        "name": "dbserver1.inventory.prices.Key",
    }
    return orjson.dumps({"schema": schema, "payload": {"id": id}})
