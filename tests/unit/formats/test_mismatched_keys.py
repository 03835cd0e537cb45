"""A record whose key names other values than its row, in every format that reads a record key: a
bad record with both, as read (the row would otherwise be written under its own key). A key that
matches, whatever form its values take (Canal's text, Debezium's day numbers and base64 decimals,
Avro), is not one. Rows are the shared fixtures' (Flink, Flink CDC, Maxwell)."""

from __future__ import annotations

import decimal
from typing import Any

import orjson
import pytest
from tests.support import debezium_avro as avro
from tests.unit.formats.format_fixtures import documents
from tests.unit.formats.test_hostile_input import REGISTRY, LocalAvroTable, avro_decoder

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import BadRecord, DataChange, Event

TOPIC = "shop.inventory.products"


def decode(format: str, pairs: list[tuple[bytes | None, bytes]]) -> list[Event]:
    records = [Record(TOPIC, 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)]
    # payload-only Debezium rows typed from their values, as a job with debezium-json.infer-types
    options = {"infer_types": True} if format == "debezium-json" else {}
    return [
        e for e in decoder_for(format, **options).decode(records) if isinstance(e, (DataChange, BadRecord))
    ]


def assert_bad_with_both(event: Event, key: bytes, value: bytes, *named: str) -> None:
    assert isinstance(event, BadRecord), event
    assert event.reason.startswith("the record key does not match its row: "), event.reason
    for text in named:
        assert text in event.reason, event.reason
    assert (event.key, event.value) == (key, value)


# ------------------------------------------------------------------------------ Canal


def test_canal_server_rows_are_text_and_a_json_key_of_the_same_id_matches() -> None:
    """Canal's own producer writes no key; a key as JSON (Flink CDC's, ferry's Kafka sink) names the
    id as a number while the Canal server's row holds it as text."""
    message = next(d for d in documents("apache-flink/canal-data.txt") if d["type"] == "UPDATE")
    row = message["data"][0]
    value = orjson.dumps({**message, "data": [row], "old": message["old"][:1]})
    good_key, bad_key = orjson.dumps({"id": int(row["id"])}), orjson.dumps({"id": int(row["id"]) + 1000})
    good, bad, keyless = decode("canal-json", [(good_key, value), (bad_key, value), (None, value)])
    assert isinstance(good, DataChange) and good.after is not None and good.after["id"] == int(row["id"])
    assert_bad_with_both(bad, bad_key, value, f"id is {int(row['id']) + 1000} in the key")
    assert isinstance(keyless, DataChange)


def test_a_flink_cdc_canal_record_whose_key_names_another_row_is_a_bad_record() -> None:
    lines = [d for d in documents("apache-flink-cdc/canal-json.txt") if d["type"] == "INSERT"]
    first, second = lines[0], lines[1]
    value = orjson.dumps(first)
    key_of_first = orjson.dumps({"id": first["data"][0]["id"]})
    key_of_second = orjson.dumps({"id": second["data"][0]["id"]})
    good, bad = decode("canal-json", [(key_of_first, value), (key_of_second, value)])
    assert isinstance(good, DataChange)
    assert_bad_with_both(bad, key_of_second, value, f"id is {second['data'][0]['id']} in the key")


def test_a_canal_key_of_another_shape_names_no_values() -> None:
    value = orjson.dumps(documents("apache-flink-cdc/canal-json.txt")[0])
    for key in (b"orders", b'"orders"', b"[1, 2]", b"\xff\x00", b'{"TableId": "shop.customers"}'):
        [event] = decode("canal-json", [(key, value)])
        assert isinstance(event, DataChange), (key, event)


# ------------------------------------------------------------------------------ Maxwell


def maxwell_rows() -> list[dict[str, Any]]:
    return [d for d in documents("apache-flink/maxwell-data.txt") if d["type"] in ("insert", "delete")]


@pytest.mark.parametrize("key_format", ["hash", "array"])
def test_a_maxwell_key_that_names_other_primary_key_values_is_a_bad_record(key_format: str) -> None:
    messages = maxwell_rows()
    insert, delete = messages[0], next(m for m in messages if m["type"] == "delete")

    def key(message: dict[str, Any], pk: int) -> bytes:
        if key_format == "hash":  # Maxwell's default kafka_key_format
            return orjson.dumps({"database": message["database"], "table": message["table"], "pk.id": pk})
        return orjson.dumps([message["database"], message["table"], [{"id": pk}]])

    pairs = [
        (key(insert, insert["data"]["id"]), orjson.dumps(insert)),
        (key(insert, insert["data"]["id"] + 1), orjson.dumps(insert)),
        (key(delete, delete["data"]["id"]), orjson.dumps(delete)),
        (key(delete, 1), orjson.dumps(delete)),
    ]
    good_insert, bad_insert, good_delete, bad_delete = decode("maxwell-json", pairs)
    assert isinstance(good_insert, DataChange) and isinstance(good_delete, DataChange)
    assert_bad_with_both(bad_insert, *pairs[1], f"id is {insert['data']['id'] + 1} in the key")
    assert_bad_with_both(bad_delete, *pairs[3], f"in the key and {delete['data']['id']} in the row")


def test_a_maxwell_key_of_another_table_is_a_bad_record_and_a_uuid_key_names_no_values() -> None:
    [message] = documents("zendesk-maxwell/user-insert.json")
    value = orjson.dumps(message)
    other = orjson.dumps({"database": "MyDatabase", "table": "Orders", "pk.UserID": 20})
    mine = orjson.dumps({"database": "MyDatabase", "table": "User", "pk.UserID": 20})
    uuid_key = orjson.dumps({"database": "MyDatabase", "table": "User", "_uuid": "4b6c-9a"})
    bad, good, no_key = decode("maxwell-json", [(other, value), (mine, value), (uuid_key, value)])
    assert isinstance(bad, BadRecord) and (bad.key, bad.value) == (other, value)
    assert "names table MyDatabase.Orders, its row is of MyDatabase.User" in bad.reason
    assert isinstance(good, DataChange) and isinstance(no_key, DataChange)


# ------------------------------------------------------------------------------ Debezium JSON


KEY = ("day", "price")


def typed_key_table(with_schema: bool) -> dbz.DebeziumTable:
    """A key of a DATE and a DECIMAL: the row's values are converted (to a date, a Decimal), the
    key's as read are a day number and base64. (The records' keys are written here.)"""
    columns = [
        dbz.ConnectColumn("day", dbz.DATE, optional=False),
        dbz.ConnectColumn("price", dbz.DECIMAL(10, 2), optional=False),
        dbz.ConnectColumn("note", dbz.STRING),
    ]
    return dbz.DebeziumTable("shop", "inventory", "prices", columns, key=(), with_schema=with_schema)


def typed_key(table: dbz.DebeziumTable, day: int, price: str) -> bytes:
    payload = {"day": day, "price": dbz.encode_decimal(decimal.Decimal(price), 2)}
    if not table.with_schema:
        return orjson.dumps(payload)
    fields = [c.field() for c in table.columns if c.name in KEY]
    return orjson.dumps({"schema": {"type": "struct", "fields": fields, "name": "Key"}, "payload": payload})


@pytest.mark.parametrize("with_schema", [True, False], ids=["envelope", "payload-only"])
def test_a_debezium_json_key_of_converted_types_matches_its_row(with_schema: bool) -> None:
    table = typed_key_table(with_schema)
    _, value = table.insert({"day": 19000, "price": decimal.Decimal("9.50"), "note": "n"})
    good_key, bad_key = typed_key(table, 19000, "9.50"), typed_key(table, 19000, "9.75")
    good, bad = decode("debezium-json", [(good_key, value), (bad_key, value)])
    assert isinstance(good, DataChange), good
    assert_bad_with_both(bad, bad_key, value, "price is ")


# ------------------------------------------------------------------------------ Debezium Avro


def avro_table() -> LocalAvroTable:
    return LocalAvroTable(
        REGISTRY,  # type: ignore[arg-type]
        "shop",
        "inventory",
        "prices",
        [
            avro.AvroColumn("day", avro.DATE, optional=False),
            avro.AvroColumn("price", avro.DECIMAL(10, 2), optional=False),
            avro.AvroColumn("note", "string"),
        ],
        key=("day", "price"),
    )


@pytest.mark.parametrize("format", ["debezium-avro", "debezium-avro-confluent"])
def test_a_debezium_avro_key_that_does_not_match_its_row_is_a_bad_record_with_both(format: str) -> None:
    table = avro_table()
    row = {"day": 19000, "price": decimal.Decimal("9.50"), "note": "n"}
    key, value = table.insert(row)
    other_key = table.encode_key({**row, "price": decimal.Decimal("9.75")})
    deleted_key, deleted = table.delete(row)
    assert key is not None and other_key is not None
    records = [
        Record(TOPIC, 0, i, key=k, value=v)
        for i, (k, v) in enumerate(
            [(key, value), (other_key, value), (deleted_key, deleted), (other_key, deleted)]
        )
    ]
    events = [e for e in avro_decoder(format)().decode(records) if isinstance(e, (DataChange, BadRecord))]
    good, bad, good_delete, bad_delete = events
    assert isinstance(good, DataChange) and isinstance(good_delete, DataChange), events
    assert_bad_with_both(bad, other_key, value, "price is Decimal('9.75') in the key and Decimal('9.50')")
    assert_bad_with_both(bad_delete, other_key, deleted, "price is Decimal('9.75') in the key")
