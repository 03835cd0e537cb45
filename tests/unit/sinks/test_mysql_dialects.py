"""StarRocks and SelectDB (Doris) statements against statements written from the vendors' documented
syntax, and the MariaDB-compatible variant the integration tests run."""

from __future__ import annotations

import pytest
from tests.support.stream_load import parse_columns

from ferry.model.events import FIRST, after
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BOOLEAN, CHAR, DECIMAL, INT, STRING, TIMESTAMP, VARCHAR
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.dialect import SelectDbDialect
from ferry.sinks.starrocks.config import StarRocksSinkConfig
from ferry.sinks.starrocks.dialect import MySqlProtocolDialect, StarRocksDialect
from ferry.sinks.starrocks.stream_load import quote_column

T = SqlTable("shop", "orders")
ORDERS = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("customer", VARCHAR(40)),
        Column("price", DECIMAL(10, 2)),
        Column("paid", BOOLEAN()),
        Column("at", TIMESTAMP(6)),
        Column("note", STRING()),
    ],
    ["id"],
)


def test_starrocks_create_table_is_the_documented_primary_key_table() -> None:
    # CREATE TABLE ... PRIMARY KEY (...) DISTRIBUTED BY HASH(...) PROPERTIES (...)
    # (StarRocks "Primary Key table"; VARCHAR lengths are bytes: 3 per character)
    sql = StarRocksDialect(vendor_only=True).create_table(T, ORDERS, ["id"], {"replication_num": "3"})
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `shop`.`orders` (\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `customer` VARCHAR(120),\n"
        "  `price` DECIMAL(10, 2),\n"
        "  `paid` BOOLEAN,\n"
        "  `at` DATETIME,\n"
        "  `note` STRING\n"
        ")\n"
        "PRIMARY KEY (`id`)\n"
        "DISTRIBUTED BY HASH(`id`)\n"
        'PROPERTIES ("replication_num" = "3")'
    )


def test_doris_create_table_is_the_documented_unique_key_table() -> None:
    # CREATE TABLE ... UNIQUE KEY (...) DISTRIBUTED BY HASH(...) BUCKETS AUTO PROPERTIES (...)
    sql = SelectDbDialect(vendor_only=True).create_table(T, ORDERS, ["id"], {})
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `shop`.`orders` (\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `customer` VARCHAR(120),\n"
        "  `price` DECIMAL(10, 2),\n"
        "  `paid` BOOLEAN,\n"
        "  `at` DATETIME(6),\n"
        "  `note` STRING\n"
        ")\n"
        "UNIQUE KEY (`id`)\n"
        "DISTRIBUTED BY HASH(`id`) BUCKETS AUTO\n"
        'PROPERTIES ("replication_num" = "1")'
    )


def test_table_without_key_is_distributed_by_its_first_column() -> None:
    schema = Schema.of([Column("a", INT()), Column("b", STRING())])
    sql = StarRocksDialect(vendor_only=True).create_table(T, schema, [], {})
    assert sql.endswith(')\nDISTRIBUTED BY HASH(`a`)\nPROPERTIES ("replication_num" = "1")')
    assert "KEY" not in sql


@pytest.mark.parametrize("dialect", [StarRocksDialect(), SelectDbDialect(), MySqlProtocolDialect()])
def test_mariadb_variant_has_no_vendor_clause(dialect: MySqlProtocolDialect) -> None:
    sql = dialect.create_table(T, ORDERS, ["id"], {"replication_num": "3"})
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `shop`.`orders` (\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `customer` VARCHAR(40),\n"
        "  `price` DECIMAL(10, 2),\n"
        "  `paid` BOOLEAN,\n"
        "  `at` DATETIME(6),\n"
        "  `note` LONGTEXT,\n"
        "  PRIMARY KEY (`id`)\n"
        ")"
    )


def test_vendor_types_and_byte_lengths() -> None:
    sr, doris = StarRocksDialect(vendor_only=True), SelectDbDialect(vendor_only=True)
    assert sr.render_type(CHAR(10)) == "CHAR(30)"
    assert sr.render_type(CHAR(100)) == "VARCHAR(300)"
    assert sr.render_type(VARCHAR(400_000)) == "STRING"
    assert doris.render_type(VARCHAR(30_000)) == "STRING"
    assert doris.render_type(VARCHAR(100)) == "VARCHAR(300)"
    assert doris.render_type(TIMESTAMP(3)) == "DATETIME(3)"


@pytest.mark.parametrize("vendor_only", [True, False])
def test_alter_statements_in_documented_syntax(vendor_only: bool) -> None:
    sr = StarRocksDialect(vendor_only=vendor_only)
    column = Column("c", INT())
    # ALTER TABLE t ADD COLUMN col type [FIRST | AFTER col]; DROP COLUMN; MODIFY COLUMN
    assert sr.add_column(T, column) == "ALTER TABLE `shop`.`orders` ADD COLUMN `c` INT"
    assert sr.add_column(T, column, FIRST) == "ALTER TABLE `shop`.`orders` ADD COLUMN `c` INT FIRST"
    assert (
        sr.add_column(T, column, after("id")) == "ALTER TABLE `shop`.`orders` ADD COLUMN `c` INT AFTER `id`"
    )
    assert sr.drop_column(T, "c") == "ALTER TABLE `shop`.`orders` DROP COLUMN `c`"
    assert (
        sr.alter_column_type(T, "c", BIGINT()) == "ALTER TABLE `shop`.`orders` MODIFY COLUMN `c` BIGINT NULL"
    )
    assert sr.truncate(T) == "TRUNCATE TABLE `shop`.`orders`"
    assert sr.drop_table(T) == "DROP TABLE IF EXISTS `shop`.`orders`"
    assert sr.create_schema("shop") == "CREATE DATABASE IF NOT EXISTS `shop`"


def test_doris_renames_without_to_and_mariadb_with_it() -> None:
    # Doris: ALTER TABLE t RENAME COLUMN old_name new_name; MariaDB: RENAME COLUMN old TO new
    assert (
        SelectDbDialect(vendor_only=True).rename_column(T, "a", "b")
        == "ALTER TABLE `shop`.`orders` RENAME COLUMN `a` `b`"
    )
    assert (
        SelectDbDialect().rename_column(T, "a", "b") == "ALTER TABLE `shop`.`orders` RENAME COLUMN `a` TO `b`"
    )


def test_alter_job_state_query() -> None:
    # SHOW ALTER TABLE COLUMN [FROM db] [WHERE ...] [ORDER BY ...] [LIMIT ...]
    assert StarRocksDialect(vendor_only=True).alter_job_state_query(T) == (
        "SHOW ALTER TABLE COLUMN FROM `shop` WHERE TableName = %s ORDER BY CreateTime DESC LIMIT 1"
    )


def test_upsert_on_mariadb_and_insert_on_the_vendor() -> None:
    assert StarRocksDialect().upsert(T, ["id", "a"], ["id"]) == (
        "INSERT INTO `shop`.`orders` (`id`, `a`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE `a` = VALUES(`a`)"
    )
    assert (
        StarRocksDialect().upsert(T, ["id"], ["id"])
        == "INSERT IGNORE INTO `shop`.`orders` (`id`) VALUES (%s)"
    )
    assert StarRocksDialect(vendor_only=True).upsert(T, ["id", "a"], ["id"]) == (
        "INSERT INTO `shop`.`orders` (`id`, `a`) VALUES (%s, %s)"
    )


def test_identifiers_cannot_break_out() -> None:
    d = StarRocksDialect()
    assert d.quote_identifier("select") == "`select`"
    assert d.quote_identifier("a`; DROP TABLE x; --") == "`a``; DROP TABLE x; --`"
    assert StarRocksDialect(for_parameters=True).quote_identifier("50%") == "`50%%`"
    with pytest.raises(SinkTerminalError):
        d.quote_identifier("a\x00b")
    assert (
        StarRocksDialect(vendor_only=True).properties_clause({'a"b': "c\\"})
        == 'PROPERTIES ("replication_num" = "1", "a\\"b" = "c\\\\")'
    )


def test_columns_header_round_trip() -> None:
    names = ["id", "a`b", "x, y", "__op"]
    assert parse_columns(", ".join(quote_column(n) for n in names)) == names
    assert parse_columns("k1, k2,__op") == ["k1", "k2", "__op"]


def test_configs_in_flink_cdc_spelling() -> None:
    sr = StarRocksSinkConfig.model_validate(
        {
            "type": "starrocks",
            "jdbc-url": "jdbc:mysql://fe:9030/ods",
            "load-url": "fe:8030;fe2:8030",
            "username": "root",
            "password": "pw",
            "sink.label-prefix": "job1",
            "table.create.properties.replication_num": 3,
            "schema.evolution.timeout": "2min",
        }
    )
    assert (sr.host, sr.port, sr.default_database) == ("fe", 9030, "ods")
    assert sr.load_urls == ["http://fe:8030", "http://fe2:8030"]
    assert sr.table_properties == {"replication_num": "3"}
    assert sr.schema_evolution_timeout == 120
    assert "pw" not in repr(sr)
    doris = SelectDbSinkConfig.model_validate(
        {
            "type": "selectdb",
            "fenodes": "http://sdb:8080",
            "jdbc-url": "jdbc:mysql://sdb:9030",
            "username": "admin",
            "sink.enable-batch-mode": "false",
        }
    )
    assert doris.load_urls == ["http://sdb:8080"] and not doris.enable_batch_mode
    assert doris.port == 9030 and doris.default_database is None
    with pytest.raises(ValueError, match="jdbc-url"):
        StarRocksSinkConfig.model_validate({"jdbc-url": "mysql://x", "username": "u"})


def test_starrocks_num_buckets_of_the_tables_the_sink_creates() -> None:
    from ferry.sinks.starrocks.sink import StarRocksSink

    options = {"jdbc-url": "jdbc:mysql://fe:9030/shop", "username": "root"}
    config = StarRocksSinkConfig.model_validate({**options, "table.create.num-buckets": 8})
    sink = StarRocksSink(config, pipeline="p1")
    sql = sink.dialect.create_table(T, ORDERS, ["id"], config.table_properties)
    assert "\nDISTRIBUTED BY HASH(`id`) BUCKETS 8\n" in sql
    default = StarRocksSink(StarRocksSinkConfig.model_validate(options), pipeline="p1")
    assert "\nDISTRIBUTED BY HASH(`id`)\n" in default.dialect.create_table(T, ORDERS, ["id"], {})
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        StarRocksSinkConfig.model_validate({**options, "table.create.num-buckets": 0})


def test_doris_auto_partition_of_the_tables_the_sink_creates() -> None:
    from ferry.sinks.selectdb.sink import SelectDbSink

    prefix = "table.create.auto-partition.properties."
    config = SelectDbSinkConfig.model_validate(
        {
            "fenodes": "fe:8030",
            "username": "root",
            prefix + "include": r"shop.\.*",
            prefix + "exclude": "shop.skipped",
            prefix + "default-partition-key": "at",
            prefix + "default-partition-unit": "DAY",
            prefix + "shop.monthly.partition-unit": "month",
        }
    )
    sink = SelectDbSink(config, pipeline="p1")
    schema = Schema.of([*ORDERS.columns], ["id", "at"])
    [sql] = sink.create_table_statements(SqlTable("shop", "orders"), schema)
    assert "  `at` DATETIME(6) NOT NULL,\n" in sql
    assert (
        "UNIQUE KEY (`id`, `at`)\n"
        "AUTO PARTITION BY RANGE (date_trunc(`at`, 'day')) ()\n"
        "DISTRIBUTED BY HASH(`id`, `at`) BUCKETS AUTO\n"
    ) in sql
    [monthly] = sink.create_table_statements(SqlTable("shop", "monthly"), schema)
    assert "AUTO PARTITION BY RANGE (date_trunc(`at`, 'month')) ()" in monthly
    for table in (SqlTable("shop", "skipped"), SqlTable("other", "orders")):  # excluded, not included
        assert "PARTITION" not in sink.create_table_statements(table, schema)[0]
    # Flink CDC's rule: a partition key that is not a DATE or DATETIME column partitions nothing
    no_time = Schema.of([c for c in ORDERS.columns if c.name != "at"], ["id"])
    assert config.auto_partition_of(TableId(None, "shop", "orders"), no_time) is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("default-partition-unit", "minute", "is not one of year, quarter, month, week, day, hour"),
        ("include", "shop.(x", "is not a valid regular expression"),
        ("partition-kind", "range", "not an auto-partition property"),
    ],
)
def test_doris_auto_partition_values_are_checked(key: str, value: str, message: str) -> None:
    options = {
        "fenodes": "fe:8030",
        "username": "root",
        f"table.create.auto-partition.properties.{key}": value,
    }
    with pytest.raises(ValueError, match=message):
        SelectDbSinkConfig.model_validate(options)
