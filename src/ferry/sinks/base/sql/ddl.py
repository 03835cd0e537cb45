"""The SQLAlchemy Core constructs of the SQL sinks' DDL, and what makes every identifier quoted.

SQLAlchemy has ``CREATE TABLE``, ``DROP TABLE`` and ``CREATE SCHEMA``; the column changes of
``ALTER TABLE``, ``TRUNCATE``, Hologres's ``set_table_property`` and the clauses StarRocks and Doris
write after the column list are :class:`~sqlalchemy.sql.ddl.ExecutableDDLElement` /
:class:`~sqlalchemy.sql.expression.ClauseElement` subclasses here, each compiled by a function
registered with :func:`sqlalchemy.ext.compiler.compiles` (the standard spelling; a dialect that
spells one otherwise registers its own under its name).

Every identifier goes through the dialect's :class:`~sqlalchemy.sql.compiler.IdentifierPreparer`;
:class:`AlwaysQuote` makes it quote every name (SQLAlchemy quotes only names that need it), so no
table or column name can end a statement early, whatever its characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import Column as SaColumn
from sqlalchemy.schema import CreateSchema, CreateTable, Table
from sqlalchemy.sql.compiler import DDLCompiler, IdentifierPreparer
from sqlalchemy.sql.ddl import ExecutableDDLElement
from sqlalchemy.sql.expression import ClauseElement
from sqlalchemy.types import String

from ferry.model.events import ColumnPosition, ColumnPositionKind
from ferry.sinks.base.exceptions import SinkTerminalError


class AlwaysQuote(IdentifierPreparer):
    """Quotes every identifier (the quote character inside a name doubled) and refuses NUL."""

    def quote(self, ident: str) -> str:
        return self.quote_identifier(ident)

    def quote_schema(self, schema: str) -> str:
        return self.quote_identifier(schema)

    def quote_identifier(self, value: str) -> str:
        if "\x00" in value:
            raise SinkTerminalError(f"identifier {value!r} contains a NUL character", sink=self.dialect.name)
        return super().quote_identifier(value)


# ----------------------------------------------------------------------------------- CREATE TABLE


class CreateTableWith(CreateTable):
    """``CREATE TABLE`` followed by vendor clauses (key model, distribution, properties), one a line."""

    inherit_cache = False

    def __init__(self, element: Table, clauses: Sequence[ClauseElement] = (), *, if_not_exists: bool) -> None:
        super().__init__(element, if_not_exists=if_not_exists)
        self.clauses = tuple(clauses)


class TableLayout(DDLCompiler):
    """``CREATE TABLE`` laid out one column a line, the key constraint (if the table has one) last
    inside the parentheses, then the clauses of :class:`CreateTableWith`, one a line."""

    def visit_create_table(self, create: CreateTable, **kw: Any) -> str:
        table = create.element
        elements = [self.process(column) for column in create.columns]
        if table.primary_key.columns:
            elements.append(self.process(table.primary_key))
        head = "CREATE TABLE " + ("IF NOT EXISTS " if create.if_not_exists else "")
        body = ",\n  ".join(e for e in elements if e)
        text = f"{head}{self.preparer.format_table(table)} (\n  {body}\n)"
        clauses = create.clauses if isinstance(create, CreateTableWith) else ()
        return text + "".join("\n" + self.process(clause) for clause in clauses)


class MySqlLayout(TableLayout):
    """:class:`TableLayout` for the MySQL protocol (MariaDB, StarRocks, Doris): a schema is a
    database (``CREATE DATABASE``)."""

    def visit_create_schema(self, create: CreateSchema, **kw: Any) -> str:
        exists = "IF NOT EXISTS " if create.if_not_exists else ""
        return f"CREATE DATABASE {exists}{self.preparer.quote_schema(create.element)}"


class KeyDesc(ClauseElement):
    """``PRIMARY KEY (`k`, ...)`` / ``UNIQUE KEY (...)`` / ``DUPLICATE KEY (...)`` after the column list."""

    inherit_cache = False

    def __init__(self, model: str, columns: Sequence[str]) -> None:
        self.model = model
        self.columns = tuple(columns)


class DistributedByHash(ClauseElement):
    """``DISTRIBUTED BY HASH(`k`, ...) [BUCKETS n | AUTO]``."""

    inherit_cache = False

    def __init__(self, columns: Sequence[str], buckets: str | None = None) -> None:
        self.columns = tuple(columns)
        self.buckets = buckets


class AutoPartitionByRange(ClauseElement):
    """Doris's ``AUTO PARTITION BY RANGE (date_trunc(`c`, 'unit')) ()``: a partition per unit of
    the column's time, made when a row needs it."""

    inherit_cache = False

    def __init__(self, column: str, unit: str) -> None:
        self.column = column
        self.unit = unit


class TableProperties(ClauseElement):
    """``PROPERTIES ("key" = "value", ...)``: double-quoted strings, ``"`` and ``\\`` escaped."""

    inherit_cache = False

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.properties = dict(properties)


def column_list(compiler: DDLCompiler, names: Sequence[str]) -> str:
    return ", ".join(compiler.preparer.quote(n) for n in names)


def property_string(value: str, *, sink: str) -> str:
    """A double-quoted string of StarRocks's and Doris's ``PROPERTIES``."""
    if "\x00" in value:
        raise SinkTerminalError(f"property {value!r} contains a NUL character", sink=sink)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@compiles(KeyDesc)
def _key_desc(element: KeyDesc, compiler: DDLCompiler, **kw: Any) -> str:
    return f"{element.model} ({column_list(compiler, element.columns)})"


@compiles(DistributedByHash)
def _distributed_by_hash(element: DistributedByHash, compiler: DDLCompiler, **kw: Any) -> str:
    buckets = "" if element.buckets is None else f" BUCKETS {element.buckets}"
    return f"DISTRIBUTED BY HASH({column_list(compiler, element.columns)}){buckets}"


@compiles(AutoPartitionByRange)
def _auto_partition(element: AutoPartitionByRange, compiler: DDLCompiler, **kw: Any) -> str:
    column = compiler.preparer.quote(element.column)
    # the unit is one of date_trunc's words (checked by the sink's options): no quoting needed
    return f"AUTO PARTITION BY RANGE (date_trunc({column}, '{element.unit}')) ()"


@compiles(TableProperties)
def _table_properties(element: TableProperties, compiler: DDLCompiler, **kw: Any) -> str:
    sink = compiler.dialect.name
    items = ", ".join(
        f"{property_string(k, sink=sink)} = {property_string(v, sink=sink)}"
        for k, v in element.properties.items()
    )
    return f"PROPERTIES ({items})"


# ----------------------------------------------------------------------------------- ALTER TABLE


class AlterTable(ExecutableDDLElement):
    """One change of ``ALTER TABLE <table>``."""

    inherit_cache = False

    def __init__(self, table: Table) -> None:
        self.table = table


class AddColumn(AlterTable):
    """``ADD COLUMN <definition> [FIRST | AFTER <column>]``; the column belongs to :attr:`table`."""

    def __init__(self, table: Table, column: SaColumn[Any], position: ColumnPosition | None = None) -> None:
        super().__init__(table)
        self.column = column
        self.position = position


class DropColumn(AlterTable):
    def __init__(self, table: Table, name: str) -> None:
        super().__init__(table)
        self.name = name


class RenameColumn(AlterTable):
    def __init__(self, table: Table, old: str, new: str) -> None:
        super().__init__(table)
        self.old = old
        self.new = new


class AlterColumnType(AlterTable):
    """A new type, and NOT NULL set or dropped to match :attr:`column`'s nullability."""

    def __init__(self, table: Table, column: SaColumn[Any]) -> None:
        super().__init__(table)
        self.column = column


class TruncateTable(AlterTable):
    pass


class SetTableProperty(AlterTable):
    """Hologres's ``CALL set_table_property('<table>', '<property>', '<value>')``."""

    def __init__(self, table: Table, key: str, value: str) -> None:
        super().__init__(table)
        self.key = key
        self.value = value


def alter_table(compiler: DDLCompiler, element: AlterTable) -> str:
    return f"ALTER TABLE {compiler.preparer.format_table(element.table)}"


def string_literal(compiler: DDLCompiler, value: str) -> str:
    """A single-quoted string literal as the dialect writes it."""
    if "\x00" in value:
        raise SinkTerminalError(f"literal {value!r} contains a NUL character", sink=compiler.dialect.name)
    return str(compiler.sql_compiler.render_literal_value(value, String()))


def sql_type(compiler: DDLCompiler, column: SaColumn[Any]) -> str:
    return str(compiler.dialect.type_compiler_instance.process(column.type, type_expression=column))


@compiles(AddColumn)
def _add_column(element: AddColumn, compiler: DDLCompiler, **kw: Any) -> str:
    text = f"{alter_table(compiler, element)} ADD COLUMN {compiler.get_column_specification(element.column)}"
    position = element.position
    if position is not None and position.kind is ColumnPositionKind.FIRST:
        text += " FIRST"
    elif position is not None and position.kind is ColumnPositionKind.AFTER and position.reference:
        text += f" AFTER {compiler.preparer.quote(position.reference)}"
    return text


@compiles(DropColumn)
def _drop_column(element: DropColumn, compiler: DDLCompiler, **kw: Any) -> str:
    return f"{alter_table(compiler, element)} DROP COLUMN {compiler.preparer.quote(element.name)}"


@compiles(RenameColumn)
def _rename_column(element: RenameColumn, compiler: DDLCompiler, **kw: Any) -> str:
    quote = compiler.preparer.quote
    return f"{alter_table(compiler, element)} RENAME COLUMN {quote(element.old)} TO {quote(element.new)}"


@compiles(AlterColumnType)
def _alter_column_type(element: AlterColumnType, compiler: DDLCompiler, **kw: Any) -> str:
    # PostgreSQL: ALTER COLUMN c TYPE t USING c::t, ALTER COLUMN c {SET | DROP} NOT NULL
    name = compiler.preparer.quote(element.column.name)
    type_ = sql_type(compiler, element.column)
    nullability = "DROP NOT NULL" if element.column.nullable else "SET NOT NULL"
    return (
        f"{alter_table(compiler, element)} ALTER COLUMN {name} TYPE {type_} USING {name}::{type_}, "
        f"ALTER COLUMN {name} {nullability}"
    )


@compiles(TruncateTable)
def _truncate_table(element: TruncateTable, compiler: DDLCompiler, **kw: Any) -> str:
    return f"TRUNCATE TABLE {compiler.preparer.format_table(element.table)}"


@compiles(SetTableProperty)
def _set_table_property(element: SetTableProperty, compiler: DDLCompiler, **kw: Any) -> str:
    # the table is named as a string that holds the quoted (schema-qualified) name
    args = (compiler.preparer.format_table(element.table), element.key, element.value)
    return f"CALL set_table_property({', '.join(string_literal(compiler, a) for a in args)})"
