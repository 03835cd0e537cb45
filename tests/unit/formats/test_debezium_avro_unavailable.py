"""``debezium-avro``: an update whose TOASTed values Debezium's PostgreSQL connector did not get
carries its placeholder (the text, the bytes; with the Avro converter) and is read with those
columns unavailable, against a real schema registry (Apicurio Registry)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from tests.support.debezium_avro import AvroColumn, DebeziumAvroTable, SchemaRegistryClient
from tests.support.registry import SchemaRegistry

from ferry.connectors.formats.debezium_avro import DebeziumAvroDecoder
from ferry.connectors.record import Record
from ferry.model.events import DataChange, Op
from ferry.model.unavailable import UNAVAILABLE, PartialRow

pytestmark = pytest.mark.integration

PLACEHOLDER = "__debezium_unavailable_value"


@pytest.fixture
def registry_client(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        yield client


@pytest.mark.parametrize("setting", [None, "hex:00ff"])
def test_an_avro_update_reads_the_placeholder_as_unavailable(
    schema_registry: SchemaRegistry, registry_client: SchemaRegistryClient, setting: str | None
) -> None:
    placeholder = PLACEHOLDER.encode() if setting is None else b"\x00\xff"
    text = placeholder.decode("utf-8", errors="replace")
    table = DebeziumAvroTable(
        registry_client,
        f"s{uuid.uuid4().hex[:12]}",
        "public",
        "docs",
        [
            AvroColumn("id", "int", optional=False),
            AvroColumn("n", "int"),
            AvroColumn("body", "string"),
            AvroColumn("blob", "bytes"),
        ],
    )
    row = {"id": 1, "n": 0, "body": "b" * 3000, "blob": b"\x01" * 3000}
    pairs = [
        table.insert({**row, "body": text}),  # an insert is never partial
        table.update(row, {"id": 1, "n": 1, "body": text, "blob": placeholder}),
        table.update(row, {"id": 1, "n": 2, "body": "new", "blob": placeholder}),
    ]
    options = {} if setting is None else {"unavailable_value_placeholder": setting}
    decoder = DebeziumAvroDecoder(schema_registry.url, **options)
    try:
        events = decoder.decode([Record(table.topic, 0, i, key=k, value=v) for i, (k, v) in enumerate(pairs)])
    finally:
        decoder.close()
    inserted, untouched, body_set = [e for e in events if isinstance(e, DataChange)]
    assert inserted.op is Op.INSERT and inserted.after is not None and inserted.after["body"] == text
    assert type(untouched.after) is PartialRow
    assert untouched.after == {"id": 1, "n": 1, "body": UNAVAILABLE, "blob": UNAVAILABLE}
    assert body_set.after == {"id": 1, "n": 2, "body": "new", "blob": UNAVAILABLE}
