"""``debezium-json`` in the modes users run: the connector's decimal and time modes, the schema
envelope on or off (with the table definitions the schema-change topic gave), and
``ExtractNewRecordState``'s flattened rows."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from debezium_mysql import (
    DECODED,
    TABLE,
    TOPIC,
    WKB,
    change_event,
    definitions,
    described_schema,
    flattened,
    key,
    row_values,
)
from format_fixtures import FIXTURES, of_type, records

from ferry.connectors.formats.ddl import parse_ddl
from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.record import Record
from ferry.model import types as t
from ferry.model.events import BadRecord, CreateTable, DataChange, Event, Op, SchemaObserved, Tombstone
from ferry.model.schema import Column, Schema, TableId

DECIMAL_MODES = ("precise", "string", "double")
TIME_MODES = ("adaptive_time_microseconds", "adaptive", "connect")


def decode(
    decoder: DebeziumJsonDecoder, *values: bytes | None, keys: list[bytes | None] | None = None
) -> list[Event]:
    keys = keys if keys is not None else [None] * len(values)
    return decoder.decode(
        [Record(TOPIC, 0, i, key=k, value=v) for i, (k, v) in enumerate(zip(keys, values, strict=True))]
    )


def expected(time_mode: str = "adaptive_time_microseconds") -> dict[str, Any]:
    row = dict(DECODED)
    if time_mode == "connect":  # Kafka Connect's Timestamp has milliseconds only
        row["updated"] = datetime(2020, 7, 17, 18, 0, 22, 123000)
    return row


# ------------------------------------------------------------------------------- the envelope


@pytest.mark.parametrize("time_mode", TIME_MODES)
@pytest.mark.parametrize("decimal_mode", DECIMAL_MODES)
def test_each_mode_with_the_envelope_and_the_ddl_gives_the_source_types(
    decimal_mode: str, time_mode: str
) -> None:
    row = row_values(decimal_mode, time_mode)
    value = change_event("c", None, row, envelope=True, decimal_mode=decimal_mode, time_mode=time_mode)
    events = decode(DebeziumJsonDecoder(definitions()), value, keys=[key(envelope=True)])
    (observed,) = of_type(events, SchemaObserved)
    (change,) = of_type(events, DataChange)
    assert observed.schema == described_schema()
    assert change.after == expected(time_mode)
    assert [type(v) for v in change.after.values()] == [type(v) for v in expected(time_mode).values()]


def test_the_ddl_types_are_the_sources() -> None:
    schema = described_schema()
    assert {c.name: str(c.type) for c in schema.columns} == {
        "id": "INT NOT NULL",
        "tiny": "TINYINT",
        "flag": "BOOLEAN",
        "price": "DECIMAL(10, 2)",
        "qty": "DECIMAL(6, 0)",
        "big_un": "DECIMAL(20, 0)",
        "name": "VARCHAR(64)",
        "code": "CHAR(3)",
        "day": "DATE",
        "at_time": "TIME(0)",
        "created": "TIMESTAMP(3)",
        "updated": "TIMESTAMP(6)",
        "seen": "TIMESTAMP_LTZ(0)",
        "hash": "BINARY(4)",
        "bits": "BINARY(2)",
        "ok": "BOOLEAN",
        "color": "STRING",
        "ratio": "DOUBLE",
        "pt": "BYTES",
    }
    assert schema.primary_keys == ("id",)


@pytest.mark.parametrize("time_mode", TIME_MODES)
def test_each_time_mode_with_the_envelope_alone(time_mode: str) -> None:
    value = change_event("c", None, row_values("precise", time_mode), envelope=True, time_mode=time_mode)
    (observed, change) = decode(DebeziumJsonDecoder(infer_types=True), value)
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    types = {c.name: str(c.type) for c in observed.schema.columns}
    assert change.after["day"] == date(2020, 7, 17)
    assert change.after["at_time"] == time(18, 0, 22)
    assert change.after["created"] == datetime(2020, 7, 17, 18, 0, 22, 123000)
    assert change.after["updated"] == expected(time_mode)["updated"]
    assert types["day"] == "DATE"
    assert (types["at_time"], types["created"], types["updated"]) == {
        "adaptive_time_microseconds": ("TIME(6)", "TIMESTAMP(3)", "TIMESTAMP(6)"),
        "adaptive": ("TIME(3)", "TIMESTAMP(3)", "TIMESTAMP(6)"),
        "connect": ("TIME(3)", "TIMESTAMP(3)", "TIMESTAMP(3)"),
    }[time_mode]
    assert types["seen"] == "TIMESTAMP_LTZ(6)"


@pytest.mark.parametrize(
    ("decimal_mode", "price", "price_type"),
    [
        ("precise", Decimal("12.50"), "DECIMAL(10, 2)"),
        # the envelope says only string or double: without the DDL that is what the sink gets
        ("string", "12.50", "STRING"),
        ("double", 12.5, "DOUBLE"),
    ],
)
def test_each_decimal_mode_with_the_envelope_alone(decimal_mode: str, price: Any, price_type: str) -> None:
    value = change_event("c", None, row_values(decimal_mode), envelope=True, decimal_mode=decimal_mode)
    (observed, change) = decode(DebeziumJsonDecoder(infer_types=True), value)
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    assert change.after["price"] == price and type(change.after["price"]) is type(price)
    assert str(observed.schema.column("price").type) == price_type


def test_double_mode_is_quantized_to_the_scale_and_string_mode_is_exact() -> None:
    for mode, price, exact in [("double", 0.1 + 0.2, "0.30"), ("string", "99999999.99", "99999999.99")]:
        value = change_event("c", None, row_values(mode, price=price), envelope=True, decimal_mode=mode)
        (change,) = of_type(decode(DebeziumJsonDecoder(definitions()), value), DataChange)
        assert change.after["price"] == Decimal(exact)
        assert str(change.after["price"]) == exact


def test_an_unsigned_bigint_in_long_mode_is_unwrapped() -> None:
    # bigint.unsigned.handling.mode=long writes 2^64 - 1 as the long -1
    for envelope in (True, False):
        value = change_event("c", None, row_values(big_un=-1), envelope=envelope)
        (change,) = of_type(decode(DebeziumJsonDecoder(definitions()), value), DataChange)
        assert change.after["big_un"] == Decimal(18446744073709551615)


def test_a_tinyint1_outside_0_and_1_is_a_bad_record_with_the_ddl() -> None:
    value = change_event("c", None, row_values(flag=7), envelope=True)
    (bad,) = decode(DebeziumJsonDecoder(definitions()), value)
    assert isinstance(bad, BadRecord)
    assert bad.reason == (
        "field 'flag' is not a valid BOOLEAN: 7 (a TINYINT(1) (BOOLEAN) value other than 0 and 1)"
    )
    # without the DDL it is the connector's INT16
    (observed, change) = decode(DebeziumJsonDecoder(infer_types=True), value)
    assert isinstance(change, DataChange) and change.after["flag"] == 7
    assert isinstance(observed, SchemaObserved) and str(observed.schema.column("flag").type) == "SMALLINT"


def test_a_column_whose_ddl_disagrees_keeps_the_records_type() -> None:
    # the DDL was read ahead of the rows: 'name' is an INT there, the rows still say string
    ahead = Schema(
        tuple(Column(c.name, t.INT() if c.name == "name" else c.type) for c in described_schema().columns),
        ("id",),
    )
    value = change_event("c", None, row_values(), envelope=True)
    (observed, change) = decode(DebeziumJsonDecoder(definitions(ahead)), value)
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    assert str(observed.schema.column("name").type) == "STRING"
    assert change.after["name"] == "Widget"
    assert str(observed.schema.column("price").type) == "DECIMAL(10, 2)"


# ----------------------------------------------------------------------- without the envelope


@pytest.mark.parametrize("decimal_mode", DECIMAL_MODES)
@pytest.mark.parametrize("op", ["c", "u", "d"])
def test_a_row_decodes_the_same_with_and_without_the_envelope(decimal_mode: str, op: str) -> None:
    """The same change, with the schema envelope and payload only, gives equal events."""
    row = row_values(decimal_mode)
    before = row_values(decimal_mode, name="Old") if op != "c" else None
    after = row if op != "d" else None
    results = []
    for envelope in (True, False):
        value = change_event(op, before, after, envelope=envelope, decimal_mode=decimal_mode)
        results.append(decode(DebeziumJsonDecoder(definitions()), value, keys=[key(envelope=envelope)]))
    with_envelope, payload_only = results
    assert [type(e) for e in payload_only] == [SchemaObserved, DataChange]
    assert payload_only == with_envelope
    (observed, change) = payload_only
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    assert observed.schema == described_schema()
    assert (change.after or change.before) == (expected() if op != "d" else {**expected(), "name": "Old"})


def test_payload_only_without_a_definition_is_inferred_when_the_job_accepts_it() -> None:
    value = change_event("c", None, row_values(), envelope=False)
    known = definitions(described_schema(["id", "name"]))
    (observed, change) = decode(DebeziumJsonDecoder(known, infer_types=True), value)
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    assert change.after["price"] == "BOI="  # base64 text, as it came
    assert str(observed.schema.column("price").type) == "STRING"
    assert str(observed.schema.column("tiny").type) == "BIGINT"


def test_payload_only_picks_the_definition_with_the_records_columns() -> None:
    # the schema-change topic read ahead of the rows: the newest definition has a column more
    old = described_schema([c for c in DECODED if c != "ratio"])
    new = described_schema()
    known = definitions(old, new)
    older = {k: v for k, v in row_values().items() if k != "ratio"}
    events = decode(
        DebeziumJsonDecoder(known),
        change_event("c", None, older, envelope=False),
        change_event("c", None, row_values(id=2), envelope=False),
    )
    observed = of_type(events, SchemaObserved)
    assert [o.schema for o in observed] == [old, new]
    assert [c.after["price"] for c in of_type(events, DataChange)] == [Decimal("12.50")] * 2


def test_payload_only_decimals_text_or_base64() -> None:
    decoder = DebeziumJsonDecoder(definitions())
    cases = [
        ("BOI=", "1234", Decimal("12.50"), Decimal(1234)),  # '=' padding: base64; "1234" reads both
        ("12.50", "5", Decimal("12.50"), Decimal(5)),  # text
        (12.5, 1234.0, Decimal("12.50"), Decimal(1234)),  # double mode
        ("-0.01", "-7", Decimal("-0.01"), Decimal(-7)),  # text with a sign is never base64
    ]
    for price, qty, want_price, want_qty in cases:
        value = change_event("c", None, row_values(price=price, qty=qty), envelope=False)
        (change,) = of_type(decode(decoder, value), DataChange)
        assert (change.after["price"], change.after["qty"]) == (want_price, want_qty), (price, qty)


def test_an_all_digit_decimal_takes_the_reading_that_fits_then_the_tables_mode() -> None:
    wide = Schema(
        tuple(
            Column(c.name, t.DECIMAL(10, 0) if c.name == "qty" else c.type)
            for c in described_schema().columns
        ),
        ("id",),
    )
    as_base64 = int.from_bytes(base64.b64decode("1234"), "big", signed=True)
    assert len(str(abs(as_base64))) <= 10  # both readings fit DECIMAL(10, 0)
    # nothing said which mode: decimal text
    value = change_event("c", None, row_values(price="12.50", qty="1234"), envelope=False)
    (change,) = of_type(decode(DebeziumJsonDecoder(definitions(wide)), value), DataChange)
    assert change.after["qty"] == Decimal(1234)
    # a base64 value before it (precise mode): base64
    decoder = DebeziumJsonDecoder(definitions(wide))
    events = decode(
        decoder,
        change_event("c", None, row_values(qty="BNI="), envelope=False),
        change_event("c", None, row_values(qty="1234"), envelope=False),
    )
    assert [c.after["qty"] for c in of_type(events, DataChange)] == [Decimal(1234), Decimal(as_base64)]
    # in DECIMAL(6, 0) the base64 reading does not fit: text whatever the mode
    assert len(str(abs(as_base64))) > 6
    decoder = DebeziumJsonDecoder(definitions())
    events = decode(
        decoder,
        change_event("c", None, row_values(qty="BNI="), envelope=False),
        change_event("c", None, row_values(qty="1234"), envelope=False),
    )
    assert [c.after["qty"] for c in of_type(events, DataChange)] == [Decimal(1234), Decimal(1234)]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"price": "12,50"}, "field 'price' is not a valid DECIMAL(10, 2): '12,50' (neither base64"),
        ({"tiny": "x"}, "field 'tiny' is a JSON string but the table's DDL says TINYINT"),
        ({"name": 5}, "field 'name' is a JSON integer but the table's DDL says VARCHAR(64)"),
        ({"day": [1]}, "field 'day' is a JSON array but the table's DDL says DATE"),
        ({"hash": "not base64!"}, "field 'hash' is not a valid BINARY(4): 'not base64!'"),
        ({"id": None}, "field 'id' is null but the table's DDL says it is NOT NULL"),
    ],
)
def test_payload_only_values_the_ddl_contradicts(changes: dict[str, Any], reason: str) -> None:
    value = change_event("c", None, row_values(**changes), envelope=False)
    (bad,) = decode(DebeziumJsonDecoder(definitions()), value)
    assert isinstance(bad, BadRecord)
    assert bad.reason.startswith(reason), bad.reason


def test_definitions_are_matched_once_per_shape_and_refreshed_once() -> None:
    calls: list[int] = []
    known = TableDefinitions(refresh=lambda: calls.append(1))
    decoder = DebeziumJsonDecoder(known, infer_types=True)
    rows = [change_event("c", None, row_values(id=i), envelope=False) for i in range(3)]
    events = decode(decoder, *rows)
    assert len(calls) == 1  # one unknown shape: one refresh, then inference
    assert of_type(events, DataChange)[0].after["price"] == "BOI="
    # the runner adds the definition it read: the next rows use it, with no refresh
    known.add(TABLE, described_schema())
    events = decode(decoder, *rows)
    assert len(calls) == 1
    assert [c.after["price"] for c in of_type(events, DataChange)] == [Decimal("12.50")] * 3
    assert [o.schema for o in of_type(events, SchemaObserved)] == [described_schema()]


def test_a_refresh_brings_the_definitions_of_shapes_seen_before() -> None:
    older = {k: v for k, v in row_values().items() if k != "ratio"}
    topic_contents = [[], [described_schema(list(older)), described_schema()]]
    known = TableDefinitions(refresh=lambda: [known.add(TABLE, s) for s in topic_contents.pop(0)])
    decoder = DebeziumJsonDecoder(known, infer_types=True)
    events = decode(
        decoder,
        change_event("c", None, older, envelope=False),  # refreshed: nothing yet, inferred
        change_event("c", None, row_values(id=2), envelope=False),  # refreshed: both definitions
        change_event("c", None, {**older, "id": 3}, envelope=False),  # the first shape's, now known
    )
    assert [c.after["price"] for c in of_type(events, DataChange)] == [
        "BOI=",
        Decimal("12.50"),
        Decimal("12.50"),
    ]
    assert not topic_contents


def test_a_refresh_that_finds_the_definition() -> None:
    known = TableDefinitions(refresh=lambda: known.add(TABLE, described_schema()))
    (observed, change) = decode(
        DebeziumJsonDecoder(known), change_event("c", None, row_values(), envelope=False)
    )
    assert isinstance(observed, SchemaObserved) and observed.schema == described_schema()
    assert isinstance(change, DataChange) and change.after == expected()


# ------------------------------------------------------------------ a delete without its before


@pytest.mark.parametrize("envelope", [True, False])
def test_a_delete_without_a_before_image_takes_the_key_converted_as_the_ddl_says(envelope: bool) -> None:
    # a table keyed by a DATE and a DECIMAL, its delete with no before-image
    keyed = Schema(
        (
            Column("day", t.DATE().not_null()),
            Column("price", t.DECIMAL(10, 2).not_null()),
            Column("name", t.VARCHAR(64)),
        ),
        ("day", "price"),
    )
    known = TableDefinitions()
    known.add(TableId(None, "inventory", "days"), keyed)
    key_payload = {"day": 18460, "price": "BOI="}
    source = {"connector": "mysql", "db": "inventory", "table": "days"}
    payload = {"before": None, "after": None, "source": source, "op": "d"}
    if envelope:
        fields = [
            {"type": "int32", "optional": False, "name": "io.debezium.time.Date", "field": "day"},
            {
                "type": "bytes",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                "field": "price",
            },
        ]
        row = {
            "type": "struct",
            "optional": True,
            "fields": [*fields, {"type": "string", "optional": True, "field": "name"}],
        }
        schema = {
            "type": "struct",
            "fields": [
                {**row, "field": "before"},
                {**row, "field": "after"},
                {"type": "string", "field": "op"},
            ],
        }
        value = orjson.dumps({"schema": schema, "payload": payload})
        record_key = orjson.dumps({"schema": {"type": "struct", "fields": fields}, "payload": key_payload})
    else:
        value, record_key = orjson.dumps(payload), orjson.dumps(key_payload)
    events = decode(DebeziumJsonDecoder(known), value, keys=[record_key])
    (change,) = of_type(events, DataChange)
    assert change.op is Op.DELETE
    assert change.before == {"day": date(2020, 7, 17), "price": Decimal("12.50")}


# ---------------------------------------------------------------------------- flattened rows


@pytest.mark.parametrize("envelope", [True, False])
def test_flattened_rows_with_rewritten_deletes_and_added_fields(envelope: bool) -> None:
    # ExtractNewRecordState with delete.handling.mode=rewrite, add.fields=op,table,source.ts_ms,
    # drop.tombstones=false
    def metadata(op: str) -> dict[str, Any]:
        deleted = "true" if op == "d" else "false"
        return {
            "__op": op,
            "__table": "prices",
            "__source_ts_ms": 1595008822000 + ord(op),
            "__deleted": deleted,
        }

    values = [
        flattened(row_values(), metadata("r"), envelope=envelope),
        flattened(row_values(name="New"), metadata("u"), envelope=envelope),
        flattened(row_values(name="New"), metadata("d"), envelope=envelope),
        None,
    ]
    keys = [key(envelope=envelope)] * 4
    events = decode(DebeziumJsonDecoder(definitions()), *values, keys=keys)
    assert [type(e) for e in events] == [SchemaObserved, DataChange, DataChange, DataChange, Tombstone]
    (observed,) = of_type(events, SchemaObserved)
    assert observed.table_id == TABLE
    assert observed.schema == described_schema()
    assert not [c for c in observed.schema.names if c.startswith("__")]
    changes = of_type(events, DataChange)
    assert [c.op for c in changes] == [Op.READ, Op.UPDATE, Op.DELETE]
    assert [c.table_id for c in changes] == [TABLE] * 3
    assert [c.ts_ms for c in changes] == [1595008822000 + ord(op) for op in "rud"]
    assert changes[0].after == expected()
    assert changes[1].after == {**expected(), "name": "New"} and changes[1].before is None
    assert changes[2].before == {**expected(), "name": "New"} and changes[2].after is None


@pytest.mark.parametrize("envelope", [True, False])
def test_flattened_rows_without_added_fields_are_upserts(envelope: bool) -> None:
    # the SMT's defaults (deletes dropped) and delete.handling.mode=rewrite alone
    values = [
        flattened(row_values(), {}, envelope=envelope),
        flattened(row_values(), {"__deleted": "false"}, envelope=envelope),
        flattened(row_values(), {"__deleted": "true"}, envelope=envelope),
    ]
    events = decode(DebeziumJsonDecoder(infer_types=True), *values, keys=[key(envelope=envelope)] * 3)
    changes = of_type(events, DataChange)
    assert [c.op for c in changes] == [Op.UPDATE, Op.UPDATE, Op.DELETE]
    assert [c.table_id for c in changes] == [TABLE] * 3  # from the topic
    assert changes[0].before is None and changes[0].after is not None
    assert changes[2].before is not None and changes[2].before["id"] == 1 and changes[2].after is None
    (observed,) = of_type(events, SchemaObserved)
    assert observed.schema.primary_keys == ("id",)
    assert "__deleted" not in observed.schema
    if envelope:  # the Connect schema types the row
        assert changes[0].after["price"] == Decimal("12.50")
        assert str(observed.schema.column("price").type) == "DECIMAL(10, 2)"


def test_a_flattened_delete_without_columns_takes_the_key() -> None:
    events = decode(
        DebeziumJsonDecoder(definitions()),
        orjson.dumps({"__op": "d", "__deleted": "true"}),
        keys=[key(envelope=False, id=9)],
    )
    assert [type(e) for e in events] == [DataChange]  # a key alone says nothing of the schema
    (change,) = events
    assert isinstance(change, DataChange)
    assert change.op is Op.DELETE and change.before == {"id": 9}


def test_a_flattened_row_names_its_table() -> None:
    value = orjson.dumps({"id": 1, "__db": "shop", "__table": "orders"})
    (change,) = of_type(decode(DebeziumJsonDecoder(infer_types=True), value), DataChange)
    assert change.table_id == TableId(None, "shop", "orders")
    assert change.after == {"id": 1}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"id": 1, "__deleted": "maybe"}, "'__deleted' must be \"true\" or \"false\", got 'maybe'"),
        ({"id": 1, "__op": "x"}, "unknown op 'x' in '__op'"),
        ({"id": 1, "__op": "c", "__deleted": "true"}, "'__deleted' is true but '__op' is 'c'"),
        ({"__op": "c"}, "a flattened record without columns"),
        (
            {"__deleted": "true"},
            "delete without a before-image or a key (a PostgreSQL table needs REPLICA IDENTITY FULL)",
        ),
    ],
)
def test_bad_flattened_records(value: dict[str, Any], reason: str) -> None:
    (bad,) = decode(DebeziumJsonDecoder(infer_types=True), orjson.dumps(value))
    assert isinstance(bad, BadRecord) and bad.reason == reason


# ------------------------------------------------------------------- Flink CDC's all-types rows


def _full_types() -> TableDefinitions:
    """The definition of Flink CDC's all-types table, from its CREATE TABLE."""
    sql = (FIXTURES / "apache-flink-cdc/column_type_test.sql").read_text()
    statement = sql[sql.index("CREATE TABLE full_types") : sql.index("DEFAULT CHARSET=utf8;") + 21]
    (create,) = parse_ddl(statement, default_database="column_type_test")
    assert isinstance(create, CreateTable)
    known = TableDefinitions()
    known.add(create.table_id, create.schema)
    return known


@pytest.mark.parametrize(
    "path",
    [
        "apache-flink-cdc/debezium-data-schema-exclude.json",
        # decimals written as JSON numbers (decimal.format=NUMERIC, bigint.unsigned precise)
        "apache-flink-cdc/debezium-data-schema-exclude-with-numeric-decimal.json",
    ],
)
def test_payload_only_all_types_with_the_tables_ddl(path: str) -> None:
    known = _full_types()
    topic = "mysql_binlog_source.column_type_test.full_types"
    events = DebeziumJsonDecoder(known).decode(records(path, topic))
    assert not of_type(events, BadRecord)
    (observed,) = of_type(events, SchemaObserved)
    assert observed.schema == known.latest(TableId(None, "column_type_test", "full_types"))
    snapshot, update = of_type(events, DataChange)
    assert (snapshot.op, update.op) == (Op.READ, Op.UPDATE)
    row = snapshot.after
    assert row["id"] == Decimal(1)
    assert row["big_un_c"] == Decimal(18446744073709551615)
    assert row["decimal_c"] == Decimal("123.4567")
    assert row["numeric_c"] == Decimal(346)
    assert (row["tiny_c"], row["small_un_c"], row["int_un_c"], row["big_c"]) == (
        127,
        65535,
        4294967295,
        9223372036854775807,
    )
    assert (row["bit1_c"], row["tiny1_c"], row["boolean_c"]) == (False, True, True)
    assert row["float_c"] == 123.102 and row["double_c"] == 404.4443
    assert row["date_c"] == date(2020, 7, 17)
    assert row["time_c"] == time(18, 0, 22)
    assert row["datetime3_c"] == datetime(2020, 7, 17, 18, 0, 22, 123000)
    assert row["datetime6_c"] == datetime(2020, 7, 17, 18, 0, 22, 123456)
    assert row["timestamp_c"] == datetime(2020, 7, 17, 18, 0, 22, tzinfo=UTC)
    assert row["file_uuid"] == bytes.fromhex("651aed08390f4893b2f136923e7b7400")
    assert row["bit_c"] == base64.b64decode("BAQEBAQEBAQ=")
    assert row["tiny_blob_c"] == b"\x10"
    assert (row["year_c"], row["enum_c"], row["set_c"]) == (2021, "red", "a,b")
    assert row["json_c"] == '{"key1": "value1"}'
    assert row["point_c"] == bytes(4) + base64.b64decode(WKB)
    assert row["varchar_len0_c"] == ""
    # DECIMAL(65, 1) is STRING and its scale is not in the DDL's ferry type: base64 stays as it
    # came, a number becomes its text
    assert row["big_decimal_c"] == ("34567892.1" if "numeric" in path else "FJqkSQ==")
    assert update.after["timestamp_c"] == datetime(2020, 7, 17, 18, 33, 22, tzinfo=UTC)
