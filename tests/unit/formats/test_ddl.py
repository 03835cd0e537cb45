from __future__ import annotations

import pytest

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.ddl import parse_ddl
from ferry.model.events import (
    FIRST,
    LAST,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    TruncateTable,
    after,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DATE, DECIMAL, DOUBLE, INT, STRING, TIMESTAMP_LTZ, VARCHAR

T = TableId(None, "shop", "t")


def ddl(sql: str, database: str | None = "shop") -> list[object]:
    return list(parse_ddl(sql, default_database=database))


def test_add_column_last_first_and_after() -> None:
    assert ddl("ALTER TABLE t ADD COLUMN a INT") == [AddColumn(T, Column("a", INT()), LAST)]
    assert ddl("ALTER TABLE t ADD a INT NOT NULL FIRST") == [
        AddColumn(T, Column("a", INT().not_null()), FIRST)
    ]
    assert ddl("ALTER TABLE t ADD COLUMN `a` VARCHAR(20) AFTER `b`") == [
        AddColumn(T, Column("a", VARCHAR(20)), after("b"))
    ]


def test_add_column_with_default_and_comment() -> None:
    (change,) = ddl("ALTER TABLE t ADD COLUMN qty BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'it''s counted'")
    assert change == AddColumn(T, Column("qty", DECIMAL(20, 0).not_null(), "it's counted", "0"))


def test_drop_column() -> None:
    assert ddl("ALTER TABLE t DROP COLUMN a") == [DropColumn(T, "a")]
    assert ddl("ALTER TABLE t DROP `a`") == [DropColumn(T, "a")]


def test_rename_column() -> None:
    assert ddl("ALTER TABLE t RENAME COLUMN a TO b") == [RenameColumn(T, "a", "b")]


def test_change_column_is_a_rename_and_a_type() -> None:
    assert ddl("ALTER TABLE t CHANGE COLUMN a b INT") == [
        RenameColumn(T, "a", "b"),
        AlterColumnType(T, "b", INT()),
    ]
    assert ddl("ALTER TABLE t CHANGE a b VARCHAR(20) NOT NULL COMMENT 'x' AFTER c") == [
        RenameColumn(T, "a", "b"),
        AlterColumnType(T, "b", VARCHAR(20).not_null()),
        AlterColumnComment(T, "b", "x"),
    ]


def test_change_column_keeping_its_name_only_changes_the_type() -> None:
    assert ddl("ALTER TABLE t CHANGE a a BIGINT") == [AlterColumnType(T, "a", BIGINT())]


def test_modify_column() -> None:
    assert ddl("ALTER TABLE t MODIFY COLUMN price DECIMAL(10,2)") == [
        AlterColumnType(T, "price", DECIMAL(10, 2))
    ]
    assert ddl("ALTER TABLE t MODIFY price DECIMAL(10,2) NULL COMMENT 'new'") == [
        AlterColumnType(T, "price", DECIMAL(10, 2)),
        AlterColumnComment(T, "price", "new"),
    ]


def test_several_clauses_in_one_alter() -> None:
    assert ddl(
        "ALTER TABLE t ADD COLUMN a INT FIRST, ADD COLUMN b DOUBLE, DROP COLUMN c, RENAME COLUMN d TO e"
    ) == [
        AddColumn(T, Column("a", INT()), FIRST),
        AddColumn(T, Column("b", DOUBLE()), LAST),
        DropColumn(T, "c"),
        RenameColumn(T, "d", "e"),
    ]


def test_add_a_list_of_columns() -> None:
    assert ddl("ALTER TABLE t ADD COLUMN (a INT, b VARCHAR(3) COMMENT 'x, (y')") == [
        AddColumn(T, Column("a", INT()), LAST),
        AddColumn(T, Column("b", VARCHAR(3), "x, (y"), LAST),
    ]


def test_add_list_among_other_clauses_with_a_leading_comment() -> None:
    sql = (
        "/* Query from DMS-WEBSQL-0 by user 1 */ ALTER TABLE schema_evolution_multiple \nADD v4 INT,\n"
        "MODIFY COLUMN v1 VARCHAR(20),\nADD COLUMN (v5 DOUBLE, v6 DECIMAL(5, 3), `$% ^,& *(` VARCHAR(10) "
        "COMMENT 'test'),\n            MODIFY v2 BIGINT"
    )
    table = TableId(None, "shop", "schema_evolution_multiple")
    assert ddl(sql) == [
        AddColumn(table, Column("v4", INT()), LAST),
        AlterColumnType(table, "v1", VARCHAR(20)),
        AddColumn(table, Column("v5", DOUBLE()), LAST),
        AddColumn(table, Column("v6", DECIMAL(5, 3)), LAST),
        AddColumn(table, Column("$% ^,& *(", VARCHAR(10), "test"), LAST),
        AlterColumnType(table, "v2", BIGINT()),
    ]


def test_table_comment() -> None:
    assert ddl("ALTER TABLE t COMMENT = 'orders of the shop'") == [AlterTableComment(T, "orders of the shop")]
    assert ddl("ALTER TABLE t ADD COLUMN d INT, COMMENT='x'") == [
        AddColumn(T, Column("d", INT()), LAST),
        AlterTableComment(T, "x"),
    ]


def test_create_table_with_inline_primary_key_and_comments() -> None:
    (change,) = ddl(
        "CREATE TABLE orders (\n"
        "  order_number INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY COMMENT 'the number',\n"
        "  order_date DATE NOT NULL,\n  note VARCHAR(255) DEFAULT 'none'\n"
        ") AUTO_INCREMENT = 10001 COMMENT='all orders'"
    )
    assert change == CreateTable(
        TableId(None, "shop", "orders"),
        Schema(
            (
                Column("order_number", INT().not_null(), "the number"),
                Column("order_date", DATE().not_null()),
                Column("note", VARCHAR(255), None, "none"),
            ),
            ("order_number",),
            comment="all orders",
        ),
    )


def test_create_table_with_a_primary_key_constraint_in_another_database() -> None:
    (change,) = ddl(
        "CREATE TABLE `xj_`.`user02` (`uid` int(0) NOT NULL,`uname` varchar(255) NULL, PRIMARY KEY (`uid`))"
    )
    assert change == CreateTable(
        TableId(None, "xj_", "user02"),
        Schema((Column("uid", INT().not_null()), Column("uname", VARCHAR(255))), ("uid",)),
    )
    (change,) = ddl("CREATE TABLE t (a INT, b INT, CONSTRAINT pk PRIMARY KEY (a, b))")
    assert isinstance(change, CreateTable)
    assert change.schema.primary_keys == ("a", "b")
    assert [c.type for c in change.schema.columns] == [INT().not_null(), INT().not_null()]


def test_create_table_maps_mysql_types() -> None:
    (change,) = ddl(
        "create table test.e ( id int(10) not null primary key auto_increment, m double, c timestamp(6),"
        " comment varchar(255) charset 'latin1', f FLOAT UNSIGNED ZEROFILL, p POINT, j JSON )"
    )
    assert isinstance(change, CreateTable)
    assert change.table_id == TableId(None, "test", "e")
    assert [(c.name, str(c.type)) for c in change.schema.columns] == [
        ("id", "INT NOT NULL"),
        ("m", "DOUBLE"),
        ("c", str(TIMESTAMP_LTZ(6))),
        ("comment", "VARCHAR(255)"),
        ("f", "FLOAT"),
        ("p", "BYTES"),
        ("j", str(STRING())),
    ]


def test_drop_and_truncate_table() -> None:
    assert ddl("DROP TABLE a, other.b") == [
        DropTable(TableId(None, "shop", "a")),
        DropTable(TableId(None, "other", "b")),
    ]
    assert ddl("DROP TABLE IF EXISTS `t`") == [DropTable(T)]
    assert ddl("TRUNCATE TABLE shop.t") == [TruncateTable(T)]
    assert ddl("TRUNCATE t") == [TruncateTable(T)]


def test_a_table_without_database_when_there_is_no_default() -> None:
    assert ddl("ALTER TABLE t DROP COLUMN a", database=None) == [DropColumn(TableId(None, None, "t"), "a")]


def test_several_statements() -> None:
    assert ddl("ALTER TABLE a ADD c INT; ALTER TABLE b DROP d") == [
        AddColumn(TableId(None, "shop", "a"), Column("c", INT()), LAST),
        DropColumn(TableId(None, "shop", "b"), "d"),
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE DATABASE IF NOT EXISTS canal_hvygfc",
        "ALTER TABLE products AUTO_INCREMENT = 1101",
        "ALTER TABLE t ENGINE=InnoDB",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
        "ALTER TABLE t ADD INDEX idx (a)",
        "ALTER TABLE t DROP INDEX idx",
        "ALTER TABLE t ALTER COLUMN a SET DEFAULT 1",
        "CREATE INDEX i ON t (a)",
        "DROP DATABASE d",
        "GRANT ALL ON *.* TO u",
        "SET NAMES utf8",
    ],
)
def test_statements_that_change_no_columns(sql: str) -> None:
    assert ddl(sql) == []


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("ALTER TABLE t ADD COLUMN", "cannot parse DDL 'ALTER TABLE t ADD COLUMN'"),
        ("CREATE TABLE (", "cannot parse DDL 'CREATE TABLE ('"),
        (
            "CREATE TABLE t2 LIKE t1",
            "cannot tell the columns of the table created by 'CREATE TABLE t2 LIKE t1'",
        ),
        ("ALTER TABLE t RENAME TO u", "table renames are not supported: 'ALTER TABLE t RENAME TO u'"),
        ("RENAME TABLE a TO b", "cannot parse DDL 'RENAME TABLE a TO b'"),
        (
            "ALTER TABLE t ADD COLUMN c FROBNICATOR(3)",
            "cannot parse DDL 'ALTER TABLE t ADD COLUMN c FROBNICATOR(3)'",
        ),
    ],
)
def test_unparseable_ddl_names_the_statement(sql: str, reason: str) -> None:
    with pytest.raises(DecodeError) as raised:
        ddl(sql)
    assert raised.value.reason.startswith(reason)
