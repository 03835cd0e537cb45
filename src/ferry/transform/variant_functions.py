"""The variant functions of transforms: ``PARSE_JSON``, ``TRY_PARSE_JSON`` and
subscripts of a variant (``v[1]``, ``v['key']``), with Flink CDC's semantics.

The values are :class:`~ferry.model.variant.Variant` (a ``str`` holding its JSON text).

Numbers are kept as Flink's variant keeps them: an integer in BIGINT's range as an int, another
integer or a number with a fraction and no exponent as an exact decimal when it has at most 38
digits, anything else as a double.

The standard library's ``json`` parses (its ``object_pairs_hook`` is what sees duplicate keys).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ferry.model.types import CHARACTER, INTEGERS, VARIANT, TypeRoot
from ferry.model.variant import Variant
from ferry.transform.compiled import Compiled, CompileError, call, constant_value

if TYPE_CHECKING:
    from collections.abc import Callable

    from ferry.transform.compiled import ExpressionCompiler

_BIGINT = (-(2**63), 2**63 - 1)
_MAX_DIGITS = 38


class VariantError(ValueError):
    """A string PARSE_JSON cannot read as one JSON document."""


def _parse_int(text: str) -> int | Decimal | float:
    n = int(text)
    if _BIGINT[0] <= n <= _BIGINT[1]:
        return n
    return Decimal(text) if len(text.lstrip("-")) <= _MAX_DIGITS else float(text)


def _parse_float(text: str) -> Decimal | float:
    if "e" in text or "E" in text:
        return float(text)
    digits = len(text.lstrip("-").replace(".", "").lstrip("0")) or 1
    return Decimal(text) if digits <= _MAX_DIGITS else float(text)


def _reject_constant(name: str) -> Any:
    raise VariantError(f"{name} is not JSON")


def _objects(allow_duplicate_keys: bool) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs) and not allow_duplicate_keys:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise VariantError(f"duplicate key {key!r}")
                seen.add(key)
        return result

    return build


def parse_json(text: str, allow_duplicate_keys: bool = False) -> Variant | None:
    """``PARSE_JSON``: the variant a JSON document holds; NULL for an empty string. Raises
    :class:`VariantError` for anything but one JSON document, or duplicate keys unless allowed
    (then the last value of a key is kept)."""
    if text == "":
        return None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_objects(allow_duplicate_keys),
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as e:
        raise VariantError(f"Failed to parse json string: {text!r}: {e}") from None
    except VariantError as e:
        raise VariantError(f"Failed to parse json string: {text!r}: {e}") from None
    return Variant(value)


def try_parse_json(text: str, allow_duplicate_keys: bool = False) -> Variant | None:
    """``TRY_PARSE_JSON``: as :func:`parse_json`, NULL where it raises."""
    try:
        return parse_json(text, allow_duplicate_keys)
    except VariantError:
        return None


def element(variant: Variant, index: int) -> Variant | None:
    """``variant[index]``: the element at ``index`` (from 1) of an array; NULL outside it or when
    the variant is not an array."""
    values = variant.value
    if not isinstance(values, list) or not 1 <= index <= len(values):
        return None
    return Variant(values[index - 1])


def field(variant: Variant, key: str) -> Variant | None:
    """``variant[key]``: the value of an object's ``key``; NULL when it lacks the key or the
    variant is not an object."""
    values = variant.value
    if not isinstance(values, dict) or key not in values:
        return None
    return Variant(values[key])


# ----------------------------------------------------------------------------------- compilation


def _parser(
    name: str, parse: Callable[[str, bool], Variant | None]
) -> Callable[[ExpressionCompiler, Any], Compiled]:
    def handler(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
        args = [c.compile(a) for a in node.expressions]
        if not 1 <= len(args) <= 2:
            raise CompileError(f"{name} takes a string and, optionally, allowDuplicateKeys")
        text = args[0]
        if text.type is not None and text.type.root not in CHARACTER:
            raise CompileError(f"{name} takes a string, not {text.type}")
        if len(args) == 2:
            allow = args[1]
            if allow.type is not None and allow.type.root is not TypeRoot.BOOLEAN:
                raise CompileError(f"{name}'s allowDuplicateKeys is a BOOLEAN, not {allow.type}")
            constant_value(allow, f"{name}'s allowDuplicateKeys")
        return call(parse, args, VARIANT())

    return handler


def subscript(c: ExpressionCompiler, operand: Compiled, node: exp.Bracket) -> Compiled:
    """``variant[index]`` (an integer, from 1) or ``variant[key]`` (a string)."""
    index = c.compile(node.expressions[0])
    t = index.type
    if t is not None and t.root in INTEGERS:
        return call(element, [operand, index], VARIANT())
    if t is not None and t.root in CHARACTER:
        return call(field, [operand, index], VARIANT())
    raise CompileError(f"{node.sql()}: a variant's subscript is an integer or a string, not {t}")


NAMED_HANDLERS = {
    "PARSE_JSON": _parser("PARSE_JSON", parse_json),
    "TRY_PARSE_JSON": _parser("TRY_PARSE_JSON", try_parse_json),
}

__all__ = [
    "NAMED_HANDLERS",
    "Variant",
    "VariantError",
    "element",
    "field",
    "parse_json",
    "subscript",
    "try_parse_json",
]
