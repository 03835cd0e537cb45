"""``debezium-avro``: records serialised by confluent-kafka's AvroSerializer against a real schema
registry (Apicurio Registry, started once per session) decode to what ``debezium-json`` gives for
the same rows written by the JSON converter."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest
from confluent_kafka.serialization import MessageField
from pydantic import SecretStr
from tests.support import debezium_avro as avro
from tests.support.debezium_avro import AvroColumn, DebeziumAvroTable, SchemaRegistryClient
from tests.support.registry import SchemaRegistry

from ferry.config.loader import load_job_text
from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.debezium_avro import DebeziumAvroDecoder, DebeziumAvroSchemaChangeDecoder
from ferry.connectors.formats.schema_registry import (
    SchemaRegistryUnavailableError,
)
from ferry.connectors.record import Record
from ferry.exceptions import TransientError
from ferry.local.ports import free_ports
from ferry.model import types as t
from ferry.model.events import BadRecord, DataChange, Op, SchemaObserved, Tombstone
from ferry.model.schema import TableId

pytestmark = pytest.mark.integration

B64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731


@pytest.fixture
def registry_client(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        yield client


@pytest.fixture
def decoder(schema_registry: SchemaRegistry) -> Iterator[DebeziumAvroDecoder]:
    decoder = DebeziumAvroDecoder(schema_registry.url)
    yield decoder
    decoder.close()


def server() -> str:
    return f"s{uuid.uuid4().hex[:12]}"


def orders(client: SchemaRegistryClient, name: str | None = None) -> DebeziumAvroTable:
    return DebeziumAvroTable(
        client,
        name or server(),
        "inventory",
        "orders",
        [
            AvroColumn("id", "int", optional=False),
            AvroColumn("item", "string"),
            AvroColumn("qty", "int"),
        ],
    )


def records(topic: str, pairs: list[tuple[bytes | None, bytes | None]], start: int = 0) -> list[Record]:
    return [Record(topic, 0, start + i, key=k, value=v) for i, (k, v) in enumerate(pairs)]


# ------------------------------------------------------------------------------ types vs JSON

#: name → (Connect schema as the JSON converter writes it, JSON value,
#:         Avro type as Connect's AvroData writes it, Avro value given to the serializer)
COLUMNS: dict[str, tuple[dict[str, Any], Any, Any, Any]] = {
    "tiny": ({"type": "int16"}, 3, {"type": "int", "connect.type": "int16"}, 3),
    "big": ({"type": "int64"}, 2**40, "long", 2**40),
    "ratio": ({"type": "float"}, 1.5, "float", 1.5),
    "price": ({"type": "double"}, 2.25, "double", 2.25),
    "flag": ({"type": "boolean"}, True, "boolean", True),
    "label": ({"type": "string"}, "héllo", "string", "héllo"),
    "blob": ({"type": "bytes"}, B64(b"\x00\x01"), "bytes", b"\x00\x01"),
    "amount": (
        {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        },
        B64((1234).to_bytes(2, "big")),
        avro.DECIMAL(10, 2),
        Decimal("12.34"),
    ),
    "unbounded": (
        {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "3"},
        },
        B64((-1500).to_bytes(2, "big", signed=True)),
        {
            "type": "bytes",
            "scale": 3,
            "precision": 64,
            "connect.version": 1,
            "connect.parameters": {"scale": "3"},
            "connect.name": "org.apache.kafka.connect.data.Decimal",
            "logicalType": "decimal",
        },
        Decimal("-1.500"),
    ),
    "born": ({"type": "int32", "name": "io.debezium.time.Date", "version": 1}, 19000, avro.DATE, 19000),
    "connect_date": (
        {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1},
        19000,
        {
            "type": "int",
            "connect.version": 1,
            "connect.name": "org.apache.kafka.connect.data.Date",
            "logicalType": "date",
        },
        date(2022, 1, 8),
    ),
    "connect_ts": (
        {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
        1_700_000_000_123,
        {
            "type": "long",
            "connect.version": 1,
            "connect.name": "org.apache.kafka.connect.data.Timestamp",
            "logicalType": "timestamp-millis",
        },
        1_700_000_000_123,
    ),
    "updated": (
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
        1_700_000_000_123_456,
        avro.MICRO_TIMESTAMP,
        1_700_000_000_123_456,
    ),
    "micro_time": (
        {"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1},
        3_723_000_001,
        {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTime"},
        3_723_000_001,
    ),
    "zoned": (
        {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1},
        "2024-01-02T03:04:05.123456Z",
        {"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"},
        "2024-01-02T03:04:05.123456Z",
    ),
    "doc": (
        {"type": "string", "name": "io.debezium.data.Json", "version": 1},
        '{"a": 1}',
        {"type": "string", "connect.version": 1, "connect.name": "io.debezium.data.Json"},
        '{"a": 1}',
    ),
    "color": (
        {
            "type": "string",
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "red,green"},
        },
        "red",
        {
            "type": "string",
            "connect.version": 1,
            "connect.parameters": {"allowed": "red,green"},
            "connect.name": "io.debezium.data.Enum",
        },
        "red",
    ),
    "bits": (
        {"type": "bytes", "name": "io.debezium.data.Bits", "version": 1, "parameters": {"length": "8"}},
        B64(b"\x05"),
        {
            "type": "bytes",
            "connect.version": 1,
            "connect.parameters": {"length": "8"},
            "connect.name": "io.debezium.data.Bits",
        },
        b"\x05",
    ),
    "variable": (
        {
            "type": "struct",
            "name": "io.debezium.data.VariableScaleDecimal",
            "version": 1,
            "fields": [
                {"field": "scale", "type": "int32", "optional": False},
                {"field": "value", "type": "bytes", "optional": False},
            ],
        },
        {"scale": 2, "value": B64((1234).to_bytes(2, "big"))},
        {
            "type": "record",
            "name": "VariableScaleDecimal",
            "namespace": "io.debezium.data",
            "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
            "connect.doc": "Variable scaled decimal",
            "connect.version": 1,
            "connect.name": "io.debezium.data.VariableScaleDecimal",
        },
        {"scale": 2, "value": (1234).to_bytes(2, "big")},
    ),
    "shape": (
        {
            "type": "struct",
            "name": "io.debezium.data.geometry.Geometry",
            "version": 1,
            "fields": [
                {"field": "wkb", "type": "bytes", "optional": False},
                {"field": "srid", "type": "int32", "optional": True},
            ],
        },
        {"wkb": B64(b"\x01\x02\x03"), "srid": 4326},
        {
            "type": "record",
            "name": "Geometry",
            "namespace": "io.debezium.data.geometry",
            "fields": [
                {"name": "wkb", "type": "bytes"},
                {"name": "srid", "type": ["null", "int"], "default": None},
            ],
            "connect.version": 1,
            "connect.name": "io.debezium.data.geometry.Geometry",
        },
        {"wkb": b"\x01\x02\x03", "srid": 4326},
    ),
    "tags": (
        {"type": "array", "items": {"type": "string", "optional": False}},
        ["a", "b"],
        {"type": "array", "items": "string"},
        ["a", "b"],
    ),
    "attrs": (
        {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "int32", "optional": False},
        },
        {"x": 1},
        {"type": "map", "values": "int"},
        {"x": 1},
    ),
    "by_number": (
        {
            "type": "map",
            "keys": {"type": "int32", "optional": False},
            "values": {"type": "string", "optional": True},
        },
        [[1, "one"], [2, None]],
        {
            "type": "array",
            "items": {
                "type": "record",
                "name": "MapEntry",
                "namespace": "io.confluent.connect.avro",
                "fields": [
                    {"name": "key", "type": "int"},
                    {"name": "value", "type": ["null", "string"], "default": None},
                ],
            },
        },
        [{"key": 1, "value": "one"}, {"key": 2, "value": None}],
    ),
    "address": (
        {
            "type": "struct",
            "name": "shop.Address",
            "fields": [
                {"field": "city", "type": "string", "optional": True},
                {"field": "code", "type": "bytes", "optional": True},
            ],
        },
        {"city": "Oslo", "code": B64(b"\x09")},
        {
            "type": "record",
            "name": "Address",
            "namespace": "shop",
            "fields": [
                {"name": "city", "type": ["null", "string"], "default": None},
                {"name": "code", "type": ["null", "bytes"], "default": None},
            ],
            "connect.name": "shop.Address",
        },
        {"city": "Oslo", "code": b"\x09"},
    ),
}


def json_record(
    topic: str, columns: dict[str, dict[str, Any]], row: dict[str, Any], ts: int
) -> tuple[bytes, bytes]:
    """The same change as the JSON converter writes it (schemas enabled)."""
    value_schema = {
        "type": "struct",
        "optional": True,
        "name": f"{topic}.Value",
        "fields": list(columns.values()),
    }
    source_schema = {
        "type": "struct",
        "optional": False,
        "name": "io.debezium.connector.mysql.Source",
        "field": "source",
        "fields": [
            {"type": "string", "optional": False, "field": "connector"},
            {"type": "int64", "optional": False, "field": "ts_ms"},
            {"type": "string", "optional": False, "field": "db"},
            {"type": "string", "optional": True, "field": "table"},
        ],
    }
    schema = {
        "type": "struct",
        "optional": False,
        "name": f"{topic}.Envelope",
        "fields": [
            {**value_schema, "field": "before"},
            {**value_schema, "field": "after"},
            source_schema,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    _, database, table = topic.split(".")
    payload = {
        "before": None,
        "after": row,
        "source": {"connector": "mysql", "ts_ms": ts, "db": database, "table": table},
        "op": "c",
        "ts_ms": ts,
    }
    key_schema = {
        "type": "struct",
        "optional": False,
        "name": f"{topic}.Key",
        "fields": [columns["id"] | {"optional": False}],
    }
    key = orjson.dumps({"schema": key_schema, "payload": {"id": row["id"]}})
    return key, orjson.dumps({"schema": schema, "payload": payload})


def test_every_connect_type_decodes_as_the_json_converter_gives_it(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    connect = {"id": {"type": "int32", "optional": False, "field": "id"}}
    connect |= {name: {**spec, "optional": True, "field": name} for name, (spec, _, _, _) in COLUMNS.items()}
    connect["note"] = {"type": "string", "optional": True, "doc": "what the buyer wrote", "field": "note"}
    connect["qty"] = {"type": "int32", "optional": True, "default": 5, "field": "qty"}
    table = DebeziumAvroTable(
        registry_client,
        server(),
        "inventory",
        "orders",
        [AvroColumn("id", "int", optional=False)]
        + [AvroColumn(name, column[2]) for name, column in COLUMNS.items()]
        + [AvroColumn("note", "string", doc="what the buyer wrote"), AvroColumn("qty", "int", default=5)],
    )
    avro_row = {"id": 7, **{name: column[3] for name, column in COLUMNS.items()}, "note": "fast", "qty": 2}
    json_row = {"id": 7, **{name: column[1] for name, column in COLUMNS.items()}, "note": "fast", "qty": 2}
    key, value = table.insert(avro_row)
    json_key, json_value = json_record(table.topic, connect, json_row, table.ts_ms)

    from_avro = decoder.decode([Record(table.topic, 0, 0, key=key, value=value)])
    from_json = decoder_for("debezium-json").decode(
        [Record(table.topic, 0, 0, key=json_key, value=json_value)]
    )

    assert [type(e) for e in from_avro] == [SchemaObserved, DataChange], from_avro
    assert from_avro == from_json
    observed, change = from_avro
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    types = {c.name: c.type for c in observed.schema.columns}
    assert types["amount"] == t.DECIMAL(10, 2) and types["unbounded"] == t.DECIMAL(38, 3)
    assert types["tiny"] == t.SMALLINT() and types["born"] == t.DATE() and types["updated"] == t.TIMESTAMP(6)
    assert types["id"] == t.INT().not_null() and observed.schema.primary_keys == ("id",)
    assert observed.schema.column("note").comment == "what the buyer wrote"
    assert observed.schema.column("qty").default == "5"
    after = change.after
    assert after is not None
    assert after["amount"] == Decimal("12.34") and after["variable"] == Decimal("12.34")
    assert after["born"] == date(2022, 1, 8) and after["connect_date"] == date(2022, 1, 8)
    assert after["updated"] == datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert after["zoned"] == datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert after["blob"] == b"\x00\x01" and after["by_number"] == {1: "one", 2: None}
    assert after["address"] == {"city": "Oslo", "code": b"\x09"}
    assert orjson.loads(after["shape"]) == {"wkb": B64(b"\x01\x02\x03"), "srid": 4326}
    assert change.table_id == TableId(None, "inventory", "orders") and change.op is Op.INSERT


def test_avro_logical_types_without_connect_names(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    """A producer other than Kafka Connect: the Avro logical types give the closest ferry types."""
    table = DebeziumAvroTable(
        registry_client,
        server(),
        "inventory",
        "events",
        [
            AvroColumn("id", "int", optional=False),
            AvroColumn("amount", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}),
            AvroColumn("day", {"type": "int", "logicalType": "date"}),
            AvroColumn("at_ms", {"type": "long", "logicalType": "timestamp-millis"}),
            AvroColumn("at_us", {"type": "long", "logicalType": "timestamp-micros"}),
            AvroColumn("ref", {"type": "string", "logicalType": "uuid"}),
            AvroColumn("kind", {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}),
            AvroColumn("digest", {"type": "fixed", "name": "Digest", "size": 2}),
        ],
    )
    moment = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    ref = uuid.UUID("12345678-1234-5678-1234-567812345678")
    key, value = table.insert(
        {"id": 1, "amount": Decimal("-4.250"), "day": date(2024, 5, 6), "at_ms": moment, "at_us": moment,
         "ref": str(ref), "kind": "B", "digest": b"\xab\xcd"}
    )  # fmt: skip
    observed, change = decoder.decode(records(table.topic, [(key, value)]))
    assert isinstance(observed, SchemaObserved) and isinstance(change, DataChange)
    assert [c.type for c in observed.schema.columns][1:] == [
        t.DECIMAL(12, 3), t.DATE(), t.TIMESTAMP(3), t.TIMESTAMP(6), t.STRING(), t.STRING(), t.BYTES(),
    ]  # fmt: skip
    naive = moment.replace(tzinfo=None)
    assert change.after == {
        "id": 1, "amount": Decimal("-4.250"), "day": date(2024, 5, 6), "at_ms": naive, "at_us": naive,
        "ref": str(ref), "kind": "B", "digest": b"\xab\xcd",
    }  # fmt: skip


# ------------------------------------------------------------------------------ schema drift


def test_a_new_writer_schema_id_is_a_schema_observed_only_when_the_table_changed(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    table = orders(registry_client)
    pairs = [
        table.insert({"id": 1, "item": "pen", "qty": 1}),
        table.insert({"id": 2, "item": "ink", "qty": 2}),
    ]
    table.add_column(AvroColumn("note", "string"))
    pairs.append(table.insert({"id": 3, "item": "cap", "qty": 3, "note": "blue"}))
    table.change_type("qty", "long")  # INT -> BIGINT
    pairs.append(table.insert({"id": 4, "item": "nib", "qty": 2**40, "note": None}))
    # The same schema under a new subject gets another id; an unchanged table is no schema change.
    first_batch = decoder.decode(records(table.topic, pairs[:2]))
    events = first_batch + decoder.decode(records(table.topic, pairs[2:], start=2))

    observed = [e for e in events if isinstance(e, SchemaObserved)]
    assert [e.position.offset for e in observed if e.position] == [0, 2, 3]
    assert [c.name for c in observed[1].schema.columns] == ["id", "item", "qty", "note"]
    assert observed[1].schema.column("qty").type == t.INT()
    assert observed[2].schema.column("qty").type == t.BIGINT()
    changes = [e for e in events if isinstance(e, DataChange)]
    assert [c.after["qty"] for c in changes if c.after] == [1, 2, 3, 2**40]

    # Another partition has its own last schema: its first record is observed again.
    other = decoder.decode([Record(table.topic, 1, 0, key=pairs[3][0], value=pairs[3][1])])
    assert isinstance(other[0], SchemaObserved) and other[0].schema == observed[2].schema


# ------------------------------------------------------------------------------ keys, tombstones


def test_keys_name_the_primary_key_and_tombstones_carry_the_key(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    table = orders(registry_client)
    table.key = ("id", "item")
    insert = table.insert({"id": 1, "item": "pen", "qty": 1})
    delete = table.delete({"id": 1, "item": "pen", "qty": 1})
    events = decoder.decode(records(table.topic, [insert, delete, (delete[0], None)]))
    observed, created, deleted, tombstone = events
    assert isinstance(observed, SchemaObserved) and observed.schema.primary_keys == ("id", "item")
    assert isinstance(created, DataChange) and isinstance(deleted, DataChange)
    assert deleted.op is Op.DELETE and deleted.before == {"id": 1, "item": "pen", "qty": 1}
    assert tombstone == Tombstone(tombstone.position, delete[0]) and tombstone.position.offset == 2


def test_a_delete_without_before_image_takes_its_row_from_the_avro_key(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    table = orders(registry_client)
    key = table.encode_key({"id": 5})
    no_before = table.value("d", None, None)  # PostgreSQL without REPLICA IDENTITY FULL
    observed, deleted, without_key = decoder.decode(
        records(table.topic, [(key, no_before), (None, no_before)])
    )
    assert isinstance(observed, SchemaObserved) and observed.schema.primary_keys == ("id",)
    assert isinstance(deleted, DataChange) and deleted.op is Op.DELETE and deleted.before == {"id": 5}
    assert isinstance(without_key, BadRecord) and "REPLICA IDENTITY FULL" in without_key.reason


def test_a_key_that_does_not_match_its_row_is_a_bad_record_with_both_through_the_registry(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    """A key of a DATE and a Connect DECIMAL, written by the serializer through the registry: the
    same values as the row's match, another price is a bad record with the key and value as read."""
    table = DebeziumAvroTable(
        registry_client,
        server(),
        "inventory",
        "prices",
        [
            AvroColumn("day", avro.DATE, optional=False),
            AvroColumn("price", avro.DECIMAL(10, 2), optional=False),
            AvroColumn("note", "string"),
        ],
        key=("day", "price"),
    )
    row = {"day": 19000, "price": Decimal("9.50"), "note": "n"}
    key, value = table.insert(row)
    other = table.encode_key({**row, "price": Decimal("9.75")})
    observed, good, bad = decoder.decode(records(table.topic, [(key, value), (other, value)]))
    assert isinstance(observed, SchemaObserved) and observed.schema.primary_keys == ("day", "price")
    assert isinstance(good, DataChange) and good.after == {
        "day": date(2022, 1, 8),
        "price": Decimal("9.50"),
        "note": "n",
    }
    assert isinstance(bad, BadRecord) and (bad.key, bad.value) == (other, value)
    assert "price is Decimal('9.75') in the key and Decimal('9.50') in the row" in bad.reason


# ------------------------------------------------------------------------------ bad records


def test_malformed_records_are_bad_records_and_the_batch_goes_on(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    table = orders(registry_client)
    key, good = table.insert({"id": 1, "item": "pen", "qty": 1})
    schema_id = int.from_bytes(good[1:5], "big")
    plain = DebeziumAvroTable(registry_client, table.server, "inventory", "plain", [])
    not_an_envelope = plain.serialize(
        {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "int"}]},
        {"id": 1},
        MessageField.VALUE,
    )
    values = [
        b'{"op": "c"}',  # JSON, not the wire format
        b"\x00\x00",  # shorter than the header
        b"\x00" + (2**31 - 7).to_bytes(4, "big") + b"\x02",  # an id the registry does not have
        good[:-3],  # truncated
        good + b"\x00\x00",  # bytes after the datum
        not_an_envelope,
        good,
    ]
    events = decoder.decode(records(table.topic, [(key, v) for v in values]))
    bad = [e for e in events if isinstance(e, BadRecord)]
    reasons = [b.reason for b in bad]
    assert len(bad) == 6, reasons
    assert "first byte is 0x7b, not the magic byte 0x00" in reasons[0]
    assert "fewer than the 5 of its header" in reasons[1]
    assert f"schema id {2**31 - 7} is not in the schema registry" in reasons[2]
    assert f"not valid Avro for schema id {schema_id}" in reasons[3]
    assert "2 bytes after its Avro datum" in reasons[4]
    assert "not a Debezium change event: no 'op' field" in reasons[5]
    assert [b.position.offset for b in bad] == [0, 1, 2, 3, 4, 5]
    assert bad[0].value == values[0] and bad[0].key == key
    assert isinstance(events[-1], DataChange) and events[-1].after == {"id": 1, "item": "pen", "qty": 1}


# ------------------------------------------------------------------------------ registry errors


def test_an_unreachable_registry_is_a_transient_error_not_bad_records(
    registry_client: SchemaRegistryClient,
) -> None:
    table = orders(registry_client)
    pair = table.insert({"id": 1, "item": "pen", "qty": 1})
    (port,) = free_ports(1)  # nothing listens there
    decoder = DebeziumAvroDecoder(f"http://reader:s3cret@127.0.0.1:{port}/apis/ccompat/v7")
    with pytest.raises(SchemaRegistryUnavailableError) as raised:
        decoder.decode(records(table.topic, [pair]))
    assert isinstance(raised.value, TransientError)
    assert f"127.0.0.1:{port}" in str(raised.value) and "s3cret" not in str(raised.value)
    assert "s3cret" not in repr(decoder)


def test_the_job_file_options_build_a_decoder_that_reads_the_registry(
    schema_registry: SchemaRegistry, registry_client: SchemaRegistryClient
) -> None:
    job = load_job_text(
        f"""
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: shop.inventory.orders
  value.format: debezium-avro-confluent
  value.debezium-avro-confluent.url: {schema_registry.url}
  value.debezium-avro-confluent.basic-auth.credentials-source: USER_INFO
  value.debezium-avro-confluent.basic-auth.user-info: ${{REGISTRY_USER_INFO}}
sink:
  type: memory
pipeline:
  name: avro
""",
        env={"REGISTRY_USER_INFO": "reader:s3cret"},
    )
    options = job.source.decoder_options()
    assert options["schema_registry_user_info"] == SecretStr("reader:s3cret")
    assert "s3cret" not in repr(job) and "s3cret" not in repr(options)
    decoder = decoder_for(job.source.value_format.value, **options)
    schema_changes = decoder_for(job.source.schema_change_format, **options)
    try:
        table = orders(registry_client)
        events = decoder.decode(records(table.topic, [table.insert({"id": 1, "item": "pen", "qty": 1})]))
        assert [type(e) for e in events] == [SchemaObserved, DataChange]
        assert isinstance(decoder, DebeziumAvroDecoder)
        assert isinstance(schema_changes, DebeziumAvroSchemaChangeDecoder)
    finally:
        for opened in (decoder, schema_changes):
            opened.close()  # type: ignore[attr-defined]


def test_schema_references_are_read_as_apicurios_converter_registers_them(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroDecoder
) -> None:
    """Apicurio's Avro converter registers Debezium's ``Source`` record as a schema of its own and
    the envelope refers to it by name."""
    import io

    from confluent_kafka.schema_registry import Schema, SchemaReference
    from fastavro import parse_schema, schemaless_writer

    table = orders(registry_client)
    source_subject = f"{table.topic}-io.debezium.connector.mysql.Source"
    source_schema = Schema(orjson.dumps(avro.SOURCE).decode(), "AVRO")
    registry_client.register_schema(source_subject, source_schema)
    version = registry_client.lookup_schema(source_subject, source_schema).version
    envelope = table.value_schema()
    envelope["fields"][2]["type"] = "io.debezium.connector.mysql.Source"
    reference = SchemaReference("io.debezium.connector.mysql.Source", source_subject, version)
    schema_id = registry_client.register_schema(
        f"{table.topic}-value", Schema(orjson.dumps(envelope).decode(), "AVRO", [reference])
    )
    assert registry_client.get_schema(schema_id).references, "the registry keeps the reference"
    named: dict[str, Any] = {}
    parse_schema(avro.SOURCE, named_schemas=named)
    buffer = io.BytesIO()
    row = {"id": 1, "item": "pen", "qty": 3}
    source = {
        "version": "3.6.1.Final", "connector": "mysql", "name": table.server, "ts_ms": 5, "snapshot": "false",
        "db": "inventory", "table": "orders", "server_id": 1, "file": "binlog.000001", "pos": 4,
    }  # fmt: skip
    schemaless_writer(
        buffer,
        parse_schema(envelope, named_schemas=named),
        {"before": None, "after": row, "source": source, "op": "c", "ts_ms": 5},
    )
    value = b"\x00" + schema_id.to_bytes(4, "big") + buffer.getvalue()
    observed, change = decoder.decode(records(table.topic, [(table.encode_key(row), value)]))
    assert isinstance(observed, SchemaObserved) and observed.schema.primary_keys == ("id",)
    assert isinstance(change, DataChange) and change.after == row and change.ts_ms == 5
