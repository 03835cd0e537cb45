"""Struct functions of transforms: ``ARRAY[...]``, ``MAP[...]``, ``ROW(...)``, ``CARDINALITY``,
``ARRAY_CONTAINS``, ``ARRAY_POSITION``, ``ELEMENT`` and subscripts (``a[1]``, ``m['k']``,
``r[2]``), with Flink CDC's semantics: indexes count from 1, an index outside an array or a key a
map lacks gives NULL. Values are Python lists (ARRAY), dicts (MAP) and dicts by field name (ROW).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ferry.model.events import Row
from ferry.model.types import ARRAY, BOOLEAN, INT, MAP, ROW, STRING, DataType, Field, TypeRoot
from ferry.transform import variant_functions
from ferry.transform.compiled import Compiled, CompileError, call, constant_value
from ferry.transform.sqlvalues import coercion, common_type

if TYPE_CHECKING:
    from ferry.transform.compiled import ExpressionCompiler

Handler = Callable[["ExpressionCompiler", Any], Compiled]


def _common(
    c: ExpressionCompiler, nodes: list[exp.Expr], what: str
) -> tuple[list[Callable[[Row], Any]], DataType]:
    compiled = [c.compile(n) for n in nodes]
    try:
        result = common_type(v.type for v in compiled) or STRING()
    except ValueError as e:
        raise CompileError(f"{what}: {e}") from None
    return [c.fold(v, coercion(v.type, result), result).fn for v in compiled], result


def array(c: ExpressionCompiler, node: exp.Array) -> Compiled:
    fns, element = _common(c, list(node.expressions), "ARRAY[...]")
    return Compiled(lambda row: [f(row) for f in fns], ARRAY(element).not_null())


def map_(c: ExpressionCompiler, node: exp.Bracket) -> Compiled:
    args = list(node.expressions)
    if len(args) % 2:
        raise CompileError("MAP[...] takes keys and values in pairs")
    keys, key_type = _common(c, args[0::2], "the keys of MAP[...]")
    values, value_type = _common(c, args[1::2], "the values of MAP[...]")
    pairs = tuple(zip(keys, values, strict=True))
    return Compiled(lambda row: {k(row): v(row) for k, v in pairs}, MAP(key_type, value_type).not_null())


def row(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``ROW(v1, v2, ...)``: a row whose fields are named f0, f1, ..."""
    compiled = [c.compile(a) for a in node.expressions]
    names = [f"f{i}" for i in range(len(compiled))]
    fields = tuple(
        Field(n, (v.type or STRING()).with_nullable(True)) for n, v in zip(names, compiled, strict=True)
    )
    pairs = tuple(zip(names, (v.fn for v in compiled), strict=True))
    return Compiled(lambda r: {n: f(r) for n, f in pairs}, ROW(*fields).not_null())


def _collection(c: ExpressionCompiler, node: exp.Expr, roots: tuple[TypeRoot, ...], what: str) -> Compiled:
    compiled = c.compile(node)
    if compiled.type is not None and compiled.type.root not in roots:
        raise CompileError(f"{what} takes {' or '.join(r.value for r in roots)}, not {compiled.type}")
    return compiled


def cardinality(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    (arg,) = node.expressions
    return c.fold(_collection(c, arg, (TypeRoot.ARRAY, TypeRoot.MAP), "CARDINALITY"), len, INT())


def element(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``ELEMENT(array)``: the one element of an array, NULL for an empty one."""
    (arg,) = node.expressions
    operand = _collection(c, arg, (TypeRoot.ARRAY,), "ELEMENT")

    def only(values: list[Any]) -> Any:
        if len(values) > 1:
            raise ValueError(f"ELEMENT of an array of {len(values)} elements")
        return values[0] if values else None

    t = operand.type
    return c.fold(operand, only, None if t is None or t.element is None else t.element.with_nullable(True))


def array_contains(c: ExpressionCompiler, node: exp.ArrayContains) -> Compiled:
    operand = _collection(c, node.this, (TypeRoot.ARRAY,), "ARRAY_CONTAINS")
    return call(lambda values, v: v in values, [operand, c.compile(node.expression)], BOOLEAN())


def array_position(c: ExpressionCompiler, node: exp.ArrayPosition) -> Compiled:
    operand = _collection(c, node.this, (TypeRoot.ARRAY,), "ARRAY_POSITION")

    def find(values: list[Any], v: Any) -> int:
        return next((i + 1 for i, item in enumerate(values) if item == v), 0)

    return call(find, [operand, c.compile(node.expression)], INT())


def subscript(c: ExpressionCompiler, node: exp.Bracket) -> Compiled:
    """``array[i]`` (from 1), ``map[key]``, ``row[i]`` (a constant, from 1), ``variant[i]`` and
    ``variant[key]``; ``MAP[k, v, ...]``."""
    if isinstance(node.this, exp.Column) and node.this.name.upper() == "MAP" and c.resolve("MAP") is None:
        return map_(c, node)
    if len(node.expressions) != 1:
        raise CompileError(f"{node.sql()}: a subscript takes one index or key")
    roots = (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW, TypeRoot.VARIANT)
    operand = _collection(c, node.this, roots, "a subscript")
    t = operand.type
    if t is not None and t.root is TypeRoot.VARIANT:
        return variant_functions.subscript(c, operand, node)
    index = c.compile(node.expressions[0])
    if t is not None and t.root is TypeRoot.ROW:
        position = constant_value(index, "the index of a row's field")
        if not isinstance(position, int) or not 1 <= position <= len(t.fields):
            raise CompileError(f"{node.sql()}: the row has fields 1 to {len(t.fields)}")
        field = t.fields[position - 1]
        return c.fold(operand, lambda r: r.get(field.name), field.type.with_nullable(True))
    result = None if t is None or t.element is None else t.element.with_nullable(True)
    if t is not None and t.root is TypeRoot.MAP:
        return call(lambda m, k: m.get(k), [operand, index], result)

    def item(values: list[Any], i: Any) -> Any:
        n = int(i)
        return values[n - 1] if 1 <= n <= len(values) else None

    return call(item, [operand, index], result)


NODE_HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.Array: array,
    exp.Bracket: subscript,
    exp.ArrayContains: array_contains,
    exp.ArrayPosition: array_position,
}
NAMED_HANDLERS: dict[str, Handler] = {"ROW": row, "CARDINALITY": cardinality, "ELEMENT": element}
