"""The Hologres (PostgreSQL) statements against statements written from the documented syntax.

PostgreSQL: ``CREATE TABLE``, ``ALTER TABLE`` (``ADD COLUMN``, ``DROP COLUMN``, ``RENAME COLUMN``,
``ALTER COLUMN ... TYPE``), ``TRUNCATE``, ``DROP TABLE``, ``INSERT ... ON CONFLICT``. Hologres:
``CALL set_table_property('<table>', '<property>', '<value>')`` and columns added only at the end.
"""

from __future__ import annotations

import pytest

from ferry.model import types as T
from ferry.model.events import FIRST, after
from ferry.model.schema import Column, Schema
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql.dialect import CatalogColumn, SqlDialect, SqlTable
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.dialect import HologresDialect
from ferry.sinks.hologres.sink import HologresSink
from ferry.sinks.hologres.types import TypeNormalizeStrategy

D = HologresDialect()
ORDERS = SqlTable("public", "orders")


def test_quoting_doubles_the_quote_character() -> None:
    assert D.quote_identifier("orders") == '"orders"'
    assert D.quote_identifier('say "hi"') == '"say ""hi"""'
    assert D.quote_identifier("select") == '"select"'
    assert D.quote_identifier('x"; DROP TABLE t; --') == '"x""; DROP TABLE t; --"'
    assert D.table_name(SqlTable('my"schema', "user")) == '"my""schema"."user"'
    assert D.table_name(SqlTable(None, "Order")) == '"Order"'
    assert D.quote_literal("it's") == "'it''s'"
    with pytest.raises(SinkTerminalError):
        D.quote_identifier("a\x00b")


def test_create_table_with_a_primary_key() -> None:
    schema = Schema.of(
        [
            Column("id", T.BIGINT()),
            Column("name", T.VARCHAR(64).not_null()),
            Column("price", T.DECIMAL(10, 2)),
            Column("at", T.TIMESTAMP_LTZ(6)),
            Column("tags", T.ARRAY(T.STRING())),
        ],
        ["id"],
    )
    assert D.create_table(ORDERS, schema, ["id"]) == (
        'CREATE TABLE IF NOT EXISTS "public"."orders" (\n'
        '  "id" BIGINT NOT NULL,\n'
        '  "name" VARCHAR(64) NOT NULL,\n'
        '  "price" NUMERIC(10, 2),\n'
        '  "at" TIMESTAMPTZ,\n'
        '  "tags" TEXT[],\n'
        '  PRIMARY KEY ("id")\n'
        ")"
    )


def test_create_table_with_a_composite_key_and_no_key() -> None:
    schema = Schema.of([Column("a", T.INT()), Column("b", T.STRING()), Column("c", T.BOOLEAN())], ["a", "b"])
    assert D.create_table(SqlTable(None, "t"), schema, ["a", "b"]) == (
        'CREATE TABLE IF NOT EXISTS "t" (\n'
        '  "a" INTEGER NOT NULL,\n'
        '  "b" TEXT NOT NULL,\n'
        '  "c" BOOLEAN,\n'
        '  PRIMARY KEY ("a", "b")\n'
        ")"
    )
    assert D.create_table(SqlTable(None, "t"), schema.with_columns(schema.columns[2:])) == (
        'CREATE TABLE IF NOT EXISTS "t" (\n  "c" BOOLEAN\n)'
    )


@pytest.mark.parametrize(
    ("ferry_type", "sql"),
    [
        (T.BOOLEAN(), "BOOLEAN"),
        (T.TINYINT(), "SMALLINT"),
        (T.SMALLINT(), "SMALLINT"),
        (T.INT(), "INTEGER"),
        (T.BIGINT(), "BIGINT"),
        (T.FLOAT(), "REAL"),
        (T.DOUBLE(), "DOUBLE PRECISION"),
        (T.DECIMAL(38, 10), "NUMERIC(38, 10)"),
        (T.CHAR(3), "CHAR(3)"),
        (T.VARCHAR(20), "VARCHAR(20)"),
        (T.VARCHAR(), "TEXT"),
        (T.STRING(), "TEXT"),
        (T.BYTES(), "BYTEA"),
        (T.DATE(), "DATE"),
        (T.TIME(3), "TIME"),
        (T.TIMESTAMP(3), "TIMESTAMP"),
        (T.TIMESTAMP_TZ(6), "TIMESTAMPTZ"),
        (T.ARRAY(T.BIGINT()), "BIGINT[]"),
    ],
)
def test_hologres_types(ferry_type: T.DataType, sql: str) -> None:
    assert D.render_type(ferry_type) == sql


def test_postgresql_base_keeps_time_precision() -> None:
    base = SqlDialect()
    assert base.render_type(T.TIMESTAMP(3)) == "TIMESTAMP(3)"
    assert base.render_type(T.TIMESTAMP_LTZ(9)) == "TIMESTAMPTZ(6)"
    assert base.render_type(T.TIME(0)) == "TIME(0)"


def test_add_column_is_appended_last_whatever_the_position() -> None:
    column = Column("note", T.VARCHAR(100))
    expected = 'ALTER TABLE "public"."orders" ADD COLUMN "note" VARCHAR(100)'
    assert D.add_column(ORDERS, column) == expected
    assert D.add_column(ORDERS, column, FIRST) == expected
    assert D.add_column(ORDERS, column, after("id")) == expected
    assert (
        D.add_column(ORDERS, Column("n", T.INT().not_null()))
        == 'ALTER TABLE "public"."orders" ADD COLUMN "n" INTEGER NOT NULL'
    )


def test_drop_rename_alter_truncate_drop_table() -> None:
    assert D.drop_column(ORDERS, "note") == 'ALTER TABLE "public"."orders" DROP COLUMN "note"'
    assert D.rename_column(ORDERS, "a", "b") == 'ALTER TABLE "public"."orders" RENAME COLUMN "a" TO "b"'
    assert D.alter_column_type(ORDERS, "qty", T.BIGINT()) == (
        'ALTER TABLE "public"."orders" ALTER COLUMN "qty" TYPE BIGINT USING "qty"::BIGINT, '
        'ALTER COLUMN "qty" DROP NOT NULL'
    )
    assert D.alter_column_type(ORDERS, "qty", T.BIGINT().not_null()).endswith(
        'ALTER COLUMN "qty" SET NOT NULL'
    )
    assert D.truncate(ORDERS) == 'TRUNCATE TABLE "public"."orders"'
    assert D.drop_table(ORDERS) == 'DROP TABLE IF EXISTS "public"."orders"'
    assert D.create_schema("ods") == 'CREATE SCHEMA IF NOT EXISTS "ods"'


def test_upsert_and_delete_by_key() -> None:
    assert D.upsert(ORDERS, ["id", "qty", "note"], ["id"]) == (
        'INSERT INTO "public"."orders" ("id", "qty", "note") VALUES (%s, %s, %s) '
        'ON CONFLICT ("id") DO UPDATE SET "qty" = "excluded"."qty", "note" = "excluded"."note"'
    )
    assert D.upsert(ORDERS, ["a", "b"], ["a", "b"]) == (
        'INSERT INTO "public"."orders" ("a", "b") VALUES (%s, %s) ON CONFLICT ("a", "b") DO NOTHING'
    )
    assert D.delete_by_key(ORDERS, ["a", "b"]) == 'DELETE FROM "public"."orders" WHERE "a" = %s AND "b" = %s'


def test_set_table_property_calls() -> None:
    # Hologres: CALL set_table_property('table_name', 'property', 'value'), in the creating transaction
    props = {"orientation": "column", "distribution_key": "id", "clustering_key": "created_at:asc"}
    assert D.table_property_statements(ORDERS, props) == [
        "CALL set_table_property('\"public\".\"orders\"', 'orientation', 'column')",
        "CALL set_table_property('\"public\".\"orders\"', 'distribution_key', 'id')",
        "CALL set_table_property('\"public\".\"orders\"', 'clustering_key', 'created_at:asc')",
    ]
    tricky = SqlTable("public", 'it\'s "odd"')
    assert D.set_table_property(tricky, "bitmap_columns", "a'b") == (
        "CALL set_table_property('\"public\".\"it''s \"\"odd\"\"\"', 'bitmap_columns', 'a''b')"
    )


def _config(**options: str) -> HologresSinkConfig:
    return HologresSinkConfig.model_validate(
        {
            "type": "hologres",
            "endpoint": "h:80",
            "dbname": "d",
            "username": "u",
            "password": "s3cr3t-pw",
            **options,
        }
    )


def test_the_sink_creates_with_properties_only_on_hologres() -> None:
    config = _config(**{"table_property.distribution_key": "id", "sink.type-normalize-strategy": "broaden"})
    schema = Schema.of([Column("id", T.INT()), Column("v", T.FLOAT())], ["id"])
    on_hologres = HologresSink(config, pipeline="p").create_table_statements(ORDERS, schema)
    on_postgres = HologresSink(config, pipeline="p", hologres_only_statements=False).create_table_statements(
        ORDERS, schema
    )
    create = (
        'CREATE TABLE IF NOT EXISTS "public"."orders" (\n'
        '  "id" BIGINT NOT NULL,\n'
        '  "v" DOUBLE PRECISION,\n'
        '  PRIMARY KEY ("id")\n'
        ")"
    )
    assert on_hologres == [
        create,
        "CALL set_table_property('\"public\".\"orders\"', 'distribution_key', 'id')",
    ]
    assert on_postgres == [create]


@pytest.mark.parametrize(
    ("strategy", "source", "stored"),
    [
        ("standard", T.TIME(3), T.TIME(6)),
        ("standard", T.ARRAY(T.TINYINT()), T.ARRAY(T.INT())),
        ("standard", T.ARRAY(T.DECIMAL(10, 2)), T.STRING()),
        ("broaden", T.INT().not_null(), T.BIGINT().not_null()),
        ("only-bigint-or-text", T.DATE(), T.STRING()),
    ],
)
def test_sink_type_is_what_the_table_reads_back(
    strategy: str, source: T.DataType, stored: T.DataType
) -> None:
    sink = HologresSink(_config(**{"sink.type-normalize-strategy": strategy}), pipeline="p")
    assert sink.config.type_normalize_strategy is TypeNormalizeStrategy(strategy)
    assert sink.sink_type(source) == stored


def test_catalog_types_read_back() -> None:
    def col(data_type: str, udt: str, nullable: str = "YES", **kw: int | None) -> CatalogColumn:
        values: dict[str, int | None] = {
            "character_maximum_length": None,
            "numeric_precision": None,
            "numeric_scale": None,
            "datetime_precision": None,
            **kw,
        }
        return CatalogColumn("c", data_type, udt, nullable, **values)

    assert D.catalog_type(col("integer", "int4", "NO")) == T.INT().not_null()
    assert D.catalog_type(col("numeric", "numeric", numeric_precision=10, numeric_scale=2)) == T.DECIMAL(
        10, 2
    )
    assert D.catalog_type(col("character varying", "varchar", character_maximum_length=5)) == T.VARCHAR(5)
    assert D.catalog_type(col("text", "text")) == T.STRING()
    assert D.catalog_type(col("timestamp with time zone", "timestamptz", datetime_precision=6)) == (
        T.TIMESTAMP_LTZ(6)
    )
    assert D.catalog_type(col("ARRAY", "_int8")) == T.ARRAY(T.BIGINT())
    assert D.catalog_type(col("bytea", "bytea")) == T.BYTES()


def test_config_endpoint_and_secret() -> None:
    config = _config()
    assert (config.host, config.port) == ("h", 80)
    assert "s3cr3t-pw" not in repr(config) and "**********" in repr(config)
    assert _config(endpoint="db.example.com").port == 80
    with pytest.raises(ValueError, match="host:port"):
        _config(endpoint="h:port")
