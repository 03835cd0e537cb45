"""Table patterns: the tables a route's or a transform's ``source-table`` names, read as Flink CDC reads it.

A table pattern is ``<schema>.<table>`` (``<namespace>.<schema>.<table>`` for three-part ids): the
unescaped ``.`` separates the parts, ``\\.`` is the regular expression's "any character", and ``,``
separates alternatives (``mydb.orders, mydb.items``). So ``mydb.\\.*`` is every table of ``mydb``
and ``\\.*.\\.*`` every table of every database. Flink CDC reads the pattern two ways, and so does
ferry:

- **Transforms** (:class:`TableSelector`, Flink CDC's ``Selectors``) match each part on its own,
  ignoring case: a pattern of one part matches only ids of one part (a table without database or
  schema), two parts match ``schema.table`` ids, three parts ``namespace.schema.table`` ids; an id
  of one part is matched by the last part of any pattern. ``\\,`` is a comma inside a part, and a
  part may itself list alternatives (``mydb.orders\\,items``).
- **Routes** (:class:`RoutePattern`, Flink CDC's ``TableIdRouter``) turn the whole pattern into one
  regular expression over the id's text (``,`` becomes ``|``, the unescaped ``.`` a literal dot,
  ``\\.`` any character), matched case-sensitively against the whole id. Its groups are ``$1``,
  ``$2``... (``${name}``) in ``sink-table``, filled as Java's ``Matcher.replaceAll`` fills them;
  with ``replace-symbol``, the symbol stands for the source table's name and ``$`` is plain text.

Patterns are Python regular expressions, which agree with Java's for the constructs table patterns
use (classes, groups, alternation, quantifiers, ``\\d``, ``\\w``); Java's named groups
``(?<name>...)`` are read as Python's ``(?P<name>...)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ferry.model.schema import TableId


class TablePatternError(ValueError):
    """A ``source-table`` or ``sink-table`` that is not a table pattern (said in words)."""


def _unescaped(text: str, what: str) -> Iterator[int]:
    """The indexes of ``text``'s characters that no backslash escapes (an escape and the character
    after it are passed over); a lone backslash at the end is refused, naming ``what``."""
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if i + 1 == len(text):
                raise TablePatternError(f"{what}{text!r} ends with a lone backslash (an escape of nothing)")
            i += 2
            continue
        yield i
        i += 1


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` that no backslash escapes (the escapes are kept)."""
    parts: list[str] = []
    start = 0
    for i in _unescaped(text, ""):
        if text[i] == separator:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


#: Java's named group ``(?<name>...)``, which Python writes ``(?P<name>...)``.
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")


def _compile(regex: str, flags: int, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", regex), flags)
    except re.error as e:
        raise TablePatternError(
            f"{regex!r} of {pattern!r} is not a valid regular expression ({e}); the unescaped . "
            "separates database and table, write \\. for the regular expression's any character"
        ) from None


_Part = Callable[[str], bool]


def _part(text: str, pattern: str) -> _Part:
    """One part of a transform's pattern: any of its comma-separated expressions matches the whole
    name, ignoring case."""
    expressions = [p.strip().replace("\\,", ",") for p in _split(text, ",")]
    regexes = [_compile(e, re.IGNORECASE, pattern) for e in expressions if e]
    return lambda name: any(r.fullmatch(name) for r in regexes)


def _never(name: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class _Selector:
    namespace: _Part
    schema: _Part
    table: _Part

    def matches(self, table: TableId) -> bool:
        namespace, schema, name = table
        if not namespace:
            if not schema:
                return self.table(name)
            return self.schema(schema) and self.table(name)
        return self.namespace(namespace) and self.schema(schema or "") and self.table(name)


@dataclass(frozen=True, slots=True)
class TableSelector:
    """A transform's ``source-table`` (see the module documentation)."""

    pattern: str
    _selectors: tuple[_Selector, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pattern.strip():
            raise TablePatternError("a table pattern cannot be empty")
        selectors: list[_Selector] = []
        for written in _split(self.pattern, ","):
            alternative = written.strip().replace("\\,", ",")
            if not alternative:
                continue
            parts = [p.strip().replace("\\.", ".") for p in _split(alternative, ".") if p.strip()]
            if not 1 <= len(parts) <= 3:
                raise TablePatternError(
                    f"{alternative!r} has {len(parts)} parts; a table pattern has one to three "
                    "(table, database.table, namespace.schema.table) separated by unescaped dots"
                )
            compiled = [_part(p, self.pattern) for p in parts]
            padded = [_never] * (3 - len(compiled)) + compiled
            selectors.append(_Selector(*padded))
        if not selectors:
            raise TablePatternError(f"{self.pattern!r} names no table")
        object.__setattr__(self, "_selectors", tuple(selectors))

    def matches(self, table: TableId) -> bool:
        return any(s.matches(table) for s in self._selectors)

    @property
    def parts(self) -> tuple[int, ...]:
        """How many parts each alternative has (1 to 3)."""
        return tuple(sum(p is not _never for p in (s.namespace, s.schema, s.table)) for s in self._selectors)


def route_regex(pattern: str) -> str:
    """A route's ``source-table`` as one regular expression over the id's text: alternatives
    joined by ``|``, the unescaped ``.`` a literal dot, ``\\.`` any character."""
    alternatives = pattern.split(",")
    while alternatives and not alternatives[-1]:
        alternatives.pop()  # trailing empty alternatives are dropped (Java's String.split)
    joined = "|".join(a.strip() for a in alternatives)
    out: list[str] = []
    i = 0
    while i < len(joined):
        if joined.startswith("\\.", i):
            out.append(".")
            i += 2
        else:
            out.append("\\." if joined[i] == "." else joined[i])
            i += 1
    return "".join(out)


_GROUP_REFERENCE = re.compile(r"\$(?:\{(?P<name>[A-Za-z][A-Za-z0-9]*)\}|(?P<number>\d+))")


@dataclass(frozen=True, slots=True)
class RoutePattern:
    """A route's ``source-table`` and ``sink-table`` (see the module documentation)."""

    pattern: str
    sink_table: str
    replace_symbol: str | None = None
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pattern.strip():
            raise TablePatternError("a table pattern cannot be empty")
        object.__setattr__(self, "regex", _compile(route_regex(self.pattern), 0, self.pattern))
        if self.replace_symbol is None:
            self._check_template()

    def _check_template(self) -> None:
        """Refuse a ``sink-table`` whose ``$`` references name no group of the pattern."""
        template = self.sink_table
        for i in _unescaped(template, "sink-table "):
            if template[i] != "$":
                continue
            reference = _GROUP_REFERENCE.match(template, i)
            if reference is None:
                raise TablePatternError(
                    f"sink-table {template!r}: $ at character {i + 1} is not a group reference "
                    "($1, ${name}); write \\$ for a dollar sign"
                )
            name = reference.group("name")
            if name is not None and name not in self.regex.groupindex:
                raise TablePatternError(f"sink-table {template!r}: the pattern has no group named {name}")
            number = reference.group("number")
            if number is not None and int(number[0]) > self.regex.groups:
                raise TablePatternError(
                    f"sink-table {template!r}: the pattern has {self.regex.groups} group(s), "
                    f"${number[0]} names none"
                )

    def matches(self, table: TableId) -> bool:
        return self.regex.fullmatch(str(table)) is not None

    def target(self, table: TableId) -> TableId | None:
        """The sink table ``table`` goes to by this route, or None when the pattern does not match it."""
        text = str(table)
        if self.regex.fullmatch(text) is None:
            return None
        if self.replace_symbol is not None:
            return TableId.parse(self.sink_table.replace(self.replace_symbol, table.table_name))
        return TableId.parse(self.regex.sub(self._expand, text))

    def _expand(self, match: re.Match[str]) -> str:
        """``sink-table`` with its group references filled from ``match`` (Java's replacement
        syntax: ``$n`` takes as many digits as name a group, ``\\`` escapes the next character)."""
        template, groups = self.sink_table, self.regex.groups
        out: list[str] = []
        i = 0
        while i < len(template):
            char = template[i]
            if char == "\\":
                out.append(template[i + 1])
                i += 2
            elif char == "$":
                reference = _GROUP_REFERENCE.match(template, i)
                assert reference is not None  # checked when the route was made
                if reference.group("name") is not None:
                    out.append(match.group(reference.group("name")) or "")
                    i = reference.end()
                    continue
                digits = reference.group("number")
                number, used = int(digits[0]), 1
                while used < len(digits) and number * 10 + int(digits[used]) <= groups:
                    number, used = number * 10 + int(digits[used]), used + 1
                out.append(match.group(number) or "")
                i += 1 + used
            else:
                out.append(char)
                i += 1
        return "".join(out)
