"""What the expression compiler produces, and the ways functions are built from it.

An expression compiles to a :class:`Compiled`: a row function and the SQL type of its values. The
function families (:mod:`ferry.transform.text_functions`, :mod:`ferry.transform.temporal_functions`,
:mod:`ferry.transform.struct_functions`) build theirs with :func:`call`: NULL in any argument gives
NULL, and a call on constants is evaluated once, when it is compiled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ferry.model.events import Row
from ferry.model.types import DataType
from ferry.transform.sqlvalues import ROW_ERRORS

if TYPE_CHECKING:
    from sqlglot import exp

    from ferry.model.schema import Column

Fn = Callable[[Row], Any]


class CompileError(ValueError):
    """An expression cannot be compiled for a schema; ``column`` names a missing column."""

    def __init__(self, message: str, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True, slots=True)
class Compiled:
    """An expression compiled for one schema: its row function and its type (None for NULL)."""

    fn: Fn
    type: DataType | None
    constant: bool = False


@dataclass(frozen=True, slots=True)
class Session:
    """What expressions read besides the row: the session time zone (``pipeline.local-time-zone``;
    None is the system's), the clock of ``NOW()`` and its kin, and the bound on DECIMAL digits."""

    zone: dt.tzinfo | None = None
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    #: The most digits a DECIMAL computed by arithmetic has (``transform.decimal.precision.mode``).
    decimal_precision: int = 38

    def local(self, value: dt.datetime) -> dt.datetime:
        """A timestamp as the session's wall clock shows it (a zoned one converted, naive kept)."""
        if value.tzinfo is None:
            return value
        return (value.astimezone(self.zone) if self.zone is not None else value.astimezone()).replace(
            tzinfo=None
        )

    def zoned(self, value: dt.datetime) -> dt.datetime:
        """A timestamp in the session time zone, with it (a naive one is taken as its wall clock)."""
        if value.tzinfo is None:
            return value.replace(tzinfo=self.zone) if self.zone is not None else value.astimezone()
        return value.astimezone(self.zone) if self.zone is not None else value.astimezone()

    def instant(self, value: dt.datetime) -> dt.datetime:
        """A timestamp as an instant (UTC): a naive one is read in the session time zone."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=self.zone) if self.zone is not None else value.astimezone()
        return value.astimezone(dt.UTC)

    def now(self) -> dt.datetime:
        """The current instant (UTC), to the millisecond, as Flink CDC's clock gives it."""
        now = self.clock()
        return now.replace(microsecond=now.microsecond // 1000 * 1000)


class ExpressionCompiler(Protocol):
    """What a function's handler asks of the compiler (:class:`ferry.transform.expressions.Compiler`):
    its arguments compiled, a conversion folded in, a column resolved, the session. The function
    families see the compiler through this, so they need not import it."""

    session: Session

    def compile(self, node: exp.Expr) -> Compiled: ...

    def numeric(self, node: exp.Expr) -> Compiled: ...

    def fold(
        self, compiled: Compiled, convert: Callable[[Any], Any] | None, type_: DataType | None
    ) -> Compiled: ...

    def resolve(self, name: str) -> Column | None: ...


class RowKind:
    """What the change being evaluated says besides its row: its kind, as ``__data_event_type__``
    reads it (``+I`` insert, ``-U`` and ``+U`` an update's old and new row, ``-D`` delete), and its
    time at the source in epoch milliseconds (``op_ts``). Set by the transform before each row it
    projects, when an expression reads them (``used``)."""

    __slots__ = ("op_ts", "used", "value")

    def __init__(self) -> None:
        self.value = "+I"
        self.op_ts: int | None = None
        self.used = False


def constant(value: Any, type_: DataType | None) -> Compiled:
    return Compiled(lambda row: value, type_, True)


def binary(compute: Callable[[Any, Any], Any], left: Compiled, right: Compiled, type_: DataType) -> Compiled:
    """``compute(a, b)`` of two operands, NULL when either is (the common case of a constant
    right operand, ``price > 10``, costs one call less)."""
    lf, rf = left.fn, right.fn
    if right.constant:
        b = rf({})
        if b is None:
            return constant(None, type_)
        return Compiled(lambda row: None if (a := lf(row)) is None else compute(a, b), type_)

    def fn(row: Row) -> Any:
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        return None if b is None else compute(a, b)

    return Compiled(fn, type_)


def call(
    compute: Callable[..., Any],
    args: Sequence[Compiled],
    type_: DataType | None,
    *,
    deterministic: bool = True,
) -> Compiled:
    """``compute(*values)`` of the arguments' values, NULL when any is NULL; on constants it is
    evaluated once here (a value it cannot take is then a :class:`CompileError`)."""
    if deterministic and all(a.constant for a in args):
        values = [a.fn({}) for a in args]
        if any(v is None for v in values):
            return constant(None, type_)
        try:
            return constant(compute(*values), type_)
        except ROW_ERRORS as e:
            raise CompileError(str(e)) from None
    fns = tuple(a.fn for a in args)
    if len(fns) == 1:
        (f,) = fns
        return Compiled(lambda row: None if (v := f(row)) is None else compute(v), type_)
    if len(fns) == 2 and args[1].constant:
        f, b = fns[0], args[1].fn({})
        if b is None:
            return constant(None, type_)
        return Compiled(lambda row: None if (v := f(row)) is None else compute(v, b), type_)

    def fn(row: Row) -> Any:
        values = []
        for f in fns:
            v = f(row)
            if v is None:
                return None
            values.append(v)
        return compute(*values)

    return Compiled(fn, type_)


def constant_value(compiled: Compiled, what: str) -> Any:
    """The value of an argument that must be a constant (a format, a unit, an index)."""
    if not compiled.constant:
        raise CompileError(f"{what} must be a constant")
    return compiled.fn({})
