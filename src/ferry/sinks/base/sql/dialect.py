"""The DDL and DML every SQL-speaking sink issues, built with SQLAlchemy Core, with small hooks
where dialects differ.

:class:`SqlDialect` builds each statement as SQLAlchemy constructs (:class:`~sqlalchemy.schema.Table`,
:class:`~sqlalchemy.schema.Column` with SQLAlchemy type objects, ``CREATE TABLE``, ``DROP TABLE``,
``CREATE SCHEMA``, the ``ALTER TABLE`` elements of :mod:`ferry.sinks.base.sql.ddl`, ``insert``/``delete``)
and compiles it with a SQLAlchemy dialect whose :class:`~sqlalchemy.sql.compiler.IdentifierPreparer`
quotes every identifier. A dialect overrides only what its database spells differently:

- :meth:`SqlDialect.sa_dialect` (the SQLAlchemy dialect: quoting, type names, layout);
- :attr:`SqlDialect.type_names` and :meth:`SqlDialect.sql_type` (the type mapping, as data);
- :attr:`SqlDialect.positions_columns` (whether ``ADD COLUMN`` takes ``FIRST``/``AFTER``);
- :meth:`SqlDialect.primary_key` and :meth:`SqlDialect.table_clauses` (keys, distribution and
  properties of ``CREATE TABLE``);
- :meth:`SqlDialect.upsert`.

The base spells everything as PostgreSQL does. Statements run without parameters (DDL) are compiled
with a dialect of the ``named`` parameter style, so a ``%`` in a name stays as it is; statements run
with bound parameters (``%s``: psycopg and PyMySQL) with the ``format`` style, which doubles it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, column, delete, insert, literal, select, text
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects.postgresql.base import (
    PGDDLCompiler,
    PGDialect,
    PGIdentifierPreparer,
    PGTypeCompiler,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import CompileError
from sqlalchemy.schema import Column as SaColumn
from sqlalchemy.schema import (
    CreateSchema,
    DefaultClause,
    DropTable,
    MetaData,
    PrimaryKeyConstraint,
    Table,
)
from sqlalchemy.sql.compiler import IdentifierPreparer
from sqlalchemy.sql.expression import ClauseElement
from sqlalchemy.types import CHAR, NUMERIC, VARCHAR, String, TypeEngine

from ferry.model import types as ft
from ferry.model.defaults import default_text, default_value
from ferry.model.events import ColumnPosition
from ferry.model.schema import Column, Schema
from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.base.sql import ddl


class SqlTable(NamedTuple):
    """A table as the database names it: an optional schema (database) and a table name."""

    schema: str | None
    name: str

    def __str__(self) -> str:
        return self.name if self.schema is None else f"{self.schema}.{self.name}"


# ----------------------------------------------------------------------------------- PostgreSQL


class PostgresPreparer(ddl.AlwaysQuote, PGIdentifierPreparer):
    pass


class PostgresDdlCompiler(ddl.TableLayout, PGDDLCompiler):
    pass


class PostgresTypeCompiler(PGTypeCompiler):
    """PostgreSQL's types, times spelt ``TIME(p)``, ``TIMESTAMP(p)``, ``TIMESTAMPTZ(p)``."""

    def visit_TIME(self, type_: Any, **kw: Any) -> str:  # noqa: N802 - SQLAlchemy's visitor name
        return ("TIMETZ" if type_.timezone else "TIME") + _precision_suffix(type_)

    def visit_TIMESTAMP(self, type_: Any, **kw: Any) -> str:  # noqa: N802
        return ("TIMESTAMPTZ" if type_.timezone else "TIMESTAMP") + _precision_suffix(type_)


def _precision_suffix(type_: Any) -> str:
    precision = getattr(type_, "precision", None)
    return "" if precision is None else f"({precision})"


class PostgresDialect(PGDialect):
    """SQLAlchemy's PostgreSQL dialect with every identifier quoted and ferry's layout."""

    supports_statement_cache = True
    preparer = PostgresPreparer
    ddl_compiler = PostgresDdlCompiler
    type_compiler_cls = PostgresTypeCompiler


# ----------------------------------------------------------------------------------- the dialect


class SqlDialect:
    """PostgreSQL spelling; subclasses override the hooks their database spells otherwise."""

    #: The name of the dialect, in error messages.
    name: str = "postgresql"
    #: The placeholder of a bound parameter (psycopg and PyMySQL both take ``%s``).
    placeholder: str = "%s"
    #: Largest fractional-second precision of TIME and TIMESTAMP.
    max_time_precision: int = 6
    #: Longest VARCHAR; a longer one is the unbounded string type.
    max_varchar_length: int = 10_485_760
    #: Whether ``ADD COLUMN`` takes a position (``FIRST`` / ``AFTER``); else columns go last.
    positions_columns: bool = False
    #: Whether a column default is written as a string literal (``DEFAULT '12.50'``, a boolean as
    #: ``'1'``/``'0'``), as StarRocks and Doris take every default; else a literal of its type.
    defaults_as_text: bool = False
    #: The ``information_schema.columns`` column spelling a column's full type, read as
    #: :attr:`CatalogColumn.udt_name`.
    catalog_type_column: str = "udt_name"
    #: Types without parameters: ferry type root → SQLAlchemy type.
    type_names: Mapping[TypeRoot, TypeEngine[Any]] = {
        TypeRoot.BOOLEAN: pg.BOOLEAN(),
        TypeRoot.TINYINT: pg.SMALLINT(),
        TypeRoot.SMALLINT: pg.SMALLINT(),
        TypeRoot.INT: pg.INTEGER(),
        TypeRoot.BIGINT: pg.BIGINT(),
        TypeRoot.FLOAT: pg.REAL(),
        TypeRoot.DOUBLE: pg.DOUBLE_PRECISION(),
        TypeRoot.STRING: pg.TEXT(),
        TypeRoot.BINARY: pg.BYTEA(),
        TypeRoot.VARBINARY: pg.BYTEA(),
        TypeRoot.BYTES: pg.BYTEA(),
        TypeRoot.DATE: pg.DATE(),
        TypeRoot.MAP: pg.TEXT(),
        TypeRoot.ROW: pg.TEXT(),
        TypeRoot.VARIANT: pg.TEXT(),
    }

    def __init__(self, *, for_parameters: bool = False) -> None:
        #: Whether :meth:`quote_identifier` and :meth:`table_name` give names for statements run with
        #: bound parameters (a ``%`` doubled).
        self.for_parameters = for_parameters

    # ------------------------------------------------------------------------------- SQLAlchemy

    def sa_dialect(self, paramstyle: str) -> Dialect:
        """A new SQLAlchemy dialect of the database, of the given parameter style."""
        return PostgresDialect(paramstyle=paramstyle)  # type: ignore[no-untyped-call]

    @cached_property
    def ddl_dialect(self) -> Dialect:
        """The SQLAlchemy dialect of statements run without parameters."""
        return self.sa_dialect("named")

    @cached_property
    def dml_dialect(self) -> Dialect:
        """The SQLAlchemy dialect of statements run with bound parameters (``%s``)."""
        return self.sa_dialect("format")

    def compile(self, element: ClauseElement) -> str:
        """The text of a statement run without parameters."""
        return str(element.compile(dialect=self.ddl_dialect)).strip()

    def compile_dml(self, element: ClauseElement, columns: Sequence[str] = ()) -> str:
        """The text of a statement run with one ``%s`` parameter for each of ``columns``, in order."""
        compiled = element.compile(dialect=self.dml_dialect, column_keys=list(columns) or None)
        return str(compiled).strip()

    def sa_table(self, table: SqlTable, columns: Sequence[SaColumn[Any]] = ()) -> Table:
        """A SQLAlchemy table of its own metadata, with ``columns``."""
        return Table(table.name, MetaData(), *columns, schema=table.schema)

    def sa_column(self, column: Column, *, nullable: bool | None = None) -> SaColumn[Any]:
        """The SQLAlchemy column of a ferry column; ``nullable`` overrides the type's own."""
        null_ok = column.type.nullable if nullable is None else nullable
        return SaColumn(column.name, self.sql_type(column.type), nullable=null_ok, autoincrement=False)

    @property
    def _preparer(self) -> IdentifierPreparer:
        dialect = self.dml_dialect if self.for_parameters else self.ddl_dialect
        return dialect.identifier_preparer

    # ------------------------------------------------------------------------------- names

    def quote_identifier(self, name: str) -> str:
        """``name`` as a quoted identifier; the quote character inside it is doubled."""
        return self._preparer.quote_identifier(name)

    def quote_literal(self, value: str) -> str:
        """``value`` as a string literal (single quotes doubled)."""
        if "\x00" in value:
            raise SinkTerminalError(f"literal {value!r} contains a NUL character", sink=self.name)
        compiled = literal(value, String()).compile(
            dialect=self.ddl_dialect, compile_kwargs={"literal_binds": True}
        )
        return str(compiled)

    def default_literal(self, column: Column) -> str | None:
        """``column``'s default as a literal of its type (None: it has none ferry can write)."""
        value = default_value(column)
        if value is None:
            return None
        if self.defaults_as_text:
            rendered = ("1" if value else "0") if isinstance(value, bool) else default_text(value)
            return None if rendered is None else self.quote_literal(rendered)
        sa_type = self.sql_type(column.type)
        try:
            compiled = literal(value, sa_type).compile(
                dialect=self.ddl_dialect, compile_kwargs={"literal_binds": True}
            )
            return str(compiled)
        except (NotImplementedError, CompileError):  # a type without a literal form: its text
            rendered = default_text(value)
            return None if rendered is None else self.quote_literal(rendered)

    def table_name(self, table: SqlTable) -> str:
        return self._preparer.format_table(self.sa_table(table))

    # ------------------------------------------------------------------------------- types

    def sql_type(self, t: DataType) -> TypeEngine[Any]:
        """The SQLAlchemy type of a ferry type (nullability is the column's)."""
        root = t.root
        if root is TypeRoot.DECIMAL:
            return NUMERIC(t.precision, t.scale)
        if root is TypeRoot.CHAR:
            return CHAR(t.length)
        if root is TypeRoot.VARCHAR:
            length = t.length or self.max_varchar_length + 1
            return pg.TEXT() if length > self.max_varchar_length else VARCHAR(length)
        if root is TypeRoot.TIME:
            return pg.TIME(precision=self._precision(t))
        if root is TypeRoot.TIMESTAMP:
            return pg.TIMESTAMP(precision=self._precision(t))
        if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
            return pg.TIMESTAMP(timezone=True, precision=self._precision(t))
        if root is TypeRoot.ARRAY:
            assert t.element is not None
            if t.element.root is TypeRoot.ARRAY:
                raise SinkTerminalError(f"no {self.name} type for nested arrays", sink=self.name)
            return pg.ARRAY(self.sql_type(t.element))
        return self.named_type(t)

    def named_type(self, t: DataType) -> TypeEngine[Any]:
        """The type of :attr:`type_names` for a type without parameters."""
        try:
            return self.type_names[t.root]
        except KeyError:
            raise SinkTerminalError(f"no {self.name} type for {t}", sink=self.name) from None

    def render_type(self, t: DataType) -> str:
        """The SQL type of a ferry type, without nullability."""
        return str(self.ddl_dialect.type_compiler_instance.process(self.sql_type(t)))

    def _precision(self, t: DataType) -> int:
        return min(
            t.precision if t.precision is not None else self.max_time_precision, self.max_time_precision
        )

    # ------------------------------------------------------------------------------- DDL hooks

    def primary_key(self, primary_keys: Sequence[str]) -> PrimaryKeyConstraint | None:
        """The key constraint inside ``CREATE TABLE``'s column list, or ``None``."""
        return PrimaryKeyConstraint(*primary_keys) if primary_keys else None

    def table_clauses(
        self,
        schema: Schema,
        primary_keys: Sequence[str],
        properties: Mapping[str, str],
        auto_partition: tuple[str, str] | None = None,
    ) -> list[ClauseElement]:
        """What follows the closing parenthesis of ``CREATE TABLE`` (partitions, distribution,
        properties); ``auto_partition`` is (column, unit) of Doris's automatic range partitions."""
        return []

    # ------------------------------------------------------------------------------- DDL

    def schema_exists_query(self) -> str:
        """One row when the schema (parameter) exists."""
        return f"SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = {self.placeholder}"

    def create_schema(self, schema: str) -> str:
        return self.compile(CreateSchema(schema, if_not_exists=True))

    def create_table(
        self,
        table: SqlTable,
        schema: Schema,
        primary_keys: Sequence[str] = (),
        properties: Mapping[str, str] | None = None,
        auto_partition: tuple[str, str] | None = None,
    ) -> str:
        """``CREATE TABLE IF NOT EXISTS``; key columns are NOT NULL."""
        keys = set(primary_keys)
        columns = [self.sa_column(c, nullable=False if c.name in keys else None) for c in schema]
        sa_table = self.sa_table(table, columns)
        key = self.primary_key(primary_keys)
        if key is not None:
            sa_table.append_constraint(key)
        clauses = self.table_clauses(schema, primary_keys, properties or {}, auto_partition)
        return self.compile(ddl.CreateTableWith(sa_table, clauses, if_not_exists=True))

    def add_column(self, table: SqlTable, column: Column, position: ColumnPosition | None = None) -> str:
        """``ADD COLUMN``, with ``DEFAULT <literal>`` when the column has a default: the database
        fills the rows it holds with it, as the source did."""
        sa_column = self.sa_column(column)
        default = self.default_literal(column)
        if default is not None:
            sa_column.server_default = DefaultClause(text(default))
        placed = position if self.positions_columns else None
        return self.compile(ddl.AddColumn(self.sa_table(table, [sa_column]), sa_column, placed))

    def drop_column(self, table: SqlTable, column: str) -> str:
        return self.compile(ddl.DropColumn(self.sa_table(table), column))

    def rename_column(self, table: SqlTable, old: str, new: str) -> str:
        return self.compile(ddl.RenameColumn(self.sa_table(table), old, new))

    def alter_column_type(self, table: SqlTable, column: str, new_type: DataType) -> str:
        """A new type, and NOT NULL set or dropped to match the type's nullability."""
        sa_column = SaColumn(column, self.sql_type(new_type), nullable=new_type.nullable)
        return self.compile(ddl.AlterColumnType(self.sa_table(table, [sa_column]), sa_column))

    def truncate(self, table: SqlTable) -> str:
        return self.compile(ddl.TruncateTable(self.sa_table(table)))

    def drop_table(self, table: SqlTable) -> str:
        return self.compile(DropTable(self.sa_table(table), if_exists=True))

    # ------------------------------------------------------------------------------- DML

    def row_table(self, table: SqlTable, columns: Sequence[str], others: Sequence[str] = ()) -> Table:
        """A table of the written ``columns`` (in order), then ``others``, for an INSERT."""
        return self.sa_table(table, [SaColumn(name) for name in [*columns, *others]])

    def insert(self, table: SqlTable, columns: Sequence[str]) -> str:
        return self.compile_dml(insert(self.row_table(table, columns)), columns)

    def upsert(self, table: SqlTable, columns: Sequence[str], keys: Sequence[str]) -> str:
        """Insert a row, or replace the non-key columns of the row with the same key."""
        statement = pg.insert(self.row_table(table, columns))
        others = [c for c in columns if c not in set(keys)]
        if not others:
            return self.compile_dml(statement.on_conflict_do_nothing(index_elements=list(keys)), columns)
        excluded = statement.excluded
        update = statement.on_conflict_do_update(
            index_elements=list(keys), set_={c: excluded[c] for c in others}
        )
        return self.compile_dml(update, columns)

    def select_keys(self, table: SqlTable, keys: Sequence[str]) -> str:
        """Whether the table holds a row of one key: its key columns, where each equals its parameter."""
        condition = and_(*(column(k) == bindparam(f"key_{i}") for i, k in enumerate(keys)))
        return self.compile_dml(
            select(*(column(k) for k in keys)).select_from(self.sa_table(table)).where(condition)
        )

    def delete_by_key(self, table: SqlTable, keys: Sequence[str]) -> str:
        condition = and_(*(column(k) == bindparam(f"key_{i}") for i, k in enumerate(keys)))
        return self.compile_dml(delete(self.sa_table(table)).where(condition))

    # ------------------------------------------------------------------------------- catalog

    def columns_query(self) -> str:
        """Columns of one table (parameters: schema, table), in order, from ``information_schema``."""
        p = self.placeholder
        return (
            f"SELECT column_name, data_type, {self.catalog_type_column}, is_nullable, "
            "character_maximum_length, numeric_precision, numeric_scale, datetime_precision "
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
