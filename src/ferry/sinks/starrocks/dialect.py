"""The MySQL-protocol SQL of StarRocks (and, through :class:`MySqlProtocolDialect`, SelectDB/Doris).

StarRocks and Doris take MySQL's quoting (backticks, doubled inside a name) and MySQL's spelling of
``ALTER TABLE ... ADD COLUMN ... FIRST | AFTER``, ``DROP COLUMN``, ``TRUNCATE TABLE``, ``DROP TABLE``.
Their ``CREATE TABLE`` differs from MySQL's: the key model follows the column list
(``PRIMARY KEY (...)`` in StarRocks, ``UNIQUE KEY (...)`` in Doris), then ``DISTRIBUTED BY HASH(...)``
and ``PROPERTIES ("k" = "v", ...)``; their types too (``STRING``, ``DATETIME``, lengths in bytes).

:class:`MySqlProtocolDialect` is what a MySQL-compatible server (MariaDB) runs: the key inside the
column list, MySQL types, ``ON DUPLICATE KEY UPDATE``. A vendor dialect built with
``vendor_only=True`` adds the vendor's clauses, each rendered by its own method
(:meth:`MySqlProtocolDialect.key_model_clause`, :meth:`MySqlProtocolDialect.distribution_clause`,
:meth:`MySqlProtocolDialect.properties_clause`) and the vendor's types; with ``vendor_only=False`` the
same dialect renders what MariaDB runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ferry.pipeline import types as ft
from ferry.pipeline.events import ColumnPosition, ColumnPositionKind
from ferry.pipeline.schema import Schema
from ferry.pipeline.types import DataType, TypeRoot
from ferry.sinks.exceptions import SinkTerminalError
from ferry.sinks.sql.dialect import CatalogColumn, SqlDialect, SqlTable

#: MySQL (MariaDB) names of the types without parameters.
MYSQL_TYPES: Mapping[TypeRoot, str] = {
    TypeRoot.BOOLEAN: "BOOLEAN",
    TypeRoot.TINYINT: "TINYINT",
    TypeRoot.SMALLINT: "SMALLINT",
    TypeRoot.INT: "INT",
    TypeRoot.BIGINT: "BIGINT",
    TypeRoot.FLOAT: "FLOAT",
    TypeRoot.DOUBLE: "DOUBLE",
    TypeRoot.STRING: "LONGTEXT",
    TypeRoot.DATE: "DATE",
}


class MySqlProtocolDialect(SqlDialect):
    """MySQL spelling (what MariaDB runs); a vendor subclass adds its clauses when ``vendor_only``."""

    name = "mysql"
    quote_char = "`"
    max_varchar_length = 16_383
    type_names = MYSQL_TYPES
    #: The key model keyword of the vendor's ``CREATE TABLE`` (``PRIMARY KEY``, ``UNIQUE KEY``).
    key_model = "PRIMARY KEY"
    #: Default vendor table properties, overridden by ``table.create.properties.*``.
    default_properties: Mapping[str, str] = {}

    def __init__(self, *, vendor_only: bool = False, for_parameters: bool = False) -> None:
        #: Whether the vendor's own clauses and types are rendered (off: what MariaDB runs).
        self.vendor_only = vendor_only
        #: Whether statements are run with bound parameters: the driver formats them with ``%``, so a
        #: ``%`` inside an identifier is doubled.
        self.for_parameters = for_parameters

    def quote_identifier(self, name: str) -> str:
        quoted = super().quote_identifier(name)
        return quoted.replace("%", "%%") if self.for_parameters else quoted

    # ------------------------------------------------------------------------------- types

    def render_type(self, t: DataType) -> str:
        if self.vendor_only:
            return self.vendor_type(t)
        root = t.root
        if root is TypeRoot.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})"
        if root is TypeRoot.TIMESTAMP:
            return f"DATETIME({self._precision(t)})"
        if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ, TypeRoot.TIME, TypeRoot.ARRAY):
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name)
        if root is TypeRoot.VARCHAR:
            length = t.length or self.max_varchar_length + 1
            return "LONGTEXT" if length > self.max_varchar_length else f"VARCHAR({length})"
        return super().render_type(t)

    def vendor_type(self, t: DataType) -> str:
        """The vendor's name of a type the sink stores (``sink_type``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------- vendor clauses

    def key_model_clause(self, primary_keys: Sequence[str]) -> str:
        """``PRIMARY KEY (`k`)`` / ``UNIQUE KEY (`k`)`` after the column list (vendor only)."""
        return f"{self.key_model} ({self.column_list(primary_keys)})"

    def distribution_clause(self, schema: Schema, primary_keys: Sequence[str]) -> str:
        """``DISTRIBUTED BY HASH(`k`)``: by the key, or the first column of a table without one."""
        columns = list(primary_keys) or schema.names[:1]
        return f"DISTRIBUTED BY HASH({self.column_list(columns)})"

    def properties_clause(self, properties: Mapping[str, str]) -> str:
        """``PROPERTIES ("k" = "v", ...)``: the defaults, overridden by ``properties``; may be empty."""
        merged = {**self.default_properties, **properties}
        if not merged:
            return ""
        items = ", ".join(f"{self.quote_property(k)} = {self.quote_property(v)}" for k, v in merged.items())
        return f"PROPERTIES ({items})"

    def quote_property(self, value: str) -> str:
        """A double-quoted string literal of a table property (quotes and backslashes escaped)."""
        if "\x00" in value:
            raise SinkTerminalError(f"property {value!r} contains a NUL character", sink=self.name)
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    # ------------------------------------------------------------------------------- DDL hooks

    def key_clause(self, primary_keys: Sequence[str]) -> str | None:
        return None if self.vendor_only else super().key_clause(primary_keys)

    def table_options(
        self, schema: Schema, primary_keys: Sequence[str], properties: Mapping[str, str]
    ) -> str:
        if not self.vendor_only:
            return ""
        clauses = [self.key_model_clause(primary_keys)] if primary_keys else []
        clauses.append(self.distribution_clause(schema, primary_keys))
        props = self.properties_clause(properties)
        if props:
            clauses.append(props)
        return "\n" + "\n".join(clauses)

    def column_position(self, position: ColumnPosition) -> str:
        """``FIRST`` or ``AFTER `c```; a BEFORE is turned into one of these by the sink."""
        if position.kind is ColumnPositionKind.FIRST:
            return " FIRST"
        if position.kind is ColumnPositionKind.AFTER and position.reference is not None:
            return f" AFTER {self.quote_identifier(position.reference)}"
        return ""

    def schema_exists_query(self) -> str:
        return f"SELECT 1 FROM information_schema.schemata WHERE schema_name = {self.placeholder}"

    def create_schema(self, schema: str) -> str:
        return f"CREATE DATABASE IF NOT EXISTS {self.quote_identifier(schema)}"

    def alter_column_type(self, table: SqlTable, column: str, new_type: DataType) -> str:
        null = "NULL" if new_type.nullable else "NOT NULL"
        return (
            f"ALTER TABLE {self.table_name(table)} MODIFY COLUMN "
            f"{self.quote_identifier(column)} {self.render_type(new_type)} {null}"
        )

    def upsert(self, table: SqlTable, columns: Sequence[str], keys: Sequence[str]) -> str:
        """``INSERT ... ON DUPLICATE KEY UPDATE`` (StarRocks/Doris: an INSERT into a primary or
        unique key table replaces the row with the same key)."""
        insert = self.insert(table, columns)
        if self.vendor_only:
            return insert
        others = [self.quote_identifier(c) for c in columns if c not in set(keys)]
        if not others:
            return f"INSERT IGNORE{insert[len('INSERT') :]}"
        return f"{insert} ON DUPLICATE KEY UPDATE " + ", ".join(f"{q} = VALUES({q})" for q in others)

    def alter_job_state_query(self, table: SqlTable) -> str:
        """The state of the table's latest column change job (``SHOW ALTER TABLE COLUMN``); the
        table name is the one parameter."""
        database = "" if table.schema is None else f" FROM {self.quote_identifier(table.schema)}"
        return (
            f"SHOW ALTER TABLE COLUMN{database} WHERE TableName = {self.placeholder} "
            "ORDER BY CreateTime DESC LIMIT 1"
        )

    # ------------------------------------------------------------------------------- catalog

    def columns_query(self) -> str:
        p = self.placeholder
        return (
            "SELECT column_name, data_type, column_type, is_nullable, character_maximum_length, "
            "numeric_precision, numeric_scale, datetime_precision "
            "FROM information_schema.columns "
            f"WHERE table_schema = {p} AND table_name = {p} ORDER BY ordinal_position"
        )

    def primary_key_query(self) -> str:
        p = self.placeholder
        return (
            "SELECT column_name FROM information_schema.key_column_usage "
            f"WHERE constraint_name = 'PRIMARY' AND table_schema = {p} AND table_name = {p} "
            "ORDER BY ordinal_position"
        )

    def catalog_type(self, column: CatalogColumn) -> DataType:
        data_type = column.data_type.lower()
        column_type = column.udt_name.lower()
        base: DataType
        if data_type == "tinyint" and column_type.startswith("tinyint(1)"):
            base = ft.BOOLEAN()
        elif data_type == "decimal":
            base = ft.DECIMAL(column.numeric_precision or 10, column.numeric_scale or 0)
        elif data_type in ("char", "varchar"):
            length = column.character_maximum_length or 1
            base = ft.CHAR(length) if data_type == "char" else ft.VARCHAR(length)
        elif data_type in ("datetime", "timestamp"):
            base = ft.TIMESTAMP(column.datetime_precision or 0)
        else:
            base = _MYSQL_CATALOG.get(data_type, ft.STRING())
        return base.with_nullable(column.nullable)


_MYSQL_CATALOG: dict[str, DataType] = {
    "tinyint": ft.TINYINT(),
    "smallint": ft.SMALLINT(),
    "int": ft.INT(),
    "bigint": ft.BIGINT(),
    "float": ft.FLOAT(),
    "double": ft.DOUBLE(),
    "date": ft.DATE(),
    "longtext": ft.STRING(),
    "text": ft.STRING(),
    "string": ft.STRING(),
}


class StarRocksDialect(MySqlProtocolDialect):
    """StarRocks: primary key tables, ``DISTRIBUTED BY HASH``, ``PROPERTIES``; lengths in bytes."""

    name = "starrocks"
    #: StarRocks's longest VARCHAR, in bytes.
    max_vendor_varchar = 1_048_576
    #: StarRocks's longest CHAR, in bytes.
    max_vendor_char = 255
    default_properties: Mapping[str, str] = {"replication_num": "1"}

    def vendor_type(self, t: DataType) -> str:
        root = t.root
        if root is TypeRoot.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})"
        if root is TypeRoot.CHAR:
            # a character takes up to 3 bytes; a CHAR too long for its bytes becomes a VARCHAR
            length = (t.length or 1) * 3
            return f"CHAR({length})" if length <= self.max_vendor_char else f"VARCHAR({length})"
        if root is TypeRoot.VARCHAR:
            length = (t.length or self.max_vendor_varchar) * 3
            return "STRING" if length > self.max_vendor_varchar else f"VARCHAR({length})"
        if root is TypeRoot.TIMESTAMP:
            return "DATETIME"
        names = {**MYSQL_TYPES, TypeRoot.STRING: "STRING"}
        try:
            return names[root]
        except KeyError:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name) from None
