from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from format_fixtures import documents, key_value_records, of_type, records, rows_by_op, summary

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import (
    BadRecord,
    DataChange,
    Op,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    Tombstone,
    TruncateTable,
)
from ferry.model.schema import TableId
from ferry.model.types import BIGINT, DOUBLE, INT, STRING

# file → (records by outcome, counted as in the fixtures' README; number of SchemaObserved)
FIXTURES: dict[str, tuple[dict[str, int], int]] = {
    "apache-flink/debezium-data-schema-include.txt": ({"delete": 1, "insert": 11, "update": 4}, 1),
    "apache-flink/debezium-postgres-data-schema-exclude.txt": (
        {"delete": 1, "insert": 2, "read": 9, "update": 4},
        1,
    ),
    "apache-flink/debezium-postgres-data-schema-include.txt": (
        {"delete": 1, "insert": 2, "read": 9, "update": 4},
        1,
    ),
    # Without REPLICA IDENTITY FULL the delete has neither a before-image nor (here) a key.
    "apache-flink/debezium-postgres-data-replica-identity.txt": (
        {"bad": 1, "insert": 2, "read": 9, "update": 4},
        1,
    ),
    "apache-flink-cdc/debezium-json.txt": ({"delete": 1, "insert": 15, "update": 4}, 3),
    "apache-flink-cdc/debezium-json-with-schema.txt": ({"delete": 1, "insert": 15, "update": 4}, 3),
    "apache-flink-cdc/debezium-data-schema-exclude.json": ({"read": 1, "update": 1}, 1),
    "apache-flink-cdc/debezium-data-schema-exclude-with-numeric-decimal.json": ({"read": 1, "update": 1}, 1),
    # Both records contradict their own schema (see test_records_contradicting_their_schema).
    "apache-flink-cdc/debezium-data-schema-include.json": ({"bad": 2}, 0),
    "apache-seatunnel/debezium-data.txt": ({"delete": 1, "insert": 11, "update": 4}, 1),
    "apache-seatunnel/debezium_data.txt": ({"read": 3}, 1),
    "apache-paimon/kafka/debezium/database/schemaevolution/topic0/debezium-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/database/schemaevolution/topic0/debezium-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/database/schemaevolution/topic1/debezium-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/database/schemaevolution/topic1/debezium-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/table/nestedtype/debezium-data-1.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/nullvalue/debezium-data-1.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/nullvalue/debezium-data-2.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/alltype/debezium-data-1.txt": ({"read": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-1.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-2.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-3.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-4.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-5.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/debezium/table/schema/schemaevolution/debezium-data-with-delete.txt": (
        {"delete": 1},
        1,
    ),
    "apache-paimon/kafka/debezium/table/schemaevolution/debezium-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/table/schemaevolution/debezium-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/debezium/table/schemaevolution/debezium-data-3.txt": (
        {"delete": 1, "insert": 2, "update": 1},
        1,
    ),
    "debezium/docs-extracted/mysql-create-event.json": ({"insert": 1}, 1),
    "debezium/docs-extracted/oracle-create-event.json": ({"insert": 1}, 1),
    "debezium/docs-extracted/postgresql-create-event.json": ({"insert": 1}, 1),
    "debezium/docs-extracted/sqlserver-create-event.json": ({"insert": 1}, 1),
    "debezium/docs-extracted/tutorial-mysql-snapshot-read-event.json": ({"read": 1}, 1),
    "debezium/docs-extracted/postgresql-logical-decoding-message-event.json": ({"bad": 1}, 0),
    # An update whose rows have one more column than the others: fine without a schema to contradict.
    "debezium/serde-unknown-property.json": ({"update": 1}, 1),
    "debezium/serde-update.json": ({"update": 1}, 1),
    "debezium/serde-with-schema.json": ({"insert": 1}, 1),
    "debezium/serde-without-schema.json": ({"insert": 1}, 1),
    # A bare row (ExtractNewRecordState output): an upsert.
    "debezium/serde-unwrapped.json": ({"update": 1}, 1),
    # Kafka Connect rows with a schema but no change envelope (ExtractNewRecordState output).
    "apache-seatunnel/compatible_data.txt": ({"update": 3}, 1),
}


@pytest.mark.parametrize("path", sorted(FIXTURES))
def test_fixture(path: str) -> None:
    expected, observed = FIXTURES[path]
    events = decoder_for("debezium-json", infer_types=True).decode(records(path))
    assert summary(events) == expected
    assert len(of_type(events, SchemaObserved)) == observed
    for event in of_type(events, DataChange):
        assert event.position is not None
        if event.op in (Op.INSERT, Op.READ, Op.UPDATE):
            assert isinstance(event.after, dict)
        if event.op is Op.DELETE:
            assert isinstance(event.before, dict)


def decode(
    *values: Any, topic: str = "srv.inventory.products", key: Any = None, partition: int = 0
) -> list[Any]:
    return decoder_for("debezium-json", infer_types=True).decode(
        [Record(topic, partition, i, key=_bytes(key), value=_bytes(v)) for i, v in enumerate(values)]
    )


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return orjson.dumps(value)


def test_schema_drift_in_the_envelope_gives_one_more_schema_observed() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink-cdc/debezium-json-with-schema.txt")
    )
    observed = of_type(events, SchemaObserved)
    products = TableId(None, "$databaseName", "products")
    assert [o.table_id for o in observed] == [TableId(None, "$databaseName", "customers"), products, products]
    before, after = observed[1].schema, observed[2].schema
    assert after.names == (*before.names, "new_col")
    assert after.column("new_col").type == INT()
    assert before.column("id").type == INT().not_null()
    first_with_new_col = next(e for e in of_type(events, DataChange) if e.after and "new_col" in e.after)
    assert observed[2].position == first_with_new_col.position
    # the schema event comes right before the first row that has the new column
    assert events[events.index(first_with_new_col) - 1] is observed[2]


def test_schema_drift_without_the_envelope_is_inferred() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink-cdc/debezium-json.txt")
    )
    observed = [o for o in of_type(events, SchemaObserved) if o.table_id.table_name == "products"]
    assert len(observed) == 2
    assert observed[1].schema.names == (*observed[0].schema.names, "new_col")
    assert observed[1].schema.column("new_col").type == BIGINT()
    assert observed[0].schema.column("weight").type == DOUBLE()
    assert observed[0].schema.column("json_c").type == STRING()


def test_values_with_the_envelope() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-paimon/kafka/debezium/table/schema/alltype/debezium-data-1.txt")
    )
    (observed,) = of_type(events, SchemaObserved)
    (change,) = of_type(events, DataChange)
    assert change.table_id == TableId(None, "paimon_sync_table", "all_types_table")
    assert change.op is Op.READ
    row = change.after
    assert row["pt"] == Decimal("1.1")
    assert row["_bit"] == bytes.fromhex("c707000000000000")
    assert row["_bigint_unsigned"] == Decimal(20000000000)
    assert row["_fixed"] == "123456789876543220000000000000000"  # DECIMAL(40, 3) sent as a JSON number
    assert row["_date"] == date(2023, 3, 23)
    assert row["_datetime3"] == datetime(2023, 3, 23, 14, 30, 5, 123000)
    assert row["_datetime6"] == datetime(2023, 3, 23, 14, 30, 5, 123456)
    assert row["_timestamp"] == datetime(2023, 3, 23, 22, 0, 10, 123456, tzinfo=UTC)
    assert row["_time"] == time(10, 13, 23)
    assert row["_year"] == 2023
    assert row["_set"] == "a,b"
    assert orjson.loads(row["_point"]) == {
        "x": 1.0,
        "y": 1.0,
        "wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/",
        "srid": None,
    }
    assert str(observed.schema.column("_fixed").type) == "STRING"
    assert str(observed.schema.column("pt").type) == "DECIMAL(2, 1)"
    assert str(observed.schema.column("_timestamp").type) == "TIMESTAMP_LTZ(6)"
    assert observed.schema.column("_id").type == INT().not_null()


def test_values_with_the_envelope_seatunnel() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-seatunnel/debezium_data.txt")
    )
    first = of_type(events, DataChange)[0].after
    assert first["f_binary"] == b"abct" + bytes(60)
    assert first["f_bigint_unsigned"] == Decimal(987654321)
    assert first["f_datetime"] == datetime(2022, 4, 27, 14, 30)
    assert first["f_timestamp"] == datetime(2023, 4, 27, 3, 8, 40, tzinfo=UTC)
    assert first["f_time"] == time(14, 30)
    assert first["f_bit64"] == b"U" * 8
    assert first["f_float"] == 12.34000015258789


def test_values_without_the_envelope_stay_as_json_gives_them() -> None:
    # these events have no source block: the table comes from the topic name
    topic = "mysql_binlog_source.column_type_test.full_types"
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink-cdc/debezium-data-schema-exclude.json", topic)
    )
    snapshot = of_type(events, DataChange)[0]
    assert snapshot.op is Op.READ
    assert snapshot.table_id == TableId(None, "column_type_test", "full_types")
    assert snapshot.after["decimal_c"] == "EtaH"
    assert snapshot.after["big_c"] == 9223372036854775807
    assert snapshot.after["point_c"] == '{"x":1.0,"y":1.0,"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAPA/","srid":null}'
    (observed,) = of_type(events, SchemaObserved)
    assert observed.schema.column("point_c").type == STRING()
    assert observed.schema.column("bit1_c").type.root.value == "BOOLEAN"


def test_records_contradicting_their_schema() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink-cdc/debezium-data-schema-include.json")
    )
    assert [e.reason for e in of_type(events, BadRecord)] == [
        "the record's schema is invalid: field 'big_decimal_c': "
        "org.apache.kafka.connect.data.Decimal declares scale 65 greater than precision 1",
        "the record's schema does not describe a change event: it has no 'after' or 'before'",
    ]
    # with the swapped decimal parameters put right, the row has columns its schema does not list
    snapshot = documents("apache-flink-cdc/debezium-data-schema-include.json")[0]
    (after,) = [f for f in snapshot["schema"]["fields"] if f["field"] == "after"]
    for f in after["fields"]:
        if f["field"] == "big_decimal_c":
            f["parameters"] = {"scale": "1", "connect.decimal.precision": "65"}
    (bad,) = decode(snapshot)
    assert bad.reason == "field 'tiny_un_z_c' is not in the record's schema"
    # and without those, its id is not what the schema says
    declared = {f["field"] for f in after["fields"]}
    snapshot["payload"]["after"] = {k: v for k, v in snapshot["payload"]["after"].items() if k in declared}
    (bad,) = decode(snapshot)
    assert bad.reason == "field 'id' is not an INT32: 'AQ=='"


def test_pretty_printed_and_payload_first_envelopes() -> None:
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {
                "type": "struct",
                "optional": True,
                "field": "after",
                "fields": [
                    {"type": "int32", "optional": False, "field": "id"},
                    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "d"},
                ],
            },
        ],
    }
    payload = {"op": "c", "after": {"id": 1, "d": 1}, "source": {"db": "inventory", "table": "products"}}
    pretty = orjson.dumps({"schema": schema, "payload": payload}, option=orjson.OPT_INDENT_2)
    reversed_order = orjson.dumps({"payload": payload, "schema": schema})
    events = decode(pretty, reversed_order, pretty)
    changes = of_type(events, DataChange)
    assert [c.after for c in changes] == [{"id": 1, "d": date(1970, 1, 2)}] * 3
    assert len(of_type(events, SchemaObserved)) == 1


def test_the_envelope_is_converted_once_and_payloads_still_differ() -> None:
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {
                "type": "struct",
                "optional": True,
                "field": "before",
                "fields": [
                    {"type": "int32", "optional": False, "field": "id"},
                    {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "at"},
                ],
            },
            {
                "type": "struct",
                "optional": True,
                "field": "after",
                "fields": [
                    {"type": "int32", "optional": False, "field": "id"},
                    {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "at"},
                ],
            },
            {"type": "string", "optional": False, "field": "op"},
        ],
    }

    def event(i: int, op: str = "c") -> dict[str, Any]:
        row = {"id": i, "at": i * 1000}
        return {
            "schema": schema,
            "payload": {
                "op": op,
                "before": row if op == "d" else None,
                "after": None if op == "d" else row,
                "source": {"db": "inventory", "table": "products", "ts_ms": 7},
            },
        }

    decoder = decoder_for("debezium-json", infer_types=True)
    events = decoder.decode(
        [
            Record("srv.inventory.products", 0, i, value=orjson.dumps(event(i, "d" if i == 3 else "c")))
            for i in range(5)
        ]
    )
    changes = of_type(events, DataChange)
    assert [(c.op, (c.after or c.before)["at"]) for c in changes] == [
        (Op.INSERT, datetime(1970, 1, 1)),
        (Op.INSERT, datetime(1970, 1, 1, 0, 0, 1)),
        (Op.INSERT, datetime(1970, 1, 1, 0, 0, 2)),
        (Op.DELETE, datetime(1970, 1, 1, 0, 0, 3)),
        (Op.INSERT, datetime(1970, 1, 1, 0, 0, 4)),
    ]
    assert [c.ts_ms for c in changes] == [7] * 5
    assert len(of_type(events, SchemaObserved)) == 1
    # a second batch with the same schema emits no schema again
    again = decoder.decode([Record("srv.inventory.products", 0, 9, value=orjson.dumps(event(9)))])
    assert [type(e) for e in again] == [DataChange]
    # the same table in another partition has its own schema
    other = decoder.decode([Record("srv.inventory.products", 1, 0, value=orjson.dumps(event(1)))])
    assert [type(e) for e in other] == [SchemaObserved, DataChange]


def test_primary_keys_from_the_key_schema() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        key_value_records("apache-paimon/kafka/debezium-avro/table/schema/alltype/debezium-avro-data-1.txt")
    )
    (observed,) = of_type(events, SchemaObserved)
    assert observed.schema.primary_keys == ("_id",)
    changes = of_type(events, DataChange)
    assert [c.after["_id"] for c in changes] == [1, 2]
    assert changes[0].after["pt"] == Decimal("1.1")  # a DECIMAL(2, 1) sent as text, typed by its source type
    assert str(observed.schema.column("pt").type) == "DECIMAL(2, 1)"


def test_primary_keys_from_a_key_without_schema() -> None:
    payload = {"op": "c", "after": {"id": 1, "name": "a"}, "source": {"db": "inventory", "table": "products"}}
    (observed, _) = decode(payload, key={"id": 1})
    assert observed.schema.primary_keys == ("id",)
    assert observed.schema.column("id").type == BIGINT().not_null()
    (observed, _) = decode(payload, key=b"not json")
    assert observed.schema.primary_keys == ()


def test_a_delete_without_before_image_takes_the_key() -> None:
    payload = {"op": "d", "before": None, "after": None, "source": {"schema": "public", "table": "t"}}
    # the key alone says nothing of the table's schema: no SchemaObserved with no columns
    (change,) = decode(payload, key={"id": 7})
    assert change.op is Op.DELETE and change.before == {"id": 7}
    (bad,) = decode(payload)
    assert (
        bad.reason
        == "delete without a before-image or a key (a PostgreSQL table needs REPLICA IDENTITY FULL)"
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b'{"op" x}', "malformed JSON: unexpected character, expected ':' after key at line 1 column 7"),
        (b"", "malformed JSON: Input is a zero-length, empty document at line 1 column 1"),
        (b"[1,2]", "not a Debezium change event: the payload is not a JSON object"),
        ({"op": "x", "source": {"db": "a", "table": "b"}}, "unknown op 'x'"),
        ({"op": "m", "message": {"prefix": "p"}}, "unsupported op 'm' (a logical decoding message)"),
        ({"op": "c", "after": None, "source": {"db": "a", "table": "b"}}, "op 'c' without an 'after' row"),
        ({"op": "c", "after": [1]}, "'before' and 'after' must be JSON objects or null"),
        ({"before": {"id": 1}}, "not a Debezium change event: no 'op' field"),
        (
            {"ddl": "ALTER TABLE t ADD c INT", "tableChanges": []},
            "not a Debezium change event: no 'op' field "
            "(a schema-change event: use the debezium-schema-change format)",
        ),
        (
            {
                "schema": {
                    "type": "struct",
                    "fields": [
                        {
                            "field": "after",
                            "type": "struct",
                            "optional": True,
                            "fields": [{"field": "id", "type": "int32", "optional": False}],
                        }
                    ],
                },
                "payload": {"op": "c", "after": {"id": "abc"}},
            },
            "field 'id' is not an INT32: 'abc'",
        ),
        (
            {"schema": {"type": "int32"}, "payload": {"op": "c", "after": {"id": 1}}},
            "the record's schema is not a Kafka Connect struct",
        ),
    ],
)
def test_bad_records_say_what_is_wrong(value: Any, reason: str) -> None:
    events = decode(value, key=b"k")
    (bad,) = events
    assert isinstance(bad, BadRecord)
    assert bad.reason == reason
    assert bad.position == SourcePosition("srv.inventory.products", 0, 0)
    assert bad.key == b"k"
    assert bad.value == _bytes(value)


def test_a_tombstone_is_a_tombstone_and_the_batch_goes_on() -> None:
    # Debezium's tombstones.on.delete=true: the delete, then its key with a null value
    key = {
        "schema": {
            "type": "struct",
            "optional": False,
            "name": "dbserver1.inventory.customers.Key",
            "fields": [{"type": "int32", "optional": False, "field": "id"}],
        },
        "payload": {"id": 1004},
    }
    delete = {"op": "d", "before": {"id": 1004}, "after": None, "source": {"db": "inventory", "table": "t"}}
    topic = "dbserver1.inventory.customers"
    events = decoder_for("debezium-json", infer_types=True).decode(
        [
            Record(topic, 0, 0, key=orjson.dumps(key), value=orjson.dumps(delete)),
            Record(topic, 0, 1, key=orjson.dumps(key), value=None),
            Record(topic, 0, 2, key=None, value=None),
        ]
    )
    assert [type(e) for e in events] == [SchemaObserved, DataChange, Tombstone, Tombstone]
    assert events[2] == Tombstone(SourcePosition(topic, 0, 1), orjson.dumps(key))
    assert events[3] == Tombstone(SourcePosition(topic, 0, 2), None)
    assert not of_type(events, BadRecord)


def test_truncate() -> None:
    (truncate,) = decode({"op": "t", "source": {"db": "inventory", "table": "products"}})
    # a truncate is in order with its partition's rows: an ordered hint, where it was read
    assert isinstance(truncate, SchemaHint) and truncate.ordered and truncate.position is not None
    assert truncate.changes == (TruncateTable(TableId(None, "inventory", "products")),)


def test_table_ids() -> None:
    pg = {"op": "c", "after": {"id": 1}, "source": {"db": "postgres", "schema": "inventory", "table": "t"}}
    mysql = {"op": "c", "after": {"id": 1}, "source": {"db": "inventory", "table": "t"}}
    bare = {"op": "c", "after": {"id": 1}}
    assert of_type(decode(pg), DataChange)[0].table_id == TableId(None, "inventory", "t")
    assert of_type(decode(mysql), DataChange)[0].table_id == TableId(None, "inventory", "t")
    assert of_type(decode(bare, topic="dbserver1.shop.orders"), DataChange)[0].table_id == TableId(
        None, "shop", "orders"
    )
    assert of_type(decode(bare, topic="orders"), DataChange)[0].table_id == TableId(None, None, "orders")


def test_snapshot_rows() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink/debezium-data-schema-include.txt")
    )
    first = of_type(events, DataChange)[0]
    # MySQL 1.1 marks snapshot rows with source.snapshot and op "c": an insert.
    assert first.op is Op.INSERT
    assert first.after == {
        "id": 101,
        "name": "scooter",
        "description": "Small 2-wheel scooter",
        "weight": 3.140000104904175,
    }
    assert first.ts_ms == 1589355606100
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink/debezium-postgres-data-schema-include.txt")
    )
    assert of_type(events, DataChange)[0].op is Op.READ
    assert rows_by_op(events) == {"delete": 1, "insert": 2, "read": 9, "update": 4}


def test_updates_without_before_image() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-flink/debezium-postgres-data-replica-identity.txt")
    )
    updates = [e for e in of_type(events, DataChange) if e.op is Op.UPDATE]
    assert len(updates) == 4 and all(u.before is None and u.after for u in updates)


def test_partial_before_images_and_nested_values() -> None:
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-paimon/kafka/debezium/table/schemaevolution/debezium-data-3.txt")
    )
    update = next(e for e in of_type(events, DataChange) if e.op is Op.UPDATE)
    assert update.before == {"address": "Shanghai"}
    events = decoder_for("debezium-json", infer_types=True).decode(
        records("apache-paimon/kafka/debezium/table/nestedtype/debezium-data-1.txt")
    )
    assert of_type(events, DataChange)[0].after["row"] == '{"row_key":"value"}'


def test_a_delete_without_before_image_converts_the_key_with_the_value_schema() -> None:
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {
                "type": "struct",
                "optional": True,
                "field": "before",
                "fields": [
                    {"type": "int32", "optional": False, "name": "io.debezium.time.Date", "field": "day"},
                    {"type": "string", "optional": False, "field": "name"},
                ],
            },
            {
                "type": "struct",
                "optional": True,
                "field": "after",
                "fields": [
                    {"type": "int32", "optional": False, "name": "io.debezium.time.Date", "field": "day"},
                    {"type": "string", "optional": False, "field": "name"},
                ],
            },
        ],
    }
    value = {
        "schema": schema,
        "payload": {"op": "d", "before": None, "after": None, "source": {"schema": "public", "table": "t"}},
    }
    (_, change) = decode(value, key={"day": 1})
    assert change.before == {"day": date(1970, 1, 2)}


def test_trailing_bytes_after_a_cached_envelope_are_not_ignored() -> None:
    good = {
        "schema": {
            "type": "struct",
            "fields": [
                {
                    "type": "struct",
                    "optional": True,
                    "field": "after",
                    "fields": [{"type": "int32", "optional": True, "field": "id"}],
                }
            ],
        },
        "payload": {"op": "c", "after": {"id": 1}, "source": {"db": "d", "table": "t"}},
    }
    events = decode(good, orjson.dumps(good) + b"}x", orjson.dumps(good) + b"\n")
    assert [type(e) for e in events] == [SchemaObserved, DataChange, BadRecord, DataChange]
    assert of_type(events, BadRecord)[0].reason.startswith("malformed JSON: ")
