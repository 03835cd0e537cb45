"""The MaxCompute sink's DDL against statements written from MaxCompute's documented syntax, its type
mapping, and which statements each schema change becomes (no service needed: the sink connects
only when it first reads or writes)."""

from __future__ import annotations

import textwrap

import pytest

from ferry.config import load_job_text
from ferry.model.events import (
    FIRST,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    DropColumn,
    RenameColumn,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    CHAR,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    MAP,
    ROW,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TIMESTAMP_TZ,
    TINYINT,
    VARBINARY,
    VARCHAR,
    DataType,
    Field,
)
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.maxcompute.config import MaxComputeSinkConfig
from ferry.sinks.maxcompute.dialect import MaxComputeDialect
from ferry.sinks.maxcompute.sink import MaxComputeSink, odps_value
from ferry.sinks.maxcompute.types import from_type_name, sink_type, type_name

D = MaxComputeDialect()
T = SqlTable("ods", "orders")
ORDERS = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("customer", VARCHAR(40), comment="who ordered"),
        Column("price", DECIMAL(10, 2)),
        Column("paid", BOOLEAN()),
        Column("at", TIMESTAMP(6)),
        Column("note", STRING()),
    ],
    ["id"],
    comment="orders of the shop",
)
ACCESS_KEY = "key-not-to-be-seen"


def config(**options: object) -> MaxComputeSinkConfig:
    return MaxComputeSinkConfig.model_validate(
        {
            "type": "maxcompute",
            "endpoint": "http://service.cn-hangzhou.maxcompute.aliyun.com/api",
            "project": "ods",
            "access-id": "id",
            "access-key": ACCESS_KEY,
            **options,
        }
    )


# ----------------------------------------------------------------------------------- statements


def test_create_table_with_a_key_is_the_documented_delta_table() -> None:
    # CREATE TABLE [IF NOT EXISTS] <name> (<col> <type> [NOT NULL] [COMMENT '<c>'], ...,
    #   PRIMARY KEY (<pk>)) [COMMENT '<c>'] TBLPROPERTIES ("transactional"="true", "write.bucket.num"="16")
    sink = MaxComputeSink(config(), pipeline="p")
    sql = sink.create_table_statement(T, ORDERS)
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `ods`.`orders` (\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `customer` STRING COMMENT 'who ordered',\n"
        "  `price` DECIMAL(10,2),\n"
        "  `paid` BOOLEAN,\n"
        "  `at` TIMESTAMP_NTZ,\n"
        "  `note` STRING,\n"
        "  PRIMARY KEY (`id`)\n"
        ")\n"
        "COMMENT 'orders of the shop'\n"
        "TBLPROPERTIES ('transactional'='true', 'write.bucket.num'='16')"
    )


def test_bucket_count_comes_from_the_config_and_a_table_without_key_is_a_standard_table() -> None:
    keyed = MaxComputeSink(config(**{"buckets-num": 4}), pipeline="p").create_table_statement(T, ORDERS)
    assert keyed.endswith("TBLPROPERTIES ('transactional'='true', 'write.bucket.num'='4')")
    log = Schema.of([Column("at", TIMESTAMP_LTZ(3)), Column("msg", STRING())])
    sql = MaxComputeSink(config(), pipeline="p").create_table_statement(T, log)
    assert sql == "CREATE TABLE IF NOT EXISTS `ods`.`orders` (\n  `at` TIMESTAMP,\n  `msg` STRING\n)"


def test_column_statements_are_the_documented_alter_table_forms() -> None:
    # ALTER TABLE <t> ADD COLUMNS (<col> <type> [COMMENT '<c>']) -- always nullable, appended last
    assert D.add_column(T, Column("qty", INT().not_null(), comment="units")) == (
        "ALTER TABLE `ods`.`orders` ADD COLUMNS (`qty` INT COMMENT 'units')"
    )
    # ALTER TABLE <t> DROP COLUMNS <col>
    assert D.drop_column(T, "qty") == "ALTER TABLE `ods`.`orders` DROP COLUMNS `qty`"
    # ALTER TABLE <t> CHANGE COLUMN <old> RENAME TO <new>
    assert D.rename_column(T, "qty", "quantity") == (
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` RENAME TO `quantity`"
    )
    # ALTER TABLE <t> CHANGE [COLUMN] <old> <new> <new_type>
    assert (
        D.alter_column_type(T, "qty", BIGINT())
        == "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` `qty` BIGINT"
    )
    # ALTER TABLE <t> CHANGE COLUMN <col> NULL
    assert D.drop_not_null(T, "code") == "ALTER TABLE `ods`.`orders` CHANGE COLUMN `code` NULL"
    assert D.truncate(T) == "TRUNCATE TABLE `ods`.`orders`"
    assert D.drop_table(T) == "DROP TABLE IF EXISTS `ods`.`orders`"


def test_names_and_literals_cannot_end_a_statement() -> None:
    table = SqlTable("ods", "a`b; DROP TABLE x")
    assert D.table_name(table) == "`ods`.`a``b; DROP TABLE x`"
    column = Column("it's`", STRING(), comment="a 'quote', a \\ and\na newline")
    assert D.column_definition(column) == "`it's``` STRING COMMENT 'a \\'quote\\', a \\\\ and\\na newline'"
    with pytest.raises(SinkTerminalError, match="NUL"):
        D.quote_identifier("a\x00b")


# ----------------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("source", "stored", "name"),
    [
        (BOOLEAN(), BOOLEAN(), "BOOLEAN"),
        (TINYINT(), TINYINT(), "TINYINT"),
        (SMALLINT(), SMALLINT(), "SMALLINT"),
        (INT(), INT(), "INT"),
        (BIGINT().not_null(), BIGINT().not_null(), "BIGINT"),
        (FLOAT(), FLOAT(), "FLOAT"),
        (DOUBLE(), DOUBLE(), "DOUBLE"),
        (DECIMAL(38, 18), DECIMAL(38, 18), "DECIMAL(38,18)"),
        (DECIMAL(38, 20), STRING(), "STRING"),
        (CHAR(3), STRING(), "STRING"),
        (VARCHAR(10), STRING(), "STRING"),
        (TIME(3), STRING(), "STRING"),
        (BINARY(4), BYTES(), "BINARY"),
        (VARBINARY(4), BYTES(), "BINARY"),
        (DATE(), DATE(), "DATE"),
        (TIMESTAMP(3), TIMESTAMP(9), "TIMESTAMP_NTZ"),
        (TIMESTAMP_LTZ(6), TIMESTAMP_LTZ(9), "TIMESTAMP"),
        (TIMESTAMP_TZ(6), TIMESTAMP_LTZ(9), "TIMESTAMP"),
        (ARRAY(INT().not_null()), ARRAY(INT()), "ARRAY<INT>"),
        (MAP(STRING(), ARRAY(VARCHAR(3))), MAP(STRING(), ARRAY(STRING())), "MAP<STRING,ARRAY<STRING>>"),
        (
            ROW(Field("a", INT()), Field("b c", TIME(0))),
            ROW(Field("a", INT()), Field("b c", STRING())),
            "STRUCT<`a`:INT,`b c`:STRING>",
        ),
    ],
)
def test_type_mapping_is_flink_cdcs_and_reads_back(source: DataType, stored: DataType, name: str) -> None:
    assert sink_type(source) == stored
    assert type_name(source) == name
    # pyodps names types in lower case (struct field names as they are: lower case here)
    assert from_type_name(name.lower()) == stored.with_nullable(True)


def test_types_only_maxcompute_has_read_back() -> None:
    assert from_type_name("datetime") == TIMESTAMP(3)
    assert from_type_name("varchar(20)") == VARCHAR(20)
    assert from_type_name("char(2)") == CHAR(2)
    assert from_type_name("decimal") == DECIMAL(38, 18)
    assert from_type_name("json") == STRING()
    assert from_type_name("struct<`a``b`:int>") == ROW(Field("a`b", INT()))
    with pytest.raises(SinkTerminalError, match="no ferry type"):
        from_type_name("geography")


# ----------------------------------------------------------------------------------- changes


def statements(change: object, current: Schema = ORDERS) -> list[str]:
    sink = MaxComputeSink(config(), pipeline="p")
    return sink.schema_change_statements(T, change, current)  # type: ignore[arg-type]


TID = TableId.parse("shop.orders")


def test_each_change_becomes_its_statements_and_a_replay_none() -> None:
    # a positioned NOT NULL column is added last and nullable
    assert statements(AddColumn(TID, Column("qty", INT().not_null()), FIRST)) == [
        "ALTER TABLE `ods`.`orders` ADD COLUMNS (`qty` INT)"
    ]
    # MaxCompute keeps names in lower case: a column it has under another case is there already
    assert statements(AddColumn(TID, Column("Note", STRING()))) == []
    assert statements(DropColumn(TID, "NOTE")) == ["ALTER TABLE `ods`.`orders` DROP COLUMNS `note`"]
    assert statements(DropColumn(TID, "gone")) == []
    assert statements(RenameColumn(TID, "note", "remark")) == [
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `note` RENAME TO `remark`"
    ]
    renamed = Schema.of([*(c for c in ORDERS if c.name != "note"), Column("remark", STRING())], ["id"])
    assert statements(RenameColumn(TID, "note", "remark"), renamed) == []
    with pytest.raises(SinkTerminalError, match="no column missing"):
        statements(RenameColumn(TID, "missing", "other"))
    assert statements(AlterColumnComment(TID, "note", "free text")) == []


def test_type_changes_widen_and_relax_but_never_tighten() -> None:
    current = Schema.of([Column("id", BIGINT().not_null()), Column("qty", INT().not_null())], ["id"])
    assert statements(AlterColumnType(TID, "qty", BIGINT(), INT().not_null()), current) == [
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` `qty` BIGINT",
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` NULL",
    ]
    assert statements(AlterColumnType(TID, "qty", INT(), INT().not_null()), current) == [
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` NULL"
    ]
    assert statements(AlterColumnType(TID, "qty", BIGINT().not_null(), INT().not_null()), current) == [
        "ALTER TABLE `ods`.`orders` CHANGE COLUMN `qty` `qty` BIGINT"
    ]
    nullable = Schema.of([Column("id", BIGINT().not_null()), Column("qty", INT())], ["id"])
    assert statements(AlterColumnType(TID, "qty", INT().not_null(), INT()), nullable) == []
    # VARCHAR(40) → VARCHAR(80): both are STRING in MaxCompute, which the table has
    stored = Schema.of([Column("id", BIGINT().not_null()), Column("customer", STRING())], ["id"])
    assert statements(AlterColumnType(TID, "customer", VARCHAR(80), VARCHAR(40)), stored) == []


# ----------------------------------------------------------------------------------- values and config


def test_values_take_the_shape_pyodps_wants() -> None:
    from datetime import UTC, date, datetime, time
    from decimal import Decimal

    assert odps_value({"a": [1, 2]}, "string") == '{"a": [1, 2]}'
    assert odps_value(time(1, 2, 3), "string") == "01:02:03"
    assert odps_value(3, "decimal(10,2)") == Decimal("3")
    assert odps_value("ab", "binary") == b"ab"
    assert odps_value(datetime(2024, 1, 2, 3, 4), "date") == date(2024, 1, 2)
    assert odps_value(datetime(2024, 1, 2), "timestamp") == datetime(2024, 1, 2, tzinfo=UTC)
    aware = datetime(2024, 1, 2, 3, tzinfo=UTC)
    assert odps_value(aware, "timestamp_ntz") == datetime(2024, 1, 2, 3)
    assert odps_value(None, "bigint") is None


def test_config_reads_secrets_from_the_environment_and_never_shows_them() -> None:
    text = textwrap.dedent(
        """\
        source:
          type: kafka
          properties.bootstrap.servers: 127.0.0.1:9092
          topic: orders
        sink:
          type: maxcompute
          endpoint: http://service.cn-hangzhou.maxcompute.aliyun.com/api/
          project: ods
          access-id: ${MC_ID}
          access-key: ${MC_KEY}
          tunnel.endpoint: http://dt.cn-hangzhou.maxcompute.aliyun.com
          compress.algorithm: raw
        """
    )
    job = load_job_text(text, env={"MC_ID": "the-id", "MC_KEY": ACCESS_KEY})
    sink = job.sink
    assert isinstance(sink, MaxComputeSinkConfig)
    assert sink.access_id == "the-id"
    assert sink.access_key.get_secret_value() == ACCESS_KEY
    assert sink.endpoint == "http://service.cn-hangzhou.maxcompute.aliyun.com/api"
    assert (sink.tunnel_endpoint, sink.compress_algorithm, sink.buckets_num) == (
        "http://dt.cn-hangzhou.maxcompute.aliyun.com",
        "raw",
        16,
    )
    assert ACCESS_KEY not in repr(job) and ACCESS_KEY not in str(sink)


def test_config_refuses_what_maxcompute_cannot_take() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="endpoint"):
        config(endpoint="service.cn-hangzhou.maxcompute.aliyun.com")
    with pytest.raises(ValidationError, match="compress.algorithm"):
        config(**{"compress.algorithm": "gzip"})
    with pytest.raises(ValidationError, match="buckets-num"):
        config(**{"buckets-num": 0})
