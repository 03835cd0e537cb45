"""Debezium change events as Debezium's connectors write them through Kafka Connect's Avro
converter, serialised by confluent-kafka's ``AvroSerializer`` against a real schema registry.

The schemas follow Connect's ``AvroData`` conventions: the envelope ``<server>.<db>.<table>.Envelope``
with ``before``/``after`` as an optional ``Value`` record (defined by ``before``, named by
``after``), ``source``, ``op``, ``ts_ms``; optional columns are unions with ``null``; logical
types carry ``connect.name`` (and ``connect.parameters``). The key is the ``Key`` record of the
primary key columns. Every schema is registered under the topic's ``-value``/``-key`` subject.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.serialization import MessageField, SerializationContext

from ferry.connectors.formats.schema_registry import registry_client_class

SchemaRegistryClient = registry_client_class()
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402 - after the client

INT: dict[str, Any] = {"type": "int"}
LONG: dict[str, Any] = {"type": "long"}
STRING: dict[str, Any] = {"type": "string"}
DOUBLE: dict[str, Any] = {"type": "double"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
DATE: dict[str, Any] = {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}
MICRO_TIMESTAMP: dict[str, Any] = {
    "type": "long",
    "connect.version": 1,
    "connect.name": "io.debezium.time.MicroTimestamp",
}


def DECIMAL(precision: int, scale: int) -> dict[str, Any]:  # noqa: N802 - SQL spelling
    """A Connect decimal as ``AvroData`` writes it (Avro ``decimal`` plus the Connect parameters)."""
    return {
        "type": "bytes",
        "scale": scale,
        "precision": precision,
        "connect.version": 1,
        "connect.parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal",
    }


def optional(avro: Any) -> list[Any]:
    return ["null", avro]


SOURCE: dict[str, Any] = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.mysql",
    "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {
            "name": "snapshot",
            "type": [
                {
                    "type": "string",
                    "connect.version": 1,
                    "connect.parameters": {"allowed": "true,first,first_in_data_collection,last,false"},
                    "connect.default": "false",
                    "connect.name": "io.debezium.data.Enum",
                },
                "null",
            ],
            "default": "false",
        },
        {"name": "db", "type": "string"},
        {"name": "table", "type": ["null", "string"], "default": None},
        {"name": "server_id", "type": "long"},
        {"name": "file", "type": "string"},
        {"name": "pos", "type": "long"},
    ],
    "connect.name": "io.debezium.connector.mysql.Source",
}


def _optional_field(avro: Any) -> dict[str, Any]:
    return {"type": ["null", avro], "default": None}


#: ``io.debezium.connector.mysql.SchemaChangeValue`` as Connect's AvroData writes it.
COLUMN = {
    "type": "record",
    "name": "Column",
    "namespace": "io.debezium.connector.schema",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "jdbcType", "type": "int"},
        {"name": "nativeType", **_optional_field("int")},
        {"name": "typeName", "type": "string"},
        {"name": "typeExpression", **_optional_field("string")},
        {"name": "charsetName", **_optional_field("string")},
        {"name": "length", **_optional_field("int")},
        {"name": "scale", **_optional_field("int")},
        {"name": "position", "type": "int"},
        {"name": "optional", **_optional_field("boolean")},
        {"name": "autoIncremented", **_optional_field("boolean")},
        {"name": "generated", **_optional_field("boolean")},
        {"name": "comment", **_optional_field("string")},
        {"name": "defaultValueExpression", **_optional_field("string")},
        {"name": "enumValues", **_optional_field({"type": "array", "items": "string"})},
    ],
    "connect.name": "io.debezium.connector.schema.Column",
}
SCHEMA_CHANGE_VALUE = {
    "type": "record",
    "name": "SchemaChangeValue",
    "namespace": "io.debezium.connector.mysql",
    "fields": [
        {"name": "source", "type": copy.deepcopy(SOURCE)},
        {"name": "ts_ms", "type": "long"},
        {"name": "databaseName", **_optional_field("string")},
        {"name": "schemaName", **_optional_field("string")},
        {"name": "ddl", **_optional_field("string")},
        {
            "name": "tableChanges",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Change",
                    "namespace": "io.debezium.connector.schema",
                    "fields": [
                        {"name": "type", "type": "string"},
                        {"name": "id", "type": "string"},
                        {
                            "name": "table",
                            **_optional_field(
                                {
                                    "type": "record",
                                    "name": "Table",
                                    "fields": [
                                        {"name": "defaultCharsetName", **_optional_field("string")},
                                        {
                                            "name": "primaryKeyColumnNames",
                                            **_optional_field({"type": "array", "items": "string"}),
                                        },
                                        {"name": "columns", "type": {"type": "array", "items": COLUMN}},
                                        {"name": "comment", **_optional_field("string")},
                                    ],
                                    "connect.name": "io.debezium.connector.schema.Table",
                                }
                            ),
                        },
                    ],
                    "connect.name": "io.debezium.connector.schema.Change",
                },
            },
        },
    ],
    "connect.name": "io.debezium.connector.mysql.SchemaChangeValue",
}


@dataclass
class AvroColumn:
    """A column: its Avro type (not optional), whether it is optional, its Connect default."""

    name: str
    avro: Any
    optional: bool = True
    default: Any = None
    doc: str | None = None

    def field(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name}
        if self.doc is not None:
            entry["doc"] = self.doc
        if not self.optional:
            entry["type"] = self.avro
            if self.default is not None:
                entry["default"] = self.default
        elif self.default is not None:  # AvroData puts the type first when the default is not null
            entry.update(type=[self.avro, "null"], default=self.default)
        else:
            entry.update(type=["null", self.avro], default=None)
        return entry


@dataclass
class DebeziumAvroTable:
    """One MySQL table's change events in Avro; :meth:`add_column` and :meth:`change_type` change
    the writer schema of later records (a new schema id)."""

    registry: SchemaRegistryClient
    server: str
    database: str
    table: str
    columns: list[AvroColumn]
    key: tuple[str, ...] = ("id",)
    ts_ms: int = 1_700_000_000_000
    _serializers: dict[str, AvroSerializer] = field(default_factory=dict, init=False, repr=False)

    @property
    def topic(self) -> str:
        return f"{self.server}.{self.database}.{self.table}"

    def add_column(self, column: AvroColumn) -> None:
        self.columns.append(column)

    def change_type(self, name: str, avro: Any) -> None:
        for column in self.columns:
            if column.name == name:
                column.avro = avro

    def value_schema(self) -> dict[str, Any]:
        namespace = self.topic
        value = {
            "type": "record",
            "name": "Value",
            "fields": [c.field() for c in self.columns],
            "connect.name": f"{namespace}.Value",
        }
        return {
            "type": "record",
            "name": "Envelope",
            "namespace": namespace,
            "fields": [
                {"name": "before", "type": ["null", value], "default": None},
                {"name": "after", "type": ["null", "Value"], "default": None},
                {"name": "source", "type": copy.deepcopy(SOURCE)},
                {"name": "op", "type": "string"},
                {"name": "ts_ms", "type": ["null", "long"], "default": None},
            ],
            "connect.version": 1,
            "connect.name": f"{namespace}.Envelope",
        }

    def key_schema(self) -> dict[str, Any]:
        fields = [{"name": c.name, "type": c.avro} for c in self.columns if c.name in self.key]
        return {
            "type": "record",
            "name": "Key",
            "namespace": self.topic,
            "fields": fields,
            "connect.name": f"{self.topic}.Key",
        }

    def serialize(self, schema: dict[str, Any], value: Any, field: MessageField) -> bytes:
        text = json.dumps(schema)
        serializer = self._serializers.get(text)
        if serializer is None:
            serializer = self._serializers[text] = AvroSerializer(self.registry, text)
        result: bytes = serializer(value, SerializationContext(self.topic, field))
        return result

    def encode_key(self, row: dict[str, Any]) -> bytes | None:
        if not self.key:
            return None
        return self.serialize(self.key_schema(), {k: row[k] for k in self.key}, MessageField.KEY)

    def record(
        self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> tuple[bytes | None, bytes]:
        """One change as a Kafka (key, value) pair."""
        row = after if after is not None else before
        assert row is not None
        return self.encode_key(row), self.value(op, before, after)

    def value(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
        """The value of one change (a delete may have neither row: PostgreSQL without REPLICA
        IDENTITY FULL)."""
        self.ts_ms += 1
        source = {
            "version": "3.6.1.Final",
            "connector": "mysql",
            "name": self.server,
            "ts_ms": self.ts_ms,
            "snapshot": "false",
            "db": self.database,
            "table": self.table,
            "server_id": 1,
            "file": "binlog.000001",
            "pos": self.ts_ms % 100_000,
        }
        envelope = {"before": before, "after": after, "source": source, "op": op, "ts_ms": self.ts_ms}
        return self.serialize(self.value_schema(), envelope, MessageField.VALUE)

    def insert(self, row: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("c", None, row)

    def update(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("u", before, after)

    def delete(self, row: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("d", row, None)
