"""MaxCompute's DDL, as its SQL reference writes it.

- ``CREATE TABLE IF NOT EXISTS `p`.`t` (`c` TYPE [NOT NULL] [COMMENT '...'], ..., PRIMARY KEY (...))
  [COMMENT '...'] [TBLPROPERTIES ('transactional'='true', 'write.bucket.num'='16')]``: a table with
  a primary key is a Delta table (transactional, with a bucket count), as Flink CDC creates it;
- ``ALTER TABLE t ADD COLUMNS (`c` TYPE)``: new columns go last and are nullable;
- ``ALTER TABLE t DROP COLUMNS `c```;
- ``ALTER TABLE t CHANGE COLUMN `old` RENAME TO `new```;
- ``ALTER TABLE t CHANGE COLUMN `c` `c` TYPE`` (a compatible type only) and
  ``ALTER TABLE t CHANGE COLUMN `c` NULL`` (drops NOT NULL);
- ``TRUNCATE TABLE t``, ``DROP TABLE IF EXISTS t``.

Identifiers are backquoted (a backquote inside is doubled); string literals are single-quoted with
MaxCompute's backslash escapes. MaxCompute has no SQLAlchemy dialect, so these are rendered here
rather than on the SQL sinks' base. Rows do not go through SQL: the sink writes them through the
Tunnel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ferry.model.schema import Column, Schema
from ferry.model.types import DataType
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.maxcompute.types import quote, type_name

_ESCAPES = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b"}


class MaxComputeDialect:
    """Renders MaxCompute statements; types go through :func:`~ferry.sinks.maxcompute.types.type_name`."""

    name = "maxcompute"

    # ------------------------------------------------------------------------------- names

    def quote_identifier(self, name: str) -> str:
        return quote(name)

    def quote_literal(self, value: str) -> str:
        if "\x00" in value:
            raise SinkTerminalError(f"literal {value!r} contains a NUL character", sink=self.name)
        return "'" + "".join(_ESCAPES.get(ch, ch) for ch in value) + "'"

    def table_name(self, table: SqlTable) -> str:
        """```project`.`table``` (or ```table``` without a project)."""
        name = quote(table.name)
        return name if table.schema is None else f"{quote(table.schema)}.{name}"

    def column_definition(self, column: Column, *, nullable: bool | None = None) -> str:
        """```name` TYPE [NOT NULL] [COMMENT '...']``; ``nullable`` overrides the type's own."""
        null_ok = column.type.nullable if nullable is None else nullable
        return (
            f"{quote(column.name)} {type_name(column.type)}"
            + ("" if null_ok else " NOT NULL")
            + (f" COMMENT {self.quote_literal(column.comment)}" if column.comment else "")
        )

    # ------------------------------------------------------------------------------- DDL

    def create_table(
        self,
        table: SqlTable,
        schema: Schema,
        primary_keys: Sequence[str] = (),
        properties: Mapping[str, str] | None = None,
    ) -> str:
        """``CREATE TABLE IF NOT EXISTS``; key columns are NOT NULL."""
        keys = set(primary_keys)
        elements = [self.column_definition(c, nullable=False if c.name in keys else None) for c in schema]
        if primary_keys:
            elements.append(f"PRIMARY KEY ({', '.join(quote(k) for k in primary_keys)})")
        body = ",\n  ".join(elements)
        sql = f"CREATE TABLE IF NOT EXISTS {self.table_name(table)} (\n  {body}\n)"
        if schema.comment:
            sql += f"\nCOMMENT {self.quote_literal(schema.comment)}"
        if properties:
            pairs = ", ".join(
                f"{self.quote_literal(k)}={self.quote_literal(v)}" for k, v in properties.items()
            )
            sql += f"\nTBLPROPERTIES ({pairs})"
        return sql

    def add_column(self, table: SqlTable, column: Column) -> str:
        """MaxCompute appends an added column last, nullable (rows written before have no value)."""
        added = self.column_definition(column, nullable=True)
        return f"ALTER TABLE {self.table_name(table)} ADD COLUMNS ({added})"

    def drop_column(self, table: SqlTable, column: str) -> str:
        return f"ALTER TABLE {self.table_name(table)} DROP COLUMNS {quote(column)}"

    def rename_column(self, table: SqlTable, old: str, new: str) -> str:
        return f"ALTER TABLE {self.table_name(table)} CHANGE COLUMN {quote(old)} RENAME TO {quote(new)}"

    def alter_column_type(self, table: SqlTable, column: str, new_type: DataType) -> str:
        """A new type (nullability is changed apart: :meth:`drop_not_null`)."""
        name = quote(column)
        return f"ALTER TABLE {self.table_name(table)} CHANGE COLUMN {name} {name} {type_name(new_type)}"

    def drop_not_null(self, table: SqlTable, column: str) -> str:
        return f"ALTER TABLE {self.table_name(table)} CHANGE COLUMN {quote(column)} NULL"

    def truncate(self, table: SqlTable) -> str:
        return f"TRUNCATE TABLE {self.table_name(table)}"

    def drop_table(self, table: SqlTable) -> str:
        return f"DROP TABLE IF EXISTS {self.table_name(table)}"
