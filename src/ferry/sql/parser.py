"""Reading Flink SQL scripts into table definitions, settings and statements.

A script is what a Flink SQL job is made of: ``CREATE TABLE`` (with computed and metadata columns,
watermarks, a primary key and ``WITH`` options), ``CREATE VIEW``, ``SET 'k' = 'v'``, and the
statements that run (``INSERT INTO ... SELECT``, a plain ``SELECT``, a statement set). Statements
that do not bear on state (``ADD JAR``, ``CREATE FUNCTION``, ``USE``, ...) are read and set aside.
Input that does not parse raises :class:`SqlParseError` with the line and column where reading
stopped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from ferry.sql.dialect import Flink, MetadataColumnConstraint, table_hints
from ferry.sql.exceptions import SqlParseError

__all__ = [
    "ColumnDef",
    "InsertDef",
    "QueryDef",
    "Script",
    "Statement",
    "TableDef",
    "ViewDef",
    "WatermarkDef",
    "hint_options",
    "parse_expression",
    "parse_script",
    "render",
]

ColumnKind = Literal["physical", "computed", "metadata"]

_DIALECT = Flink()


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """One column of a table: physical, computed (``c AS expr``) or metadata."""

    name: str
    kind: ColumnKind
    type: str | None
    expression: exp.Expr | None = field(default=None, compare=False, repr=False)
    expression_sql: str | None = None
    metadata_key: str | None = None
    virtual: bool = False
    nullable: bool = True

    def describe(self) -> str:
        """The column as it would be written in ``CREATE TABLE``."""
        if self.kind == "computed":
            return f"{self.name} AS {self.expression_sql}"
        text = f"{self.name} {self.type}"
        if not self.nullable:
            text += " NOT NULL"
        if self.kind == "metadata":
            text += " METADATA"
            if self.metadata_key:
                text += f" FROM '{self.metadata_key}'"
            if self.virtual:
                text += " VIRTUAL"
        return text


@dataclass(frozen=True, slots=True)
class WatermarkDef:
    """``WATERMARK FOR column AS expression``."""

    column: str
    expression: str


@dataclass(frozen=True, slots=True)
class TableDef:
    """A ``CREATE TABLE``: its columns, keys, watermarks and ``WITH`` options."""

    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...]
    watermarks: tuple[WatermarkDef, ...]
    options: Mapping[str, str]
    line: int = 1

    @property
    def connector(self) -> str | None:
        """The ``connector`` option, lower-cased."""
        value = self.options.get("connector")
        return value.lower() if value is not None else None

    def column(self, name: str) -> ColumnDef | None:
        """The column called ``name``, if there is one."""
        for column in self.columns:
            if column.name == name:
                return column
        return None


@dataclass(frozen=True, slots=True)
class ViewDef:
    """A ``CREATE VIEW name [(columns)] AS query``."""

    name: str
    query: exp.Query = field(compare=False, repr=False)
    column_names: tuple[str, ...] | None = None
    line: int = 1


@dataclass(frozen=True, slots=True)
class InsertDef:
    """``INSERT INTO target [(columns)] query``, the target's hint options included."""

    target: str
    query: exp.Expr = field(compare=False, repr=False)
    columns: tuple[str, ...] | None = None
    hint_options: Mapping[str, str] = field(default_factory=dict)
    line: int = 1


@dataclass(frozen=True, slots=True)
class QueryDef:
    """A query that runs without a sink of its own (a plain ``SELECT``)."""

    query: exp.Query = field(compare=False, repr=False)
    line: int = 1


Statement = InsertDef | QueryDef


@dataclass(frozen=True, slots=True)
class Script:
    """Everything a Flink SQL script defines, in the order it was written."""

    tables: Mapping[str, TableDef]
    views: Mapping[str, ViewDef]
    settings: Mapping[str, str]
    statements: tuple[Statement, ...]
    path: str | None = None

    def table(self, name: str) -> TableDef | None:
        """The table called ``name``; a qualified name also finds a table defined by its last part."""
        if name in self.tables:
            return self.tables[name]
        short = name.rsplit(".", 1)[-1]
        return self.tables.get(short)

    def view(self, name: str) -> ViewDef | None:
        """The view called ``name``, by full name or by its last part."""
        if name in self.views:
            return self.views[name]
        return self.views.get(name.rsplit(".", 1)[-1])


def render(expression: exp.Expr) -> str:
    """An expression as Flink SQL text."""
    return expression.sql(dialect=_DIALECT)


def table_name(table: exp.Expr) -> str:
    """The dotted name of a table reference, without quotes."""
    if isinstance(table, exp.Schema):
        table = table.this
    if isinstance(table, exp.Table):
        return ".".join(part.name for part in table.parts)
    return table.name


def hint_options(table: exp.Expr) -> dict[str, str]:
    """The ``OPTIONS('k' = 'v')`` of a table reference's hints; with several hints, the first wins."""
    options: dict[str, str] = {}
    for hint in table_hints(table):
        if hint.name != "OPTIONS":
            continue
        for pair in hint.expressions:
            if isinstance(pair, exp.EQ):
                options.setdefault(_literal(pair.this), _literal(pair.expression))
    return options


def parse_expression(text: str, path: str | None = None) -> exp.Expr:
    """One SQL expression (a projection item or a filter), as a pipeline YAML file writes it."""
    with _quiet_sqlglot():
        try:
            return _parse_one(text)
        except TokenError as error:
            line, column = _locate_token_error(text)
            raise SqlParseError(f"cannot read expression: {error}", line, column, path) from error
        except ParseError as error:
            raise _from_parse_error(error, path) from error


def _parse_one(text: str) -> exp.Expr:
    parsed = _DIALECT.parse(f"SELECT {text}")
    select = parsed[0] if len(parsed) == 1 else None
    if not isinstance(select, exp.Select) or len(select.expressions) != 1:
        raise ParseError.new("expected one expression", description="expected one expression", line=1, col=1)
    first: exp.Expr = select.expressions[0]
    return first


def parse_script(sql: str, path: str | None = None) -> Script:
    """Read a Flink SQL script.

    Raises :class:`SqlParseError` for input that does not parse, located by line and column.
    """
    builder = _ScriptBuilder(path)
    for tokens in _statements(sql, path):
        builder.add(tokens, sql)
    return builder.build()


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    # sqlglot logs a warning when it falls back to an opaque command; the caller reports those itself.
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _statements(sql: str, path: str | None) -> Iterator[list[Token]]:
    """The tokens of each statement, with statement-set wrappers removed."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError as error:
        line, column = _locate_token_error(sql)
        raise SqlParseError(_token_error_message(sql, line, column), line, column, path) from error
    current: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if current:
                yield from _unwrap_statement_set(current)
            current = []
        else:
            current.append(token)
    if current:
        yield from _unwrap_statement_set(current)


def _words(tokens: list[Token], count: int) -> list[str]:
    return [token.text.upper() for token in tokens[:count]]


def _unwrap_statement_set(tokens: list[Token]) -> Iterator[list[Token]]:
    # ``EXECUTE STATEMENT SET BEGIN stmt; stmt; END`` and ``BEGIN STATEMENT SET; stmt; END``.
    if _words(tokens, 4) == ["EXECUTE", "STATEMENT", "SET", "BEGIN"]:
        tokens = tokens[4:]
    elif _words(tokens, 3) == ["BEGIN", "STATEMENT", "SET"] and len(tokens) == 3:
        return
    elif _words(tokens, 1) == ["EXECUTE"] and len(tokens) > 1:
        tokens = tokens[1:]
    if _words(tokens, 1) == ["END"] and len(tokens) == 1:
        return
    if tokens:
        yield tokens


def _start_column(end_column: int, text: str) -> int:
    # sqlglot reports the column where a token ends; a message points at where it starts.
    return max(1, end_column - len(text) + 1)


def _from_parse_error(error: ParseError, path: str | None) -> SqlParseError:
    details = error.errors[0] if error.errors else {}
    line = int(details.get("line") or 1)
    end = int(details.get("col") or 1)
    highlight = str(details.get("highlight") or "")
    column = _start_column(end, highlight) if highlight else end
    description = re.sub(
        r"<Token token_type: [^,]+, text: ([^,]*),[^>]*>", r"'\1'", str(details.get("description") or error)
    )
    description = description.rstrip(".")
    near = f" near '{highlight}'" if highlight else ""
    return SqlParseError(f"syntax error{near}: {description}", line, column, path)


def _locate_token_error(sql: str) -> tuple[int, int]:
    """Where an unterminated string, quoted identifier or comment starts."""
    index = 0
    opening: int | None = None
    closer = ""
    while index < len(sql):
        if opening is None:
            if sql.startswith("--", index):
                newline = sql.find("\n", index)
                index = len(sql) if newline < 0 else newline
                continue
            if sql.startswith("/*", index):
                opening, closer = index, "*/"
                index += 2
                continue
            if sql[index] in "'`":
                opening, closer = index, sql[index]
            index += 1
            continue
        if sql.startswith(closer, index):
            if closer == "'" and sql.startswith("''", index):
                index += 2
                continue
            index += len(closer)
            opening = None
            continue
        index += 1
    position = opening if opening is not None else 0
    line = sql.count("\n", 0, position) + 1
    column = position - (sql.rfind("\n", 0, position) + 1) + 1
    return line, column


def _token_error_message(sql: str, line: int, column: int) -> str:
    offset = sum(len(text) + 1 for text in sql.split("\n")[: line - 1]) + column - 1
    char = sql[offset : offset + 2]
    if char.startswith("/*"):
        return "unterminated comment"
    if char.startswith("`"):
        return "unterminated quoted identifier"
    if char.startswith("'"):
        return "unterminated string literal"
    return "cannot read the text"


def _literal(node: exp.Expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, exp.Literal | exp.Identifier | exp.Var):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Column):
        return ".".join(part.name for part in node.parts)
    return render(node)


_SET_TEXT = re.compile(r"^\s*SET\s+(?P<key>.+?)\s*=\s*(?P<value>.*?)\s*$", re.IGNORECASE | re.DOTALL)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'`":
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


class _ScriptBuilder:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.tables: dict[str, TableDef] = {}
        self.views: dict[str, ViewDef] = {}
        self.settings: dict[str, str] = {}
        self.statements: list[Statement] = []

    def build(self) -> Script:
        return Script(
            tables=dict(self.tables),
            views=dict(self.views),
            settings=dict(self.settings),
            statements=tuple(self.statements),
            path=self.path,
        )

    def error(self, message: str, token: Token) -> SqlParseError:
        return SqlParseError(message, token.line, _start_column(token.col, token.text), self.path)

    def add(self, tokens: list[Token], sql: str) -> None:
        first = tokens[0]
        text = sql[first.start : tokens[-1].end + 1]
        if first.token_type == TokenType.SET:
            self._add_setting(text, first)
            return
        with _quiet_sqlglot():
            try:
                parsed = _DIALECT.parser().parse(tokens, sql)
            except ParseError as error:
                raise _from_parse_error(error, self.path) from error
        for statement in parsed:
            if statement is not None:
                self._add_statement(statement, first)

    def _add_setting(self, text: str, token: Token) -> None:
        match = _SET_TEXT.match(text)
        if match is None:
            return  # a bare ``SET`` lists the settings
        key = _unquote(match.group("key").strip())
        value = _unquote(match.group("value").strip())
        if not key:
            raise self.error("SET needs a key", token)
        self.settings[key] = value

    def _add_statement(self, statement: exp.Expr, first: Token) -> None:
        line = first.line
        if isinstance(statement, exp.Create):
            self._add_create(statement, first)
        elif isinstance(statement, exp.Insert):
            self._add_insert(statement, first)
        elif isinstance(statement, exp.Query):
            self.statements.append(QueryDef(query=statement, line=line))
        elif isinstance(statement, exp.Command):
            command = statement.name.upper()
            if command in {"INSERT", "SELECT", "WITH"} or (
                command == "CREATE" and _creates_table_or_view(statement)
            ):
                raise self.error(f"unsupported syntax in this {command} statement", first)
        # Anything else (USE, DROP, ALTER, DESCRIBE, CREATE FUNCTION/CATALOG/DATABASE, ADD JAR,
        # RESET, LOAD MODULE, ...) does not define tables or queries and bears on no state.

    def _add_create(self, create: exp.Create, first: Token) -> None:
        kind = str(create.args.get("kind") or "").upper()
        if kind == "VIEW":
            target = create.this
            columns = None
            if isinstance(target, exp.Schema):
                columns = tuple(column.name for column in target.expressions)
            query = create.expression
            if not isinstance(query, exp.Query):
                raise self.error("CREATE VIEW needs AS followed by a query", first)
            name = table_name(target)
            self.views[name] = ViewDef(name=name, query=query, column_names=columns, line=first.line)
        elif kind == "TABLE":
            table = self._table_def(create, first)
            self.tables[table.name] = table
            query = create.expression
            if isinstance(query, exp.Query):
                self.statements.append(InsertDef(target=table.name, query=query, line=first.line))

    def _table_def(self, create: exp.Create, first: Token) -> TableDef:
        target = create.this
        name = table_name(target)
        columns: list[ColumnDef] = []
        primary_key: list[str] = []
        watermarks: list[WatermarkDef] = []
        options: dict[str, str] = {}
        like: exp.LikeProperty | None = None
        for prop in (create.args.get("properties") or exp.Properties()).expressions:
            if isinstance(prop, exp.LikeProperty):
                like = prop
            elif type(prop) is exp.Property:
                options[_literal(prop.this)] = _literal(prop.args.get("value"))
        if like is not None:
            base = self.tables.get(table_name(like.this))
            if base is None:
                raise self.error(f"LIKE refers to table {table_name(like.this)}, which is not defined", first)
            excluded = {
                _literal(option.args.get("value"))
                for option in like.expressions
                if str(option.this).upper() == "EXCLUDING"
            }
            columns.extend(
                column
                for column in base.columns
                if not (
                    (("ALL" in excluded or "GENERATED" in excluded) and column.kind == "computed")
                    or (("ALL" in excluded or "METADATA" in excluded) and column.kind == "metadata")
                )
            )
            if not {"ALL", "CONSTRAINTS"} & excluded:
                primary_key.extend(base.primary_key)
            if not {"ALL", "WATERMARKS"} & excluded:
                watermarks.extend(base.watermarks)
            if not {"ALL", "OPTIONS"} & excluded:
                options = {**base.options, **options}
        for item in target.expressions if isinstance(target, exp.Schema) else []:
            if isinstance(item, exp.ColumnDef):
                column, inline_key = self._column_def(item)
                columns.append(column)
                if inline_key:
                    primary_key = [column.name]
            elif isinstance(item, exp.WatermarkColumnConstraint):
                watermarks.append(
                    WatermarkDef(column=_literal(item.this), expression=render(item.expression))
                )
            elif isinstance(item, exp.PrimaryKey):
                primary_key = [_literal(key) for key in item.expressions]
            elif isinstance(item, exp.Constraint):
                for inner in item.expressions:
                    if isinstance(inner, exp.PrimaryKey):
                        primary_key = [_literal(key) for key in inner.expressions]
        if not columns and isinstance(create.expression, exp.Query):
            columns = [
                ColumnDef(name=select_name, kind="physical", type=None)
                for select_name in create.expression.named_selects
            ]
        return TableDef(
            name=name,
            columns=tuple(columns),
            primary_key=tuple(primary_key),
            watermarks=tuple(watermarks),
            options=options,
            line=first.line,
        )

    def _column_def(self, item: exp.ColumnDef) -> tuple[ColumnDef, bool]:
        name = item.name
        kind = item.args.get("kind")
        type_sql = render(kind) if kind is not None else None
        nullable = True
        primary = False
        metadata: MetadataColumnConstraint | None = None
        computed: exp.ComputedColumnConstraint | None = None
        for constraint in item.constraints:
            value = constraint.args.get("kind")
            if isinstance(value, exp.NotNullColumnConstraint) and not value.args.get("allow_null"):
                nullable = False
            elif isinstance(value, exp.PrimaryKeyColumnConstraint):
                primary = True
                nullable = False
            elif isinstance(value, MetadataColumnConstraint):
                metadata = value
            elif isinstance(value, exp.ComputedColumnConstraint):
                computed = value
        if computed is not None:
            expression = computed.this
            return (
                ColumnDef(
                    name=name,
                    kind="computed",
                    type=None,
                    expression=expression,
                    expression_sql=render(expression),
                ),
                primary,
            )
        if metadata is not None:
            key = metadata.args.get("this")
            return (
                ColumnDef(
                    name=name,
                    kind="metadata",
                    type=type_sql,
                    metadata_key=_literal(key) if key is not None else name,
                    virtual=bool(metadata.args.get("virtual")),
                    nullable=nullable,
                ),
                primary,
            )
        return ColumnDef(name=name, kind="physical", type=type_sql, nullable=nullable), primary

    def _add_insert(self, insert: exp.Insert, first: Token) -> None:
        target = insert.this
        columns = None
        if isinstance(target, exp.Schema):
            columns = tuple(column.name for column in target.expressions)
            target = target.this
        query = insert.expression
        if not isinstance(query, exp.Query | exp.Values):
            raise self.error("INSERT needs a query (VALUES or SELECT)", first)
        self.statements.append(
            InsertDef(
                target=table_name(target),
                query=query,
                columns=columns,
                hint_options=hint_options(target),
                line=first.line,
            )
        )


def _creates_table_or_view(command: exp.Command) -> bool:
    words = str(command.expression or "").upper().split()
    return any(word in {"TABLE", "VIEW"} for word in words[:3])
