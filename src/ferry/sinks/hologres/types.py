"""Hologres's ``sink.type-normalize-strategy``: which Hologres type a source type becomes.

As in Flink CDC's Hologres pipeline connector:

- ``standard``: the closest Hologres type (Hologres has no TINYINT: it becomes SMALLINT);
- ``broaden``: a wider type, so that fewer source type changes need an ALTER (every integer is
  BIGINT, every floating point DOUBLE, every string TEXT, decimals take the full precision);
- ``only-bigint-or-text``: integers are BIGINT, everything else TEXT: no type change ever needs
  an ALTER.

Types are given back as ferry types (what the sink stores, read back), so the router can tell
that a change is already in place (an INT → BIGINT change under ``broaden``).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from ferry.model import types as t
from ferry.model.types import DataType, TypeRoot


class TypeNormalizeStrategy(StrEnum):
    STANDARD = "standard"
    BROADEN = "broaden"
    ONLY_BIGINT_OR_TEXT = "only-bigint-or-text"


_INTEGERS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT)


def _standard(source: DataType) -> DataType:
    root = source.root
    if root is TypeRoot.TINYINT:
        return t.SMALLINT()
    if root in (TypeRoot.STRING, TypeRoot.CHAR) or (
        root is TypeRoot.VARCHAR and (source.length or 0) > 10_485_760
    ):
        return t.STRING()
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        return t.BYTES()
    if root is TypeRoot.TIMESTAMP_TZ:
        return t.TIMESTAMP_LTZ(6)
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return DataType(root, precision=6)
    return source


def _broaden(source: DataType) -> DataType:
    root = source.root
    if root in _INTEGERS:
        return t.BIGINT()
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return t.DOUBLE()
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING):
        return t.STRING()
    if root is TypeRoot.DECIMAL:
        return t.DECIMAL(38, source.scale or 0)
    if root is TypeRoot.DATE:
        return t.TIMESTAMP(6)
    return _standard(source)


def _bigint_or_text(source: DataType) -> DataType:
    return t.BIGINT() if source.root in _INTEGERS else t.STRING()


_STRATEGIES: dict[TypeNormalizeStrategy, Callable[[DataType], DataType]] = {
    TypeNormalizeStrategy.STANDARD: _standard,
    TypeNormalizeStrategy.BROADEN: _broaden,
    TypeNormalizeStrategy.ONLY_BIGINT_OR_TEXT: _bigint_or_text,
}


def hologres_type(source: DataType, strategy: TypeNormalizeStrategy) -> DataType:
    """The type Hologres stores for ``source`` under ``strategy`` (nullability kept)."""
    if source.root is TypeRoot.VARIANT:
        mapped = t.STRING()
    elif source.root in (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW):
        mapped = (
            t.STRING()
            if strategy is not TypeNormalizeStrategy.STANDARD or source.root is not TypeRoot.ARRAY
            else source
        )
    else:
        mapped = _STRATEGIES[strategy](source)
    return mapped.with_nullable(source.nullable)
