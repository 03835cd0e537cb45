"""The MySQL-protocol SQL of StarRocks (and, through :class:`MySqlProtocolDialect`, SelectDB/Doris).

StarRocks and Doris take MySQL's quoting (backticks, doubled inside a name) and MySQL's spelling of
``ALTER TABLE ... ADD COLUMN ... FIRST | AFTER``, ``DROP COLUMN``, ``MODIFY COLUMN``,
``TRUNCATE TABLE``, ``DROP TABLE``. Their ``CREATE TABLE`` differs from MySQL's: the key model
follows the column list (``PRIMARY KEY (...)`` in StarRocks, ``UNIQUE KEY (...)`` in Doris), then
``DISTRIBUTED BY HASH(...)`` and ``PROPERTIES ("k" = "v", ...)``; their types too (``STRING``,
``DATETIME``, lengths in bytes).

:class:`MySqlProtocolDialect` is what a MySQL-compatible server (MariaDB) runs: statements compiled
with SQLAlchemy's MySQL dialect, the key inside the column list, MySQL types,
``ON DUPLICATE KEY UPDATE``. A vendor dialect built with ``vendor_only=True`` compiles with the
vendor's SQLAlchemy dialect (:meth:`MySqlProtocolDialect.vendor_sa_dialect`: the ``starrocks``
package's for StarRocks, see :mod:`ferry.sinks.starrocks.vendor`) and adds the vendor's clauses
(:class:`~ferry.sinks.base.sql.ddl.KeyDesc`, :class:`~ferry.sinks.base.sql.ddl.DistributedByHash`,
:class:`~ferry.sinks.base.sql.ddl.TableProperties`) and types; with ``vendor_only=False`` the same dialect
renders what MariaDB runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.mysql.base import (
    MySQLDDLCompiler,
    MySQLDialect,
    MySQLIdentifierPreparer,
    MySQLTypeCompiler,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import PrimaryKeyConstraint
from sqlalchemy.sql.compiler import DDLCompiler, SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement
from sqlalchemy.types import TypeEngine

from ferry.model import types as ft
from ferry.model.schema import Schema
from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.exceptions import MissingExtraError, SinkTerminalError
from ferry.sinks.base.sql import ddl
from ferry.sinks.base.sql.dialect import CatalogColumn, SqlDialect, SqlTable

#: MySQL (MariaDB) types without parameters.
MYSQL_TYPES: Mapping[TypeRoot, TypeEngine[Any]] = {
    TypeRoot.BOOLEAN: mysql.BOOLEAN(),
    TypeRoot.TINYINT: mysql.TINYINT(),
    TypeRoot.SMALLINT: mysql.SMALLINT(),
    TypeRoot.INT: mysql.INTEGER(),
    TypeRoot.BIGINT: mysql.BIGINT(),
    TypeRoot.FLOAT: mysql.FLOAT(),
    TypeRoot.DOUBLE: mysql.DOUBLE(),
    TypeRoot.STRING: mysql.LONGTEXT(),
    TypeRoot.DATE: mysql.DATE(),
}


# ----------------------------------------------------------------------------------- SQLAlchemy


class MySqlPreparer(ddl.AlwaysQuote, MySQLIdentifierPreparer):
    pass


class MySqlTypeCompiler(MySQLTypeCompiler):
    """MySQL's types, spelt as StarRocks's and Doris's documentation does (``BOOLEAN``, ``INT``)."""

    def visit_BOOLEAN(self, type_: Any, **kw: Any) -> str:  # noqa: N802 - SQLAlchemy's visitor name
        return "BOOLEAN"

    def visit_INTEGER(self, type_: Any, **kw: Any) -> str:  # noqa: N802
        return "INT"


class MariaDbDdlCompiler(ddl.MySqlLayout, MySQLDDLCompiler):
    pass


class MariaDbDialect(MySQLDialect):
    """SQLAlchemy's MySQL dialect with every identifier quoted and ferry's layout."""

    supports_statement_cache = True
    preparer = MySqlPreparer
    ddl_compiler = MariaDbDdlCompiler
    type_compiler_cls = MySqlTypeCompiler


#: The SQLAlchemy dialect names of the MySQL-protocol family.
MYSQL_FAMILY = ("mysql", "starrocks", "doris")


@compiles(ddl.AlterColumnType, *MYSQL_FAMILY)
def _modify_column(element: ddl.AlterColumnType, compiler: DDLCompiler, **kw: Any) -> str:
    # MODIFY COLUMN c type NULL | NOT NULL (MySQL, StarRocks, Doris)
    null = "NULL" if element.column.nullable else "NOT NULL"
    name = compiler.preparer.quote(element.column.name)
    type_ = ddl.sql_type(compiler, element.column)
    return f"{ddl.alter_table(compiler, element)} MODIFY COLUMN {name} {type_} {null}"


class InsertedValue(ColumnElement[Any]):
    """``VALUES(`c`)`` of ``ON DUPLICATE KEY UPDATE``: the value the INSERT gives ``c`` (SQLAlchemy's
    own ``inserted`` column doubles a ``%`` of the name twice)."""

    inherit_cache = False

    def __init__(self, name: str) -> None:
        self.name = name


@compiles(InsertedValue)
def _inserted_value(element: InsertedValue, compiler: SQLCompiler, **kw: Any) -> str:
    return f"VALUES({compiler.preparer.quote(element.name)})"


# ----------------------------------------------------------------------------------- the dialect


class MySqlProtocolDialect(SqlDialect):
    """MySQL spelling (what MariaDB runs); a vendor subclass adds its clauses when ``vendor_only``."""

    name = "mysql"
    max_varchar_length = 16_383
    positions_columns = True
    defaults_as_text = True
    catalog_type_column = "column_type"
    type_names = MYSQL_TYPES
    #: The key model keyword of the vendor's ``CREATE TABLE`` (``PRIMARY KEY``, ``UNIQUE KEY``).
    key_model = "PRIMARY KEY"
    #: The ``BUCKETS`` of ``DISTRIBUTED BY HASH(...)`` (``None``: the vendor's default).
    buckets: str | None = None
    #: Default vendor table properties, overridden by ``table.create.properties.*``.
    default_properties: Mapping[str, str] = {}

    def __init__(
        self, *, vendor_only: bool = False, for_parameters: bool = False, buckets: str | None = None
    ) -> None:
        super().__init__(for_parameters=for_parameters)
        #: Whether the vendor's own clauses and types are rendered (off: what MariaDB runs).
        self.vendor_only = vendor_only
        if buckets is not None:
            self.buckets = buckets

    # ------------------------------------------------------------------------------- SQLAlchemy

    def sa_dialect(self, paramstyle: str) -> Dialect:
        return (
            self.vendor_sa_dialect(paramstyle) if self.vendor_only else MariaDbDialect(paramstyle=paramstyle)
        )

    def vendor_sa_dialect(self, paramstyle: str) -> Dialect:
        """The vendor's SQLAlchemy dialect (``vendor_only``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------- types

    def sql_type(self, t: DataType) -> TypeEngine[Any]:
        if self.vendor_only:
            return self.vendor_type(t)
        root = t.root
        if root is TypeRoot.DECIMAL:
            return mysql.DECIMAL(t.precision, t.scale)
        if root is TypeRoot.TIMESTAMP:
            return mysql.DATETIME(fsp=self._precision(t))
        if root is TypeRoot.CHAR:
            return mysql.CHAR(t.length)
        if root is TypeRoot.VARCHAR:
            length = t.length or self.max_varchar_length + 1
            return mysql.LONGTEXT() if length > self.max_varchar_length else mysql.VARCHAR(length)
        return self.named_type(t)

    def vendor_type(self, t: DataType) -> TypeEngine[Any]:
        """The vendor's type of a type the sink stores (``sink_type``)."""
        raise NotImplementedError

    def byte_length(self, t: DataType, default: int) -> int:
        """The length of a CHAR or VARCHAR in bytes: a character takes up to 3 (UTF-8)."""
        return (t.length or default) * 3

    # ------------------------------------------------------------------------------- vendor clauses

    def primary_key(self, primary_keys: Sequence[str]) -> PrimaryKeyConstraint | None:
        return None if self.vendor_only else super().primary_key(primary_keys)

    def table_clauses(
        self,
        schema: Schema,
        primary_keys: Sequence[str],
        properties: Mapping[str, str],
        auto_partition: tuple[str, str] | None = None,
    ) -> list[ClauseElement]:
        """The key model (with keys), Doris's ``AUTO PARTITION BY RANGE`` (``auto_partition``),
        ``DISTRIBUTED BY HASH`` of the key (or the first column of a table without one) and
        ``PROPERTIES`` (the defaults, overridden by ``properties``)."""
        if not self.vendor_only:
            return []
        clauses: list[ClauseElement] = [ddl.KeyDesc(self.key_model, primary_keys)] if primary_keys else []
        if auto_partition is not None:
            clauses.append(ddl.AutoPartitionByRange(*auto_partition))
        clauses.append(ddl.DistributedByHash(list(primary_keys) or schema.names[:1], self.buckets))
        merged = {**self.default_properties, **properties}
        if merged:
            clauses.append(ddl.TableProperties(merged))
        return clauses

    def properties_clause(self, properties: Mapping[str, str]) -> str:
        """``PROPERTIES ("k" = "v", ...)``: the defaults, overridden by ``properties``; may be empty."""
        merged = {**self.default_properties, **properties}
        return self.compile(ddl.TableProperties(merged)) if merged else ""

    # ------------------------------------------------------------------------------- DDL and DML

    def schema_exists_query(self) -> str:
        return f"SELECT 1 FROM information_schema.schemata WHERE schema_name = {self.placeholder}"

    def upsert(self, table: SqlTable, columns: Sequence[str], keys: Sequence[str]) -> str:
        """``INSERT ... ON DUPLICATE KEY UPDATE`` (StarRocks/Doris: an INSERT into a primary or
        unique key table replaces the row with the same key)."""
        if self.vendor_only:
            return self.insert(table, columns)
        others = [c for c in columns if c not in set(keys)]
        if not others:
            return self.compile_dml(
                mysql.insert(self.row_table(table, columns)).prefix_with("IGNORE"), columns
            )
        statement = mysql.insert(self.row_table(table, columns))
        update = statement.on_duplicate_key_update({c: InsertedValue(c) for c in others})
        return self.compile_dml(update, columns)

    def alter_job_state_query(self, table: SqlTable) -> str:
        """The state of the table's latest column change job (``SHOW ALTER TABLE COLUMN``); the
        table name is the one parameter."""
        preparer = self.dml_dialect.identifier_preparer
        database = "" if table.schema is None else f" FROM {preparer.quote(table.schema)}"
        return (
            f"SHOW ALTER TABLE COLUMN{database} WHERE TableName = {self.placeholder} "
            "ORDER BY CreateTime DESC LIMIT 1"
        )

    # ------------------------------------------------------------------------------- catalog

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

    def __init__(
        self, *, vendor_only: bool = False, for_parameters: bool = False, buckets: str | None = None
    ) -> None:
        super().__init__(vendor_only=vendor_only, for_parameters=for_parameters, buckets=buckets)
        if vendor_only:
            _vendor()  # a missing ``starrocks`` package is named now, not at the first statement

    def vendor_sa_dialect(self, paramstyle: str) -> Dialect:
        dialect: Dialect = _vendor().StarRocksSqlDialect(paramstyle=paramstyle)
        return dialect

    def vendor_type(self, t: DataType) -> TypeEngine[Any]:
        mapped: TypeEngine[Any] | None = _vendor().starrocks_type(self, t)
        if mapped is None:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name)
        return mapped


def _vendor() -> ModuleType:
    """:mod:`ferry.sinks.starrocks.vendor`, which imports the ``starrocks`` package."""
    try:
        from ferry.sinks.starrocks import vendor  # noqa: PLC0415 - only for the vendor's statements
    except ImportError as e:
        raise MissingExtraError("starrocks", "starrocks", e) from e
    return vendor
