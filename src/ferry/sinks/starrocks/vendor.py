"""StarRocks's own SQL through the ``starrocks`` package's SQLAlchemy dialect.

The package gives StarRocks's type objects (``STRING``, ``DATETIME``, ``BOOLEAN``, ...), its type
compiler and the column definitions of its DDL compiler. ferry keeps what it relies on in its own
hands: every identifier quoted (the package quotes only names that need it), and the key model,
``DISTRIBUTED BY`` and ``PROPERTIES`` clauses built from :mod:`ferry.sinks.base.sql.ddl` with quoted
columns and escaped property strings (the package takes these clauses as raw text). This module is
imported only when a vendor statement is built, so the MariaDB-compatible statements and SelectDB
need no ``starrocks`` package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy.types import TypeEngine
from starrocks import datatype as sr
from starrocks.dialect import (
    StarRocksDDLCompiler,
    StarRocksDialect,
    StarRocksIdentifierPreparer,
    StarRocksTypeCompiler,
)

from ferry.model.types import DataType, TypeRoot
from ferry.sinks.base.sql import ddl

#: StarRocks types without parameters.
STARROCKS_TYPES: Mapping[TypeRoot, TypeEngine[Any]] = {
    TypeRoot.BOOLEAN: sr.BOOLEAN(),
    TypeRoot.TINYINT: sr.TINYINT(),
    TypeRoot.SMALLINT: sr.SMALLINT(),
    TypeRoot.INT: sr.INTEGER(),
    TypeRoot.BIGINT: sr.BIGINT(),
    TypeRoot.FLOAT: sr.FLOAT(),
    TypeRoot.DOUBLE: sr.DOUBLE(),
    TypeRoot.STRING: sr.STRING(),
    TypeRoot.DATE: sr.DATE(),
    TypeRoot.TIMESTAMP: sr.DATETIME(),
}


class StarRocksPreparer(ddl.AlwaysQuote, StarRocksIdentifierPreparer):  # type: ignore[misc]
    pass


class StarRocksDdlCompiler(ddl.MySqlLayout, StarRocksDDLCompiler):  # type: ignore[misc]
    pass


class StarRocksTypes(StarRocksTypeCompiler):  # type: ignore[misc]
    def visit_INTEGER(self, type_: Any, **kw: Any) -> str:  # noqa: N802 - SQLAlchemy's visitor name
        return "INT"


class StarRocksSqlDialect(StarRocksDialect):  # type: ignore[misc]
    """The ``starrocks`` dialect with every identifier quoted and ferry's layout."""

    supports_statement_cache = True
    preparer = StarRocksPreparer
    ddl_compiler = StarRocksDdlCompiler
    # the package sets the legacy ``type_compiler``, which SQLAlchemy prefers to ``type_compiler_cls``
    type_compiler = StarRocksTypes
    type_compiler_cls = StarRocksTypes


class ByteLimits(Protocol):
    """What the StarRocks dialect knows of its string lengths (in bytes)."""

    max_vendor_char: int
    max_vendor_varchar: int

    def byte_length(self, t: DataType, default: int) -> int: ...


def starrocks_type(dialect: ByteLimits, t: DataType) -> TypeEngine[Any] | None:
    """StarRocks's type of a type the sink stores, or ``None`` if it has none; lengths in bytes."""
    root = t.root
    mapped: TypeEngine[Any] | None
    if root is TypeRoot.DECIMAL:
        mapped = sr.DECIMAL(t.precision, t.scale)
    elif root is TypeRoot.CHAR:
        # a CHAR too long for its bytes becomes a VARCHAR
        length = dialect.byte_length(t, 1)
        mapped = sr.CHAR(length) if length <= dialect.max_vendor_char else sr.VARCHAR(length)
    elif root is TypeRoot.VARCHAR:
        length = dialect.byte_length(t, dialect.max_vendor_varchar)
        mapped = sr.STRING() if length > dialect.max_vendor_varchar else sr.VARCHAR(length)
    else:
        mapped = STARROCKS_TYPES.get(root)
    return mapped
