"""SQL expressions of transforms, compiled into Python closures.

:class:`Compiler` turns a sqlglot expression into a row function for one source schema, with the
expression's type: column references, literals, arithmetic, comparisons, ``AND``/``OR``/``NOT``,
``IS [NOT] NULL``, ``IS [NOT] DISTINCT FROM``, ``IN``, ``BETWEEN``, ``LIKE``, ``CASE``, ``IF``,
``CAST``/``TRY_CAST``, ``COALESCE``, ``NULLIF``, numeric rounding, the metadata columns, and the
function families of their own modules (:mod:`~ferry.transform.text_functions`,
:mod:`~ferry.transform.temporal_functions`, :mod:`~ferry.transform.struct_functions`; the list is
:data:`~ferry.transform.function_catalog.FLINK_CDC_FUNCTIONS`) and the job's user-defined
functions (:mod:`~ferry.transform.udf`). Nothing is parsed per row. Evaluation follows SQL: NULL
in, NULL out, three-valued logic; a value an expression cannot take raises
:class:`~ferry.transform.sqlvalues.ExpressionError`; one that cannot be compiled for the schema (a
missing column, an operand of the wrong type) raises :class:`CompileError`.

Types follow Flink's rules: integer arithmetic widens with :func:`~ferry.model.types.widen`
(and an integer result that leaves its type's range is an error, not a wrap-around), DECIMAL
arithmetic derives precision and scale as Flink does, string functions give ``STRING``,
conditions ``BOOLEAN`` and a ``CAST`` its target.
"""

from __future__ import annotations

import decimal
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlglot import exp

from ferry.model.events import Row
from ferry.model.exceptions import SchemaError
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import (
    BIGINT,
    BOOLEAN,
    CHARACTER,
    DECIMAL,
    DOUBLE,
    INT,
    INTEGERS,
    MAX_DECIMAL_PRECISION,
    STRING,
    TIMESTAMPS,
    DataType,
    TypeRoot,
    parse,
)
from ferry.transform import struct_functions, temporal_functions, text_functions, variant_functions
from ferry.transform.compiled import Compiled, CompileError, Fn, RowKind, Session, binary, constant
from ferry.transform.function_catalog import dialect_for
from ferry.transform.sqlvalues import (
    CONTEXT,
    INT_RANGE,
    NUMERIC,
    ROW_ERRORS,
    arithmetic,
    arithmetic_type,
    cast_to,
    coercion,
    common_type,
    like_regex,
    round_half_up,
    substring,
    to_text,
    to_timestamp,
)
from ferry.transform.udf import UserFunction

DIALECT = dialect_for()
#: Hidden columns an expression may name (Flink CDC's metadata columns).
METADATA_COLUMNS = ("__namespace_name__", "__schema_name__", "__table_name__")
#: The metadata column of the change's kind: ``+I``, ``-U``, ``+U``, ``-D``.
EVENT_TYPE_COLUMN = "__data_event_type__"
#: The metadata column of the change's time at the source, epoch milliseconds (Flink CDC's
#: ``metadata.list: op_ts``; Debezium's ``source.ts_ms``), when the table has no column of the name.
OP_TS_COLUMN = "op_ts"


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)


#: What a projection or filter may use; anything else is refused when the job is validated.
SUPPORTED = (
    "Flink CDC's built-in functions (docs/transforms.md lists them), CAST, TRY_CAST and the job's "
    "user-defined functions"
)


def _literal_number(text: str) -> Compiled:
    if re.fullmatch(r"\d+", text):
        value = int(text)
        for candidate in (INT(), BIGINT()):
            low, high = INT_RANGE[candidate.root]
            if low <= value <= high:
                return constant(value, candidate.not_null())
        return constant(decimal.Decimal(value), DECIMAL(min(len(text), MAX_DECIMAL_PRECISION), 0))
    if "e" in text.lower():
        return constant(float(text), DOUBLE().not_null())
    number = decimal.Decimal(text)
    scale = max(0, -int(number.as_tuple().exponent))
    precision = max(len(number.as_tuple().digits), scale, 1)
    return constant(number, DECIMAL(precision, scale).not_null())


class Compiler:
    """Compiles expressions against one table's schema; raises :class:`CompileError`.

    ``aliases`` are the expressions names stand for, before the source's columns (a filter reads
    the projection's columns: its computed ones, and a source column as the projection makes it).
    """

    def __init__(
        self,
        table: TableId,
        schema: Schema,
        aliases: Mapping[str, exp.Expr] | None = None,
        *,
        session: Session | None = None,
        functions: Mapping[str, UserFunction] | None = None,
        row_kind: RowKind | None = None,
    ) -> None:
        self.table = table
        self.row_kind = row_kind or RowKind()
        self.schema = schema
        self.aliases = dict(aliases or {})
        self.session = session or Session()
        self.functions = {name.upper(): f for name, f in (functions or {}).items()}
        self._inlining: set[str] = set()

    def compile(self, node: exp.Expr) -> Compiled:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise CompileError(f"{_sql(node)} is not supported; transforms support {SUPPORTED}")
        return handler(self, node)

    def condition(self, node: exp.Expr) -> Compiled:
        compiled = self.compile(node)
        if compiled.type is not None and compiled.type.root is not TypeRoot.BOOLEAN:
            raise CompileError(f"{_sql(node)} is a {compiled.type}, not a condition")
        return compiled

    def numeric(self, node: exp.Expr) -> Compiled:
        compiled = self.compile(node)
        if compiled.type is not None and compiled.type.root not in NUMERIC:
            raise CompileError(f"{_sql(node)} is a {compiled.type}, not a number")
        return compiled

    def fold(
        self, compiled: Compiled, convert: Callable[[Any], Any] | None, type_: DataType | None
    ) -> Compiled:
        """``compiled`` with ``convert`` applied to its non-NULL values (at compile time for a constant)."""
        if convert is None:
            return Compiled(compiled.fn, type_, compiled.constant)
        if compiled.constant:
            value = compiled.fn({})
            try:
                return constant(None if value is None else convert(value), type_)
            except ROW_ERRORS as e:
                raise CompileError(str(e)) from None
        inner = compiled.fn

        def fn(row: Row) -> Any:
            value = inner(row)
            return None if value is None else convert(value)

        return Compiled(fn, type_)

    def pair(self, a: Compiled, b: Compiled, text: str) -> tuple[Compiled, Compiled]:
        """Two operands brought to a type they can be compared in (text is cast to the other side)."""
        ta, tb = a.type, b.type
        if ta is None or tb is None:
            return a, b
        ra, rb = ta.root, tb.root
        if {ra, rb} <= set(NUMERIC) or {ra, rb} <= set(CHARACTER) or ra is rb:
            return a, b
        if {ra, rb} <= {TypeRoot.DATE, *TIMESTAMPS}:  # a DATE meets a TIMESTAMP at midnight
            if ra is TypeRoot.DATE:
                return self.fold(a, to_timestamp, tb), b
            return a, self.fold(b, to_timestamp, ta)
        if ra in CHARACTER:
            return self.fold(a, self.cast(tb.with_nullable(True)), tb), b
        if rb in CHARACTER:
            return a, self.fold(b, self.cast(ta.with_nullable(True)), ta)
        raise CompileError(f"cannot compare {ta} with {tb} in {text}")

    def cast(self, target: DataType) -> Callable[[Any], Any]:
        try:
            return cast_to(target)
        except ValueError as e:
            raise CompileError(str(e)) from None

    # ---------------------------------------------------------------------------- leaves

    def resolve(self, name: str) -> Column | None:
        """The source column a name refers to: the same name, else the only one equal ignoring case."""
        column = self.schema.find(name)
        if column is None:
            matches = [c for c in self.schema.columns if c.name.lower() == name.lower()]
            column = matches[0] if len(matches) == 1 else None
        return column

    def column(self, node: exp.Column) -> Compiled:
        if isinstance(node.this, exp.Star):
            raise CompileError("* is only allowed as a projection item")
        name = node.name
        if name in self.aliases and name not in self._inlining:
            # the projection's value of the name, even where a source column has it (Flink CDC's
            # filters read the projected row first)
            self._inlining.add(name)
            try:
                return self.compile(self.aliases[name])
            finally:
                self._inlining.discard(name)
        column = self.resolve(name)
        if column is not None:
            return Compiled(operator.methodcaller("get", column.name), column.type)
        if name.lower() == EVENT_TYPE_COLUMN:
            kind = self.row_kind
            kind.used = True
            return Compiled(lambda row: kind.value, STRING().not_null())
        if name.lower() == OP_TS_COLUMN:
            kind = self.row_kind
            kind.used = True
            return Compiled(lambda row: kind.op_ts, BIGINT())
        if name.lower() in METADATA_COLUMNS:
            value = (self.table.namespace, self.table.schema_name, self.table.table_name)[
                METADATA_COLUMNS.index(name.lower())
            ]
            return constant(value, STRING() if value is None else STRING().not_null())
        columns = ", ".join(self.schema.names)
        raise CompileError(
            f"column {name!r} does not exist in table {self.table} (its columns: {columns})", name
        )

    def literal(self, node: exp.Literal) -> Compiled:
        if node.is_string:
            return constant(str(node.this), STRING().not_null())
        return _literal_number(str(node.this))

    def null(self, node: exp.Null) -> Compiled:
        return constant(None, None)

    def boolean(self, node: exp.Boolean) -> Compiled:
        return constant(bool(node.this), BOOLEAN().not_null())

    def paren(self, node: exp.Paren) -> Compiled:
        return self.compile(node.this)

    # ---------------------------------------------------------------------------- arithmetic

    def negate(self, node: exp.Neg) -> Compiled:
        operand = self.numeric(node.this)
        return self.fold(operand, operator.neg, operand.type)

    def arithmetic(self, node: exp.Binary) -> Compiled:
        if isinstance(node, exp.Add | exp.Sub) and (
            isinstance(node.this, exp.Interval) or isinstance(node.expression, exp.Interval)
        ):
            return temporal_functions.interval_arithmetic(self, node)
        op = _ARITHMETIC[type(node)]
        left, right = self.numeric(node.this), self.numeric(node.expression)
        if left.type is None or right.type is None:
            return constant(None, left.type or right.type)
        result = arithmetic_type(op, left.type, right.type, self.session.decimal_precision)
        return binary(arithmetic(op, result), left, right, result)

    # ---------------------------------------------------------------------------- conditions

    def compare(self, node: exp.Binary) -> Compiled:
        test = _COMPARISONS[type(node)]
        left, right = self.pair(self.compile(node.this), self.compile(node.expression), _sql(node))
        return binary(test, left, right, BOOLEAN())

    def distinct(self, node: exp.NullSafeEQ | exp.NullSafeNEQ) -> Compiled:
        """``IS [NOT] DISTINCT FROM``: NULL is a value like any other, the result never NULL."""
        left, right = self.pair(self.compile(node.this), self.compile(node.expression), _sql(node))
        lf, rf, same = left.fn, right.fn, isinstance(node, exp.NullSafeEQ)

        def fn(row: Row) -> bool:
            a, b = lf(row), rf(row)
            equal = (a is None and b is None) or (a is not None and b is not None and a == b)
            return equal is same

        return Compiled(fn, BOOLEAN().not_null())

    def nullif(self, node: exp.Nullif) -> Compiled:
        """``NULLIF(a, b)``: NULL when ``a`` equals ``b``, else ``a``."""
        value = self.compile(node.this)
        left, right = self.pair(value, self.compile(node.expression), _sql(node))
        vf, lf, rf = value.fn, left.fn, right.fn

        def fn(row: Row) -> Any:
            a = lf(row)
            return None if a is not None and a == rf(row) else vf(row)

        return Compiled(fn, None if value.type is None else value.type.with_nullable(True))

    def and_(self, node: exp.And) -> Compiled:
        lf, rf = self.condition(node.this).fn, self.condition(node.expression).fn

        def fn(row: Row) -> bool | None:
            a = lf(row)
            if a is False:
                return False
            b = rf(row)
            if b is False:
                return False
            return None if a is None or b is None else True

        return Compiled(fn, BOOLEAN())

    def or_(self, node: exp.Or) -> Compiled:
        lf, rf = self.condition(node.this).fn, self.condition(node.expression).fn

        def fn(row: Row) -> bool | None:
            a = lf(row)
            if a is True:
                return True
            b = rf(row)
            if b is True:
                return True
            return None if a is None or b is None else False

        return Compiled(fn, BOOLEAN())

    def not_(self, node: exp.Not) -> Compiled:
        return self.fold(self.condition(node.this), operator.not_, BOOLEAN())

    def is_(self, node: exp.Is) -> Compiled:
        f, target = self.compile(node.this).fn, node.expression
        if isinstance(target, exp.Null):
            return Compiled(lambda row: f(row) is None, BOOLEAN().not_null())
        if isinstance(target, exp.Boolean):
            expected = bool(target.this)
            return Compiled(lambda row: f(row) is expected, BOOLEAN().not_null())
        raise CompileError(f"{_sql(node)} is not supported: IS takes NULL, TRUE or FALSE")

    def in_(self, node: exp.In) -> Compiled:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise CompileError(f"{_sql(node)}: IN takes a list of values, not a query")
        value = self.compile(node.this)
        items = [self.pair(value, self.compile(item), _sql(node)) for item in node.expressions]
        f = items[0][0].fn if items else value.fn
        if all(item.constant for _, item in items):
            constants = [item.fn({}) for _, item in items]
            has_null, members = None in constants, frozenset(c for c in constants if c is not None)

            def in_constants(row: Row) -> bool | None:
                v = f(row)
                if v is None:
                    return None
                return True if v in members else (None if has_null else False)

            return Compiled(in_constants, BOOLEAN())
        pairs = [(left.fn, right.fn) for left, right in items]

        def fn(row: Row) -> bool | None:
            unknown = False
            for left, right in pairs:
                a, b = left(row), right(row)
                if a is None or b is None:
                    unknown = True
                elif a == b:
                    return True
            return None if unknown else False

        return Compiled(fn, BOOLEAN())

    def between(self, node: exp.Between) -> Compiled:
        low = exp.GTE(this=node.this.copy(), expression=node.args["low"].copy())
        high = exp.LTE(this=node.this.copy(), expression=node.args["high"].copy())
        return self.compile(exp.And(this=low, expression=high))

    def like(self, node: exp.Like | exp.ILike, escape: str | None = None) -> Compiled:
        value, pattern = self.compile(node.this).fn, self.compile(node.expression)
        flags = re.IGNORECASE if isinstance(node, exp.ILike) else 0
        negate = bool(node.args.get("negate"))

        def matcher(text: str) -> re.Pattern[str]:
            regex = like_regex(text, escape)
            return re.compile(regex.pattern, regex.flags | flags)

        if pattern.constant:
            text = pattern.fn({})
            if text is None:
                return constant(None, BOOLEAN())
            compiled = matcher(to_text(text))

            def fn(row: Row) -> bool | None:
                v = value(row)
                return None if v is None else (compiled.fullmatch(to_text(v)) is not None) is not negate

            return Compiled(fn, BOOLEAN())
        cached = lru_cache(maxsize=64)(matcher)
        pf = pattern.fn

        def dynamic(row: Row) -> bool | None:
            v, p = value(row), pf(row)
            if v is None or p is None:
                return None
            return (cached(to_text(p)).fullmatch(to_text(v)) is not None) is not negate

        return Compiled(dynamic, BOOLEAN())

    def escape(self, node: exp.Escape) -> Compiled:
        like, escape = node.this, self.compile(node.expression)
        text = escape.fn({}) if escape.constant else None
        if (
            not isinstance(like, exp.Like | exp.ILike | exp.SimilarTo)
            or not isinstance(text, str)
            or len(text) != 1
        ):
            raise CompileError(f"{_sql(node)}: ESCAPE takes one character after LIKE or SIMILAR TO")
        if isinstance(like, exp.SimilarTo):
            return text_functions.similar_to(self, like, text)
        return self.like(like, text)

    # ---------------------------------------------------------------------------- conditionals

    def branches(self, values: Sequence[Compiled], text: str) -> tuple[list[Fn], DataType | None]:
        try:
            result = common_type(v.type for v in values)
            if result is None:
                return [v.fn for v in values], None
            return [self.fold(v, coercion(v.type, result), result).fn for v in values], result
        except ValueError as e:
            raise CompileError(f"{text}: {e}") from None

    def case(self, node: exp.Case) -> Compiled:
        operand = node.args.get("this")
        conditions: list[Fn] = []
        values: list[Compiled] = []
        for branch in node.args.get("ifs") or []:
            when = (
                branch.this if operand is None else exp.EQ(this=operand.copy(), expression=branch.this.copy())
            )
            conditions.append(self.condition(when).fn)
            values.append(self.compile(branch.args["true"]))
        default = node.args.get("default")
        values.append(self.compile(default) if default is not None else constant(None, None))
        fns, result = self.branches(values, _sql(node))
        pairs, otherwise = tuple(zip(conditions, fns, strict=False)), fns[-1]

        def fn(row: Row) -> Any:
            for condition, value in pairs:
                if condition(row) is True:
                    return value(row)
            return otherwise(row)

        return Compiled(fn, result)

    def if_(self, node: exp.If) -> Compiled:
        false = node.args.get("false")
        case = exp.Case(ifs=[exp.If(this=node.this.copy(), true=node.args["true"].copy())])
        if false is not None:
            case.set("default", false.copy())
        return self.case(case)

    def coalesce(self, node: exp.Coalesce) -> Compiled:
        args = [node.this, *node.expressions]
        fns, result = self.branches([self.compile(a) for a in args], _sql(node))

        def fn(row: Row) -> Any:
            for f in fns:
                value = f(row)
                if value is not None:
                    return value
            return None

        return Compiled(fn, result)

    def cast_(self, node: exp.Cast) -> Compiled:
        operand = self.compile(node.this)
        try:
            target = parse(node.args["to"].sql(dialect=DIALECT)).with_nullable(True)
        except SchemaError:
            raise CompileError(f"{_sql(node)}: unknown type {node.args['to'].sql(dialect=DIALECT)}") from None
        if operand.type is not None and operand.type.same_ignoring_nullability(target):
            return Compiled(operand.fn, target, operand.constant)
        convert = self.cast(target)
        if isinstance(node, exp.TryCast) or node.args.get("safe"):
            strict = convert

            def convert(value: Any) -> Any:
                try:
                    return strict(value)
                except ROW_ERRORS:
                    return None

        return self.fold(operand, convert, target)

    # ---------------------------------------------------------------------------- functions

    def text_function(self, node: exp.Func) -> Compiled:
        function = {exp.Upper: str.upper, exp.Lower: str.lower}[type(node)]
        operand = self.compile(node.this)
        if operand.type is not None and operand.type.root in CHARACTER:
            return self.fold(operand, function, STRING())
        return self.fold(operand, lambda v: function(to_text(v)), STRING())

    def length(self, node: exp.Length) -> Compiled:
        operand = self.compile(node.this)
        if operand.type is not None and operand.type.root in CHARACTER:
            return self.fold(operand, len, INT())
        return self.fold(operand, lambda v: len(to_text(v)), INT())

    def trim(self, node: exp.Trim) -> Compiled:
        position = str(node.args.get("position") or "BOTH").upper()
        chars = node.args.get("expression")
        strip = {"BOTH": str.strip, "LEADING": str.lstrip, "TRAILING": str.rstrip}[position]
        value = self.compile(node.this).fn
        cf = self.compile(chars).fn if chars is not None else lambda row: " "

        def fn(row: Row) -> str | None:
            v, c = value(row), cf(row)
            return None if v is None or c is None else strip(to_text(v), to_text(c))

        return Compiled(fn, STRING())

    def concat(self, node: exp.Concat | exp.DPipe) -> Compiled:
        args = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        fns = [self.compile(a).fn for a in args]
        skip_nulls = bool(node.args.get("coalesce"))

        def fn(row: Row) -> str | None:
            # Flink CDC joins the texts as Java's String.join does: a NULL is written ``null``
            # (``__namespace_name__ || '.' || __schema_name__`` of a MySQL table is ``null.db``)
            parts = []
            for f in fns:
                v = f(row)
                if v is None:
                    if not skip_nulls:
                        parts.append("null")
                    continue
                parts.append(to_text(v))
            return "".join(parts)

        return Compiled(fn, STRING())

    def substring(self, node: exp.Substring) -> Compiled:
        value = self.compile(node.this).fn
        start = self.numeric(node.args["start"]).fn if node.args.get("start") else lambda row: 1
        length_node = node.args.get("length")
        length = self.numeric(length_node).fn if length_node is not None else None

        def fn(row: Row) -> str | None:
            v, s = value(row), start(row)
            if v is None or s is None:
                return None
            n = None if length is None else length(row)
            if length is not None and n is None:
                return None
            return substring(to_text(v), int(s), None if n is None else int(n))

        return Compiled(fn, STRING())

    def abs_(self, node: exp.Abs) -> Compiled:
        operand = self.numeric(node.this)
        return self.fold(operand, abs, None if operand.type is None else operand.type.with_nullable(True))

    def ceil_floor(self, node: exp.Ceil | exp.Floor) -> Compiled:
        """``CEIL(x)``/``FLOOR(x)`` of a number (an integer type stays one, a DECIMAL loses its
        scale); ``CEIL(t TO unit)``/``FLOOR(t TO unit)`` of a date or timestamp."""
        if node.args.get("to") is not None:
            return temporal_functions.floor_to(self, node)
        if node.args.get("decimals") is not None:
            raise CompileError(f"{_sql(node)}: {node.key.upper()} takes one number")
        operand = self.numeric(node.this)
        up = isinstance(node, exp.Ceil)
        t = operand.type
        if t is None or t.root in INTEGERS:
            return self.fold(operand, lambda v: v, None if t is None else t.with_nullable(True))
        rounding = decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR
        if t.root is TypeRoot.DECIMAL:
            precision, scale = t.precision or 10, t.scale or 0
            result = DECIMAL(max(precision - scale + (1 if scale else 0), 1), 0)
            return self.fold(
                operand, lambda v: decimal.Decimal(v).quantize(decimal.Decimal(1), rounding=rounding), result
            )
        function = math.ceil if up else math.floor
        return self.fold(operand, lambda v: float(function(v)), t.with_nullable(True))

    def truncate(self, node: exp.Trunc) -> Compiled:
        """``TRUNCATE(x[, places])``: ``x`` cut (towards zero) to ``places`` decimals (0 by default)."""
        operand = self.numeric(node.this)
        places_node = node.args.get("decimals")
        places = self.compile(places_node).fn({}) if places_node is not None else 0
        if not isinstance(places, int):
            raise CompileError(f"{_sql(node)}: TRUNCATE takes a constant integer number of decimal places")
        t = operand.type

        def cut(v: Any) -> Any:
            if isinstance(v, int):
                unit = 10 ** max(-places, 0)
                return int(v / unit) * unit if places < 0 else v
            exact = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(v)
            result = exact.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_DOWN)
            return float(result) if isinstance(v, float) else result

        if t is not None and t.root is TypeRoot.DECIMAL:
            precision, scale = t.precision or 10, t.scale or 0
            kept = min(max(places, 0), scale)
            return self.fold(operand, cut, DECIMAL(max(precision - scale + kept, 1), kept))
        return self.fold(operand, cut, None if t is None else t.with_nullable(True))

    def anonymous(self, node: exp.Anonymous) -> Compiled:
        """A call sqlglot knows only by name: a built-in function of one of the families, or one
        of the job's user-defined functions."""
        name = node.name.upper()
        function = self.functions.get(name)
        if function is not None:
            return function.compile(self, node)
        handler = _NAMED.get(name)
        if handler is None:
            raise CompileError(f"{node.name} is not a function transforms know; they support {SUPPORTED}")
        return handler(self, node)

    def round_(self, node: exp.Round) -> Compiled:
        operand = self.numeric(node.this)
        places_node = node.args.get("decimals")
        places_value = self.compile(places_node) if places_node is not None else constant(0, INT())
        places = places_value.fn({}) if places_value.constant else None
        if not isinstance(places, int):
            raise CompileError(f"{_sql(node)}: ROUND takes a constant integer number of decimal places")
        t = operand.type
        if t is None or t.root is not TypeRoot.DECIMAL:
            return self.fold(
                operand, lambda v: round_half_up(v, places), None if t is None else t.with_nullable(True)
            )
        precision, scale = t.precision or 10, t.scale or 0
        kept = min(max(places, 0), scale)
        result = DECIMAL(min(MAX_DECIMAL_PRECISION, precision - scale + kept + 1), kept)
        unit = decimal.Decimal(1).scaleb(-kept)
        return self.fold(operand, lambda v: round_half_up(v, places).quantize(unit, context=CONTEXT), result)


_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_COMPARISONS: dict[type[exp.Expr], Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}
_HANDLERS: dict[type[exp.Expr], Callable[[Compiler, Any], Compiled]] = {
    exp.Column: Compiler.column,
    exp.Literal: Compiler.literal,
    exp.Null: Compiler.null,
    exp.Boolean: Compiler.boolean,
    exp.Paren: Compiler.paren,
    exp.Neg: Compiler.negate,
    **dict.fromkeys(_ARITHMETIC, Compiler.arithmetic),
    **dict.fromkeys(_COMPARISONS, Compiler.compare),
    exp.And: Compiler.and_,
    exp.Or: Compiler.or_,
    exp.Not: Compiler.not_,
    exp.Is: Compiler.is_,
    exp.In: Compiler.in_,
    exp.Between: Compiler.between,
    exp.Like: Compiler.like,
    exp.ILike: Compiler.like,
    exp.Escape: Compiler.escape,
    exp.Case: Compiler.case,
    exp.If: Compiler.if_,
    exp.Coalesce: Compiler.coalesce,
    exp.Cast: Compiler.cast_,
    exp.TryCast: Compiler.cast_,
    exp.Upper: Compiler.text_function,
    exp.Lower: Compiler.text_function,
    exp.Length: Compiler.length,
    exp.Trim: Compiler.trim,
    exp.Concat: Compiler.concat,
    exp.DPipe: Compiler.concat,
    exp.Substring: Compiler.substring,
    exp.Abs: Compiler.abs_,
    exp.Round: Compiler.round_,
    exp.Ceil: Compiler.ceil_floor,
    exp.Floor: Compiler.ceil_floor,
    exp.Trunc: Compiler.truncate,
    exp.NullSafeEQ: Compiler.distinct,
    exp.NullSafeNEQ: Compiler.distinct,
    exp.Nullif: Compiler.nullif,
    exp.Anonymous: Compiler.anonymous,
    **text_functions.NODE_HANDLERS,
    **temporal_functions.NODE_HANDLERS,
    **struct_functions.NODE_HANDLERS,
}
#: The functions sqlglot knows only by name, by their upper-case name.
_NAMED: dict[str, Callable[[Compiler, Any], Compiled]] = {
    **text_functions.NAMED_HANDLERS,
    **temporal_functions.NAMED_HANDLERS,
    **struct_functions.NAMED_HANDLERS,
    **variant_functions.NAMED_HANDLERS,
}
#: Nodes that occur inside supported expressions without being expressions of their own.
_PARTS: tuple[type[exp.Expr], ...] = (
    exp.Identifier,
    exp.DataType,
    exp.DataTypeParam,
    exp.Var,
    exp.Interval,
    exp.IntervalSpan,
)


def unsupported(node: exp.Expr, functions: Sequence[str] = ()) -> exp.Expr | None:
    """The first part of ``node`` a transform cannot evaluate, or None; ``functions`` are the
    names of the job's user-defined functions."""
    known = {name.upper() for name in functions}
    for part in node.walk():
        if isinstance(part, exp.Anonymous):
            if part.name.upper() not in _NAMED and part.name.upper() not in known:
                return part
        elif type(part) not in _HANDLERS and not isinstance(part, _PARTS):
            return part
    return None
