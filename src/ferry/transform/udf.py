"""User-defined functions of transforms: Python callables a job names in
``pipeline.user-defined-function``.

An entry names a callable as ``module:function`` (``classpath``, the key Flink CDC has for its Java
classes), or a class with an ``eval`` method (instantiated once; its ``open(options)`` is called with
the entry's ``options`` before the first row), or gives the code itself (``python-code``: a
function named ``eval``, as Flink CDC's Python functions are written). The annotations are the
function's types: ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``Decimal``, ``date``,
``datetime``, ``time``, ``list[...]`` and ``dict[..., ...]`` (``X | None`` allowed); the return
annotation is required, and an unannotated parameter takes any value. They are checked when the
job is validated, and each call's arguments against them when it is compiled for a table. NULL
arguments are passed as ``None``; what the function raises on a row sends that row to the
dead-letter destination with the reason.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferry.model.events import Row
from ferry.model.types import (
    ARRAY,
    BIGINT,
    BINARIES,
    BOOLEAN,
    BYTES,
    CHARACTER,
    DATE,
    DECIMAL,
    DOUBLE,
    INTEGERS,
    MAP,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMPS,
    DataType,
    TypeRoot,
)
from ferry.transform.compiled import Compiled, CompileError
from ferry.transform.sqlvalues import NUMERIC, ExpressionError

if TYPE_CHECKING:
    from sqlglot import exp

    from ferry.transform.compiled import ExpressionCompiler

_SCALARS: dict[Any, DataType] = {
    bool: BOOLEAN(),
    int: BIGINT(),
    float: DOUBLE(),
    str: STRING(),
    bytes: BYTES(),
    decimal.Decimal: DECIMAL(38, 18),
    dt.date: DATE(),
    dt.datetime: TIMESTAMP(6),
    dt.time: TIME(6),
}
#: Which SQL types an annotation takes as an argument.
_ACCEPTS: dict[Any, tuple[TypeRoot, ...]] = {
    bool: (TypeRoot.BOOLEAN,),
    int: INTEGERS,
    float: NUMERIC,
    str: CHARACTER,
    bytes: BINARIES,
    decimal.Decimal: (*INTEGERS, TypeRoot.DECIMAL),
    dt.date: (TypeRoot.DATE,),
    dt.datetime: TIMESTAMPS,
    dt.time: (TypeRoot.TIME,),
}


class UserFunctionError(ValueError):
    """A user-defined function that cannot be loaded or used as declared."""


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def sql_type(annotation: Any) -> DataType:
    """The SQL type of a Python annotation; raises :class:`UserFunctionError` for one without."""
    annotation = _without_none(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, Sequence) and len(args) == 1:
        return ARRAY(sql_type(args[0]))
    if origin in (dict, Mapping) and len(args) == 2:
        return MAP(sql_type(args[0]), sql_type(args[1]))
    name = getattr(annotation, "__name__", repr(annotation))
    raise UserFunctionError(
        f"the annotation {name} has no SQL type (bool, int, float, str, bytes, Decimal, date, "
        "datetime, time, list[...], dict[..., ...])"
    )


def _accepts(annotation: Any, t: DataType | None) -> bool:
    if annotation is inspect.Parameter.empty or annotation is Any or t is None:
        return True
    annotation = _without_none(annotation)
    if annotation in _ACCEPTS:
        return t.root in _ACCEPTS[annotation]
    origin = typing.get_origin(annotation)
    if origin in (list, Sequence):
        return t.root is TypeRoot.ARRAY
    if origin in (dict, Mapping):
        return t.root is TypeRoot.MAP
    return False


@dataclass
class UserFunction:
    """One user-defined function: its name in expressions, its parameters and return annotation
    (Python types), and the callable (a function, or a class whose ``eval`` rows call). Without a
    callable it is a declaration, read from the source when a job is validated: calls are
    checked against it but not evaluated."""

    name: str
    parameters: tuple[inspect.Parameter, ...]
    returns: Any
    target: Any = None
    options: Mapping[str, str] = field(default_factory=dict)
    _callable: Callable[..., Any] | None = field(default=None, repr=False)
    #: The opened instance of a class function, until it is closed.
    _instance: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.options and self.target is not None and not inspect.isclass(self.target):
            raise UserFunctionError(f"{self.name}: options are given to a class with open(options)")
        if self.returns is inspect.Parameter.empty:
            raise UserFunctionError(f"{self.name}: the function needs a return annotation (its SQL type)")
        try:
            for p in self.parameters:
                if p.annotation is not inspect.Parameter.empty and p.annotation is not Any:
                    sql_type(p.annotation)
            self.result = sql_type(self.returns).with_nullable(True)
        except UserFunctionError as e:
            raise UserFunctionError(f"{self.name}: {e}") from None
        self._python_result = _without_none(self.returns)

    @classmethod
    def of(cls, name: str, target: Any, options: Mapping[str, str] | None = None) -> UserFunction:
        """The function ``target`` (or the ``eval`` of the class ``target``), typed by its annotations."""
        function: Any = getattr(target, "eval", None) if inspect.isclass(target) else target
        if not callable(function):
            raise UserFunctionError(f"{name}: {target!r} is not callable")
        try:
            signature = inspect.signature(function)
            hints = typing.get_type_hints(function)
        except (TypeError, ValueError, NameError) as e:
            raise UserFunctionError(f"{name}: its signature cannot be read: {e}") from None
        parameters = tuple(
            p.replace(annotation=hints.get(p.name, inspect.Parameter.empty))
            for p in signature.parameters.values()
            if p.name != "self"
        )
        return cls(name, parameters, hints.get("return", inspect.Parameter.empty), target, options or {})

    def check_arity(self, count: int) -> None:
        """Refuse a call with ``count`` arguments that the signature does not take."""
        positional = [p for p in self.parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = sum(1 for p in positional if p.default is p.empty)
        variadic = any(p.kind is p.VAR_POSITIONAL for p in self.parameters)
        if count < required or (not variadic and count > len(positional)):
            most = "more" if variadic else str(len(positional))
            takes = str(required) if most == str(required) else f"{required} to {most}"
            raise UserFunctionError(f"{self.name} takes {takes} arguments, not {count}")

    def bound(self) -> Callable[..., Any]:
        """The function rows call (a class is instantiated and opened once)."""
        if self._callable is None:
            if inspect.isclass(self.target):
                instance = self.target()
                if hasattr(instance, "open"):
                    instance.open(dict(self.options))
                self._instance = instance
                self._callable = getattr(instance, "eval", None)
            else:
                self._callable = self.target
        assert self._callable is not None
        return self._callable

    def close(self) -> None:
        """Close the opened instance of a class function (its ``close()``, as Flink's functions
        have); a later call opens a new one. A plain function has nothing to close."""
        instance, self._instance = self._instance, None
        if instance is None:
            return
        self._callable = None
        close = getattr(instance, "close", None)
        if callable(close):
            close()

    def compile(self, compiler: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
        args = [compiler.compile(a) for a in node.expressions]
        try:
            self.check_arity(len(args))
        except UserFunctionError as e:
            raise CompileError(str(e)) from None
        positional = [p for p in self.parameters if p.kind is not p.VAR_KEYWORD]
        for i, arg in enumerate(args):
            param = positional[min(i, len(positional) - 1)] if positional else None
            if param is not None and not _accepts(param.annotation, arg.type):
                wanted = getattr(_without_none(param.annotation), "__name__", str(param.annotation))
                raise CompileError(
                    f"{self.name}: argument {i + 1} ({node.expressions[i].sql()}) is a {arg.type}, "
                    f"and its parameter {param.name} takes {wanted}"
                )
        if self.target is None:  # a declaration: the call is checked, not made
            return Compiled(lambda row: None, self.result)
        fns, name, expected = tuple(a.fn for a in args), self.name, self._python_result
        check = expected if isinstance(expected, type) and expected in _SCALARS else None
        function = self.bound()

        def fn(row: Row) -> Any:
            try:
                value = function(*(f(row) for f in fns))
            except Exception as e:  # the user's code: any failure is this row's
                raise ExpressionError(f"{name} raised {type(e).__name__}: {e}") from None
            if (
                value is not None
                and check is not None
                and not isinstance(value, check)
                and not (check is float and isinstance(value, int))
            ):
                raise ExpressionError(f"{name} returned a {type(value).__name__}, not a {check.__name__}")
            return value

        return Compiled(fn, self.result)


def python_file_paths(name: str, python_files: Sequence[str]) -> list[str]:
    """The paths of a function's ``python-files``, ``~`` expanded; raises
    :class:`UserFunctionError` naming one that does not exist."""
    paths = []
    for entry in python_files:
        path = str(Path(entry).expanduser())
        if not Path(path).exists():
            raise UserFunctionError(f"{name}: python-files names {entry}, which does not exist")
        paths.append(path)
    return paths


def load(
    name: str,
    *,
    classpath: str | None = None,
    python_code: str | None = None,
    python_files: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
) -> UserFunction:
    """A user-defined function from a ``module:function`` reference or from its code; raises
    :class:`UserFunctionError` saying why it cannot be one."""
    for path in python_file_paths(name, python_files):
        if path not in sys.path:
            sys.path.append(path)
    if python_code is not None:
        namespace: dict[str, Any] = {}
        target: Any
        try:
            exec(compile(python_code, f"<user-defined-function {name}>", "exec"), namespace)
        except Exception as e:
            raise UserFunctionError(f"{name}: python-code does not run: {type(e).__name__}: {e}") from None
        target = namespace.get("eval")
        if not callable(target):
            raise UserFunctionError(f"{name}: python-code defines no function named eval")
        return UserFunction.of(name, target, options)
    if not classpath:
        raise UserFunctionError(f"{name}: give classpath (module:function) or python-code")
    module_name, colon, attribute = classpath.partition(":")
    if not colon:
        raise UserFunctionError(
            f"{name}: {classpath!r} is not a Python callable: write module:function (a Java class "
            "cannot run in ferry; its eval is to be written in Python)"
        )
    try:
        target = importlib.import_module(module_name)
    except Exception as e:
        raise UserFunctionError(f"{name}: cannot import {module_name}: {type(e).__name__}: {e}") from None
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise UserFunctionError(f"{name}: {module_name} has no {attribute}")
    return UserFunction.of(name, target, options)
