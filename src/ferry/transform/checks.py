"""What a job's transform expressions ask for that ferry cannot evaluate, found when the job is
validated: a function transforms do not have (named as the job file spells it, with its place in
the expression), or a call to a user-defined function with the wrong number of arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from ferry.model.schema import Schema, TableId
from ferry.transform.blocks import TransformSpec, parse_filter, parse_projection, stateful_reason
from ferry.transform.compiled import Compiled, CompileError
from ferry.transform.expressions import DIALECT, Compiler, unsupported
from ferry.transform.function_catalog import FLINK_CDC_FUNCTIONS, dialect_for
from ferry.transform.udf import UserFunction, UserFunctionError

#: Why a documented function is not evaluated, by the name a job calls it by.
_WHY = {f.syntax.split("(")[0].strip().upper(): f.why for f in FLINK_CDC_FUNCTIONS if f.example is None}


@dataclass(frozen=True, slots=True)
class ExpressionProblem:
    """One refusal: the transform's index, its key (``projection`` or ``filter``), the character
    offset in the key's text (None when the construct is not a call), and what is wrong."""

    index: int
    key: str
    offset: int | None
    message: str


def _unescaped(text: str) -> tuple[str, list[int]]:
    """The expression as parsed (``\\*`` read as ``*``) and, per character, its offset in ``text``."""
    out: list[str] = []
    where: list[int] = []
    i = 0
    while i < len(text):
        if text.startswith("\\*", i):
            out.append("*")
            where.append(i)
            i += 2
            continue
        out.append(text[i])
        where.append(i)
        i += 1
    where.append(len(text))
    return "".join(out), where


def _calls(sql: str, functions: tuple[str, ...]) -> list[tuple[Token, exp.Expr]]:
    """Every ``name(...)`` in ``sql``, with what it parses to on its own."""
    dialect = dialect_for(functions)
    try:
        tokens = dialect.tokenize(sql)
    except TokenError:
        return []
    calls: list[tuple[Token, exp.Expr]] = []
    for i, token in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type is not TokenType.L_PAREN or not token.text[:1].isalpha():
            continue
        depth = 0
        for closing in tokens[i + 1 :]:
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(closing.token_type, 0)
            if depth == 0:
                break
        try:
            parsed = dialect.parse("SELECT " + sql[token.start : closing.end + 1])[0]
        except (ParseError, TokenError, IndexError):
            continue
        if isinstance(parsed, exp.Select) and parsed.expressions:
            calls.append((token, parsed.expressions[0].unalias()))
    return calls


def _same(a: exp.Expr, b: exp.Expr) -> bool:
    if type(a) is not type(b):
        return False
    return not isinstance(a, exp.Anonymous) or a.name.upper() == b.name.upper()


def _problem(
    index: int, key: str, text: str, functions: Mapping[str, UserFunction]
) -> ExpressionProblem | None:
    names = tuple(functions)
    try:
        select = parse_projection(text, names) if key == "projection" else None
        nodes = list(select.expressions) if select is not None else [parse_filter(text, names)]
        nodes = [
            n.unalias() for n in nodes if not isinstance(n, exp.Star) and not isinstance(n.this, exp.Star)
        ]
    except ValueError:
        return None  # the key's own validation reports it
    sql, where = _unescaped(text)
    calls = _calls(sql, names)
    by_name = {name.upper(): f for name, f in functions.items()}
    for node in nodes:
        for call in node.find_all(exp.Anonymous):
            function = by_name.get(call.name.upper())
            if function is None:
                continue
            try:
                function.check_arity(len(call.expressions))
            except UserFunctionError as e:
                token = next((t for t, parsed in calls if _same(parsed, call)), None)
                return ExpressionProblem(index, key, None if token is None else where[token.start], str(e))
        part = unsupported(node, names)
        if part is None:
            continue
        token = next((t for t, parsed in calls if _same(parsed, part)), None)
        spelling = token.text if token is not None else part.sql(dialect=DIALECT)
        why = _WHY.get(spelling.upper())
        if why:
            message = f"{spelling} is not supported: {why}"
        else:
            message = (
                f"{spelling} is not a function transforms evaluate (docs/transforms.md lists Flink CDC's "
                "functions and their status); a Python function can be declared in "
                "pipeline.user-defined-function"
            )
        return ExpressionProblem(index, key, None if token is None else where[token.start], message)
    compiler = _AnyColumns(TableId(None, None, "t"), Schema((), (), ()), functions=functions)
    for node in nodes:
        try:
            compiler.compile(node)
        except CompileError as e:
            return ExpressionProblem(index, key, None, str(e))
    return None


class _AnyColumns(Compiler):
    """A compiler for no table in particular: any name is a column of a type not yet known, so
    what an expression asks of its functions (arguments, constant formats and units) is checked
    before a table's schema is."""

    def compile(self, node: exp.Expr) -> Compiled:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return Compiled(lambda row: None, None)
        return super().compile(node)


@dataclass(frozen=True, slots=True)
class _Alone:
    """One transform as a job of its own, for :func:`stateful_reason`."""

    spec: TransformSpec

    @property
    def transform(self) -> Sequence[TransformSpec]:
        return (self.spec,)


def expression_problems(
    specs: Sequence[TransformSpec], functions: Mapping[str, UserFunction] | None = None
) -> list[ExpressionProblem]:
    """The first problem of each transform expression that has one."""
    problems: list[ExpressionProblem] = []
    for index, spec in enumerate(specs):
        if stateful_reason(_Alone(spec)) is not None:
            continue  # ferry check names the construct that keeps state
        for key, text in (("projection", spec.projection), ("filter", spec.filter)):
            if text:
                problem = _problem(index, key, text, functions or {})
                if problem is not None:
                    problems.append(problem)
    return problems
