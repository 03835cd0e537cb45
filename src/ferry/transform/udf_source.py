"""User-defined functions declared from their source, without running it.

Validating a job (``ferry validate``, the control plane taking a pipeline) must not run the code
of its functions: the module named by ``classpath`` is found on the import path (``python-files``
first) and read with :mod:`ast`, as is ``python-code``; the function's parameters and annotations
become a :class:`~ferry.transform.udf.UserFunction` without a callable, which calls are checked
against. The pipeline itself imports the function (:func:`ferry.transform.udf.load`).
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import inspect
import sys
import typing
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ferry.transform.udf import UserFunction, UserFunctionError, python_file_paths

_NAMES: dict[str, Any] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "bytes": bytes,
    "Decimal": decimal.Decimal,
    "date": dt.date,
    "datetime": dt.datetime,
    "time": dt.time,
    "Any": Any,
    "None": None,
}
_LISTS = {"list", "List", "Sequence"}
_MAPS = {"dict", "Dict", "Mapping"}
_DEFAULT = object()


def _annotation(node: ast.expr | None, name: str) -> Any:
    """The Python type an annotation's source stands for (the types :func:`~ferry.transform.udf.sql_type`
    knows); :class:`UserFunctionError` for another."""
    if node is None:
        return inspect.Parameter.empty
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return _annotation(ast.parse(node.value, mode="eval").body, name)
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Name | ast.Attribute):
        key = node.id if isinstance(node, ast.Name) else node.attr
        if key in _NAMES:
            return _NAMES[key]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _annotation(node.left, name), _annotation(node.right, name)
        return typing.Optional[left if right is None else right]  # noqa: UP045 - built at run time
    if isinstance(node, ast.Subscript):
        base = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        types = [_annotation(a, name) for a in args]
        if base in _LISTS and len(types) == 1:
            return list[types[0]]  # type: ignore[valid-type]
        if base in _MAPS and len(types) == 2:
            return dict[types[0], types[1]]  # type: ignore[valid-type]
        if base == "Optional" and len(types) == 1:
            return typing.Optional[types[0]]  # noqa: UP045
        if base == "Union":
            members = [t for t in types if t is not None]
            if len(members) == 1:
                return typing.Optional[members[0]]  # noqa: UP045
    raise UserFunctionError(
        f"{name}: the annotation {ast.unparse(node)} has no SQL type (bool, int, float, str, bytes, "
        "Decimal, date, datetime, time, list[...], dict[..., ...])"
    )


def _parameters(function: ast.FunctionDef, name: str, method: bool) -> tuple[inspect.Parameter, ...]:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    out: list[inspect.Parameter] = []
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if method and i == 0:
            continue  # self
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if i < len(arguments.posonlyargs)
            else (inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
        out.append(
            inspect.Parameter(
                arg.arg,
                kind,
                default=inspect.Parameter.empty if default is None else _DEFAULT,
                annotation=_annotation(arg.annotation, name),
            )
        )
    if arguments.vararg is not None:
        out.append(
            inspect.Parameter(
                arguments.vararg.arg,
                inspect.Parameter.VAR_POSITIONAL,
                annotation=_annotation(arguments.vararg.annotation, name),
            )
        )
    for arg, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if kw_default is None:
            raise UserFunctionError(f"{name}: its keyword-only parameter {arg.arg} has no default")
    return tuple(out)


def _module_source(module: str, python_files: Sequence[str]) -> str:
    """The source of ``module``, found as the import system would (``python-files`` first)."""
    relative = module.replace(".", "/")
    candidates = (f"{relative}.py", f"{relative}/__init__.py")
    for entry in [*python_files, *sys.path]:
        root = Path(entry or ".").expanduser()
        if root.is_dir():
            for candidate in candidates:
                if (root / candidate).is_file():
                    return (root / candidate).read_text(encoding="utf-8")
        elif root.is_file() and zipfile.is_zipfile(root):
            with zipfile.ZipFile(root) as archive:
                for candidate in candidates:
                    if candidate in archive.namelist():
                        return archive.read(candidate).decode("utf-8")
    raise UserFunctionError(
        f"cannot find module {module} on the import path (python-files, then the installed packages)"
    )


def _find(tree: ast.Module, path: str, name: str) -> tuple[ast.FunctionDef, bool]:
    """The function ``path`` names in a module (``f``, ``Class``: its ``eval``), and whether it is
    a method."""
    body: list[ast.stmt] = tree.body
    parts = path.split(".")
    for i, part in enumerate(parts):
        node = next(
            (n for n in reversed(body) if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part),
            None,
        )
        if node is None:
            raise UserFunctionError(f"{name}: no function or class {part} is defined in the module")
        if isinstance(node, ast.FunctionDef):
            if i != len(parts) - 1:
                raise UserFunctionError(f"{name}: {part} is a function, not a class")
            return node, i > 0
        if i == len(parts) - 1:
            method = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "eval"), None)
            if method is None:
                raise UserFunctionError(f"{name}: the class {part} has no eval method")
            return method, True
        body = node.body
    raise UserFunctionError(f"{name}: nothing is named {path}")


def declare(
    name: str,
    *,
    classpath: str | None = None,
    python_code: str | None = None,
    python_files: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
) -> UserFunction:
    """The declaration of a user-defined function, read from its source; raises
    :class:`UserFunctionError` saying why it cannot be one."""
    python_file_paths(name, python_files)
    if python_code is not None:
        source, path = python_code, "eval"
    elif classpath:
        module, colon, path = classpath.partition(":")
        if not colon or not path:
            raise UserFunctionError(
                f"{name}: {classpath!r} is not a Python callable: write module:function (a Java class "
                "cannot run in ferry; its eval is to be written in Python)"
            )
        try:
            source = _module_source(module, python_files)
        except UserFunctionError as e:
            raise UserFunctionError(f"{name}: {e}") from None
    else:
        raise UserFunctionError(f"{name}: give classpath (module:function) or python-code")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise UserFunctionError(f"{name}: its code does not parse: {e.msg} at line {e.lineno}") from None
    if python_code is not None and not any(
        isinstance(n, ast.FunctionDef) and n.name == "eval" for n in tree.body
    ):
        raise UserFunctionError(f"{name}: python-code defines no function named eval")
    function, method = _find(tree, path, name)
    is_class = method and path.split(".")[-1] != "eval"
    if options and not is_class:
        raise UserFunctionError(f"{name}: options are given to a class with open(options)")
    parameters = _parameters(function, name, method)
    returns = _annotation(function.returns, name)
    return UserFunction(name, parameters, returns, None, options or {})
