"""Hologres's SQL: PostgreSQL's DDL, columns added only at the end, ``set_table_property`` and the
three ways a write meets an existing key (``mutatetype``).

Hologres speaks the PostgreSQL protocol and its DDL (``CREATE TABLE`` with ``PRIMARY KEY``,
``ALTER TABLE ... ADD COLUMN`` / ``RENAME COLUMN``, ``TRUNCATE``, ``DROP TABLE``), so statements are
compiled with SQLAlchemy's PostgreSQL dialect. What only Hologres has are table properties
(distribution key, clustering key, orientation, ...), set by
``CALL set_table_property('<table>', '<property>', '<value>')`` in the transaction that creates the
table; :meth:`HologresDialect.table_property_statements` renders them, apart from the rest, so that a
PostgreSQL server can run everything else.

Writes to a table with a primary key are ``INSERT ... ON CONFLICT (<key>)``: ``DO NOTHING``
(:meth:`HologresDialect.insert_or_ignore`), ``DO UPDATE SET`` of every other column of the table,
``NULL`` where the write has no value (:meth:`HologresDialect.insert_or_replace`), or of the written
columns only (:meth:`~ferry.sinks.base.sql.dialect.SqlDialect.upsert`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import null
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.types import TypeEngine

from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.sql import ddl
from ferry.sinks.base.sql.dialect import SqlDialect, SqlTable

#: Array element types Hologres stores (``INT4[]``, ``INT8[]``, ``FLOAT4[]``, ``FLOAT8[]``, ``BOOLEAN[]``,
#: ``TEXT[]``).
ARRAY_ELEMENTS = (
    TypeRoot.INT,
    TypeRoot.BIGINT,
    TypeRoot.FLOAT,
    TypeRoot.DOUBLE,
    TypeRoot.BOOLEAN,
    TypeRoot.STRING,
)


class HologresDialect(SqlDialect):
    name = "hologres"

    def sql_type(self, t: DataType) -> TypeEngine[Any]:
        # times take their default precision (microseconds), as Flink CDC's connector creates them
        root = t.root
        if root is TypeRoot.TIME:
            return pg.TIME()
        if root is TypeRoot.TIMESTAMP:
            return pg.TIMESTAMP()
        if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
            return pg.TIMESTAMP(timezone=True)
        return super().sql_type(t)

    def set_table_property(self, table: SqlTable, key: str, value: str) -> str:
        """``CALL set_table_property('"schema"."table"', 'key', 'value')`` (Hologres only)."""
        return self.compile(ddl.SetTableProperty(self.sa_table(table), key, value))

    def table_property_statements(self, table: SqlTable, properties: Mapping[str, str]) -> list[str]:
        """The ``set_table_property`` calls of a new table, in the order of ``properties``."""
        return [self.set_table_property(table, key, value) for key, value in properties.items()]

    def insert_or_ignore(self, table: SqlTable, columns: Sequence[str], keys: Sequence[str]) -> str:
        """Insert a row; a row with the same key stays as it is (``mutatetype: insertorignore``)."""
        statement = pg.insert(self.row_table(table, columns))
        return self.compile_dml(statement.on_conflict_do_nothing(index_elements=list(keys)), columns)

    def insert_or_replace(
        self, table: SqlTable, columns: Sequence[str], keys: Sequence[str], table_columns: Sequence[str]
    ) -> str:
        """Insert a row, or replace the whole row with the same key: the table's columns the write
        has no value for become NULL (``mutatetype: insertorreplace``)."""
        missing = [c for c in table_columns if c not in set(columns) and c not in set(keys)]
        statement = pg.insert(self.row_table(table, columns, missing))
        excluded = statement.excluded
        values: dict[str, Any] = {c: excluded[c] for c in columns if c not in set(keys)}
        values.update({c: null() for c in missing})
        if not values:
            return self.insert_or_ignore(table, columns, keys)
        return self.compile_dml(
            statement.on_conflict_do_update(index_elements=list(keys), set_=values), columns
        )
