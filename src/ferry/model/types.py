"""ferry's type system, close to Flink CDC's, with an explicit widening lattice.

A :class:`DataType` is one immutable value: a root (``INT``, ``DECIMAL``, ``ROW`` ...), its
parameters (length, precision, scale, children) and its nullability. Types render and parse in
Flink SQL spelling (``DECIMAL(10, 2) NOT NULL``).

Widening (:func:`widen`) gives the narrowest type that holds every value of both inputs without
loss; it is what a sink table fed by several sources, or by several partitions of one source, is
given. :func:`can_widen` tells whether values of one type fit another unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from ferry.model.exceptions import TypeWideningError


class TypeRoot(StrEnum):
    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    STRING = "STRING"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    BYTES = "BYTES"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_LTZ = "TIMESTAMP_LTZ"
    TIMESTAMP_TZ = "TIMESTAMP_TZ"
    ARRAY = "ARRAY"
    MAP = "MAP"
    ROW = "ROW"
    #: Semi-structured: JSON's values (see :mod:`ferry.model.variant`).
    VARIANT = "VARIANT"


INTEGERS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT)
#: Decimal digits each integer type needs, to widen it into a DECIMAL losslessly.
INTEGER_DIGITS = {TypeRoot.TINYINT: 3, TypeRoot.SMALLINT: 5, TypeRoot.INT: 10, TypeRoot.BIGINT: 19}
FLOATS = (TypeRoot.FLOAT, TypeRoot.DOUBLE)
CHARACTER = (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING)
BINARIES = (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES)
TIMESTAMPS = (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ)
MAX_DECIMAL_PRECISION = 38
MAX_LENGTH = 2_147_483_647
_WITH_LENGTH = (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY)
_WITH_PRECISION = (TypeRoot.TIME, *TIMESTAMPS)


@dataclass(frozen=True, slots=True)
class Field:
    """A named field of a ROW type."""

    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class DataType:
    """One SQL type. Build them with the constructors below (``INT()``, ``DECIMAL(10, 2)``)."""

    root: TypeRoot
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    element: DataType | None = None
    key: DataType | None = None
    fields: tuple[Field, ...] = ()

    def with_nullable(self, nullable: bool) -> DataType:
        return self if self.nullable is nullable else replace(self, nullable=nullable)

    def not_null(self) -> DataType:
        return self.with_nullable(False)

    def same_ignoring_nullability(self, other: DataType) -> bool:
        return self.with_nullable(True) == other.with_nullable(True)

    def __str__(self) -> str:
        return render(self)


def BOOLEAN() -> DataType:  # noqa: N802 - SQL spelling
    return DataType(TypeRoot.BOOLEAN)


def TINYINT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.TINYINT)


def SMALLINT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.SMALLINT)


def INT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.INT)


def BIGINT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.BIGINT)


def FLOAT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.FLOAT)


def DOUBLE() -> DataType:  # noqa: N802
    return DataType(TypeRoot.DOUBLE)


def DECIMAL(precision: int = 10, scale: int = 0) -> DataType:  # noqa: N802
    return DataType(TypeRoot.DECIMAL, precision=precision, scale=scale)


def CHAR(length: int = 1) -> DataType:  # noqa: N802
    return DataType(TypeRoot.CHAR, length=length)


def VARCHAR(length: int = MAX_LENGTH) -> DataType:  # noqa: N802
    return DataType(TypeRoot.VARCHAR, length=length)


def STRING() -> DataType:  # noqa: N802
    return DataType(TypeRoot.STRING)


def BINARY(length: int = 1) -> DataType:  # noqa: N802
    return DataType(TypeRoot.BINARY, length=length)


def VARBINARY(length: int = MAX_LENGTH) -> DataType:  # noqa: N802
    return DataType(TypeRoot.VARBINARY, length=length)


def BYTES() -> DataType:  # noqa: N802
    return DataType(TypeRoot.BYTES)


def DATE() -> DataType:  # noqa: N802
    return DataType(TypeRoot.DATE)


def TIME(precision: int = 0) -> DataType:  # noqa: N802
    return DataType(TypeRoot.TIME, precision=precision)


def TIMESTAMP(precision: int = 6) -> DataType:  # noqa: N802
    return DataType(TypeRoot.TIMESTAMP, precision=precision)


def TIMESTAMP_LTZ(precision: int = 6) -> DataType:  # noqa: N802
    return DataType(TypeRoot.TIMESTAMP_LTZ, precision=precision)


def TIMESTAMP_TZ(precision: int = 6) -> DataType:  # noqa: N802
    return DataType(TypeRoot.TIMESTAMP_TZ, precision=precision)


def ARRAY(element: DataType) -> DataType:  # noqa: N802
    return DataType(TypeRoot.ARRAY, element=element)


def MAP(key: DataType, value: DataType) -> DataType:  # noqa: N802
    return DataType(TypeRoot.MAP, key=key, element=value)


def ROW(*fields: Field) -> DataType:  # noqa: N802
    return DataType(TypeRoot.ROW, fields=tuple(fields))


def VARIANT() -> DataType:  # noqa: N802
    return DataType(TypeRoot.VARIANT)


# --------------------------------------------------------------------------------------- rendering


def render(t: DataType) -> str:
    """Flink SQL spelling of a type: ``VARCHAR(20) NOT NULL``, ``MAP<STRING, INT>``."""
    root = t.root
    if root is TypeRoot.DECIMAL:
        body = f"DECIMAL({t.precision}, {t.scale})"
    elif root in _WITH_LENGTH:
        body = f"{root.value}({t.length})"
    elif root in _WITH_PRECISION:
        body = f"{root.value}({t.precision})"
    elif root is TypeRoot.ARRAY:
        assert t.element is not None
        body = f"ARRAY<{render(t.element)}>"
    elif root is TypeRoot.MAP:
        assert t.key is not None and t.element is not None
        body = f"MAP<{render(t.key)}, {render(t.element)}>"
    elif root is TypeRoot.ROW:
        body = "ROW<" + ", ".join(f"{quote_name(f.name)} {render(f.type)}" for f in t.fields) + ">"
    else:
        body = root.value
    return body if t.nullable else body + " NOT NULL"


def quote_name(name: str) -> str:
    """A field name in backquotes, a backquote in it doubled (``a`b`` is ```a``b```)."""
    return "`" + name.replace("`", "``") + "`"


def unquote_name(token: str) -> str:
    """The field name a (backquoted or bare) name token spells: the inverse of :func:`quote_name`."""
    return token[1:-1].replace("``", "`") if token.startswith("`") else token


_ALIASES = {
    "INTEGER": "INT",
    "BOOL": "BOOLEAN",
    "REAL": "FLOAT",
    "NUMERIC": "DECIMAL",
    "DEC": "DECIMAL",
    "TEXT": "STRING",
    "BLOB": "BYTES",
    "DATETIME": "TIMESTAMP",
    "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
    "TIMESTAMP WITH TIME ZONE": "TIMESTAMP_TZ",
    "DOUBLE PRECISION": "DOUBLE",
}


# A parser of ferry's own: sqlglot has no Flink dialect, fails on BYTES and ROW<`a` INT>, and drops
# a trailing NOT NULL (exp.DataType.build("INT NOT NULL") is INT).
def parse(text: str) -> DataType:
    """Parse Flink SQL spelling back into a type (the inverse of :func:`render`)."""
    parser = _TypeParser(text)
    t = parser.parse_type()
    parser.expect_end()
    return t


class _TypeParser:
    _TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z_0-9]*|\d+|[(),<>])")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = self._TOKEN.match(text, pos)
            if not m:
                if text[pos:].strip() == "":
                    break
                raise TypeWideningError(f"cannot parse type {text!r} at character {pos}")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _next(self) -> str:
        tok = self._peek()
        if tok is None:
            raise TypeWideningError(f"type {self.text!r} ends too early")
        self.i += 1
        return tok

    def _accept(self, *words: str) -> bool:
        n = len(words)
        got = [t.upper() for t in self.tokens[self.i : self.i + n]]
        if got == list(words):
            self.i += n
            return True
        return False

    def _ints(self) -> list[int]:
        if not self._accept("("):
            return []
        values = [int(self._next())]
        while self._accept(","):
            values.append(int(self._next()))
        self._expect(")")
        return values

    def _expect(self, tok: str) -> None:
        got = self._next()
        if got != tok:
            raise TypeWideningError(f"expected {tok!r} in type {self.text!r}, found {got!r}")

    def expect_end(self) -> None:
        if self._peek() is not None:
            raise TypeWideningError(f"unexpected {self._peek()!r} in type {self.text!r}")

    def parse_type(self) -> DataType:
        name = self._next().upper()
        if name in {"TIMESTAMP", "TIME"}:
            args = self._ints()
            if self._accept("WITH", "LOCAL", "TIME", "ZONE"):
                name = "TIMESTAMP_LTZ"
            elif self._accept("WITH", "TIME", "ZONE"):
                name = "TIMESTAMP_TZ"
            elif self._accept("WITHOUT", "TIME", "ZONE"):
                pass
        elif name == "DOUBLE":
            self._accept("PRECISION")
            args = []
        elif name in ("CHARACTER", "CHAR") and self._accept("VARYING"):
            name, args = "VARCHAR", self._ints()
        else:
            args = []
        name = _ALIASES.get(name, name)
        try:
            root = TypeRoot(name)
        except ValueError:
            raise TypeWideningError(f"unknown type {name!r} in {self.text!r}") from None
        if root is TypeRoot.ARRAY:
            self._expect("<")
            t = ARRAY(self.parse_type())
            self._expect(">")
        elif root is TypeRoot.MAP:
            self._expect("<")
            k = self.parse_type()
            self._expect(",")
            v = self.parse_type()
            self._expect(">")
            t = MAP(k, v)
        elif root is TypeRoot.ROW:
            self._expect("<")
            fields = []
            while True:
                fname = unquote_name(self._next())
                fields.append(Field(fname, self.parse_type()))
                if not self._accept(","):
                    break
            self._expect(">")
            t = ROW(*fields)
        else:
            args = args or self._ints()
            t = _with_args(root, args)
        if self._accept("NOT", "NULL"):
            t = t.not_null()
        else:
            self._accept("NULL")
        return t


def _with_args(root: TypeRoot, args: list[int]) -> DataType:
    if root is TypeRoot.DECIMAL:
        return DECIMAL(args[0] if args else 10, args[1] if len(args) > 1 else 0)
    if root in _WITH_LENGTH:
        default = 1 if root in (TypeRoot.CHAR, TypeRoot.BINARY) else MAX_LENGTH
        return DataType(root, length=args[0] if args else default)
    if root in _WITH_PRECISION:
        default = 0 if root is TypeRoot.TIME else 6
        return DataType(root, precision=args[0] if args else default)
    return DataType(root)


# --------------------------------------------------------------------------------------- widening


def can_widen(source: DataType, target: DataType) -> bool:
    """True when every value of ``source`` is a value of ``target`` (nullability included)."""
    if source.nullable and not target.nullable:
        return False
    try:
        return widen(source, target).same_ignoring_nullability(target)
    except TypeWideningError:
        return False


def widen(a: DataType, b: DataType) -> DataType:
    """The narrowest type holding every value of ``a`` and of ``b``.

    The lattice: TINYINT < SMALLINT < INT < BIGINT < DECIMAL(p, 0); FLOAT < DOUBLE; an integer and
    a DECIMAL meet at a DECIMAL wide enough for both; an exact and an approximate number meet at
    DOUBLE; CHAR(n) < VARCHAR(m) < STRING; BINARY(n) < VARBINARY(m) < BYTES; DATE < TIMESTAMP;
    precisions of TIME and TIMESTAMP take the maximum; ARRAY, MAP and ROW widen element-wise
    (a ROW may gain fields). Anything else meets at STRING (a VARIANT with another type too: its
    JSON text), except the nested types, which have no
    common supertype with a different root and raise :class:`TypeWideningError`.
    """
    nullable = a.nullable or b.nullable
    return _widen(a, b).with_nullable(nullable)


def _widen(a: DataType, b: DataType) -> DataType:
    ra, rb = a.root, b.root
    if a.same_ignoring_nullability(b):
        return a
    if ra in INTEGERS and rb in INTEGERS:
        return a if INTEGERS.index(ra) >= INTEGERS.index(rb) else b
    if ra is TypeRoot.DECIMAL or rb is TypeRoot.DECIMAL:
        da, db = _as_decimal(a), _as_decimal(b)
        if da is not None and db is not None:
            return _widen_decimal(da, db)
    numeric = (*INTEGERS, TypeRoot.DECIMAL, *FLOATS)
    if ra in numeric and rb in numeric:
        if ra is TypeRoot.FLOAT and rb is TypeRoot.FLOAT:
            return FLOAT()
        return DOUBLE()
    if ra in CHARACTER and rb in CHARACTER:
        return _widen_sized(a, b, CHARACTER)
    if ra in BINARIES and rb in BINARIES:
        return _widen_sized(a, b, BINARIES)
    if ra is TypeRoot.TIME and rb is TypeRoot.TIME:
        return TIME(max(a.precision or 0, b.precision or 0))
    if {ra, rb} <= {TypeRoot.DATE, *TIMESTAMPS} and not (ra is rb is TypeRoot.DATE):
        roots = [r for r in (ra, rb) if r is not TypeRoot.DATE]
        root = roots[0] if len(set(roots)) == 1 else TypeRoot.TIMESTAMP_LTZ
        return DataType(root, precision=max(a.precision or 0, b.precision or 0))
    nested = (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW)
    if ra in nested or rb in nested:
        return _widen_nested(a, b)
    return STRING()


def _as_decimal(t: DataType) -> DataType | None:
    if t.root is TypeRoot.DECIMAL:
        return t
    if t.root in INTEGERS:
        return DECIMAL(INTEGER_DIGITS[t.root], 0)
    return None


def _widen_decimal(a: DataType, b: DataType) -> DataType:
    pa, sa, pb, sb = a.precision or 0, a.scale or 0, b.precision or 0, b.scale or 0
    scale = max(sa, sb)
    precision = max(pa - sa, pb - sb) + scale
    if precision > MAX_DECIMAL_PRECISION:
        return DOUBLE() if scale else STRING()
    return DECIMAL(precision, scale)


def _widen_sized(a: DataType, b: DataType, chain: tuple[TypeRoot, ...]) -> DataType:
    ra, rb = a.root, b.root
    top = chain[2]
    if top in (ra, rb):
        return DataType(top)
    la, lb = a.length or 0, b.length or 0
    if ra is rb and ra is chain[0]:
        return DataType(ra, length=la) if la == lb else DataType(chain[1], length=max(la, lb))
    return DataType(chain[1], length=max(la, lb))


def _widen_nested(a: DataType, b: DataType) -> DataType:
    if a.root is not b.root:
        raise TypeWideningError(f"{render(a)} and {render(b)} have no common type")
    if a.root is TypeRoot.ARRAY:
        assert a.element is not None and b.element is not None
        return ARRAY(widen(a.element, b.element))
    if a.root is TypeRoot.MAP:
        assert a.key is not None and b.key is not None and a.element is not None and b.element is not None
        return MAP(widen(a.key, b.key), widen(a.element, b.element))
    by_name = {f.name: f.type for f in b.fields}
    fields = [
        Field(f.name, widen(f.type, by_name.pop(f.name)) if f.name in by_name else f.type.with_nullable(True))
        for f in a.fields
    ]
    fields += [Field(name, t.with_nullable(True)) for name, t in by_name.items()]
    return ROW(*fields)
