"""MySQL DDL text to schema changes, parsed with sqlglot's MySQL dialect.

Canal (``isDdl``), Maxwell (``table-alter``) and Debezium's schema-change topic (``ddl``) carry the
statement that changed a table. :func:`parse_ddl` turns it into ferry's schema changes:
``CREATE TABLE`` (columns, inline or constraint primary key, comments), ``ALTER TABLE`` with any
number of ``ADD [COLUMN] ... [FIRST | AFTER c]``, ``DROP [COLUMN]``, ``RENAME COLUMN a TO b``,
``CHANGE [COLUMN] a b type`` (a rename and/or a new type), ``MODIFY [COLUMN]`` and ``COMMENT=``
clauses, ``DROP TABLE`` and ``TRUNCATE TABLE``.

Statements that change no table's columns (``CREATE DATABASE``, indexes, grants, engine or
auto-increment options) give no change. A statement that does change a table but cannot be
understood (a syntax error, ``CREATE TABLE ... LIKE``, a table rename) raises :class:`DecodeError`.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import SqlglotError
from sqlglot.parsers.mysql import MySQLParser
from sqlglot.tokenizer_core import TokenType

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.mysql_types import mysql_data_type
from ferry.model.defaults import literal_default
from ferry.model.events import (
    FIRST,
    LAST,
    AddColumn,
    AlterColumnComment,
    AlterColumnType,
    AlterTableComment,
    ColumnPosition,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    SchemaChange,
    TruncateTable,
    after,
)
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId

_SPATIAL = (
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
    "GEOMCOLLECTION",
)


class _MySQL(MySQL):
    """sqlglot's MySQL dialect, taught the spatial column types and unsigned floating types."""

    class Tokenizer(MySQL.Tokenizer):
        KEYWORDS = {
            **MySQL.Tokenizer.KEYWORDS,
            **dict.fromkeys(_SPATIAL, TokenType.GEOMETRY),
            "REAL": TokenType.DOUBLE,
        }

    class Parser(MySQLParser):
        SIGNED_TO_UNSIGNED_TYPE_TOKEN = {
            **MySQLParser.SIGNED_TO_UNSIGNED_TYPE_TOKEN,
            TokenType.FLOAT: TokenType.FLOAT,
            TokenType.DOUBLE: TokenType.DOUBLE,
            TokenType.DECIMAL: TokenType.DECIMAL,
        }


_COLUMN_CLAUSE = re.compile(r"\b(ADD|DROP|CHANGE|MODIFY|RENAME|ALTER\s+COLUMN)\b", re.I)
_TABLE_COMMAND = re.compile(r"\s*(ALTER|CREATE|RENAME)\s+TABLE\b", re.I)


def parse_ddl(sql: str, *, default_database: str | None) -> list[SchemaChange]:
    """The schema changes that ``sql`` (one or more MySQL statements) makes, in statement order.

    Tables named without a database belong to ``default_database``.
    """
    statements = _parse(sql)
    if any(isinstance(s, exp.Command) and _TABLE_COMMAND.match(_command_text(s)) for s in statements):
        rewritten = _expand_add_lists(sql)
        if rewritten is not None:
            statements = _parse(rewritten, sql)
    changes: list[SchemaChange] = []
    for statement in statements:
        if statement is not None:
            changes += _statement(statement, sql, default_database)
    return changes


def _parse(text: str, original: str | None = None) -> list[exp.Expression]:
    original = original or text
    try:
        return [s for s in sqlglot.parse(text, read=_MySQL) if isinstance(s, exp.Expression)]
    except SqlglotError as e:
        rewritten = _expand_add_lists(text)
        if rewritten is not None:
            return _parse(rewritten, original)
        raise DecodeError(f"cannot parse DDL {_short(original)}: {_first_line(e)}") from None


def _statement(node: exp.Expression, sql: str, db: str | None) -> list[SchemaChange]:
    if isinstance(node, exp.Create):
        return _create(node, sql, db)
    if isinstance(node, exp.Alter):
        if str(node.args.get("kind") or "").upper() != "TABLE":
            return []
        return _alter(node, sql, db)
    if isinstance(node, exp.Drop):
        if str(node.args.get("kind") or "").upper() != "TABLE":
            return []
        return [DropTable(_table_id(t, db)) for t in node.args.get("tables") or []]
    if isinstance(node, exp.TruncateTable):
        if node.args.get("is_database"):
            return []
        return [TruncateTable(_table_id(t, db)) for t in node.expressions]
    if isinstance(node, exp.Command):
        return _command(node, sql, db)
    return []


def _create(node: exp.Create, sql: str, db: str | None) -> list[SchemaChange]:
    if str(node.args.get("kind") or "").upper() != "TABLE":
        return []
    target = node.this
    if not isinstance(target, exp.Schema):
        raise DecodeError(f"cannot tell the columns of the table created by {_short(sql)}")
    assert isinstance(target.this, exp.Table)
    table_id = _table_id(target.this, db)
    columns: list[Column] = []
    keys: list[str] = []
    for item in target.expressions:
        if isinstance(item, exp.ColumnDef):
            column, is_key = _column(item, sql)
            columns.append(column)
            if is_key:
                keys.append(column.name)
        elif isinstance(item, exp.PrimaryKey):
            keys += [_name(e) for e in item.expressions]
        elif isinstance(item, exp.Constraint):
            for sub in item.expressions:
                if isinstance(sub, exp.PrimaryKey):
                    keys += [_name(e) for e in sub.expressions]
    keys = list(dict.fromkeys(keys))
    columns = [
        Column(c.name, c.type.not_null(), c.comment, c.default) if c.name in keys else c for c in columns
    ]
    comment = None
    properties = node.args.get("properties")
    if properties is not None:
        for prop in properties.expressions:
            if isinstance(prop, exp.SchemaCommentProperty):
                comment = _literal(prop.this)
    try:
        schema = Schema(tuple(columns), tuple(keys), comment=comment)
    except SchemaError as e:
        raise DecodeError(f"{e} in {_short(sql)}") from None
    return [CreateTable(table_id, schema)]


def _alter(node: exp.Alter, sql: str, db: str | None) -> list[SchemaChange]:
    table_id = _table_id(node.this, db)
    changes: list[SchemaChange] = []
    for action in node.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            column, _ = _column(action, sql)
            changes.append(AddColumn(table_id, column, _position(action)))
        elif isinstance(action, exp.Drop):
            if str(action.args.get("kind") or "").upper() == "COLUMN":
                changes += [DropColumn(table_id, _name(c)) for c in action.args.get("tables") or []]
        elif isinstance(action, exp.RenameColumn):
            changes.append(RenameColumn(table_id, _name(action.this), _name(action.args["to"])))
        elif isinstance(action, exp.ModifyColumn):
            changes += _modify(table_id, action, sql)
        elif isinstance(action, exp.AlterRename):
            raise DecodeError(f"table renames are not supported: {_short(sql)}")
    for option in node.args.get("options") or []:
        if isinstance(option, exp.SchemaCommentProperty):
            changes.append(AlterTableComment(table_id, _literal(option.this)))
    return changes


def _modify(table_id: TableId, action: exp.ModifyColumn, sql: str) -> list[SchemaChange]:
    definition = action.this
    assert isinstance(definition, exp.ColumnDef)
    column, _ = _column(definition, sql)
    changes: list[SchemaChange] = []
    old = action.args.get("rename_from")
    if old is not None and _name(old) != column.name:
        changes.append(RenameColumn(table_id, _name(old), column.name))
    changes.append(AlterColumnType(table_id, column.name, column.type))
    if column.comment is not None:
        changes.append(AlterColumnComment(table_id, column.name, column.comment))
    return changes


def _command(node: exp.Command, sql: str, db: str | None) -> list[SchemaChange]:
    """Statements sqlglot could only read as an opaque command."""
    text = _command_text(node)
    if not _TABLE_COMMAND.match(text):
        return []
    if text.upper().startswith("ALTER") and not _COLUMN_CLAUSE.search(text.split(None, 3)[-1]):
        return []  # table options sqlglot does not know (CONVERT TO CHARACTER SET ...)
    raise DecodeError(f"cannot parse DDL {_short(sql)}: unsupported syntax")


def _command_text(node: exp.Command) -> str:
    body = node.expression
    if isinstance(body, exp.Literal):
        body = body.this
    elif isinstance(body, exp.Expression):
        body = body.sql(dialect=_MySQL)
    return f"{node.this} {body or ''}".strip()


_ADD_LIST = re.compile(r"\bADD\s+(?:COLUMN\s+)?\(", re.I)


def _expand_add_lists(sql: str) -> str | None:
    """``ADD [COLUMN] (a INT, b INT)`` clauses, which sqlglot does not read, rewritten as
    ``ADD COLUMN a INT, ADD COLUMN b INT``; ``None`` when ``sql`` has none."""
    masked = _mask(sql)
    pieces: list[str] = []
    done = 0
    for m in _ADD_LIST.finditer(masked):
        if m.start() < done:
            continue
        close = _closing(masked, m.end() - 1)
        if close is None:
            return None
        try:
            node = sqlglot.parse_one(f"CREATE TABLE t ({sql[m.end() : close]})", read=_MySQL)
        except SqlglotError:
            return None
        if not isinstance(node, exp.Create) or not isinstance(node.this, exp.Schema):
            return None
        definitions = [d for d in node.this.expressions if isinstance(d, exp.ColumnDef)]
        pieces += [
            sql[done : m.start()],
            ", ".join(f"ADD COLUMN {d.sql(dialect=_MySQL)}" for d in definitions),
        ]
        done = close + 1
    if not pieces:
        return None
    return "".join(pieces) + sql[done:]


def _mask(sql: str) -> str:
    """``sql`` with the inside of quotes and comments blanked out (same length), so that searches
    for keywords and parentheses only see the statement's structure."""
    out = list(sql)
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            out[i + 1 : j] = "_" * (min(j, n) - i - 1)
            i = j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = " " * (j - i)
            i = j
        elif c == "#" or sql.startswith("-- ", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        else:
            i += 1
    return "".join(out)


def _closing(masked: str, start: int) -> int | None:
    depth = 0
    for i in range(start, len(masked)):
        if masked[i] == "(":
            depth += 1
        elif masked[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


# ----------------------------------------------------------------------------------------- parts


def _column(node: exp.ColumnDef, sql: str) -> tuple[Column, bool]:
    kind = node.args.get("kind")
    if kind is None:
        raise DecodeError(f"column {node.name!r} has no type in {_short(sql)}")
    type_text = kind.sql(dialect=_MySQL)
    try:
        data_type = mysql_data_type(type_text)
    except DecodeError as e:
        raise DecodeError(f"column {node.name!r}: {e.reason} in {_short(sql)}") from None
    comment = default = None
    is_key = False
    for constraint in node.constraints:
        c = constraint.kind
        if isinstance(c, exp.NotNullColumnConstraint):
            data_type = data_type.with_nullable(bool(c.args.get("allow_null")))
        elif isinstance(c, exp.PrimaryKeyColumnConstraint):
            is_key = True
            data_type = data_type.not_null()
        elif isinstance(c, exp.CommentColumnConstraint):
            comment = _literal(c.this)
        elif isinstance(c, exp.DefaultColumnConstraint):
            default = _default(c.this)
    return Column(_name(node.this), data_type, comment, literal_default(default, data_type)), is_key


def _default(node: exp.Expression) -> str | None:
    """A ``DEFAULT``'s constant as text; None for NULL and for an expression (``CURRENT_TIMESTAMP``,
    a function, ``(expr)``), which gives each row its own value."""
    if isinstance(node, exp.Literal | exp.Boolean):
        return _literal(node)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_number:
        return "-" + str(node.this.this)
    return None


def _position(node: exp.ColumnDef) -> ColumnPosition:
    position = node.args.get("position")
    if position is None:
        return LAST
    where = str(position.args.get("position") or "").upper()
    if where == "FIRST":
        return FIRST
    if where == "AFTER" and position.this is not None:
        return after(_name(position.this))
    return LAST


def _table_id(table: exp.Expression, db: str | None) -> TableId:
    if not isinstance(table, exp.Table):
        raise DecodeError(f"expected a table name, got {table.sql(dialect=_MySQL)!r}")
    return TableId(None, table.db or db or None, table.name)


def _name(node: exp.Expression) -> str:
    return node.name if isinstance(node, exp.Column | exp.Identifier) else node.sql(dialect=_MySQL)


def _literal(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal):
        return str(node.this)
    return node.sql(dialect=_MySQL)


def mysql_string(body: str) -> str:
    """The value of a single-quoted MySQL string literal whose body (between the quotes) is
    ``body``; ``body`` itself when it is no such body (a lone quote: it was double-quoted)."""
    try:
        literal = sqlglot.parse_one(f"'{body}'", read=_MySQL)
    except SqlglotError:
        return body
    return str(literal.this) if isinstance(literal, exp.Literal) and literal.is_string else body


def _short(sql: str, limit: int = 200) -> str:
    text = " ".join(sql.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
