from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from format_fixtures import of_type, records, rows_by_op, summary

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import (
    LAST,
    AddColumn,
    BadRecord,
    CreateTable,
    DataChange,
    DropTable,
    Op,
    SchemaHint,
    SchemaObserved,
    TruncateTable,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DOUBLE, FLOAT, INT, VARCHAR

# file → (records by outcome, counted as in the fixtures' README; number of SchemaObserved)
FIXTURES: dict[str, tuple[dict[str, int], int]] = {
    "apache-flink/canal-data.txt": ({"delete": 2, "hint": 1, "insert": 3, "update": 5}, 1),
    # One INSERT of table `project` says id is int(11) but holds 'A101' ...: a bad record.
    "apache-flink/canal-data-filter-table.txt": (
        {"bad": 1, "delete": 3, "hint": 2, "insert": 4, "update": 6},
        2,
    ),
    "apache-seatunnel/canal-data-filter-table.txt": (
        {"bad": 1, "delete": 3, "hint": 2, "insert": 4, "update": 6},
        2,
    ),
    # INIT rows are snapshot rows; two messages have a column ('other') without a mysqlType.
    "apache-flink/canal-data-with-init.txt": (
        {"bad": 2, "delete": 2, "hint": 1, "insert": 2, "read": 1, "update": 4},
        1,
    ),
    # CREATE DATABASE (type QUERY) and ALTER TABLE ... AUTO_INCREMENT change no table's columns.
    "apache-seatunnel/canal_data.txt": ({"delete": 1, "hint": 1, "insert": 1, "update": 2}, 1),
    "apache-flink-cdc/canal-json.txt": ({"delete": 1, "insert": 15, "update": 4}, 3),
    "apache-paimon/kafka/canal/database/schemaevolution/topic0/canal-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/canal/database/schemaevolution/topic0/canal-data-2.txt": (
        {"hint": 1, "insert": 2},
        1,
    ),
    "apache-paimon/kafka/canal/database/schemaevolution/topic0/canal-data-3.txt": (
        {"hint": 1, "insert": 1},
        1,
    ),
    "apache-paimon/kafka/canal/database/schemaevolution/topic1/canal-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/canal/database/schemaevolution/topic1/canal-data-2.txt": (
        {"hint": 1, "insert": 2},
        1,
    ),
    "apache-paimon/kafka/canal/database/schemaevolution/topic1/canal-data-3.txt": (
        {"hint": 1, "insert": 1},
        1,
    ),
    "apache-paimon/kafka/canal/database/schemaevolution/topic2/canal-data-1.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/canal/table/alltype/canal-data.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/canal/table/event/event-delete.txt": ({"delete": 1}, 1),
    "apache-paimon/kafka/canal/table/event/event-insert.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/canal/table/event/event-row.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/canal/table/event/event-update.txt": ({"update": 1}, 1),
    # Messages with only 'data' and 'type' name no table.
    "apache-paimon/kafka/canal/table/incomplete/canal-data-1.txt": ({"bad": 2}, 0),
    "apache-paimon/kafka/canal/table/incomplete/canal-data-2.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/canal/table/nononddldata/canal-data-1.txt": ({"hint": 2}, 0),
    "apache-paimon/kafka/canal/table/nonpk/canal-data-1.txt": ({"insert": 2}, 1),
    "apache-paimon/kafka/canal/table/schemaevolution/canal-data-1.txt": ({"insert": 2}, 2),
    "apache-paimon/kafka/canal/table/schemaevolution/canal-data-2.txt": (
        {"hint": 2, "insert": 2, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolution/canal-data-3.txt": (
        {"delete": 1, "hint": 2, "insert": 2, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolution/canal-data-4.txt": (
        {"hint": 8, "insert": 1, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolution/canal-data-5.txt": ({"hint": 4, "update": 2}, 2),
    "apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-1.txt": ({"insert": 2}, 2),
    "apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-2.txt": (
        {"insert": 2, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-3.txt": (
        {"delete": 1, "insert": 2, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-4.txt": (
        {"insert": 1, "update": 1},
        2,
    ),
    "apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-5.txt": ({"update": 2}, 2),
    "apache-paimon/kafka/canal/table/schemaevolutionmultiple/canal-data-1.txt": ({"insert": 1}, 1),
    "apache-paimon/kafka/canal/table/schemaevolutionmultiple/canal-data-2.txt": ({"hint": 1, "insert": 1}, 1),
}


@pytest.mark.parametrize("path", sorted(FIXTURES))
def test_fixture(path: str) -> None:
    expected, observed = FIXTURES[path]
    events = decoder_for("canal-json").decode(records(path))
    assert summary(events) == expected
    assert len(of_type(events, SchemaObserved)) == observed
    assert all(h.ordered for h in of_type(events, SchemaHint))


def test_rows_are_typed_by_mysql_type() -> None:
    events = decoder_for("canal-json").decode(records("apache-flink/canal-data.txt"))
    assert rows_by_op(events) == {"delete": 3, "insert": 11, "update": 6}
    (observed,) = of_type(events, SchemaObserved)
    products = TableId(None, "inventory", "products2")
    assert observed.table_id == products
    assert observed.schema == Schema(
        (
            Column("id", INT().not_null()),
            Column("name", VARCHAR(255)),
            Column("description", VARCHAR(512)),
            Column("weight", FLOAT()),
        ),
        ("id",),
    )
    changes = of_type(events, DataChange)
    assert changes[0] == DataChange(
        products,
        Op.INSERT,
        None,
        {"id": 101, "name": "scooter", "description": "Small 2-wheel scooter", "weight": 3.14},
        changes[0].position,
        1589373515000,
    )
    update = changes[9]
    assert update.op is Op.UPDATE
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
    delete = next(c for c in changes if c.op is Op.DELETE)
    assert delete.after is None and delete.before is not None and delete.before["id"] == 111


def test_a_message_with_several_rows_gives_one_change_per_row_at_the_same_position() -> None:
    events = decoder_for("canal-json").decode(records("apache-seatunnel/canal_data.txt"))
    inserts = [c for c in of_type(events, DataChange) if c.op is Op.INSERT]
    assert len(inserts) == 9
    assert len({c.position for c in inserts}) == 1


def test_create_table_ddl_becomes_an_ordered_hint() -> None:
    events = decoder_for("canal-json").decode(records("apache-flink/canal-data.txt"))
    (hint,) = of_type(events, SchemaHint)
    user02 = TableId(None, "xj_", "user02")
    assert hint.table_id == user02
    assert hint.ordered is True
    assert hint.ddl == (
        "CREATE TABLE `xj_`.`user02` (`uid` int(0) NOT NULL,`uname` varchar(255) NULL, PRIMARY KEY (`uid`))"
    )
    assert hint.changes == (
        CreateTable(
            user02, Schema((Column("uid", INT().not_null()), Column("uname", VARCHAR(255))), ("uid",))
        ),
    )
    assert hint.position is not None and hint.position.offset == 9  # the 10th line


def test_alter_ddl_with_a_client_comment() -> None:
    events = decoder_for("canal-json").decode(
        records("apache-paimon/kafka/canal/table/nononddldata/canal-data-1.txt")
    )
    table = TableId(None, "paimon_sync_table", "schema_evolution_2")
    assert [h.changes for h in of_type(events, SchemaHint)] == [
        (AddColumn(table, Column("v2", INT()), LAST),),
        (AddColumn(table, Column("v3", INT()), LAST),),
    ]


def test_mysql_type_changes_give_a_new_schema() -> None:
    events = decoder_for("canal-json").decode(
        records("apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-1.txt")
        + records("apache-paimon/kafka/canal/table/schemaevolutionmissingddl/canal-data-2.txt", partition=0)
    )
    table = TableId(None, "paimon_sync_table", "schema_evolution_1")
    schemas = [o.schema for o in of_type(events, SchemaObserved) if o.table_id == table]
    assert [s.names for s in schemas] == [("pt", "_id", "v1"), ("pt", "_id", "v1", "v2")]
    assert schemas[1].column("v2").type == INT()


def test_all_types_values() -> None:
    events = decoder_for("canal-json").decode(
        records("apache-paimon/kafka/canal/table/alltype/canal-data.txt")
    )
    row = of_type(events, DataChange)[0].after
    assert row["_tinyint1"] is True
    assert row["_bigint_unsigned"] == Decimal(20000000000)
    assert row["_numeric"] == Decimal("12345.110")
    assert row["_fixed"] == "123456789876543212345678987654321.110"
    assert row["_date"] == date(2023, 3, 23)
    assert row["_datetime3"] == datetime(2023, 3, 23, 14, 30, 5, 123000)
    assert row["_timestamp"] == datetime(2023, 3, 23, 15, 0, 10, 123456, tzinfo=UTC)
    assert row["_time"] == time(10, 13, 23)
    assert row["_bin"] == b"bytes"
    assert row["_enum"] == "value1"
    assert row["_set"] == "a,b"
    assert row["_point"][:6] == b"\x00\x00\x00\x00\x01\x01"
    (observed,) = of_type(events, SchemaObserved)
    assert str(observed.schema.column("_serial").type) == "DECIMAL(20, 0)"  # nullable: canal does not say
    assert observed.schema.column("_double").type == DOUBLE()


def test_timestamps_in_the_server_time_zone() -> None:
    message = {
        "data": [{"id": "1", "at": "2023-03-23 08:00:00"}],
        "database": "d",
        "table": "t",
        "isDdl": False,
        "mysqlType": {"id": "int", "at": "timestamp"},
        "pkNames": ["id"],
        "type": "INSERT",
    }
    decoder = decoder_for("canal-json", server_time_zone="Asia/Shanghai")
    (change,) = of_type(decoder.decode([Record("canal", 0, 0, value=orjson.dumps(message))]), DataChange)
    assert change.after["at"] == datetime(2023, 3, 23, 0, 0, tzinfo=UTC)


def test_flink_cdc_variant_is_inferred_with_full_before_images() -> None:
    events = decoder_for("canal-json").decode(records("apache-flink-cdc/canal-json.txt"))
    products = TableId(None, "$databaseName", "products")
    schemas = [o.schema for o in of_type(events, SchemaObserved) if o.table_id == products]
    assert len(schemas) == 2
    assert schemas[0].primary_keys == ("id",)
    assert schemas[0].column("id").type == BIGINT().not_null()
    assert schemas[1].names == (*schemas[0].names, "new_col")
    update = next(c for c in of_type(events, DataChange) if c.op is Op.UPDATE)
    assert update.before is not None and update.after is not None
    assert update.before["weight"] == 5.3 and update.after["weight"] == 5.1


def message(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "database": "d",
        "table": "t",
        "isDdl": False,
        "pkNames": ["id"],
        "mysqlType": {"id": "int", "v": "varchar(10)"},
        "type": "INSERT",
        "data": [{"id": "1", "v": "a"}],
        "old": None,
    }
    base.update(fields)
    return orjson.dumps(base)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{", "malformed JSON: unexpected end of data at line 1 column 2"),
        (b'"text"', "not a Canal message: expected a JSON object"),
        (message(type="INSERTED"), "unknown type 'INSERTED'"),
        (message(type=None), "not a Canal message: no 'type'"),
        (message(database=None), "the message names no table (no 'database' and 'table')"),
        (message(data=[]), "'data' must be a non-empty list of rows"),
        (message(data=[{"id": "x", "v": "a"}]), "field 'id' is not a valid int: 'x'"),
        (message(data=[{"id": "1", "v": "a", "w": "b"}]), "column 'w' has no mysqlType"),
        (message(mysqlType={"id": "int", "v": "frob"}), "column 'v': unknown MySQL type FROB"),
        (
            message(isDdl=True, sql="ALTER TABLE t ADD COLUMN"),
            "cannot parse DDL 'ALTER TABLE t ADD COLUMN': ",
        ),
        (message(isDdl=True, sql=""), "a DDL message without 'sql'"),
    ],
)
def test_bad_messages(value: bytes, reason: str) -> None:
    (bad,) = decoder_for("canal-json").decode([Record("canal", 2, 5, value=value)])
    assert isinstance(bad, BadRecord)
    assert bad.reason.startswith(reason)
    assert bad.value == value


def test_bad_rows_are_reported_once_and_good_rows_go_on() -> None:
    value = message(data=[{"id": "1", "v": "a"}, {"id": "x", "v": "b"}, {"id": "3", "v": "c"}])
    events = decoder_for("canal-json").decode([Record("canal", 0, 0, value=value)])
    assert [type(e) for e in events] == [BadRecord, SchemaObserved, DataChange, DataChange]
    assert (
        of_type(events, BadRecord)[0].reason
        == "1 of 3 rows cannot be decoded; row 2: field 'id' is not a valid int: 'x'"
    )
    assert [c.after["id"] for c in of_type(events, DataChange)] == [1, 3]


def test_truncate_and_drop_ddl() -> None:
    table = TableId(None, "d", "t")
    events = decoder_for("canal-json").decode(
        [
            Record(
                "canal", 0, 0, value=message(isDdl=True, type="TRUNCATE", sql="TRUNCATE TABLE t", data=None)
            ),
            Record("canal", 0, 1, value=message(isDdl=True, type="ERASE", sql="DROP TABLE `t`", data=None)),
        ]
    )
    assert [h.changes for h in of_type(events, SchemaHint)] == [(TruncateTable(table),), (DropTable(table),)]
