"""Hologres's SQL: PostgreSQL's DDL, columns added only at the end, and ``set_table_property``.

Hologres speaks the PostgreSQL protocol and its DDL (``CREATE TABLE`` with ``PRIMARY KEY``,
``ALTER TABLE ... ADD COLUMN`` / ``RENAME COLUMN``, ``TRUNCATE``, ``DROP TABLE``). What only Hologres
has are table properties (distribution key, clustering key, orientation, ...), set by
``CALL set_table_property('<table>', '<property>', '<value>')`` in the transaction that creates the
table; :meth:`HologresDialect.table_property_statements` renders them, apart from the rest, so that a
PostgreSQL server can run everything else.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.pipeline.events import ColumnPosition
from ferry.pipeline.types import DataType, TypeRoot
from ferry.sinks.sql.dialect import SqlDialect, SqlTable

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

_TIME_NAMES = {
    TypeRoot.TIME: "TIME",
    TypeRoot.TIMESTAMP: "TIMESTAMP",
    TypeRoot.TIMESTAMP_LTZ: "TIMESTAMPTZ",
    TypeRoot.TIMESTAMP_TZ: "TIMESTAMPTZ",
}


class HologresDialect(SqlDialect):
    name = "hologres"

    def render_type(self, t: DataType) -> str:
        # times take their default precision (microseconds), as Flink CDC's connector creates them
        name = _TIME_NAMES.get(t.root)
        return name if name is not None else super().render_type(t)

    def column_position(self, position: ColumnPosition) -> str:
        return ""  # Hologres appends every added column last

    def set_table_property(self, table: SqlTable, key: str, value: str) -> str:
        """``CALL set_table_property('"schema"."table"', 'key', 'value')`` (Hologres only)."""
        args = (self.table_name(table), key, value)
        return f"CALL set_table_property({', '.join(self.quote_literal(a) for a in args)})"

    def table_property_statements(self, table: SqlTable, properties: Mapping[str, str]) -> list[str]:
        """The ``set_table_property`` calls of a new table, in the order of ``properties``."""
        return [self.set_table_property(table, key, value) for key, value in properties.items()]
