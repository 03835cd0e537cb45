"""StarRocks's statements, compiled with the ``starrocks`` package's SQLAlchemy dialect, against
statements written by hand from StarRocks's documented syntax:

- ``CREATE TABLE [IF NOT EXISTS] [db.]tbl (col type [NOT NULL], ...) PRIMARY KEY (k1, k2)
  DISTRIBUTED BY HASH (k1, k2) PROPERTIES ("key" = "value", ...)`` (Primary Key table);
- ``ALTER TABLE tbl ADD COLUMN col type [AFTER col | FIRST]``, ``DROP COLUMN col``,
  ``MODIFY COLUMN col type [NULL | NOT NULL]``, ``RENAME COLUMN old TO new`` (v3.3.2+);
- identifiers in backticks, a backtick inside doubled.
"""

from __future__ import annotations

import starrocks.dialect
from sqlalchemy.dialects.mysql.base import MySQLDialect

from ferry.model.events import FIRST, after, before
from ferry.model.schema import Column, Schema
from ferry.model.types import BIGINT, CHAR, DATE, DECIMAL, DOUBLE, INT, STRING, TIMESTAMP, VARCHAR
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.starrocks.dialect import StarRocksDialect

SR = StarRocksDialect(vendor_only=True)
MARIADB = StarRocksDialect()
EVENTS = SqlTable("ods", "events")


def test_vendor_statements_are_compiled_by_the_starrocks_dialect() -> None:
    assert isinstance(SR.ddl_dialect, starrocks.dialect.StarRocksDialect)
    assert SR.ddl_dialect.name == "starrocks"
    assert isinstance(MARIADB.ddl_dialect, MySQLDialect)
    assert not isinstance(MARIADB.ddl_dialect, starrocks.dialect.StarRocksDialect)


def test_primary_key_table_with_a_composite_key_and_properties() -> None:
    schema = Schema.of(
        [
            Column("tenant", INT().not_null()),
            Column("id", BIGINT().not_null()),
            Column("day", DATE()),
            Column("amount", DECIMAL(18, 4)),
            Column("score", DOUBLE()),
            Column("code", CHAR(2)),
            Column("at", TIMESTAMP(6)),
            Column("body", STRING()),
        ],
        ["tenant", "id"],
    )
    sql = SR.create_table(
        EVENTS, schema, ["tenant", "id"], {"replication_num": "3", "enable_persistent_index": "true"}
    )
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `ods`.`events` (\n"
        "  `tenant` INT NOT NULL,\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `day` DATE,\n"
        "  `amount` DECIMAL(18, 4),\n"
        "  `score` DOUBLE,\n"
        "  `code` CHAR(6),\n"
        "  `at` DATETIME,\n"
        "  `body` STRING\n"
        ")\n"
        "PRIMARY KEY (`tenant`, `id`)\n"
        "DISTRIBUTED BY HASH(`tenant`, `id`)\n"
        'PROPERTIES ("replication_num" = "3", "enable_persistent_index" = "true")'
    )


def test_key_columns_follow_the_key_order_not_the_column_order() -> None:
    schema = Schema.of([Column("a", INT().not_null()), Column("b", INT().not_null())], ["b", "a"])
    sql = SR.create_table(EVENTS, schema, ["b", "a"], {})
    assert "\nPRIMARY KEY (`b`, `a`)\nDISTRIBUTED BY HASH(`b`, `a`)\n" in sql
    assert MARIADB.create_table(EVENTS, schema, ["b", "a"]).endswith("  PRIMARY KEY (`b`, `a`)\n)")


def test_alter_column_statements() -> None:
    note = Column("note", VARCHAR(10))
    assert SR.add_column(EVENTS, note) == "ALTER TABLE `ods`.`events` ADD COLUMN `note` VARCHAR(30)"
    assert (
        SR.add_column(EVENTS, note, FIRST) == "ALTER TABLE `ods`.`events` ADD COLUMN `note` VARCHAR(30) FIRST"
    )
    assert (
        SR.add_column(EVENTS, Column("n", INT().not_null()), after("id"))
        == "ALTER TABLE `ods`.`events` ADD COLUMN `n` INT NOT NULL AFTER `id`"
    )
    # no BEFORE in StarRocks: the sink turns it into AFTER/FIRST; one left over is appended last
    assert (
        SR.add_column(EVENTS, note, before("id"))
        == "ALTER TABLE `ods`.`events` ADD COLUMN `note` VARCHAR(30)"
    )
    assert SR.drop_column(EVENTS, "note") == "ALTER TABLE `ods`.`events` DROP COLUMN `note`"
    assert (
        SR.rename_column(EVENTS, "note", "memo")
        == "ALTER TABLE `ods`.`events` RENAME COLUMN `note` TO `memo`"
    )
    assert (
        SR.alter_column_type(EVENTS, "n", BIGINT().not_null())
        == "ALTER TABLE `ods`.`events` MODIFY COLUMN `n` BIGINT NOT NULL"
    )
    assert SR.alter_column_type(EVENTS, "s", VARCHAR(100)) == (
        "ALTER TABLE `ods`.`events` MODIFY COLUMN `s` VARCHAR(300) NULL"
    )


def test_hostile_names_stay_names() -> None:
    table = SqlTable("db`x", "t`; DROP DATABASE ods; --")
    schema = Schema.of(
        [Column("select", INT().not_null()), Column("a`b", STRING()), Column("50%", INT())], ["select"]
    )
    assert SR.create_table(table, schema, ["select"], {'k"\\': 'v"); DROP TABLE x; --'}) == (
        "CREATE TABLE IF NOT EXISTS `db``x`.`t``; DROP DATABASE ods; --` (\n"
        "  `select` INT NOT NULL,\n"
        "  `a``b` STRING,\n"
        "  `50%` INT\n"
        ")\n"
        "PRIMARY KEY (`select`)\n"
        "DISTRIBUTED BY HASH(`select`)\n"
        'PROPERTIES ("replication_num" = "1", "k\\"\\\\" = "v\\"); DROP TABLE x; --")'
    )
    name = "`db``x`.`t``; DROP DATABASE ods; --`"
    assert SR.rename_column(table, "a`b", "c`d") == f"ALTER TABLE {name} RENAME COLUMN `a``b` TO `c``d`"
    assert SR.drop_column(table, "select") == f"ALTER TABLE {name} DROP COLUMN `select`"
    assert SR.truncate(table) == f"TRUNCATE TABLE {name}"
    assert SR.drop_table(table) == f"DROP TABLE IF EXISTS {name}"


def test_a_percent_is_doubled_only_where_parameters_are_bound() -> None:
    table = SqlTable("d%", "t%")
    # DDL runs without parameters: the name as it is
    assert SR.add_column(table, Column("50%", INT())) == "ALTER TABLE `d%`.`t%` ADD COLUMN `50%` INT"
    # INSERT and DELETE run with %s parameters: the driver turns %% back into %
    assert SR.insert(table, ["id", "50%"]) == "INSERT INTO `d%%`.`t%%` (`id`, `50%%`) VALUES (%s, %s)"
    assert MARIADB.upsert(table, ["id", "50%"], ["id"]) == (
        "INSERT INTO `d%%`.`t%%` (`id`, `50%%`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE `50%%` = VALUES(`50%%`)"
    )
    assert SR.delete_by_key(table, ["id", "50%"]) == "DELETE FROM `d%%`.`t%%` WHERE `id` = %s AND `50%%` = %s"
    assert SR.alter_job_state_query(table).startswith("SHOW ALTER TABLE COLUMN FROM `d%%` WHERE")
