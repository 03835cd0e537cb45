"""Values the source did not send: a partial row.

PostgreSQL's logical decoding leaves out a TOASTed value (text, bytea, jsonb, an array stored out
of line) that an UPDATE did not change, unless the table's ``REPLICA IDENTITY`` is ``FULL``;
Debezium then writes its ``unavailable.value.placeholder`` in the column instead of the value. A
decoder that knows the placeholder puts :data:`UNAVAILABLE` in such a column of an update's new
row: the column keeps the value the sink holds. Inserts never have one (a new row is sent whole);
a delete matches its row by key.

What each sink does with a partial row (a row with :data:`UNAVAILABLE` values) is its own: a SQL
sink leaves the columns out of its upsert, a table format takes the values from the row's last
version (buffered, or read from the table), the Kafka sink writes the placeholder again, a sink
that can do none of these sends the row to the dead-letter destination (``RowShaper``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ferry.model.events import DataChange, Row
from ferry.model.types import DataType, TypeRoot

#: Debezium's default ``unavailable.value.placeholder``.
DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"


class Unavailable:
    """The one value :data:`UNAVAILABLE`: no value was sent for this column."""

    __slots__ = ()
    _instance: Unavailable | None = None

    def __new__(cls) -> Unavailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __reduce__(self) -> str:
        return "UNAVAILABLE"  # pickled as the module's one instance


UNAVAILABLE: Final = Unavailable()


def unavailable_columns(row: Row | None) -> list[str]:
    """The columns of ``row`` whose value was not sent."""
    if row is None:
        return []
    return [name for name, value in row.items() if value is UNAVAILABLE]


class PartialRow(dict[str, Any]):
    """A row with :data:`UNAVAILABLE` values: its class says so, so that finding the partial rows
    among many costs a type check each (a decoder makes one; a copy of it, by a row adapter or a
    rename in flight, is one too). Its values filled, it stays of this class."""

    __slots__ = ()


def is_partial(row: Row | None) -> bool:
    """Whether ``row`` lacks the value of a column."""
    return type(row) is PartialRow and UNAVAILABLE in row.values()


def partial_changes(changes: Iterable[DataChange]) -> list[int]:
    """The indexes of the changes among ``changes`` whose new row is partial."""
    partial, unavailable = PartialRow, UNAVAILABLE
    return [
        i
        for i, change in enumerate(changes)
        if type(after := change[3]) is partial and unavailable in after.values()
    ]


def keep_partial(row: Mapping[str, Any] | None, copy: Row) -> Row:
    """``copy`` (a copy of ``row``, shaped) of the class of ``row``."""
    return PartialRow(copy) if type(row) is PartialRow else copy


def fill(row: Row, known: Row) -> bool:
    """Fill, in place, the unavailable values of ``row`` from ``known`` (the row's last version);
    whether ``row`` is whole then."""
    whole = True
    for name, value in row.items():
        if value is UNAVAILABLE:
            held = known.get(name, UNAVAILABLE)
            if held is UNAVAILABLE:
                whole = False
            else:
                row[name] = held
    return whole


def unavailable_reason(change: DataChange) -> str:
    """Why a partial row cannot be written (the dead letter's reason)."""
    columns = ", ".join(unavailable_columns(change.after))
    return (
        f"the value of {columns} is unavailable (an unchanged TOASTed value: Debezium's "
        "unavailable.value.placeholder) and the sink cannot keep the value it holds; "
        "REPLICA IDENTITY FULL on the source table sends every value"
    )


def placeholder_bytes(setting: str) -> bytes:
    """The bytes of a placeholder setting, as Debezium reads it (``hex:`` then hexadecimal;
    raises ValueError when that is not hexadecimal)."""
    return bytes.fromhex(setting[4:]) if setting.startswith("hex:") else setting.encode()


_TEXT = (TypeRoot.STRING, TypeRoot.VARCHAR, TypeRoot.CHAR)
_BYTES = (TypeRoot.BYTES, TypeRoot.VARBINARY, TypeRoot.BINARY)
_NUMBERS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT)
_EPOCH = dt.date(1970, 1, 1)


def placeholder_value(data_type: DataType, setting: str = DEFAULT_PLACEHOLDER) -> Any:
    """The value Debezium's PostgreSQL connector writes for an unchanged TOASTed value of a
    column of ``data_type`` (as ferry's decoders read it), or :data:`UNAVAILABLE` for a type it
    never writes one in: the text for text (``jsonb``, ``xml`` ... too), the bytes for ``bytea``,
    a one-element list of the text for ``text[]``, of the bytes for ``bytea[]``, the bytes as
    numbers (Java's signed bytes) for ``int[]`` and ``bigint[]``, as days for ``date[]``, a map
    of the text to itself for ``hstore``."""
    raw = placeholder_bytes(setting)
    text = raw.decode("utf-8", errors="replace")
    root = data_type.root
    if root in _TEXT:
        return text
    if root in _BYTES:
        return raw
    element = data_type.element
    if root is TypeRoot.ARRAY and element is not None:
        numbers = [b - 256 if b > 127 else b for b in raw]
        if element.root in _TEXT:
            return [text]
        if element.root in _BYTES:
            return [raw]
        if element.root in _NUMBERS:
            return numbers
        if element.root is TypeRoot.DATE:
            return [_EPOCH + dt.timedelta(days=n) for n in numbers]
    if root is TypeRoot.MAP and element is not None and element.root in _TEXT:
        return {text: text}
    return UNAVAILABLE


def placeholder_uuid(setting: str = DEFAULT_PLACEHOLDER) -> str:
    """The one element Debezium writes in a ``uuid[]`` column: the name-based UUID of the
    placeholder's bytes (Java's ``UUID.nameUUIDFromBytes``)."""
    digest = hashlib.md5(placeholder_bytes(setting), usedforsecurity=False).digest()
    return str(uuid.UUID(bytes=digest, version=3))
