"""Debezium's schema-change topic written by an Avro converter gives the events that
``debezium-schema-change`` gives for the JSON converter's records."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka.serialization import MessageField
from tests.support.debezium_avro import COLUMN, SCHEMA_CHANGE_VALUE, DebeziumAvroTable, SchemaRegistryClient
from tests.support.registry import SchemaRegistry

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.debezium_avro import DebeziumAvroSchemaChangeDecoder
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model import types as t
from ferry.model.events import BadRecord, DropTable, RenameColumn, SchemaHint, SchemaObserved

pytestmark = pytest.mark.integration


@pytest.fixture
def registry_client(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        yield client


@pytest.fixture
def decoder(schema_registry: SchemaRegistry) -> Iterator[DebeziumAvroSchemaChangeDecoder]:
    decoder = DebeziumAvroSchemaChangeDecoder(schema_registry.url)
    yield decoder
    decoder.close()


def as_avro(message: dict[str, Any], server: str) -> dict[str, Any]:
    """The JSON converter's schema-change value with every field of the Avro schema present (and
    the statement's place in the binlog as the JSON one has it)."""
    at = message.get("source") or {}
    source = {
        "version": "3.6.1.Final", "connector": "mysql", "name": server, "ts_ms": 1, "snapshot": "false",
        "db": message["databaseName"], "table": None, "server_id": 1,
        "file": at.get("file", "binlog.000001"), "pos": at.get("pos", 4), "row": at.get("row", 0),
    }  # fmt: skip
    changes = []
    for change in message["tableChanges"]:
        table = change.get("table")
        if table is not None:
            columns = [
                {f["name"]: column.get(f["name"]) for f in COLUMN["fields"]} for column in table["columns"]
            ]
            table = {"defaultCharsetName": None, "comment": None, **table, "columns": columns}
        changes.append({**change, "table": table})
    return {**message, "source": source, "ts_ms": 1, "tableChanges": changes}


def test_the_avro_schema_change_topic_gives_the_json_events(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroSchemaChangeDecoder
) -> None:
    server = f"s{uuid.uuid4().hex[:12]}"
    table = dbz.DebeziumTable(
        server,
        "inventory",
        "orders",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("qty", dbz.INT32)],
    )
    writer = DebeziumAvroTable(registry_client, server, "inventory", "orders", [])
    messages = []
    for ddl in (
        table.add_column("note", dbz.STRING),
        table.rename_column("note", "remark"),
        table.change_type("qty", dbz.INT64),
    ):
        _, value = table.schema_change(ddl)
        messages.append(orjson.loads(value))
    drop = {
        **messages[-1],
        "ddl": "DROP TABLE `orders`",
        "tableChanges": [{"type": "DROP", "id": '"inventory"."orders"'}],
    }
    messages.append(drop)
    json_records = [Record(server, 0, i, value=orjson.dumps(m)) for i, m in enumerate(messages)]
    avro_records = [
        Record(
            server, 0, i, value=writer.serialize(SCHEMA_CHANGE_VALUE, as_avro(m, server), MessageField.VALUE)
        )
        for i, m in enumerate(messages)
    ]

    from_json = decoder_for("debezium-schema-change").decode(json_records)
    from_avro = decoder.decode(avro_records)

    assert from_avro == from_json
    assert [type(e) for e in from_avro] == [
        SchemaObserved,
        SchemaHint,
        SchemaObserved,
        SchemaObserved,
        SchemaHint,
    ]
    renamed, dropped = from_avro[1], from_avro[4]
    assert isinstance(renamed, SchemaHint) and isinstance(renamed.changes[0], RenameColumn)
    assert isinstance(dropped, SchemaHint) and isinstance(dropped.changes[0], DropTable)
    retyped = from_avro[3]
    assert isinstance(retyped, SchemaObserved) and retyped.schema.column("qty").type == t.BIGINT()


def test_a_data_change_record_on_the_schema_change_topic_is_a_bad_record(
    registry_client: SchemaRegistryClient, decoder: DebeziumAvroSchemaChangeDecoder
) -> None:
    table = DebeziumAvroTable(registry_client, f"s{uuid.uuid4().hex[:12]}", "inventory", "orders", [], key=())
    value = table.value("c", None, None)
    (bad,) = decoder.decode(
        [
            Record(table.topic, 0, 0, value=value),
        ]
    )
    assert isinstance(bad, BadRecord) and "no 'tableChanges'" in bad.reason
