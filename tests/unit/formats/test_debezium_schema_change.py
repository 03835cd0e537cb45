from __future__ import annotations

from typing import Any

import orjson
import pytest
from format_fixtures import of_type, records

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import (
    BadRecord,
    DropColumn,
    DropTable,
    RenameColumn,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BOOLEAN, DECIMAL, INT, STRING, TIMESTAMP, TIMESTAMP_LTZ, VARCHAR


def test_the_documented_alter_message() -> None:
    (observed,) = decoder_for("debezium-schema-change").decode(
        records("debezium/docs-extracted/mysql-schema-change-topic-message.json", topic="dbserver1")
    )
    assert isinstance(observed, SchemaObserved)
    assert observed.table_id == TableId(None, "inventory", "customers")
    assert observed.ddl == "ALTER TABLE customers ADD middle_name varchar(255) AFTER first_name"
    assert observed.position == SourcePosition("dbserver1", 0, 0)
    assert observed.schema == Schema(
        (
            Column("id", INT().not_null()),
            Column("first_name", VARCHAR(255).not_null()),
            Column("middle_name", VARCHAR(255)),
            Column("last_name", VARCHAR(255).not_null()),
            Column("email", VARCHAR(255).not_null()),
        ),
        ("id",),
    )


def test_the_documented_drop_message() -> None:
    (hint,) = decoder_for("debezium-schema-change").decode(
        records("debezium/docs-extracted/schema-change-event-filter-before.json")
    )
    table = TableId(None, "test", "table")
    assert hint == SchemaHint(table, (DropTable(table),), "", False, SourcePosition("topic", 0, 0))


def column(
    name: str,
    position: int,
    type_name: str,
    jdbc: int,
    length: int | None = None,
    *,
    scale: int | None = None,
    optional: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "jdbcType": jdbc,
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


def mysql_message(
    ddl: str,
    columns: list[dict[str, Any]],
    *,
    kind: str = "ALTER",
    table: str = "customers",
    comment: str | None = None,
) -> dict[str, Any]:
    return {
        "source": {
            "version": "2.7.0.Final",
            "connector": "mysql",
            "name": "dbserver1",
            "ts_ms": 1700000000000,
            "snapshot": "false",
            "db": "inventory",
            "table": table,
            "server_id": 223344,
            "file": "mysql-bin.000003",
            "pos": 1570,
            "row": 0,
        },
        "ts_ms": 1700000000100,
        "databaseName": "inventory",
        "schemaName": None,
        "ddl": ddl,
        "tableChanges": [
            {
                "type": kind,
                "id": f'"inventory"."{table}"',
                "table": {
                    "defaultCharsetName": "utf8mb4",
                    "primaryKeyColumnNames": ["id"],
                    "columns": columns,
                    "attributes": [],
                    "comment": comment,
                },
            }
        ],
    }


CUSTOMERS = [
    column("id", 1, "INT", 4, 11, optional=False, autoIncremented=True),
    column("first_name", 2, "VARCHAR", 12, 255, optional=False),
    column("email_address", 3, "VARCHAR", 12, 255, comment="where to write"),
    column("balance", 4, "DECIMAL", 3, 10, scale=2),
    column("visits", 5, "BIGINT UNSIGNED", -5, 20),
    column("active", 6, "TINYINT", -6, 1),
    column("updated", 7, "TIMESTAMP", 93, 3, defaultValueExpression="CURRENT_TIMESTAMP(3)"),
    column("created", 8, "DATETIME", 93, 6),
    column("colour", 9, "ENUM", 1, 1, enumValues=["'red'", "'green'"]),
]


def decode(*messages: Any, envelope: bool = False) -> list[Any]:
    values = [
        orjson.dumps(
            {
                "schema": {
                    "type": "struct",
                    "name": "io.debezium.connector.mysql.SchemaChangeValue",
                    "fields": [],
                },
                "payload": m,
            }
            if envelope
            else m
        )
        for m in messages
    ]
    return decoder_for("debezium-schema-change").decode(
        [
            Record("dbserver1", 0, i, key=b'{"databaseName":"inventory"}', value=v)
            for i, v in enumerate(values)
        ]
    )


def expected_customers(email: str = "email_address") -> Schema:
    return Schema(
        (
            Column("id", INT().not_null()),
            Column("first_name", VARCHAR(255).not_null()),
            Column(email, VARCHAR(255), "where to write"),
            Column("balance", DECIMAL(10, 2)),
            Column("visits", DECIMAL(20, 0)),
            Column("active", BOOLEAN()),
            Column("updated", TIMESTAMP_LTZ(3)),  # CURRENT_TIMESTAMP(3): no constant
            Column("created", TIMESTAMP(6)),
            Column("colour", STRING()),
        ),
        ("id",),
        comment="our customers",
    )


@pytest.mark.parametrize("envelope", [False, True])
def test_a_rename_comes_as_a_hint_before_the_whole_table(envelope: bool) -> None:
    ddl = "ALTER TABLE customers RENAME COLUMN email TO email_address"
    events = decode(mysql_message(ddl, CUSTOMERS, comment="our customers"), envelope=envelope)
    table = TableId(None, "inventory", "customers")
    hint, observed = events
    at = SourcePosition("dbserver1", 0, 0)
    binlog = ("mysql-bin.000003", 1570, 0)  # where the statement stands in the binlog
    assert hint == SchemaHint(table, (RenameColumn(table, "email", "email_address"),), ddl, False, at, binlog)
    assert observed == SchemaObserved(table, expected_customers(), at, ddl=ddl, source_order=binlog)


def test_a_column_dropped_and_added_again_comes_as_a_drop_hint_with_its_place_in_the_binlog() -> None:
    # a record of the whole table cannot tell that a is another column than before: the DDL says
    ddl = "ALTER TABLE customers DROP COLUMN email, ADD COLUMN email VARCHAR(255)"
    hint, observed = decode(mysql_message(ddl, CUSTOMERS))
    table = TableId(None, "inventory", "customers")
    assert hint.changes == (DropColumn(table, "email"),)
    assert hint.source_order == observed.source_order == ("mysql-bin.000003", 1570, 0)


def test_change_column_renames_too() -> None:
    ddl = "ALTER TABLE `inventory`.`customers` CHANGE COLUMN `email` `email_address` VARCHAR(255) NULL"
    hint, observed = decode(mysql_message(ddl, CUSTOMERS, comment="our customers"))
    table = TableId(None, "inventory", "customers")
    assert hint.changes == (RenameColumn(table, "email", "email_address"),)
    assert observed.schema == expected_customers()


def test_create_without_renames_is_one_schema() -> None:
    ddl = "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2))"
    columns = [column("id", 1, "INT", 4, optional=False), column("total", 2, "DECIMAL", 3, 10, scale=2)]
    (observed,) = decode(mysql_message(ddl, columns, kind="CREATE", table="orders"))
    assert observed.table_id == TableId(None, "inventory", "orders")
    assert observed.schema == Schema(
        (Column("id", INT().not_null()), Column("total", DECIMAL(10, 2))), ("id",)
    )


def test_other_connectors_use_jdbc_types() -> None:
    message = {
        "source": {"connector": "sqlserver", "db": "testDB", "schema": "dbo", "table": "customers"},
        "databaseName": "testDB",
        "schemaName": "dbo",
        "ddl": None,
        "tableChanges": [
            {
                "type": "CREATE",
                "id": '"testDB"."dbo"."customers"',
                "table": {
                    "primaryKeyColumnNames": ["id"],
                    "columns": [
                        column("id", 1, "int identity", 4, 10, scale=0, optional=False),
                        column("name", 2, "nvarchar", -9, 255),
                        column("big", 3, "bigint", -5, 19, scale=0),
                        column("at", 4, "datetime2", 93, 27, scale=7),
                    ],
                },
            }
        ],
    }
    (observed,) = decode(message)
    assert observed.table_id == TableId(None, "dbo", "customers")
    assert observed.ddl is None
    assert observed.schema == Schema(
        (
            Column("id", INT().not_null()),
            Column("name", VARCHAR(255)),
            Column("big", BIGINT()),
            Column("at", TIMESTAMP(7)),
        ),
        ("id",),
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{oops", "malformed JSON: "),
        (
            {"op": "c", "after": {}},
            "not a Debezium schema-change event: no 'tableChanges' (a data change event: use "
            "the debezium-json format)",
        ),
        (
            {"ddl": "x", "tableChanges": [{"type": "ALTER", "id": '"inventory"."t"'}]},
            "DDL for unknown table inventory.t: the ALTER change has no table definition",
        ),
        (
            {"ddl": "x", "tableChanges": [{"type": "RENAME", "id": '"inventory"."t"'}]},
            "unknown table change type 'RENAME' for table inventory.t",
        ),
        (
            {
                "tableChanges": [
                    {
                        "type": "CREATE",
                        "id": "db.t",
                        "table": {"columns": [{"name": "a", "typeName": "FROB", "position": 1}]},
                    }
                ]
            },
            "column 'a' of table db.t: unknown MySQL type FROB",
        ),
    ],
)
def test_bad_messages(value: Any, reason: str) -> None:
    (bad,) = decoder_for("debezium-schema-change").decode(
        [Record("dbserver1", 0, 4, value=value if isinstance(value, bytes) else orjson.dumps(value))]
    )
    assert isinstance(bad, BadRecord)
    assert bad.reason.startswith(reason)


def test_ddl_for_no_captured_table_gives_no_event_and_tombstones_are_bad() -> None:
    events = decoder_for("debezium-schema-change").decode(
        [
            Record(
                "dbserver1",
                0,
                0,
                value=orjson.dumps(
                    {"databaseName": "inventory", "ddl": "CREATE DATABASE x", "tableChanges": []}
                ),
            ),
            Record("dbserver1", 0, 1, value=None),
        ]
    )
    assert [type(e) for e in events] == [BadRecord]
    assert of_type(events, BadRecord)[0].reason == "tombstone (null value)"
