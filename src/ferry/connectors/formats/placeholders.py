"""Debezium's ``unavailable.value.placeholder``: the value its PostgreSQL connector writes in a
column whose TOASTed value an UPDATE left unchanged (and logical decoding therefore did not send).

The setting is text, or ``hex:`` and the hexadecimal of its bytes. Debezium writes it in the form
of the column's type (``UnchangedToastedPlaceholder``, ``PostgresValueConverter``): text, ``varchar``,
``jsonb``, ``xml`` ... the text; ``bytea`` its bytes (base64 in JSON); ``text[]`` (and ``varchar[]``,
``jsonb[]``) a one-element list of the text; ``bytea[]`` a one-element list of the bytes;
``int[]``, ``bigint[]`` and ``date[]`` the list of its bytes as numbers; ``uuid[]`` a one-element
list of the name-based UUID of its bytes; ``hstore`` a map of the text to itself (as JSON text by
default). :class:`Placeholders` gives, per column of a row schema, the value a decoder reads for
it, so that a decoded update's column equal to it is marked
:data:`~ferry.model.unavailable.UNAVAILABLE`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from ferry.connectors.exceptions import DecodeError
from ferry.connectors.formats.connect_types import CONVERSION_ERRORS, ConnectField
from ferry.model.events import Row
from ferry.model.schema import Column
from ferry.model.types import DataType, TypeRoot
from ferry.model.unavailable import (
    DEFAULT_PLACEHOLDER,
    UNAVAILABLE,
    PartialRow,
    placeholder_bytes,
    placeholder_uuid,
    placeholder_value,
)

_TEXT = (TypeRoot.STRING, TypeRoot.VARCHAR, TypeRoot.CHAR)
_BYTES = (TypeRoot.BYTES, TypeRoot.VARBINARY, TypeRoot.BINARY)
_NUMBERS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT, TypeRoot.DATE)

#: The Connect name of JSON text (``jsonb``, and ``hstore`` with ``hstore.handling.mode=json``).
_JSON = "io.debezium.data.Json"

#: Per column: the value its placeholder is read as (a column may have two).
Markers = tuple[tuple[str, Any], ...]


class Placeholders:
    """The JSON forms of one placeholder setting, and the markers of a row schema's columns."""

    def __init__(self, setting: str = DEFAULT_PLACEHOLDER) -> None:
        try:
            raw = placeholder_bytes(setting)
        except ValueError:
            raise DecodeError(
                f"unavailable value placeholder {setting!r} is not hexadecimal after 'hex:'"
            ) from None
        self.setting = setting
        self.text = raw.decode("utf-8", errors="replace")
        self.base64 = base64.b64encode(raw).decode()
        self.numbers = [b - 256 if b > 127 else b for b in raw]  # Java's bytes are signed
        self.uuid = placeholder_uuid(setting)
        self.hstore = json.dumps({self.text: self.text}, separators=(",", ":"))

    def json_forms(self, data_type: DataType, label: str = "") -> list[Any]:
        """The JSON values Debezium writes for a column of ``data_type`` (none: it never writes the
        placeholder there); ``label`` is the Connect schema's name (``io.debezium.data.Json``:
        also an ``hstore`` column's, as JSON text)."""
        root = data_type.root
        if root in _TEXT:
            return [self.text, self.hstore] if label == _JSON else [self.text]
        if root in _BYTES:
            return [self.base64]
        if root is TypeRoot.ARRAY:
            element_root = None if data_type.element is None else data_type.element.root
            if element_root in _TEXT:
                return [[self.text], [self.uuid]]
            if element_root in _BYTES:
                return [[self.base64]]
            if element_root in _NUMBERS:
                return [self.numbers]
            return []
        if root is TypeRoot.MAP:
            return [{self.text: self.text}]
        return []

    def markers(self, fields: dict[str, ConnectField]) -> Markers:
        """Per column of a Connect row schema, the value a decoder reads for the placeholder."""
        markers: list[tuple[str, Any]] = []
        for name, field in fields.items():
            for form in self.json_forms(field.data_type, field.label):
                try:
                    markers.append((name, field.read(form)))
                except (*CONVERSION_ERRORS, DecodeError):
                    continue
        return tuple(markers)

    def value_markers(self, columns: Iterable[Column]) -> Markers:
        """Per column, the placeholder as a decoder whose values need no reading gives it (Avro:
        text, bytes, lists and maps as they are)."""
        markers: list[tuple[str, Any]] = []
        for column in columns:
            value = placeholder_value(column.type, self.setting)
            if value is not UNAVAILABLE:
                markers.append((column.name, value))
            if type(value) is str:
                markers.append((column.name, self.hstore))
            elif value == [self.text]:
                markers.append((column.name, [self.uuid]))
        return tuple(markers)

    def inferred_markers(self, names: Iterable[str]) -> Markers:
        """Markers of columns whose types are inferred from JSON values: the text (or the base64
        of the bytes) in any column."""
        return tuple((name, form) for name in names for form in (self.text, self.base64))

    def mark_inferred(self, row: Row) -> Row:
        """The row, a :class:`~ferry.model.unavailable.PartialRow` if it holds the placeholder
        (where its types are inferred, no schema says which columns hold text, bytes or lists)."""
        text, encoded, listed = self.text, self.base64, [self.text]
        found = False
        for name, value in row.items():
            if value in (text, encoded, listed):
                row[name] = UNAVAILABLE
                found = True
        return PartialRow(row) if found else row


def mark(row: Row, markers: Markers) -> Row:
    """The row with the columns holding their placeholder :data:`UNAVAILABLE`: a
    :class:`~ferry.model.unavailable.PartialRow` (a copy) if it has any, else the row itself."""
    found = False
    for name, marker in markers:
        if row.get(name) == marker:
            row[name] = UNAVAILABLE
            found = True
    return PartialRow(row) if found else row
