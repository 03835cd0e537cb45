"""String functions of transforms, with Flink CDC's semantics: NULL in any argument gives NULL
(``CONCAT_WS`` skips NULL strings), positions count from 1 and 0 means not found, and the
regular-expression functions give NULL (not an error) for a pattern that does not compile.
Patterns are Java's, which Python's :mod:`re` reads the same for what jobs write; a replacement's
``$1`` is a group, as in Java.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ferry.model.types import ARRAY, BINARIES, BOOLEAN, BYTES, INT, STRING, DataType
from ferry.transform.compiled import Compiled, CompileError, call
from ferry.transform.sqlvalues import to_text

if TYPE_CHECKING:
    from ferry.transform.compiled import ExpressionCompiler

Handler = Callable[["ExpressionCompiler", Any], Compiled]


def _text(value: Any) -> str:
    return to_text(value)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except (re.error, OverflowError):
        return None


def _string_args(c: ExpressionCompiler, nodes: list[exp.Expr | None]) -> list[Compiled]:
    return [c.compile(n) for n in nodes if n is not None]


def _arguments(node: exp.Anonymous, low: int, high: int) -> list[exp.Expr]:
    args = list(node.expressions)
    if not low <= len(args) <= high:
        count = str(low) if low == high else f"{low} to {high}"
        raise CompileError(f"{node.name.upper()} takes {count} arguments, not {len(args)}")
    return args


# --------------------------------------------------------------------------------------------------
# Regular expressions


def _java_replacement(replacement: str) -> str:
    """A Java replacement (``$1``, ``${name}``, ``\\$``) in Python's :func:`re.sub` syntax."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if ch == "$":
            named = re.match(r"\$\{(\w+)\}", replacement[i:])
            number = re.match(r"\$(\d+)", replacement[i:])
            if named or number:
                match = named or number
                assert match is not None
                out.append(f"\\g<{match.group(1)}>")
                i += match.end()
                continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


def regexp_replace(c: ExpressionCompiler, node: exp.RegexpReplace) -> Compiled:
    def replace(s: Any, pattern: Any, replacement: Any) -> str | None:
        regex = _regex(_text(pattern))
        if regex is None:
            return None
        try:
            return regex.sub(_java_replacement(_text(replacement)), _text(s))
        except (re.error, IndexError):
            return None

    args = [node.this, node.expression, node.args.get("replacement")]
    return call(replace, _string_args(c, args), STRING())


def _group(index: Any) -> int | None:
    group = int(index)
    return None if group < 0 else group


def regexp_extract(c: ExpressionCompiler, node: exp.RegexpExtract) -> Compiled:
    """``REGEXP_EXTRACT(s, regex[, group])``: the first match's group (0, the whole match, by
    default); NULL without a match, or for a group the pattern does not have."""

    def extract(s: Any, pattern: Any, index: Any = 0) -> str | None:
        regex, group = _regex(_text(pattern)), _group(index)
        if regex is None or group is None or group > regex.groups:
            return None
        match = regex.search(_text(s))
        return None if match is None else match.group(group)

    args = [node.this, node.expression, node.args.get("position") or node.args.get("group")]
    return call(extract, _string_args(c, args), STRING())


def regexp_extract_all(c: ExpressionCompiler, node: exp.RegexpExtractAll) -> Compiled:
    """``REGEXP_EXTRACT_ALL(s, regex[, group])``: every match's group (1 by default)."""

    def extract_all(s: Any, pattern: Any, index: Any = 1) -> list[str | None] | None:
        regex, group = _regex(_text(pattern)), _group(index)
        if regex is None or group is None or group > regex.groups:
            return None
        return [m.group(group) for m in regex.finditer(_text(s))]

    args = [node.this, node.expression, node.args.get("group") or node.args.get("position")]
    return call(extract_all, _string_args(c, args), ARRAY(STRING()))


def _search(kind: str) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.Func) -> Compiled:
        def search(s: Any, pattern: Any) -> Any:
            regex = _regex(_text(pattern))
            if regex is None:
                return None
            text = _text(s)
            if kind == "count":
                return sum(1 for _ in regex.finditer(text))
            match = regex.search(text)
            if kind == "instr":
                return 0 if match is None else match.start() + 1
            return None if match is None else match.group(0)

        result = STRING() if kind == "substr" else INT()
        return call(search, _string_args(c, [node.this, node.args.get("expression")]), result)

    return handler


def similar_to(c: ExpressionCompiler, node: exp.SimilarTo, escape: str | None = None) -> Compiled:
    """``s SIMILAR TO pattern``: SQL's ``%`` and ``_`` with regular-expression alternation,
    repetition and classes, matched against the whole string."""

    def matches(s: Any, pattern: Any) -> bool:
        return re.fullmatch(_similar_regex(_text(pattern), escape), _text(s), re.DOTALL) is not None

    return call(matches, _string_args(c, [node.this, node.expression]), BOOLEAN())


def _similar_regex(pattern: str, escape: str | None) -> str:
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            out.append(re.escape(next(chars, "")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch in "|*+?{}()[]^-,":
            out.append(ch)
        else:
            out.append(re.escape(ch))
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# Positions, pieces and padding


def position(c: ExpressionCompiler, node: exp.StrPosition) -> Compiled:
    """``POSITION(seek IN s)``, ``LOCATE(seek, s[, from])``, ``INSTR(s, seek)``: 1-based, 0 when
    not found."""

    args = [node.this, node.args.get("substr"), node.args.get("position")]
    return call(_find, _string_args(c, args), INT())


def _find(s: Any, seek: Any, start: Any = 1) -> int:
    text, needle = _text(s), _text(seek)
    if not needle:
        return 1
    begin = max(int(start) - 1, 0)
    if begin > len(text):
        return 0
    return text.find(needle, begin) + 1


def locate(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    seek, s, *start = _arguments(node, 2, 3)
    return call(_find, _string_args(c, [s, seek, *start]), INT())


def instr(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    s, seek = _arguments(node, 2, 2)
    return call(_find, _string_args(c, [s, seek]), INT())


def overlay(c: ExpressionCompiler, node: exp.Overlay) -> Compiled:
    """``OVERLAY(s PLACING r FROM start [FOR n])``: ``n`` characters from ``start`` replaced (as
    many as ``r`` has by default); a start outside ``s`` leaves it as it is."""

    def place(s: Any, r: Any, start: Any, length: Any = None) -> Any:
        binary = isinstance(s, bytes)
        text = s if binary else _text(s)
        piece = (r if isinstance(r, bytes) else _text(r).encode()) if binary else _text(r)
        begin = int(start)
        n = len(piece) if length is None else int(length)
        if begin <= 0 or begin > len(text):
            return text
        return text[: begin - 1] + piece + text[begin - 1 + max(n, 0) :]  # type: ignore[operator]

    args = [
        node.this,
        node.expression,
        node.args.get("from_") or node.args.get("from"),
        node.args.get("for_"),
    ]
    operand = c.compile(node.this)
    result = BYTES() if operand.type is not None and operand.type.root in BINARIES else STRING()
    return call(place, _string_args(c, args), result)


def concat_ws(c: ExpressionCompiler, node: exp.ConcatWs) -> Compiled:
    """``CONCAT_WS(separator, s1, s2, ...)``: NULL strings are skipped, a NULL separator is NULL."""
    separator, *parts = (c.compile(a).fn for a in node.expressions)

    def join(row: Any) -> str | None:
        sep = separator(row)
        if sep is None:
            return None
        return _text(sep).join(_text(v) for v in (f(row) for f in parts) if v is not None)

    return Compiled(join, STRING())


def pad(c: ExpressionCompiler, node: exp.Pad) -> Compiled:
    """``LPAD(s, n, pad)`` / ``RPAD``: ``s`` padded, or cut, to ``n`` characters; NULL for a
    negative ``n`` or an empty ``pad``."""
    left = bool(node.args.get("is_left"))

    def padded(s: Any, length: Any, fill: Any) -> str | None:
        text, n, filler = _text(s), int(length), _text(fill)
        if n < 0 or not filler:
            return None
        if len(text) >= n:
            return text[:n]
        padding = (filler * (n // len(filler) + 1))[: n - len(text)]
        return padding + text if left else text + padding

    args = [node.this, node.expression, node.args.get("fill_pattern")]
    if args[2] is None:
        raise CompileError(f"{'LPAD' if left else 'RPAD'} takes a string, a length and a padding")
    return call(padded, _string_args(c, args), STRING())


def _two(compute: Callable[..., Any], result: DataType) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.Func) -> Compiled:
        args = [node.this, node.args.get("expression") or node.args.get("times")]
        return call(compute, _string_args(c, args), result)

    return handler


def _left(s: Any, n: Any) -> str:
    count = int(n)
    return _text(s)[:count] if count > 0 else ""


def _right(s: Any, n: Any) -> str:
    count, text = int(n), _text(s)
    return text[max(len(text) - count, 0) :] if count > 0 else ""


def _repeat(s: Any, n: Any) -> str:
    return _text(s) * max(int(n), 0)


def _affix(test: str) -> Callable[[Any, Any], bool]:
    def check(s: Any, affix: Any) -> bool:
        if isinstance(s, bytes) or isinstance(affix, bytes):
            a = s if isinstance(s, bytes) else _text(s).encode()
            b = affix if isinstance(affix, bytes) else _text(affix).encode()
            return bool(getattr(a, test)(b))
        return bool(getattr(_text(s), test)(_text(affix)))

    return check


def replace(c: ExpressionCompiler, node: exp.Replace) -> Compiled:
    args = [node.this, node.expression, node.args.get("replacement")]
    return call(lambda s, a, b: _text(s).replace(_text(a), _text(b)), _string_args(c, args), STRING())


def btrim(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    args = _arguments(node, 1, 2)
    compiled = _string_args(c, list(args))
    return call(lambda s, chars=" ": _text(s).strip(_text(chars)), compiled, STRING())


def initcap(c: ExpressionCompiler, node: exp.Initcap) -> Compiled:
    """``INITCAP(s)``: each word's first letter in upper case, the others in lower case."""
    words = re.compile(r"[^\W_]+")

    def capitalised(s: Any) -> str:
        return words.sub(lambda m: m.group(0)[0].upper() + m.group(0)[1:].lower(), _text(s))

    return call(capitalised, [c.compile(node.this)], STRING())


# --------------------------------------------------------------------------------------------------
# Base64 and UUID


def _to_base64(value: Any) -> str:
    data = value if isinstance(value, bytes) else _text(value).encode()
    return base64.b64encode(data).decode("ascii")


def _from_base64(value: Any) -> bytes:
    try:
        return base64.b64decode(_text(value), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{_text(value)[:40]!r} is not base64") from None


def _one(compute: Callable[[Any], Any], result: DataType) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.Func) -> Compiled:
        arg = node.this if not isinstance(node, exp.Anonymous) else _arguments(node, 1, 1)[0]
        return call(compute, [c.compile(arg)], result)

    return handler


def uuid_(c: ExpressionCompiler, node: exp.Uuid) -> Compiled:
    return Compiled(lambda row: str(uuid.uuid4()), STRING().not_null())


NODE_HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.RegexpReplace: regexp_replace,
    exp.RegexpExtract: regexp_extract,
    exp.RegexpExtractAll: regexp_extract_all,
    exp.RegexpCount: _search("count"),
    exp.RegexpInstr: _search("instr"),
    exp.RegexpSubstr: _search("substr"),
    exp.SimilarTo: similar_to,
    exp.StrPosition: position,
    exp.Overlay: overlay,
    exp.ConcatWs: concat_ws,
    exp.Pad: pad,
    exp.Replace: replace,
    exp.Repeat: _two(_repeat, STRING()),
    exp.Left: _two(_left, STRING()),
    exp.Right: _two(_right, STRING()),
    exp.StartsWith: _two(_affix("startswith"), BOOLEAN()),
    exp.EndsWith: _two(_affix("endswith"), BOOLEAN()),
    exp.ToBase64: _one(_to_base64, STRING()),
    exp.FromBase64: _one(lambda v: _from_base64(v).decode("utf-8", "replace"), STRING()),
    exp.Initcap: initcap,
    exp.Uuid: uuid_,
}
NAMED_HANDLERS: dict[str, Handler] = {
    "BTRIM": btrim,
    "LOCATE": locate,
    "INSTR": instr,
    "FROM_BASE64_BINARY": _one(_from_base64, BYTES()),
}
