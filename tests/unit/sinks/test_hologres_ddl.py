"""Hologres's statements, compiled with SQLAlchemy's PostgreSQL dialect, against statements written
by hand from Hologres's documented syntax:

- ``CREATE TABLE [IF NOT EXISTS] [schema.]table (col type [NOT NULL], ..., PRIMARY KEY (k1, k2))``,
  then ``CALL set_table_property('<table>', '<property>', '<value>')`` in the same transaction;
- ``ALTER TABLE t ADD COLUMN col type`` (always appended last), ``DROP COLUMN col``,
  ``RENAME COLUMN old TO new``, ``ALTER COLUMN col TYPE type``;
- ``INSERT INTO ... ON CONFLICT (k) DO NOTHING | DO UPDATE SET col = EXCLUDED.col`` for ``mutatetype``;
- identifiers in double quotes, a double quote inside doubled.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy.dialects.postgresql.base import PGDialect

from ferry.model.events import after
from ferry.model.schema import Column, Schema
from ferry.model.types import BIGINT, BOOLEAN, INT, STRING, TIMESTAMP_LTZ, VARCHAR
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.hologres.config import HologresSinkConfig, MutateType
from ferry.sinks.hologres.dialect import HologresDialect

D = HologresDialect()
ORDERS = SqlTable("ods", "orders")


def _config(**options: str) -> HologresSinkConfig:
    return HologresSinkConfig.model_validate(
        {"type": "hologres", "endpoint": "h:80", "dbname": "d", "username": "u", "password": "p", **options}
    )


def test_statements_are_compiled_by_the_postgresql_dialect() -> None:
    assert isinstance(D.ddl_dialect, PGDialect) and D.ddl_dialect.name == "postgresql"


def test_create_table_with_a_composite_key_then_table_properties() -> None:
    schema = Schema.of(
        [
            Column("shop", INT().not_null()),
            Column("id", BIGINT().not_null()),
            Column("paid", BOOLEAN()),
            Column("at", TIMESTAMP_LTZ(3)),
        ],
        ["shop", "id"],
    )
    assert D.create_table(ORDERS, schema, ["shop", "id"]) == (
        'CREATE TABLE IF NOT EXISTS "ods"."orders" (\n'
        '  "shop" INTEGER NOT NULL,\n'
        '  "id" BIGINT NOT NULL,\n'
        '  "paid" BOOLEAN,\n'
        '  "at" TIMESTAMPTZ,\n'
        '  PRIMARY KEY ("shop", "id")\n'
        ")"
    )
    properties = {"orientation": "column", "distribution_key": "shop,id", "clustering_key": "at:asc"}
    assert D.table_property_statements(ORDERS, properties) == [
        "CALL set_table_property('\"ods\".\"orders\"', 'orientation', 'column')",
        "CALL set_table_property('\"ods\".\"orders\"', 'distribution_key', 'shop,id')",
        "CALL set_table_property('\"ods\".\"orders\"', 'clustering_key', 'at:asc')",
    ]


def test_alter_column_statements() -> None:
    assert D.add_column(ORDERS, Column("note", STRING()), after("id")) == (
        'ALTER TABLE "ods"."orders" ADD COLUMN "note" TEXT'
    )
    assert D.drop_column(ORDERS, "note") == 'ALTER TABLE "ods"."orders" DROP COLUMN "note"'
    assert (
        D.rename_column(ORDERS, "note", "memo") == 'ALTER TABLE "ods"."orders" RENAME COLUMN "note" TO "memo"'
    )
    assert D.alter_column_type(ORDERS, "memo", VARCHAR(20)) == (
        'ALTER TABLE "ods"."orders" ALTER COLUMN "memo" TYPE VARCHAR(20) USING "memo"::VARCHAR(20), '
        'ALTER COLUMN "memo" DROP NOT NULL'
    )


def test_hostile_names_stay_names() -> None:
    table = SqlTable('s"x', 'o"; DROP SCHEMA ods CASCADE; --')
    name = '"s""x"."o""; DROP SCHEMA ods CASCADE; --"'
    schema = Schema.of([Column("user", INT().not_null()), Column("it's", STRING())], ["user"])
    assert D.create_table(table, schema, ["user"]) == (
        f'CREATE TABLE IF NOT EXISTS {name} (\n  "user" INTEGER NOT NULL,\n  "it\'s" TEXT,\n  PRIMARY KEY ("user")\n)'
    )
    assert D.rename_column(table, "it's", 'a"b') == f'ALTER TABLE {name} RENAME COLUMN "it\'s" TO "a""b"'
    assert D.set_table_property(table, "bitmap_columns", "x'); DROP TABLE t; --") == (
        'CALL set_table_property(\'"s""x"."o""; DROP SCHEMA ods CASCADE; --"\', '
        "'bitmap_columns', 'x''); DROP TABLE t; --')"
    )
    assert D.create_schema('s"x') == 'CREATE SCHEMA IF NOT EXISTS "s""x"'
    for refused in (lambda: D.drop_column(ORDERS, "a\x00b"), lambda: D.quote_literal("a\x00b")):
        with pytest.raises(SinkTerminalError, match="NUL"):
            refused()


def test_a_percent_is_doubled_only_where_parameters_are_bound() -> None:
    assert D.add_column(ORDERS, Column("50%", INT())) == 'ALTER TABLE "ods"."orders" ADD COLUMN "50%" INTEGER'
    assert D.upsert(ORDERS, ["id", "50%"], ["id"]) == (
        'INSERT INTO "ods"."orders" ("id", "50%%") VALUES (%s, %s) '
        'ON CONFLICT ("id") DO UPDATE SET "50%%" = "excluded"."50%%"'
    )


def test_the_three_mutate_types() -> None:
    columns, keys = ["id", "qty"], ["id"]
    insert = 'INSERT INTO "ods"."orders" ("id", "qty") VALUES (%s, %s) ON CONFLICT ("id") '
    assert D.insert_or_ignore(ORDERS, columns, keys) == insert + "DO NOTHING"
    assert D.upsert(ORDERS, columns, keys) == insert + 'DO UPDATE SET "qty" = "excluded"."qty"'
    assert D.insert_or_replace(ORDERS, columns, keys, ["id", "qty", "note", "tag"]) == (
        insert + 'DO UPDATE SET "qty" = "excluded"."qty", "note" = NULL, "tag" = NULL'
    )
    # a table of key columns only: nothing to replace
    assert D.insert_or_replace(ORDERS, ["id"], keys, ["id"]) == (
        'INSERT INTO "ods"."orders" ("id") VALUES (%s) ON CONFLICT ("id") DO NOTHING'
    )


def test_mutatetype_option() -> None:
    assert _config().mutate_type is MutateType.INSERT_OR_UPDATE
    assert _config(mutatetype="insertorignore").mutate_type is MutateType.INSERT_OR_IGNORE
    assert _config(mutatetype="insertorreplace").mutate_type is MutateType.INSERT_OR_REPLACE
    with pytest.raises(ValidationError, match="mutatetype"):
        _config(mutatetype="upsert")
