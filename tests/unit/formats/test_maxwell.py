from __future__ import annotations

from typing import Any

import orjson
import pytest
from format_fixtures import of_type, records, rows_by_op, summary

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnType,
    BadRecord,
    CreateTable,
    DataChange,
    DropColumn,
    DropTable,
    Op,
    SchemaHint,
    SchemaObserved,
    after,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DECIMAL, DOUBLE, INT, STRING, TIMESTAMP_LTZ, VARCHAR

# file → (records by outcome, counted as in the fixtures' README; number of SchemaObserved)
FIXTURES: dict[str, tuple[dict[str, int], int]] = {
    "apache-flink/maxwell-data.txt": ({"delete": 3, "insert": 11, "update": 6}, 1),
    "apache-seatunnel/maxwell-data-filter-table.txt": ({"delete": 3, "insert": 11, "update": 6}, 1),
    "apache-seatunnel/maxwell_data.txt": ({"delete": 1, "insert": 9, "update": 2}, 1),
    "apache-paimon/kafka/maxwell/database/schemaevolution/topic0/maxwell-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/database/schemaevolution/topic0/maxwell-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/database/schemaevolution/topic1/maxwell-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/database/schemaevolution/topic1/maxwell-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/table/schemaevolution/maxwell-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/table/schemaevolution/maxwell-data-2.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/maxwell/table/schemaevolution/maxwell-data-3.txt": (
        {"delete": 1, "insert": 2, "update": 1},
        1,
    ),
    # the first row's weight is null (STRING until a value shows the type), the second's a number
    "apache-paimon/kafka/maxwell/table/schemaevolution/maxwell-data-4.txt": ({"insert": 2}, 2),
    "zendesk-maxwell/docs-extracted/maxwell-insert-event.json": ({"insert": 1}, 1),
    "zendesk-maxwell/docs-extracted/maxwell-table-alter-ddl-event.json": ({"hint": 1}, 0),
    "zendesk-maxwell/docs-extracted/maxwell-table-create-ddl-event.json": ({"hint": 1}, 0),
    "zendesk-maxwell/user-insert.json": ({"insert": 1}, 1),
    "zendesk-maxwell/user-update.json": ({"update": 1}, 1),
}


@pytest.mark.parametrize("path", sorted(FIXTURES))
def test_fixture(path: str) -> None:
    expected, observed = FIXTURES[path]
    events = decoder_for("maxwell-json").decode(records(path))
    assert summary(events) == expected
    assert len(of_type(events, SchemaObserved)) == observed


def test_rows_and_inferred_schema() -> None:
    events = decoder_for("maxwell-json").decode(records("apache-flink/maxwell-data.txt"))
    assert rows_by_op(events) == {"delete": 3, "insert": 11, "update": 6}
    (observed,) = of_type(events, SchemaObserved)
    product = TableId(None, "test", "product")
    assert observed.table_id == product
    assert observed.schema == Schema(
        (
            Column("id", BIGINT().not_null()),
            Column("name", STRING()),
            Column("description", STRING()),
            Column("weight", DOUBLE()),
        ),
        ("id",),
    )
    changes = of_type(events, DataChange)
    assert changes[0].after == {
        "id": 101,
        "name": "scooter",
        "description": "Small 2-wheel scooter",
        "weight": 3.14,
    }
    assert changes[0].ts_ms == 1596684883000
    update = next(c for c in changes if c.op is Op.UPDATE)
    assert update.before == {
        "id": 106,
        "name": "hammer",
        "description": "16oz carpenter's hammer",
        "weight": 1.0,
    }
    assert update.after == {
        "id": 106,
        "name": "hammer",
        "description": "18oz carpenter hammer",
        "weight": 1.0,
    }


def test_old_may_name_columns_the_row_does_not_have() -> None:
    events = decoder_for("maxwell-json").decode(records("zendesk-maxwell/user-update.json"))
    (change,) = of_type(events, DataChange)
    assert change.before is not None and change.before["backup_date"] == "2017-02-08 02:00:05"
    assert (
        change.before["FirstName"] == "Foo"
        and change.after is not None
        and change.after["FirstName"] == "Fiz"
    )
    (observed,) = of_type(events, SchemaObserved)
    assert "backup_date" in observed.schema and observed.schema.primary_keys == ()


def test_table_create_ddl() -> None:
    events = decoder_for("maxwell-json").decode(
        records("zendesk-maxwell/docs-extracted/maxwell-table-create-ddl-event.json")
    )
    (hint,) = of_type(events, SchemaHint)
    table = TableId(None, "test", "e")
    assert hint.ordered is True
    assert hint.changes == (
        CreateTable(
            table,
            Schema(
                (
                    Column("id", INT().not_null()),
                    Column("m", DOUBLE()),
                    Column("c", TIMESTAMP_LTZ(6)),
                    Column("comment", VARCHAR(255)),
                ),
                ("id",),
            ),
        ),
    )


def test_table_alter_ddl() -> None:
    events = decoder_for("maxwell-json").decode(
        records("zendesk-maxwell/docs-extracted/maxwell-table-alter-ddl-event.json")
    )
    (hint,) = of_type(events, SchemaHint)
    table = TableId(None, "test", "e")
    assert hint.ddl == "alter table test.e add column torvalds bigint unsigned after m"
    assert hint.changes == (AddColumn(table, Column("torvalds", DECIMAL(20, 0)), after("m")),)


def ddl_message(kind: str, **fields: Any) -> bytes:
    definition = {
        "database": "test",
        "table": "e",
        "primary-key": ["id"],
        "columns": [
            {"type": "int", "name": "id", "signed": True},
            {"type": "decimal", "name": "p", "precision": 10, "scale": 2},
            {"type": "varchar", "name": "s"},
        ],
    }
    return orjson.dumps({"type": kind, "database": "test", "table": "e", "def": definition, **fields})


def test_ddl_from_the_table_definition_when_there_is_no_sql() -> None:
    table = TableId(None, "test", "e")
    old = {
        "database": "test",
        "table": "e",
        "primary-key": ["id"],
        "columns": [
            {"type": "int", "name": "id", "signed": True},
            {"type": "varchar", "name": "gone"},
            {"type": "varchar", "name": "s"},
            {"type": "int", "name": "p"},
        ],
    }
    events = decoder_for("maxwell-json").decode(
        [
            Record("maxwell", 0, 0, value=ddl_message("table-create")),
            Record("maxwell", 0, 1, value=ddl_message("table-alter", old=old)),
            Record("maxwell", 0, 2, value=ddl_message("table-drop", sql="")),
        ]
    )
    create, alter, drop = of_type(events, SchemaHint)
    assert create.changes == (
        CreateTable(
            table,
            Schema(
                (Column("id", INT().not_null()), Column("p", DECIMAL(10, 2)), Column("s", STRING())), ("id",)
            ),
        ),
    )
    assert alter.changes == (DropColumn(table, "gone"), AlterColumnType(table, "p", DECIMAL(10, 2), INT()))
    assert drop.changes == (DropTable(table),)
    moved = decoder_for("maxwell-json").decode(
        [
            Record(
                "maxwell",
                0,
                0,
                value=ddl_message(
                    "table-alter", old={"columns": [{"type": "varchar", "name": "s"}], "primary-key": []}
                ),
            )
        ]
    )
    assert of_type(moved, SchemaHint)[0].changes[:2] == (
        AddColumn(table, Column("id", INT().not_null()), FIRST),
        AddColumn(table, Column("p", DECIMAL(10, 2)), after("id")),
    )


def test_markers_without_rows_give_no_event() -> None:
    values = [
        {"type": "bootstrap-start", "database": "d", "table": "t", "data": {}},
        {"type": "database-create", "database": "d", "sql": "CREATE DATABASE d"},
    ]
    assert (
        decoder_for("maxwell-json").decode(
            [Record("m", 0, i, value=orjson.dumps(v)) for i, v in enumerate(values)]
        )
        == []
    )


def test_bootstrap_rows_are_snapshot_rows() -> None:
    value = {"type": "bootstrap-insert", "database": "d", "table": "t", "ts": 1, "data": {"id": 1}}
    (change,) = of_type(
        decoder_for("maxwell-json").decode([Record("m", 0, 0, value=orjson.dumps(value))]), DataChange
    )
    assert change.op is Op.READ and change.after == {"id": 1} and change.ts_ms == 1000


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"xyz", "malformed JSON: unexpected character, expected a JSON value at line 1 column 1"),
        (b"[]", "not a Maxwell message: expected a JSON object"),
        (b'{"type": "heartbeat2", "database": "d", "table": "t"}', "unknown type 'heartbeat2'"),
        (b'{"database": "d", "table": "t"}', "not a Maxwell message: no 'type'"),
        (b'{"type": "insert", "data": {"id": 1}}', "the message names no table (no 'database' and 'table')"),
        (b'{"type": "insert", "database": "d", "table": "t", "data": [1]}', "'data' must be a JSON object"),
        (
            b'{"type": "table-alter", "database": "d", "table": "t", "sql": "ALTER TABLE t ADD COLUMN"}',
            "cannot parse DDL 'ALTER TABLE t ADD COLUMN'",
        ),
    ],
)
def test_bad_messages(value: bytes, reason: str) -> None:
    (bad,) = decoder_for("maxwell-json").decode([Record("m", 0, 3, value=value)])
    assert isinstance(bad, BadRecord)
    assert bad.reason.startswith(reason)
