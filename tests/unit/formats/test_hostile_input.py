"""Hostile input, for every decoder: whatever a record holds, it is decoded or becomes a bad record
with a reason; the decoder never raises and never drops a record silently.

Hypothesis draws random bytes, JSON of any shape and depth, change events with wrong shapes and
types, unknown ops, huge values (long text, numbers past every integer and float type, long
lists), invalid UTF-8 (in the bytes and inside JSON strings), nesting deeper than any parser takes,
truncated and bit-flipped valid records (Debezium JSON with the envelope and payload only, Avro
in the Confluent wire format, Canal, Maxwell), and keys that do not match their rows; a valid
record given a key of other values is a bad record with both, in every format that has keys.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import orjson
import pytest
from confluent_kafka.schema_registry import Schema as RegisteredSchema
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import debezium_avro as avro
from tests.unit.formats.test_debezium_avro_schema_change import as_avro

from ferry.connectors.formats import FORMATS, Decoder, decoder_for
from ferry.connectors.formats.schema_registry import ConfluentAvroReader
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import BadRecord, Event

TOPIC = "shop.inventory.orders"

# ------------------------------------------------------------------------------ the decoders


class LocalRegistry:
    """The two calls of a schema registry client the decoders make, answered from a dict."""

    def __init__(self) -> None:
        self.schemas: dict[int, str] = {}

    def register(self, schema: dict[str, Any]) -> int:
        text = json.dumps(schema)
        for schema_id, known in self.schemas.items():
            if known == text:
                return schema_id
        schema_id = len(self.schemas) + 1
        self.schemas[schema_id] = text
        return schema_id

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        if schema_id not in self.schemas:
            raise SchemaRegistryError(404, 40403, f"schema {schema_id} not found")
        return RegisteredSchema(self.schemas[schema_id], "AVRO")

    def get_version(self, subject: str, version: int) -> Any:
        raise SchemaRegistryError(404, 40401, f"subject {subject} not found")


class LocalAvroTable(avro.DebeziumAvroTable):
    """Encodes in the Confluent wire format with :class:`LocalRegistry` (no registry server)."""

    def serialize(self, schema: dict[str, Any], value: Any, field: MessageField) -> bytes:
        registry: LocalRegistry = self.registry  # type: ignore[assignment]
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), value)
        return b"\x00" + struct.pack(">I", registry.register(schema)) + buffer.getvalue()


REGISTRY = LocalRegistry()
AVRO_TABLE = LocalAvroTable(
    REGISTRY,  # type: ignore[arg-type]
    "shop",
    "inventory",
    "orders",
    [
        avro.AvroColumn("id", "int", optional=False),
        avro.AvroColumn("item", "string"),
        avro.AvroColumn("qty", "long"),
    ],
)
PAYLOAD_ONLY_TABLE = dbz.DebeziumTable(
    "shop",
    "inventory",
    "orders",
    [
        dbz.ConnectColumn("id", dbz.INT32, optional=False),
        dbz.ConnectColumn("item", dbz.STRING),
        dbz.ConnectColumn("qty", dbz.INT64),
    ],
    with_schema=False,
)
JSON_TABLE = dbz.DebeziumTable(
    "shop",
    "inventory",
    "orders",
    [
        dbz.ConnectColumn("id", dbz.INT32, optional=False),
        dbz.ConnectColumn("item", dbz.STRING),
        dbz.ConnectColumn("qty", dbz.INT64),
    ],
)


def avro_decoder(cls_name: str) -> Callable[[], Decoder]:
    def build() -> Decoder:
        reader = ConfluentAvroReader("http://registry.invalid", client=REGISTRY)
        return decoder_for(cls_name, schema_registry_url="http://registry.invalid", reader=reader)

    return build


DECODERS: dict[str, Callable[[], Decoder]] = {
    "debezium-json": lambda: decoder_for("debezium-json", infer_types=True),
    "debezium-schema-change": lambda: decoder_for("debezium-schema-change"),
    "debezium-avro": avro_decoder("debezium-avro"),
    "debezium-avro-confluent": avro_decoder("debezium-avro-confluent"),
    "debezium-avro-schema-change": avro_decoder("debezium-avro-schema-change"),
    "canal-json": lambda: decoder_for("canal-json"),
    "maxwell-json": lambda: decoder_for("maxwell-json"),
}


def test_every_format_is_fuzzed() -> None:
    assert set(DECODERS) == set(FORMATS)


# ------------------------------------------------------------------------------ what is drawn

ROW = {"id": 7, "item": "seven", "qty": 70}


def valid_records() -> list[tuple[bytes | None, bytes]]:
    """Valid records of every format, to be cut, flipped and mutated."""
    canal = {
        "data": [{"id": "7", "item": "seven"}],
        "database": "inventory",
        "table": "orders",
        "pkNames": ["id"],
        "isDdl": False,
        "type": "INSERT",
        "mysqlType": {"id": "int", "item": "varchar(20)"},
        "sqlType": {"id": 4, "item": 12},
        "es": 1,
        "ts": 2,
    }
    maxwell = {"database": "inventory", "table": "orders", "type": "insert", "ts": 1, "data": ROW}
    _, schema_change = JSON_TABLE.schema_change(JSON_TABLE.add_column("note", dbz.STRING))
    avro_schema_change = AVRO_TABLE.serialize(
        avro.SCHEMA_CHANGE_VALUE, as_avro(orjson.loads(schema_change), "shop"), MessageField.VALUE
    )
    return [
        JSON_TABLE.insert(ROW),
        JSON_TABLE.update(ROW, {**ROW, "qty": 71}),
        JSON_TABLE.delete(ROW),
        PAYLOAD_ONLY_TABLE.insert(ROW),
        PAYLOAD_ONLY_TABLE.update(ROW, {**ROW, "qty": 71}),
        PAYLOAD_ONLY_TABLE.delete(ROW),
        AVRO_TABLE.insert(ROW),
        AVRO_TABLE.delete(ROW),
        (None, orjson.dumps(canal)),
        (
            None,
            orjson.dumps({**canal, "isDdl": True, "type": "ALTER", "sql": "ALTER TABLE orders ADD x INT"}),
        ),
        (None, orjson.dumps(maxwell)),
        (orjson.dumps({"database": "inventory", "table": "orders", "pk.id": 7}), orjson.dumps(maxwell)),
        (b'{"id": 7}', orjson.dumps({**canal, "data": [ROW], "mysqlType": None})),
        (None, orjson.dumps({**maxwell, "type": "table-alter", "sql": "ALTER TABLE orders DROP qty"})),
        (b'{"databaseName":"inventory"}', schema_change),
        (None, avro_schema_change),
    ]


VALID = valid_records()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


FIELD_NAMES = ["id", "item", "qty", "op", "before", "after", "payload", "schema", "source", "data", "type"]
FIELD_NAMES += ["table", "database", "isDdl", "sql", "ddl", "mysqlType", "pkNames", "__op", "__deleted"]


@st.composite
def shaped_like_an_event(draw: st.DrawFn) -> bytes:
    """A JSON object with the field names the formats use, holding values of any type and shape."""
    base = draw(st.sampled_from([orjson.loads(v) for _, v in VALID if v.startswith(b"{")]))
    for _ in range(draw(st.integers(1, 4))):
        target = base
        if isinstance(base.get("payload"), dict) and draw(st.booleans()):
            target = base["payload"]
        target[draw(st.sampled_from(FIELD_NAMES))] = draw(
            json_values | st.sampled_from(["c", "u", "d", "r", "t", "x", "INSERT", "insert", "", "?"])
        )
    return json_bytes(base)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid record of some format, truncated, bit-flipped, or with bytes inserted."""
    _, value = draw(st.sampled_from(VALID))
    data = bytearray(value)
    kind = draw(st.sampled_from(["cut", "flip", "insert", "invalid-utf8"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "cut":
        return bytes(data[:at])
    if kind == "flip":
        data[at] ^= 1 << draw(st.integers(0, 7))
    elif kind == "insert":
        data[at:at] = draw(st.binary(min_size=1, max_size=8))
    else:
        data[at:at] = b"\xff\xfe\xc3"
    return bytes(data)


def deep(depth: int) -> bytes:
    return b'{"payload":' * depth + b"{}" + b"}" * depth


@st.composite
def deep_inside(draw: st.DrawFn) -> bytes:
    """A change event of some format whose column value nests lists or objects ``depth`` deep."""
    depth = draw(st.integers(1, 3000))
    nested = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    value = nested[0] * depth + b"1" + nested[1] * depth
    template = draw(
        st.sampled_from(
            [
                b'{"op": "c", "source": {"db": "d", "table": "t"}, "after": {"id": 1, "item": %s}}',
                b'{"type": "insert", "database": "d", "table": "t", "data": {"id": 1, "item": %s}}',
                b'{"type": "INSERT", "database": "d", "table": "t", "data": [{"id": 1, "item": %s}]}',
            ]
        )
    )
    return template % value


HUGE = [
    b'{"payload": {"op": "c", "after": {"id": 1, "item": "' + b"z" * 200_000 + b'"}}}',
    b'{"op": "c", "source": {"table": "t"}, "after": {"id": 1' + b"9" * 400 + b', "qty": 1e999}}',
    b'{"type": "insert", "database": "d", "table": "t", "data": {"id": -1' + b"0" * 5000 + b"}}",
    b'{"type": "INSERT", "database": "d", "table": "t", "pkNames": ["id"], "mysqlType": {"id": "int"},'
    b' "data": [{"id": "' + b"9" * 100 + b'"}]}',
    b'{"type": "INSERT", "database": "d", "table": "t", "data": [' + b'{"id": 1},' * 20_000 + b'{"id": 2}]}',
]


@st.composite
def invalid_utf8_inside(draw: st.DrawFn) -> bytes:
    """A valid record of a JSON format with bytes that are not UTF-8 inside one of its strings."""
    _, value = draw(st.sampled_from([r for r in VALID if r[1].startswith(b"{")]))
    quotes = [i for i, byte in enumerate(value) if byte == ord('"')]
    at = draw(st.sampled_from(quotes)) + 1
    return value[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"])) + value[at:]


values = st.one_of(
    st.binary(max_size=200),
    json_values.map(json_bytes),
    shaped_like_an_event(),
    mutated(),
    st.integers(1, 3000).map(deep),
    deep_inside(),
    invalid_utf8_inside(),
    st.sampled_from(HUGE),
)
keys = st.one_of(
    st.none(),
    st.binary(max_size=30),
    json_values.map(json_bytes),
    st.sampled_from([k for k, _ in VALID if k is not None]),
)


#: Formats of which a valid record may mean nothing to do (a schema change of no table: Debezium
#: writes one for ``CREATE DATABASE`` or ``SET`` statements).
MAY_BE_EMPTY = frozenset({"debezium-schema-change", "debezium-avro-schema-change"})


#: Maxwell's messages that carry no row and no table change (bootstrap markers, database DDL).
MAXWELL_NO_EVENT = frozenset(
    {"bootstrap-start", "bootstrap-complete", "database-create", "database-alter", "database-drop"}
)


def may_be_empty(format: str, record: Record) -> bool:
    """Whether a record may rightly give no event: a message of its format that changes no table
    (a Canal DDL message of a statement such as ``CREATE DATABASE`` or ``SET``, a Maxwell marker)."""
    if format in MAY_BE_EMPTY:
        return True
    try:
        message = orjson.loads(record.value() or b"")
    except orjson.JSONDecodeError:
        return False
    if type(message) is not dict:
        return False
    if format == "canal-json":
        return message.get("isDdl") is True
    kind = message.get("type")
    return format == "maxwell-json" and type(kind) is str and kind in MAXWELL_NO_EVENT


def check(format: str, records: list[Record]) -> list[Event]:
    events = DECODERS[format]().decode(records)
    for event in events:
        if isinstance(event, BadRecord):
            assert event.reason.strip(), event
    offsets = {e.position.offset for e in events if e.position is not None}
    for record in records:
        if not may_be_empty(format, record):
            assert record.offset() in offsets, f"record {record.offset()} produced no event: {events}"
    return events


@pytest.mark.parametrize("format", sorted(DECODERS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(st.tuples(keys, values), min_size=1, max_size=4))
def test_any_record_is_decoded_or_a_bad_record_with_a_reason(
    format: str, batch: list[tuple[bytes | None, bytes]]
) -> None:
    records = [Record(TOPIC, 0, i, key=k, value=v) for i, (k, v) in enumerate(batch)]
    check(format, records)


@pytest.mark.parametrize("format", sorted(DECODERS))
def test_the_valid_records_of_a_format_are_not_bad_records(format: str) -> None:
    """The seeds are valid: mutations start from records each decoder reads."""
    records = [Record(TOPIC, 0, i, key=k, value=v) for i, (k, v) in enumerate(VALID)]
    events = check(format, records)
    assert len([e for e in events if not isinstance(e, BadRecord)]) >= 1


# ------------------------------------------------------------------------------ mismatched keys

#: format → valid records of it whose key names the row's ``id`` (7), to be given another id.
KEYED: dict[str, list[tuple[bytes, bytes]]] = {
    "debezium-json": [(k, v) for k, v in VALID[:6] if k is not None],
    "debezium-avro": [(k, v) for k, v in VALID[6:8] if k is not None],
    "debezium-avro-confluent": [(k, v) for k, v in VALID[6:8] if k is not None],
    "maxwell-json": [r for r in VALID if r[0] is not None and r[0].startswith(b'{"database"')],
    "canal-json": [r for r in VALID if r[0] == b'{"id": 7}'],
}


def key_of_id(format: str, key: bytes, new_id: int) -> bytes:
    """``key`` naming ``new_id`` instead of 7."""
    if format.startswith("debezium-avro"):
        return AVRO_TABLE.encode_key({"id": new_id}) or b""
    document = orjson.loads(key)
    if format == "maxwell-json":
        return orjson.dumps({**document, "pk.id": new_id})
    if "payload" in document:
        return orjson.dumps({**document, "payload": {"id": new_id}})
    return orjson.dumps({**document, "id": new_id})


def test_every_format_with_keys_has_keyed_seeds() -> None:
    assert all(KEYED.values()), KEYED
    assert set(KEYED) == set(FORMATS) - {"debezium-schema-change", "debezium-avro-schema-change"}


@pytest.mark.parametrize("format", sorted(KEYED))
@settings(max_examples=60, deadline=None)
@given(data=st.data(), new_id=st.integers(-(2**31), 2**31 - 1).filter(lambda i: i != 7))
def test_a_valid_record_with_a_key_of_other_values_is_a_bad_record_with_both(
    format: str, data: st.DataObject, new_id: int
) -> None:
    key, value = data.draw(st.sampled_from(KEYED[format]))
    other = key_of_id(format, key, new_id)
    good, bad = (
        [e for e in check(format, [Record(TOPIC, 0, 0, key=k, value=value)]) if e.position is not None]
        for k in (key, other)
    )
    assert not any(isinstance(e, BadRecord) for e in good), good
    [refused] = [e for e in bad if isinstance(e, BadRecord)]
    assert refused.reason.startswith("the record key does not match its row: id is "), refused.reason
    assert (refused.key, refused.value) == (other, value)


@pytest.mark.parametrize("schema", [True, False], ids=["envelope", "payload-only"])
def test_a_key_that_does_not_match_its_row_is_a_bad_record_with_both(schema: bool) -> None:
    key, value = JSON_TABLE.insert(ROW)
    if not schema:
        key, value = b'{"id": 8}', orjson.dumps(orjson.loads(value)["payload"])
    else:
        key = key.replace(b'"payload":{"id":7}', b'"payload":{"id":8}')
    decoder = decoder_for("debezium-json", infer_types=True)
    good, bad = decoder.decode(
        [
            Record(TOPIC, 0, 0, key=JSON_TABLE.insert(ROW)[0], value=value),
            Record(TOPIC, 0, 1, key=key, value=value),
        ]
    )[-2:]
    assert not isinstance(good, BadRecord)
    assert isinstance(bad, BadRecord)
    assert "key does not match its row: id is 8 in the key and 7 in the row" in bad.reason
    assert (bad.key, bad.value) == (key, value)


def test_a_flattened_record_whose_key_does_not_match_is_a_bad_record() -> None:
    [bad] = decoder_for("debezium-json", infer_types=True).decode(
        [Record(TOPIC, 0, 0, key=b'{"id": 1}', value=b'{"id": 2, "item": "two", "__op": "c"}')]
    )
    assert isinstance(bad, BadRecord) and "id is 1 in the key and 2 in the row" in bad.reason
