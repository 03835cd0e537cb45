"""SelectDB's (Apache Doris's) statements against statements written by hand from Doris's
documented syntax:

- ``CREATE TABLE [IF NOT EXISTS] [db.]tbl (col type [NOT NULL], ...) UNIQUE KEY(k1, k2)
  DISTRIBUTED BY HASH(k1, k2) BUCKETS AUTO PROPERTIES ("key" = "value", ...)`` (Unique Key model);
- ``ALTER TABLE tbl ADD COLUMN col type [AFTER col | FIRST]``, ``DROP COLUMN col``,
  ``MODIFY COLUMN col type [NULL | NOT NULL]``, ``RENAME COLUMN old_name new_name`` (no ``TO``);
- identifiers in backticks, a backtick inside doubled.
"""

from __future__ import annotations

from ferry.model.events import FIRST, after
from ferry.model.schema import Column, Schema
from ferry.model.types import BIGINT, BOOLEAN, CHAR, DECIMAL, INT, STRING, TIMESTAMP, VARCHAR
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.selectdb.dialect import DorisSqlDialect, SelectDbDialect

DORIS = SelectDbDialect(vendor_only=True)
MARIADB = SelectDbDialect()
USERS = SqlTable("crm", "users")


def test_vendor_statements_are_compiled_by_the_doris_dialect() -> None:
    assert isinstance(DORIS.ddl_dialect, DorisSqlDialect) and DORIS.ddl_dialect.name == "doris"
    assert MARIADB.ddl_dialect.name == "mysql"


def test_unique_key_table_with_a_composite_key_and_properties() -> None:
    schema = Schema.of(
        [
            Column("region", CHAR(2).not_null()),
            Column("user_id", BIGINT().not_null()),
            Column("name", VARCHAR(50)),
            Column("vip", BOOLEAN()),
            Column("balance", DECIMAL(27, 9)),
            Column("seen", TIMESTAMP(3)),
            Column("bio", STRING()),
        ],
        ["region", "user_id"],
    )
    sql = DORIS.create_table(
        USERS,
        schema,
        ["region", "user_id"],
        {"replication_num": "3", "enable_unique_key_merge_on_write": "true"},
    )
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `crm`.`users` (\n"
        "  `region` CHAR(6) NOT NULL,\n"
        "  `user_id` BIGINT NOT NULL,\n"
        "  `name` VARCHAR(150),\n"
        "  `vip` BOOLEAN,\n"
        "  `balance` DECIMAL(27, 9),\n"
        "  `seen` DATETIME(3),\n"
        "  `bio` STRING\n"
        ")\n"
        "UNIQUE KEY (`region`, `user_id`)\n"
        "DISTRIBUTED BY HASH(`region`, `user_id`) BUCKETS AUTO\n"
        'PROPERTIES ("replication_num" = "3", "enable_unique_key_merge_on_write" = "true")'
    )


def test_alter_column_statements() -> None:
    flag = Column("flag", BOOLEAN())
    assert DORIS.add_column(USERS, flag) == "ALTER TABLE `crm`.`users` ADD COLUMN `flag` BOOLEAN"
    assert DORIS.add_column(USERS, flag, FIRST) == "ALTER TABLE `crm`.`users` ADD COLUMN `flag` BOOLEAN FIRST"
    assert (
        DORIS.add_column(USERS, flag, after("name"))
        == "ALTER TABLE `crm`.`users` ADD COLUMN `flag` BOOLEAN AFTER `name`"
    )
    assert DORIS.drop_column(USERS, "flag") == "ALTER TABLE `crm`.`users` DROP COLUMN `flag`"
    assert (
        DORIS.rename_column(USERS, "name", "nick") == "ALTER TABLE `crm`.`users` RENAME COLUMN `name` `nick`"
    )
    assert (
        DORIS.alter_column_type(USERS, "n", BIGINT())
        == "ALTER TABLE `crm`.`users` MODIFY COLUMN `n` BIGINT NULL"
    )
    assert DORIS.alter_column_type(USERS, "bio", STRING().not_null()) == (
        "ALTER TABLE `crm`.`users` MODIFY COLUMN `bio` STRING NOT NULL"
    )
    # the same changes on MariaDB: RENAME COLUMN ... TO, MySQL types
    assert (
        MARIADB.rename_column(USERS, "name", "nick")
        == "ALTER TABLE `crm`.`users` RENAME COLUMN `name` TO `nick`"
    )
    assert MARIADB.alter_column_type(USERS, "bio", STRING()) == (
        "ALTER TABLE `crm`.`users` MODIFY COLUMN `bio` LONGTEXT NULL"
    )


def test_hostile_names_stay_names() -> None:
    table = SqlTable("crm", "u`; DROP TABLE users; --")
    schema = Schema.of([Column("key", INT().not_null()), Column("x` INT, `y", STRING())], ["key"])
    assert DORIS.create_table(table, schema, ["key"], {}) == (
        "CREATE TABLE IF NOT EXISTS `crm`.`u``; DROP TABLE users; --` (\n"
        "  `key` INT NOT NULL,\n"
        "  `x`` INT, ``y` STRING\n"
        ")\n"
        "UNIQUE KEY (`key`)\n"
        "DISTRIBUTED BY HASH(`key`) BUCKETS AUTO\n"
        'PROPERTIES ("replication_num" = "1")'
    )
    assert DORIS.rename_column(table, "x` INT, `y", "z") == (
        "ALTER TABLE `crm`.`u``; DROP TABLE users; --` RENAME COLUMN `x`` INT, ``y` `z`"
    )
