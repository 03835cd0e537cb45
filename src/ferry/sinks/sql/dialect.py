"""The DDL and DML every SQL-speaking sink issues, with small hooks where dialects differ.

:class:`SqlDialect` renders statements as strings: quoting, types, ``CREATE TABLE`` with keys and
properties, the column changes of ``ALTER TABLE``, ``TRUNCATE``, ``DROP TABLE`` and the upsert and
delete statements of the writer. A dialect overrides only what its database spells differently:

- :attr:`SqlDialect.quote_char` (``"`` in PostgreSQL, a backtick in StarRocks and Doris);
- :attr:`SqlDialect.type_names` and :meth:`SqlDialect.render_type` (the type mapping, as data);
- :meth:`SqlDialect.column_position` (``FIRST``/``AFTER`` where an ADD COLUMN takes a position);
- :meth:`SqlDialect.key_clause` and :meth:`SqlDialect.table_options` (keys, distribution and
  properties of ``CREATE TABLE``);
- :meth:`SqlDialect.alter_column_type`, :meth:`SqlDialect.upsert`.

The base spells everything as PostgreSQL does. Every identifier goes through
:meth:`SqlDialect.quote_identifier` and every value is a bound parameter (``%s``), so no table or
column name can end a statement early.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ferry.pipeline import types as ft
from ferry.pipeline.events import ColumnPosition
from ferry.pipeline.schema import Column, Schema
from ferry.pipeline.types import DataType, TypeRoot
from ferry.sinks.exceptions import SinkTerminalError


class SqlTable(NamedTuple):
    """A table as the database names it: an optional schema (database) and a table name."""

    schema: str | None
    name: str

    def __str__(self) -> str:
        return self.name if self.schema is None else f"{self.schema}.{self.name}"


class SqlDialect:
    """PostgreSQL spelling; subclasses override the hooks their database spells otherwise."""

    #: The name of the dialect, in error messages.
    name: str = "postgresql"
    #: The character around a quoted identifier; inside one it is doubled.
    quote_char: str = '"'
    #: The placeholder of a bound parameter (psycopg and PyMySQL both take ``%s``).
    placeholder: str = "%s"
    #: Largest fractional-second precision of TIME and TIMESTAMP.
    max_time_precision: int = 6
    #: Longest VARCHAR; a longer one is the unbounded string type.
    max_varchar_length: int = 10_485_760
    #: Types without parameters: ferry type root → SQL type name.
    type_names: Mapping[TypeRoot, str] = {
        TypeRoot.BOOLEAN: "BOOLEAN",
        TypeRoot.TINYINT: "SMALLINT",
        TypeRoot.SMALLINT: "SMALLINT",
        TypeRoot.INT: "INTEGER",
        TypeRoot.BIGINT: "BIGINT",
        TypeRoot.FLOAT: "REAL",
        TypeRoot.DOUBLE: "DOUBLE PRECISION",
        TypeRoot.STRING: "TEXT",
        TypeRoot.BINARY: "BYTEA",
        TypeRoot.VARBINARY: "BYTEA",
        TypeRoot.BYTES: "BYTEA",
        TypeRoot.DATE: "DATE",
        TypeRoot.MAP: "TEXT",
        TypeRoot.ROW: "TEXT",
    }

    # ------------------------------------------------------------------------------- names

    def quote_identifier(self, name: str) -> str:
        """``name`` as a quoted identifier; the quote character inside it is doubled."""
        if "\x00" in name:
            raise SinkTerminalError(f"identifier {name!r} contains a NUL character", sink=self.name)
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def quote_literal(self, value: str) -> str:
        """``value`` as a string literal (single quotes doubled): for the few statements that take
        names as strings (Hologres's ``set_table_property``)."""
        if "\x00" in value:
            raise SinkTerminalError(f"literal {value!r} contains a NUL character", sink=self.name)
        return "'" + value.replace("'", "''") + "'"

    def table_name(self, table: SqlTable) -> str:
        name = self.quote_identifier(table.name)
        return name if table.schema is None else f"{self.quote_identifier(table.schema)}.{name}"

    def column_list(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote_identifier(n) for n in names)

    # ------------------------------------------------------------------------------- types

    def render_type(self, t: DataType) -> str:
        """The SQL type of a ferry type, without nullability."""
        root = t.root
        if root is TypeRoot.DECIMAL:
            return f"NUMERIC({t.precision}, {t.scale})"
        if root is TypeRoot.CHAR:
            return f"CHAR({t.length})"
        if root is TypeRoot.VARCHAR:
            length = t.length or self.max_varchar_length + 1
            return "TEXT" if length > self.max_varchar_length else f"VARCHAR({length})"
        if root is TypeRoot.TIME:
            return f"TIME({self._precision(t)})"
        if root is TypeRoot.TIMESTAMP:
            return f"TIMESTAMP({self._precision(t)})"
        if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
            return f"TIMESTAMPTZ({self._precision(t)})"
        if root is TypeRoot.ARRAY:
            assert t.element is not None
            return self.render_array(t.element)
        try:
            return self.type_names[root]
        except KeyError:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name) from None

    def render_array(self, element: DataType) -> str:
        if element.root is TypeRoot.ARRAY:
            raise SinkTerminalError(f"no {self.name} type for nested arrays", sink=self.name)
        return self.render_type(element) + "[]"

    def _precision(self, t: DataType) -> int:
        return min(
            t.precision if t.precision is not None else self.max_time_precision, self.max_time_precision
        )

    def column_definition(self, column: Column, *, nullable: bool | None = None) -> str:
        """``"name" TYPE [NOT NULL]``; ``nullable`` overrides the type's own nullability."""
        null_ok = column.type.nullable if nullable is None else nullable
        return f"{self.quote_identifier(column.name)} {self.render_type(column.type)}" + (
            "" if null_ok else " NOT NULL"
        )

    # ------------------------------------------------------------------------------- DDL hooks

    def key_clause(self, primary_keys: Sequence[str]) -> str | None:
        """The key element of ``CREATE TABLE``'s column list, or ``None`` without keys."""
        return f"PRIMARY KEY ({self.column_list(primary_keys)})" if primary_keys else None

    def table_options(
        self, schema: Schema, primary_keys: Sequence[str], properties: Mapping[str, str]
    ) -> str:
        """What follows the closing parenthesis of ``CREATE TABLE`` (distribution, properties)."""
        return ""

    def column_position(self, position: ColumnPosition) -> str:
        """The position clause of ``ADD COLUMN`` (with a leading space), or ``""``: appended last."""
        return ""

    # ------------------------------------------------------------------------------- DDL

    def schema_exists_query(self) -> str:
        """One row when the schema (parameter) exists."""
        return f"SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = {self.placeholder}"

    def create_schema(self, schema: str) -> str:
        return f"CREATE SCHEMA IF NOT EXISTS {self.quote_identifier(schema)}"

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
        key = self.key_clause(primary_keys)
        if key is not None:
            elements.append(key)
        options = self.table_options(schema, primary_keys, properties or {})
        body = ",\n  ".join(elements)
        return f"CREATE TABLE IF NOT EXISTS {self.table_name(table)} (\n  {body}\n){options}"

    def add_column(self, table: SqlTable, column: Column, position: ColumnPosition | None = None) -> str:
        clause = "" if position is None else self.column_position(position)
        return f"ALTER TABLE {self.table_name(table)} ADD COLUMN {self.column_definition(column)}{clause}"

    def drop_column(self, table: SqlTable, column: str) -> str:
        return f"ALTER TABLE {self.table_name(table)} DROP COLUMN {self.quote_identifier(column)}"

    def rename_column(self, table: SqlTable, old: str, new: str) -> str:
        return (
            f"ALTER TABLE {self.table_name(table)} "
            f"RENAME COLUMN {self.quote_identifier(old)} TO {self.quote_identifier(new)}"
        )

    def alter_column_type(self, table: SqlTable, column: str, new_type: DataType) -> str:
        """A new type, and NOT NULL set or dropped to match the type's nullability."""
        name = self.quote_identifier(column)
        sql_type = self.render_type(new_type)
        nullability = "DROP NOT NULL" if new_type.nullable else "SET NOT NULL"
        return (
            f"ALTER TABLE {self.table_name(table)} "
            f"ALTER COLUMN {name} TYPE {sql_type} USING {name}::{sql_type}, "
            f"ALTER COLUMN {name} {nullability}"
        )

    def truncate(self, table: SqlTable) -> str:
        return f"TRUNCATE TABLE {self.table_name(table)}"

    def drop_table(self, table: SqlTable) -> str:
        return f"DROP TABLE IF EXISTS {self.table_name(table)}"

    # ------------------------------------------------------------------------------- DML

    def insert(self, table: SqlTable, columns: Sequence[str]) -> str:
        values = ", ".join(self.placeholder for _ in columns)
        return f"INSERT INTO {self.table_name(table)} ({self.column_list(columns)}) VALUES ({values})"

    def upsert(self, table: SqlTable, columns: Sequence[str], keys: Sequence[str]) -> str:
        """Insert a row, or replace the non-key columns of the row with the same key."""
        others = [c for c in columns if c not in set(keys)]
        action = (
            "DO UPDATE SET " + ", ".join(f"{q} = EXCLUDED.{q}" for q in map(self.quote_identifier, others))
            if others
            else "DO NOTHING"
        )
        return f"{self.insert(table, columns)} ON CONFLICT ({self.column_list(keys)}) {action}"

    def delete_by_key(self, table: SqlTable, keys: Sequence[str]) -> str:
        condition = " AND ".join(f"{self.quote_identifier(k)} = {self.placeholder}" for k in keys)
        return f"DELETE FROM {self.table_name(table)} WHERE {condition}"

    # ------------------------------------------------------------------------------- catalog

    def columns_query(self) -> str:
        """Columns of one table (parameters: schema, table), in order, from ``information_schema``."""
        p = self.placeholder
        return (
            "SELECT column_name, data_type, udt_name, is_nullable, character_maximum_length, "
            "numeric_precision, numeric_scale, datetime_precision "
            "FROM information_schema.columns "
            f"WHERE table_schema = {p} AND table_name = {p} ORDER BY ordinal_position"
        )

    def primary_key_query(self) -> str:
        """Primary key columns of one table (parameters: schema, table), in key order."""
        p = self.placeholder
        return (
            "SELECT k.column_name FROM information_schema.table_constraints c "
            "JOIN information_schema.key_column_usage k "
            "ON k.constraint_schema = c.constraint_schema AND k.constraint_name = c.constraint_name "
            "AND k.table_schema = c.table_schema AND k.table_name = c.table_name "
            f"WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = {p} AND c.table_name = {p} "
            "ORDER BY k.ordinal_position"
        )

    def catalog_type(self, column: CatalogColumn) -> DataType:
        """The ferry type of a column as ``information_schema.columns`` describes it."""
        data_type = column.data_type.lower()
        if data_type == "array":
            element = _PG_UDT.get(column.udt_name.lstrip("_"), ft.STRING())
            base = ft.ARRAY(element)
        elif data_type == "numeric":
            base = (
                ft.DECIMAL(column.numeric_precision, column.numeric_scale or 0)
                if column.numeric_precision is not None
                else ft.STRING()
            )
        elif data_type in ("character", "character varying"):
            length = column.character_maximum_length
            if length is None:
                base = ft.STRING()
            else:
                base = ft.CHAR(length) if data_type == "character" else ft.VARCHAR(length)
        elif data_type in _PG_TIMES:
            base = DataType(_PG_TIMES[data_type], precision=column.datetime_precision)
        else:
            base = _PG_UDT.get(column.udt_name, ft.STRING())
        return base.with_nullable(column.nullable)


class CatalogColumn(NamedTuple):
    """One row of :meth:`SqlDialect.columns_query`."""

    name: str
    data_type: str
    udt_name: str
    is_nullable: str
    character_maximum_length: int | None
    numeric_precision: int | None
    numeric_scale: int | None
    datetime_precision: int | None

    @property
    def nullable(self) -> bool:
        return self.is_nullable.upper() == "YES"


#: PostgreSQL's internal type names (``udt_name``) of the types without parameters.
_PG_UDT: dict[str, DataType] = {
    "bool": ft.BOOLEAN(),
    "int2": ft.SMALLINT(),
    "int4": ft.INT(),
    "int8": ft.BIGINT(),
    "float4": ft.FLOAT(),
    "float8": ft.DOUBLE(),
    "text": ft.STRING(),
    "varchar": ft.STRING(),
    "bpchar": ft.STRING(),
    "json": ft.STRING(),
    "jsonb": ft.STRING(),
    "bytea": ft.BYTES(),
    "date": ft.DATE(),
    "numeric": ft.STRING(),
}
_PG_TIMES: dict[str, TypeRoot] = {
    "time without time zone": TypeRoot.TIME,
    "timestamp without time zone": TypeRoot.TIMESTAMP,
    "timestamp with time zone": TypeRoot.TIMESTAMP_LTZ,
}
