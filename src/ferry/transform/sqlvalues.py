"""SQL semantics on Python values, for the expressions of transforms.

``CAST`` (:func:`cast_to`), the coercions that let values of two types meet (:func:`coercion`,
:func:`common_type`), arithmetic with the result types Flink derives (:func:`arithmetic_type`,
:func:`arithmetic`) and the helpers of ``ROUND``, ``LIKE`` and ``SUBSTR``. Values are what the
decoders produce: ``int``, ``float``, ``Decimal``, ``str``, ``bool``, ``date``, ``datetime``,
``time``, ``bytes``. A value an operation cannot take raises :class:`ExpressionError`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from ferry.model.types import (
    BINARIES,
    CHARACTER,
    DECIMAL,
    FLOATS,
    INTEGER_DIGITS,
    INTEGERS,
    MAX_DECIMAL_PRECISION,
    MAX_LENGTH,
    TIMESTAMPS,
    DataType,
    TypeRoot,
    widen,
)

#: What evaluating an expression on a row may raise: the row is bad, not the pipeline (a value of
#: another shape than its column's type, in schemaless JSON, fails a subscript or a field).
ROW_ERRORS = (ValueError, ArithmeticError, TypeError, LookupError, AttributeError)

NUMERIC = (*INTEGERS, TypeRoot.DECIMAL, *FLOATS)
#: The range of each integer type.
INT_RANGE = {
    root: (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
    for root, size in zip(INTEGERS, (1, 2, 4, 8), strict=True)
}
#: Exact decimal arithmetic (twice the digits a DECIMAL holds), rounding half up.
CONTEXT = decimal.Context(prec=2 * MAX_DECIMAL_PRECISION + 2, rounding=decimal.ROUND_HALF_UP)

_N = TypeVar("_N")


class ExpressionError(ValueError):
    """An expression failed on one row (a cast that cannot be made, a division by zero, ...)."""


def to_text(v: Any) -> str:
    """A value as SQL text (``CAST(x AS STRING)``): ``TRUE``, ``12.50``, ``2024-03-01 12:30:00``;
    a VARIANT its JSON text."""
    if isinstance(v, str):
        return str(v)  # a Variant is a str: its text, as a plain one
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, dict | list):
        return orjson.dumps(v).decode()
    return str(v)


def _number(v: Any) -> decimal.Decimal | float | int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float | decimal.Decimal):
        return v
    if isinstance(v, str):
        try:
            return decimal.Decimal(v.strip())
        except decimal.InvalidOperation:
            raise ExpressionError("not a number") from None
    raise ExpressionError(f"a {type(v).__name__} is not a number")


def cast_to(target: DataType) -> Callable[[Any], Any]:
    """SQL ``CAST`` to ``target``: numbers are truncated to integers and rounded half up to a
    DECIMAL's scale, text is parsed; what does not fit raises :class:`ExpressionError`."""
    convert = _converter(target)

    def cast(v: Any) -> Any:
        try:
            return convert(v)
        except ROW_ERRORS as e:
            raise ExpressionError(f"cannot cast {v!r} to {target.with_nullable(True)}: {e}") from None

    return cast


def _converter(target: DataType) -> Callable[[Any], Any]:
    root = target.root
    if root in INTEGERS:
        low, high = INT_RANGE[root]

        def to_int(v: Any) -> int:
            n = _number(v)
            if isinstance(n, float) and not math.isfinite(n):
                raise ExpressionError("not a finite number")
            result = int(n)
            if not low <= result <= high:
                raise ExpressionError(f"out of the range of {root.value}")
            return result

        return to_int
    if root in FLOATS:
        return lambda v: float(_number(v))
    if root is TypeRoot.DECIMAL:
        return _decimal_fitter(target.precision or 10, target.scale or 0)
    if root in CHARACTER:
        length = target.length or MAX_LENGTH
        if root is TypeRoot.CHAR:
            return lambda v: to_text(v)[:length].ljust(length)
        return to_text if length >= MAX_LENGTH else lambda v: to_text(v)[:length]
    if root is TypeRoot.BOOLEAN:
        return _to_bool
    if root is TypeRoot.DATE:
        return _to_date
    if root is TypeRoot.TIME:
        return lambda v: v if isinstance(v, dt.time) else dt.time.fromisoformat(to_text(v).strip())
    if root in TIMESTAMPS:
        return to_timestamp
    if root in BINARIES:
        return lambda v: v if isinstance(v, bytes) else to_text(v).encode()
    raise ValueError(f"CAST to {target} is not supported")


def _decimal_fitter(precision: int, scale: int) -> Callable[[Any], decimal.Decimal]:
    quantum = decimal.Decimal(1).scaleb(-scale)
    limit = decimal.Decimal(10) ** (precision - scale)

    def fit(v: Any) -> decimal.Decimal:
        d = _exact(v)
        if not d.is_finite():
            raise ExpressionError("not a finite number")
        result = d.quantize(quantum, context=CONTEXT)
        if abs(result) >= limit:
            raise ExpressionError(f"does not fit DECIMAL({precision}, {scale})")
        return result

    return fit


def _to_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | decimal.Decimal):
        return v != 0
    text = to_text(v).strip().lower()
    if text in ("true", "t", "yes", "y", "1"):
        return True
    if text in ("false", "f", "no", "n", "0"):
        return False
    raise ExpressionError("not a boolean")


def _to_date(v: Any) -> dt.date:
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    text = to_text(v).strip()
    return dt.date.fromisoformat(text) if len(text) == 10 else dt.datetime.fromisoformat(text).date()


def to_timestamp(v: Any) -> dt.datetime:
    """A TIMESTAMP from a timestamp, a date (at midnight) or ISO text."""
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime.combine(v, dt.time())
    return dt.datetime.fromisoformat(to_text(v).strip())


def coercion(source: DataType | None, target: DataType) -> Callable[[Any], Any] | None:
    """How a value of ``source`` becomes one of ``target`` when both meet (CASE branches,
    COALESCE arguments, comparisons); None when it passes unchanged."""
    if source is None or source.same_ignoring_nullability(target):
        return None
    s, t = source.root, target.root
    if s is t or (s in INTEGERS and t in INTEGERS):
        return None
    if t in CHARACTER:
        return None if s in CHARACTER else to_text
    if t in FLOATS and s in NUMERIC:
        return float
    if t is TypeRoot.DECIMAL and s in INTEGERS:
        return decimal.Decimal
    if t in TIMESTAMPS and s is TypeRoot.DATE:
        return to_timestamp
    if s in CHARACTER:
        return cast_to(target)
    raise ValueError(f"{source} and {target} have no common type")


def common_type(types: Iterable[DataType | None]) -> DataType | None:
    """The type values of all ``types`` meet at (NULL, typed None, meets anything)."""
    known = [t for t in types if t is not None]
    if not known:
        return None
    result = known[0]
    for t in known[1:]:
        result = widen(result, t)
    return result.with_nullable(True)


# --------------------------------------------------------------------------------------------------
# Arithmetic


def _as_decimal(t: DataType) -> tuple[int, int]:
    if t.root is TypeRoot.DECIMAL:
        return t.precision or 10, t.scale or 0
    return INTEGER_DIGITS[t.root], 0


def _bounded_decimal(precision: int, scale: int, most: int = MAX_DECIMAL_PRECISION) -> DataType:
    """DECIMAL(precision, scale) within ``most`` digits, keeping the integral digits (Flink's rule)."""
    if precision <= most:
        return DECIMAL(precision, scale)
    integral = precision - scale
    return DECIMAL(most, min(max(most - integral, min(scale, 6)), most))


def arithmetic_type(op: str, a: DataType, b: DataType, most: int = MAX_DECIMAL_PRECISION) -> DataType:
    """The type of ``a op b`` (``op`` one of ``+ - * / %``): integers and floating point widen,
    DECIMAL precision and scale follow Flink's rules (``*`` adds them, ``/`` keeps 6 digits or more),
    within ``most`` digits (38, or 19 under ``transform.decimal.precision.mode: UP_TO_19``)."""
    if (a.root in INTEGERS and b.root in INTEGERS) or a.root in FLOATS or b.root in FLOATS:
        return widen(a, b).with_nullable(True)
    (p1, s1), (p2, s2) = _as_decimal(a), _as_decimal(b)
    if op in "+-":
        scale = max(s1, s2)
        return _bounded_decimal(max(p1 - s1, p2 - s2) + scale + 1, scale, most)
    if op == "*":
        return _bounded_decimal(p1 + p2, s1 + s2, most)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return _bounded_decimal(p1 - s1 + s2 + scale, scale, most)
    scale = max(s1, s2)
    return _bounded_decimal(min(p1 - s1, p2 - s2) + scale, scale, most)


def _nonzero(b: _N) -> _N:
    if b == 0:
        raise ExpressionError("division by zero")
    return b


def _int_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(_nonzero(b))
    return quotient if (a < 0) == (b < 0) else -quotient


def _int_mod(a: int, b: int) -> int:
    remainder = abs(a) % abs(_nonzero(b))
    return remainder if a >= 0 else -remainder


def arithmetic(op: str, result: DataType) -> Callable[[Any, Any], Any]:
    """``a op b`` for two non-NULL values, computed in ``result``'s domain and checked to fit it."""
    root = result.root
    if root in INTEGERS:
        low, high = INT_RANGE[root]
        base = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _int_div, "%": _int_mod}[op]

        def integer(a: Any, b: Any) -> int:
            value: int = base(a, b)
            if not low <= value <= high:
                raise ExpressionError(f"{value} is out of the range of {root.value}")
            return value

        return integer
    if root in FLOATS:
        fop = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}.get(
            op, math.fmod
        )
        if op in "/%":
            return lambda a, b: fop(float(a), float(_nonzero(b)))
        return lambda a, b: fop(float(a), float(b))
    precision, scale = result.precision or 10, result.scale or 0
    quantum, limit = decimal.Decimal(1).scaleb(-scale), decimal.Decimal(10) ** (precision - scale)
    dop = {"+": CONTEXT.add, "-": CONTEXT.subtract, "*": CONTEXT.multiply, "/": CONTEXT.divide}.get(
        op, CONTEXT.remainder
    )
    divides = op in "/%"

    def exact(a: Any, b: Any) -> decimal.Decimal:
        if divides:
            _nonzero(b)
        try:
            value = dop(a, b)
        except TypeError:  # a float or text where a DECIMAL was declared (schemaless JSON)
            value = dop(_exact(a), _exact(b))
        value = value.quantize(quantum, context=CONTEXT)
        if -limit < value < limit:
            return value
        raise ExpressionError(f"{value} does not fit {result}")

    return exact


def _exact(v: Any) -> decimal.Decimal:
    n = _number(v)
    return decimal.Decimal(repr(n)) if isinstance(n, float) else decimal.Decimal(n)


def round_half_up(value: Any, places: int) -> Any:
    """``ROUND(value, places)``: half away from zero, ``places`` may be negative."""
    if isinstance(value, int):
        if places >= 0:
            return value
        unit = 10 ** (-places)
        magnitude = (abs(value) + unit // 2) // unit * unit
        return magnitude if value >= 0 else -magnitude
    exact = decimal.Decimal(repr(value)) if isinstance(value, float) else value
    rounded = exact.quantize(decimal.Decimal(1).scaleb(-places), context=CONTEXT)
    return float(rounded) if isinstance(value, float) else rounded


def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """A ``LIKE`` pattern (``%`` any text, ``_`` one character) as a regular expression to fullmatch."""
    parts: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            parts.append(re.escape(next(chars, "")))
        elif ch == "%":
            parts.append(".*")
        elif ch == "_":
            parts.append(".")
        else:
            parts.append(re.escape(ch))
    return re.compile("".join(parts), re.DOTALL)


def substring(s: str, start: int, length: int | None) -> str:
    """``SUBSTR(s, start, length)``: ``start`` counts from 1, from the end when negative."""
    begin = start - 1 if start > 0 else max(len(s) + start, 0) if start < 0 else 0
    if length is None:
        return s[begin:]
    return s[begin : begin + length] if length > 0 else ""
