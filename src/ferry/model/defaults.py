"""Column defaults: the value a column added with a default has in the rows that existed before.

A source fills every existing row of a column added with ``DEFAULT <literal>`` without writing a
row event, so the sink must show that value in the rows it holds, and in the rows read before the
change that reach it after. :attr:`Column.default <ferry.model.schema.Column.default>` keeps
that value as text in one form per type (:func:`default_text`): what a decoder found, converted
like a value of the column, and read back with :func:`default_value`. It is the column's *initial*
default: a default changed later (``ALTER COLUMN ... SET DEFAULT``) concerns only rows inserted
afterwards, which carry their value, so the schema keeps the first one.

A default that is not a constant (``CURRENT_TIMESTAMP``, a function, a sequence) is no default
here: the rows keep what the source writes for them, and the existing rows read NULL. Debezium
writes such a default as a placeholder of the column's type (the MySQL connector
``1970-01-01 00:00:00`` for ``CURRENT_TIMESTAMP``; the PostgreSQL connector ``1970-01-01`` for
``now()`` and ``CURRENT_DATE``, ``0`` for ``nextval(...)``, ``''`` for a text function): a date or
timestamp default at the epoch is therefore taken as no default; the others cannot be told from
a constant.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from ferry.model.schema import Column
from ferry.model.types import BINARIES, CHARACTER, FLOATS, INTEGERS, DataType, TypeRoot

_EPOCH = dt.datetime(1970, 1, 1)
_TRUE = frozenset({"true", "1", "t", "y", "yes", "on", "b'1'"})
_FALSE = frozenset({"false", "0", "f", "n", "no", "off", "b'0'"})


def default_text(value: Any) -> str | None:
    """A column default's value (a row value of its type) in the form :attr:`Column.default` keeps:
    ``true``/``false``, ISO dates and times (``2024-05-01 12:00:00``), numbers as written; None
    for a value with no text form here (bytes, nested values) and for a date or timestamp at the
    epoch (Debezium's placeholder for a default computed by a function)."""
    if value is None or isinstance(value, bytes | bytearray | dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        epoch = _EPOCH if value.tzinfo is None else _EPOCH.replace(tzinfo=dt.UTC)
        return None if value == epoch else value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return None if value == _EPOCH.date() else value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat()
    return str(value)


def default_value(column: Column) -> Any:
    """The row value of ``column``'s default, or None when it has none ferry can write (no
    default, a NULL default, an expression, a value that does not fit the type)."""
    if column.default is None:
        return None
    try:
        return parse_default(column.default, column.type)
    except (ValueError, ArithmeticError, TypeError):
        return None


def parse_default(text: str, data_type: DataType) -> Any:
    """``text`` read as a value of ``data_type`` (raising ValueError when it is not one)."""
    root = data_type.root
    if root in CHARACTER:
        if data_type.length is not None and root is not TypeRoot.STRING and len(text) > data_type.length:
            raise ValueError(f"{text!r} is longer than {data_type}")
        return text
    stripped = text.strip()
    if root is TypeRoot.BOOLEAN:
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"{text!r} is not a boolean")
    if root in INTEGERS:
        return int(stripped)
    if root in FLOATS:
        return float(stripped)
    if root is TypeRoot.DECIMAL:
        number = decimal.Decimal(stripped)
        if not number.is_finite():
            raise ValueError(f"{text!r} is not a finite decimal")
        quantum = decimal.Decimal(1).scaleb(-(data_type.scale or 0))
        quantized = number.quantize(quantum)
        if quantized != number:
            raise ValueError(f"{text!r} has more digits after the point than {data_type}")
        return quantized
    if root is TypeRoot.DATE:
        return dt.date.fromisoformat(stripped)
    if root is TypeRoot.TIME:
        return dt.time.fromisoformat(stripped)
    if root is TypeRoot.TIMESTAMP:
        value = dt.datetime.fromisoformat(stripped)
        return value.replace(tzinfo=None) if value.tzinfo is None else value
    if root in (TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        value = dt.datetime.fromisoformat(stripped)
        return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    if root in BINARIES:
        raise ValueError("binary defaults are not kept")
    raise ValueError(f"no default of type {data_type}")


def literal_default(text: str | None, data_type: DataType) -> str | None:
    """A default as a source's DDL or table definition spells it, kept when it is a value of
    ``data_type`` (in :func:`default_text`'s form); None for an expression (``CURRENT_TIMESTAMP``,
    ``nextval(...)``), NULL, or a value that does not fit."""
    if text is None:
        return None
    try:
        return default_text(parse_default(text, data_type))
    except (ValueError, ArithmeticError, TypeError):
        return None


def column_defaults(columns: tuple[Column, ...] | list[Column]) -> dict[str, Any]:
    """Each column's default value, for the columns that have one ferry can write."""
    values = {}
    for column in columns:
        if column.default is not None:
            value = default_value(column)
            if value is not None:
                values[column.name] = value
    return values
