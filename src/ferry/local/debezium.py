"""Debezium change events as Debezium's MySQL connector writes them, for the demo, tests and benchmark.

:class:`DebeziumTable` keeps a table's columns (as Kafka Connect schema fields) and renders
inserts, updates and deletes as Kafka records (key, value) with the JSON converter's envelope
(``schemas.enable=true``), or payload only. Schema changes (add, drop, rename, retype) change the
envelope of later records, and :meth:`DebeziumTable.schema_change` renders the matching record of
Debezium's schema-change topic (``ddl`` + ``tableChanges``).
"""

from __future__ import annotations

import base64
import decimal
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

INT32: dict[str, Any] = {"type": "int32"}
INT64: dict[str, Any] = {"type": "int64"}
FLOAT64: dict[str, Any] = {"type": "double"}
STRING: dict[str, Any] = {"type": "string"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
DATE: dict[str, Any] = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
TIMESTAMP_MICROS: dict[str, Any] = {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}


def DECIMAL(precision: int, scale: int) -> dict[str, Any]:  # noqa: N802 - SQL spelling
    return {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
    }


def VARCHAR(length: int) -> dict[str, Any]:  # noqa: N802 - SQL spelling
    """A string column with its source type, as ``column.propagate.source.type`` sends it."""
    return {
        "type": "string",
        "parameters": {
            "__debezium.source.column.type": "VARCHAR",
            "__debezium.source.column.length": str(length),
        },
    }


_MYSQL_TYPES = {
    "int32": ("INT", 4),
    "int64": ("BIGINT", -5),
    "double": ("DOUBLE", 8),
    "string": ("VARCHAR", 12),
    "boolean": ("BOOLEAN", 16),
}


def _sql_literal(value: Any) -> str:
    """A value as a literal of MySQL's DDL."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def encode_decimal(value: decimal.Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale).to_integral_value())
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


@dataclass
class ConnectColumn:
    name: str
    spec: dict[str, Any]
    optional: bool = True

    def field(self) -> dict[str, Any]:
        return {**self.spec, "optional": self.optional, "field": self.name}


@dataclass
class DebeziumTable:
    server: str
    database: str
    table: str
    columns: list[ConnectColumn]
    key: tuple[str, ...] = ("id",)
    with_schema: bool = True
    ts_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    _envelope: bytes | None = field(default=None, init=False, repr=False)

    @property
    def topic(self) -> str:
        return f"{self.server}.{self.database}.{self.table}"

    # ------------------------------------------------------------------------------ schema changes

    def add_column(self, name: str, spec: dict[str, Any], *, after: str | None = None) -> str:
        column = ConnectColumn(name, spec)
        if after is None:
            self.columns.append(column)
            where = ""
        else:
            index = [c.name for c in self.columns].index(after) + 1
            self.columns.insert(index, column)
            where = f" AFTER `{after}`"
        self._envelope = None
        default = "" if spec.get("default") is None else f" DEFAULT {_sql_literal(spec['default'])}"
        return f"ALTER TABLE `{self.table}` ADD COLUMN `{name}` {self._sql_type(spec)}{default}{where}"

    def drop_column(self, name: str) -> str:
        self.columns = [c for c in self.columns if c.name != name]
        self._envelope = None
        return f"ALTER TABLE `{self.table}` DROP COLUMN `{name}`"

    def rename_column(self, old: str, new: str) -> str:
        for c in self.columns:
            if c.name == old:
                c.name = new
        self._envelope = None
        return f"ALTER TABLE `{self.table}` RENAME COLUMN `{old}` TO `{new}`"

    def change_type(self, name: str, spec: dict[str, Any]) -> str:
        for c in self.columns:
            if c.name == name:
                c.spec = spec
        self._envelope = None
        return f"ALTER TABLE `{self.table}` MODIFY COLUMN `{name}` {self._sql_type(spec)}"

    @staticmethod
    def _sql_type(spec: dict[str, Any]) -> str:
        if spec.get("name") == "org.apache.kafka.connect.data.Decimal":
            p = spec["parameters"]
            return f"DECIMAL({p['connect.decimal.precision']},{p['scale']})"
        if spec.get("name") == "io.debezium.time.Date":
            return "DATE"
        if spec.get("name") == "io.debezium.time.MicroTimestamp":
            return "DATETIME(6)"
        name, _ = _MYSQL_TYPES[spec["type"]]
        if name == "VARCHAR":
            length = spec.get("parameters", {}).get("__debezium.source.column.length", "255")
            return f"VARCHAR({length})"
        return name

    # ------------------------------------------------------------------------------ records

    def _encode_row(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        if row is None:
            return None
        out: dict[str, Any] = {}
        for c in self.columns:
            value = row.get(c.name)
            if isinstance(value, decimal.Decimal):
                value = encode_decimal(value, int(c.spec["parameters"]["scale"]))
            out[c.name] = value
        return out

    def _envelope_schema(self) -> bytes:
        if self._envelope is None:
            value = {
                "type": "struct",
                "fields": [c.field() for c in self.columns],
                "optional": True,
                "name": f"{self.topic}.Value",
            }
            schema = {
                "type": "struct",
                "fields": [
                    {**value, "field": "before"},
                    {**value, "field": "after"},
                    {
                        "type": "struct",
                        "optional": False,
                        "name": "io.debezium.connector.mysql.Source",
                        "field": "source",
                        "fields": [
                            {"type": "string", "optional": False, "field": "connector"},
                            {"type": "string", "optional": False, "field": "name"},
                            {"type": "int64", "optional": False, "field": "ts_ms"},
                            {"type": "string", "optional": True, "field": "db"},
                            {"type": "string", "optional": True, "field": "table"},
                        ],
                    },
                    {"type": "string", "optional": False, "field": "op"},
                    {"type": "int64", "optional": True, "field": "ts_ms"},
                ],
                "optional": False,
                "name": f"{self.topic}.Envelope",
            }
            self._envelope = orjson.dumps(schema)
        return self._envelope

    def _key(self, row: dict[str, Any]) -> bytes | None:
        if not self.key:
            return None  # a table without a primary key: Debezium writes records without a key
        payload = {k: row[k] for k in self.key}
        if not self.with_schema:
            return orjson.dumps(payload)
        fields = [c.field() | {"optional": False} for c in self.columns if c.name in self.key]
        schema = {"type": "struct", "fields": fields, "optional": False, "name": f"{self.topic}.Key"}
        return orjson.dumps({"schema": schema, "payload": payload})

    def record(
        self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> tuple[bytes | None, bytes]:
        """One change as a Kafka (key, value) pair."""
        self.ts_ms += 1
        payload = {
            "before": self._encode_row(before),
            "after": self._encode_row(after),
            "source": {
                "connector": "mysql",
                "name": self.server,
                "ts_ms": self.ts_ms,
                "db": self.database,
                "table": self.table,
                # where the change stands in the binlog: one step per change of this table
                "file": "mysql-bin.000001",
                "pos": self.ts_ms,
                "row": 0,
            },
            "op": op,
            "ts_ms": self.ts_ms,
        }
        row = after if after is not None else before
        key = None if row is None else self._key(row)
        if not self.with_schema:
            return key, orjson.dumps(payload)
        return key, b'{"schema":' + self._envelope_schema() + b',"payload":' + orjson.dumps(payload) + b"}"

    def insert(self, row: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("c", None, row)

    def update(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("u", before, after)

    def delete(self, row: dict[str, Any]) -> tuple[bytes | None, bytes]:
        return self.record("d", row, None)

    def truncate(self) -> tuple[bytes | None, bytes]:
        """A ``TRUNCATE TABLE`` (Debezium's op ``t``, without a key)."""
        return self.record("t", None, None)

    def schema_change(self, ddl: str) -> tuple[bytes, bytes]:
        """The record of Debezium's schema-change topic for ``ddl`` (whole table after the change)."""
        columns = []
        for position, c in enumerate(self.columns, start=1):
            sql = self._sql_type(c.spec)
            name = sql.split("(")[0]
            length = int(sql.split("(")[1].split(",")[0].rstrip(")")) if "(" in sql else None
            scale = int(c.spec["parameters"]["scale"]) if "scale" in c.spec.get("parameters", {}) else None
            default = c.spec.get("default")
            columns.append(
                {
                    "name": c.name,
                    "jdbcType": _MYSQL_TYPES.get(c.spec["type"], ("", 12))[1],
                    "typeName": name,
                    "typeExpression": name,
                    "charsetName": None,
                    "length": length,
                    "scale": scale,
                    "position": position,
                    "optional": c.name not in self.key,
                    "autoIncremented": False,
                    "generated": False,
                    # as the MySQL connector writes a literal default: a text's without its quotes
                    **({} if default is None else {"defaultValueExpression": str(default)}),
                }
            )
        self.ts_ms += 1
        value = {
            "source": {
                "connector": "mysql",
                "name": self.server,
                "ts_ms": self.ts_ms,
                "db": self.database,
                "table": self.table,
                # the statement's place in the binlog, among the changes of this table
                "file": "mysql-bin.000001",
                "pos": self.ts_ms,
                "row": 0,
            },
            "databaseName": self.database,
            "schemaName": None,
            "ddl": ddl,
            "tableChanges": [
                {
                    "type": "ALTER",
                    "id": f'"{self.database}"."{self.table}"',
                    "table": {
                        "defaultCharsetName": "utf8mb4",
                        "primaryKeyColumnNames": list(self.key),
                        "columns": columns,
                    },
                }
            ],
        }
        return orjson.dumps({"databaseName": self.database}), orjson.dumps(value)
