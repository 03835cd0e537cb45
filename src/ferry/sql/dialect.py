"""A Flink SQL dialect for sqlglot.

sqlglot has no Flink dialect. This one starts from sqlglot's default dialect and adds what Flink
scripts need: backquoted identifiers, ``WITH ('k' = 'v')`` table options, ``WATERMARK FOR c AS e``,
``METADATA [FROM 'key'] [VIRTUAL]`` columns, ``ROW<...>`` and ``MULTISET<...>`` types, ``TABLE t``
and ``DESCRIPTOR(c)`` arguments of window table functions, ``/*+ OPTIONS('k' = 'v') */`` table hints,
``MATCH_RECOGNIZE`` and a few statements parsed as commands (``ADD JAR``, ``RESET``, ...).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp, generator, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ParseError
from sqlglot.parsers.base import BaseParser
from sqlglot.tokenizer_core import TokenType

__all__ = [
    "Flink",
    "MetadataColumnConstraint",
    "TableArgument",
    "TableHint",
    "table_hints",
]

_HINTS_META_KEY = "ferry_hints"


class MetadataColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    """``METADATA [FROM 'key'] [VIRTUAL]``: a column read from the connector's metadata."""

    arg_types: ClassVar[dict[str, bool]] = {"this": False, "virtual": False}


class TableArgument(exp.Expression):
    """``TABLE t [PARTITION BY a, b]`` passed to a table function such as ``TUMBLE``."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "partition_by": False}


class TableHint(exp.Expression):
    """One table hint, for example ``OPTIONS('scan.startup.mode' = 'earliest-offset')``."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False}


def table_hints(table: exp.Expr) -> list[TableHint]:
    """The ``/*+ ... */`` hints written after a table reference, in order."""
    hints = table.meta.get(_HINTS_META_KEY)
    return list(hints) if hints else []


def _parse_metadata(parser: FlinkParser) -> MetadataColumnConstraint:
    key = parser._parse_string() if parser._match(TokenType.FROM) else None
    virtual = parser._match_text_seq("VIRTUAL")
    return parser.expression(MetadataColumnConstraint(this=key, virtual=virtual or None))


def _parse_watermark(parser: FlinkParser) -> exp.WatermarkColumnConstraint:
    if not parser._match(TokenType.FOR):
        parser.raise_error("Expecting FOR after WATERMARK")
    column = parser._parse_column()
    if not parser._match(TokenType.ALIAS):
        parser.raise_error("Expecting AS in WATERMARK FOR column AS expression")
    return parser.expression(
        exp.WatermarkColumnConstraint(this=column, expression=parser._parse_disjunction())
    )


def _parse_kwarg(parser: FlinkParser, expressions: list[exp.Expr]) -> exp.Kwarg:
    value = parser._parse_table_argument() or parser._parse_assignment()
    return parser.expression(exp.Kwarg(this=exp.var(expressions[0].name), expression=value))


class FlinkTokenizer(tokens.Tokenizer):
    """Backquoted identifiers, single-quoted strings, Flink type names and commands."""

    IDENTIFIERS: ClassVar = ["`"]
    QUOTES: ClassVar = ["'"]
    KEYWORDS: ClassVar = {
        **tokens.Tokenizer.KEYWORDS,
        "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE,
        "STRING": TokenType.TEXT,
        "BYTES": TokenType.VARBINARY,
        "TIMESTAMP_LTZ": TokenType.TIMESTAMPLTZ,
        "ROW": TokenType.STRUCT,
        "ADD JAR": TokenType.COMMAND,
        "REMOVE JAR": TokenType.COMMAND,
        "RESET": TokenType.COMMAND,
        "LOAD MODULE": TokenType.COMMAND,
        "UNLOAD MODULE": TokenType.COMMAND,
        "SHOW": TokenType.COMMAND,
    }
    # Flink hints are read from the comments they are in (``/*+ ... */`` keeps its ``+``), so that
    # a hint after a table name is attached to that table.
    KEYWORDS.pop("/*+")
    # ``EXECUTE STATEMENT SET BEGIN ... END`` and ``EXECUTE INSERT ...`` wrap statements that must be
    # read, not swallowed as an opaque command.
    COMMANDS: ClassVar = tokens.Tokenizer.COMMANDS - {TokenType.EXECUTE}


class FlinkParser(BaseParser):
    """sqlglot's default parser with Flink's DDL and table-function syntax."""

    CONSTRAINT_PARSERS: ClassVar = {
        **BaseParser.CONSTRAINT_PARSERS,
        "WATERMARK": _parse_watermark,
        "METADATA": _parse_metadata,
    }
    SCHEMA_UNNAMED_CONSTRAINTS: ClassVar = {*BaseParser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}
    LAMBDAS: ClassVar = {**BaseParser.LAMBDAS, TokenType.FARROW: _parse_kwarg}
    FUNC_TOKENS: ClassVar = {*BaseParser.FUNC_TOKENS, TokenType.SESSION}

    def validate_expression(self, expression: Any, args: list[Any] | None = None) -> Any:
        # Flink resolves function names against its own catalog and user functions: a call such as
        # ``split(s)`` to a user-defined table function must not be rejected for the arity that
        # sqlglot expects of a built-in with the same name.
        if isinstance(expression, exp.Func):
            return expression
        return super().validate_expression(expression, args)

    def _parse_create_like(self) -> exp.LikeProperty | None:
        # ``LIKE source [( {INCLUDING | EXCLUDING | OVERWRITING} {ALL | CONSTRAINTS | ...} ... )]``
        table = self._parse_table_parts(schema=True)
        options: list[exp.Expr] = []
        if self._match(TokenType.L_PAREN):
            while self._match_texts(("INCLUDING", "EXCLUDING", "OVERWRITING")):
                strategy = self._prev.text.upper()
                feature = self._parse_id_var(any_token=True)
                if not feature:
                    self.raise_error("Expecting a LIKE option such as ALL, OPTIONS or WATERMARKS")
                    return None
                options.append(
                    self.expression(exp.Property(this=strategy, value=exp.var(feature.name.upper())))
                )
            self._match_r_paren()
        return self.expression(exp.LikeProperty(this=table, expressions=options))

    def _parse_table_argument(self) -> TableArgument | None:
        if not self._is_table_query():
            return None
        self._advance()
        table = self._parse_table_parts()
        partition: list[exp.Expr] | None = None
        if self._match(TokenType.PARTITION_BY):
            # ``PARTITION BY a`` or ``PARTITION BY (a, b)``: a bare list would swallow the next argument.
            if self._match(TokenType.L_PAREN, advance=False):
                partition = self._parse_wrapped_csv(self._parse_column)
            else:
                column = self._parse_column()
                partition = [column] if column else None
        return self.expression(TableArgument(this=table, partition_by=partition))

    def _parse_lambda(self, alias: bool = False) -> exp.Expr | None:
        return self._parse_table_argument() or super()._parse_lambda(alias=alias)

    def _parse_types(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        if (
            self._curr
            and self._curr.text.upper() == "MULTISET"
            and self._next
            and self._next.token_type == TokenType.LT
        ):
            self._advance(2)
            element = self._parse_types(schema=True)
            if not self._match(TokenType.GT):
                self.raise_error("Expecting > after MULTISET element type")
            return exp.DataType(
                this=exp.DataType.Type.USERDEFINED, kind="MULTISET", expressions=[element], nested=True
            )
        return super()._parse_types(*args, **kwargs)

    def _parse_table_parts(
        self,
        schema: bool = False,
        is_db_reference: bool = False,
        wildcard: bool = False,
        fast: bool = False,
    ) -> exp.Table | exp.Dot | None:
        table = super()._parse_table_parts(
            schema=schema, is_db_reference=is_db_reference, wildcard=wildcard, fast=fast
        )
        if table is not None:
            self._attach_hints(table)
        return table

    def _parse_table(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        table = super()._parse_table(*args, **kwargs)
        # A hint may also follow the alias: ``FROM t AS x /*+ OPTIONS(...) */``.
        if isinstance(table, exp.Table) and isinstance(alias := table.args.get("alias"), exp.TableAlias):
            self._attach_hints(table, alias)
            if isinstance(alias.this, exp.Identifier):
                self._attach_hints(table, alias.this)
        return table

    def _attach_hints(self, table: exp.Expr, holder: exp.Expr | None = None) -> None:
        holder = holder or table
        kept: list[str] = []
        hints: list[TableHint] = list(table.meta.get(_HINTS_META_KEY) or [])
        found = False
        for comment in holder.comments or []:
            if comment.startswith("+"):
                hints.extend(self._parse_hint_text(comment[1:]))
                found = True
            else:
                kept.append(comment)
        if found:
            holder.comments = kept
            table.meta[_HINTS_META_KEY] = hints

    def _parse_hint_text(self, text: str) -> list[TableHint]:
        token = self._prev
        try:
            parsed = Flink().parse(f"SELECT {text}")
        except ParseError:
            self.raise_error(f"Invalid table hint /*+{text}*/", token)
            return []
        hints: list[TableHint] = []
        select = parsed[0]
        for item in select.expressions if isinstance(select, exp.Select) else []:
            if isinstance(item, exp.Anonymous | exp.Func):
                name = item.name if isinstance(item, exp.Anonymous) else item.sql_name()
                hints.append(TableHint(this=name.upper(), expressions=list(item.expressions)))
            else:
                self.raise_error(f"Invalid table hint /*+{text}*/", token)
        return hints


def _partition_sql(gen: generator.Generator, argument: TableArgument) -> str:
    columns = argument.args.get("partition_by") or []
    if not columns:
        return ""
    listed = gen.expressions(argument, key="partition_by", flat=True)
    return f" PARTITION BY ({listed})" if len(columns) > 1 else f" PARTITION BY {listed}"


class FlinkGenerator(generator.Generator):
    """Renders expressions with Flink's type names (``STRING``, ``BYTES``, ``ROW<...>``)."""

    TYPE_MAPPING: ClassVar = {
        **generator.Generator.TYPE_MAPPING,
        exp.DataType.Type.TEXT: "STRING",
        exp.DataType.Type.VARBINARY: "BYTES",
        exp.DataType.Type.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
        exp.DataType.Type.STRUCT: "ROW",
    }
    TRANSFORMS: ClassVar = {
        **generator.Generator.TRANSFORMS,
        MetadataColumnConstraint: lambda self, e: " ".join(
            part
            for part in (
                "METADATA",
                f"FROM {self.sql(e, 'this')}" if e.args.get("this") else "",
                "VIRTUAL" if e.args.get("virtual") else "",
            )
            if part
        ),
        TableArgument: lambda self, e: f"TABLE {self.sql(e, 'this')}" + _partition_sql(self, e),
        TableHint: lambda self, e: f"{e.name}({self.expressions(e, flat=True)})",
        exp.WatermarkColumnConstraint: lambda self, e: (
            f"WATERMARK FOR {self.sql(e, 'this')} AS {self.sql(e, 'expression')}"
        ),
    }


class Flink(Dialect):
    """Apache Flink SQL, as far as ``ferry check`` and transforms need to read it."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE

    Tokenizer = FlinkTokenizer
    Parser = FlinkParser
    Generator = FlinkGenerator
