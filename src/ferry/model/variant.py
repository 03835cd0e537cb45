"""VARIANT values: semi-structured data, JSON's null, booleans, numbers, strings, arrays and objects.

A :class:`Variant` is a ``str`` holding its JSON text, compact and with object keys sorted (the
order Flink's binary variant keeps them in), so that a sink storing VARIANT as a JSON string column
writes it as it is; its parsed value is :attr:`Variant.value`. A variant holding JSON's ``null`` is
a value (the text ``null``), distinct from SQL's NULL (Python's None). Transforms make them
(:mod:`ferry.transform.variant_functions`: ``PARSE_JSON``), sinks write them.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


class Variant(str):
    """A VARIANT value: its JSON text (a ``str``), and :attr:`value`, the parsed value (None for
    JSON's null; dicts, lists, str, bool, int, :class:`~decimal.Decimal`, float)."""

    value: Any

    def __new__(cls, value: Any) -> Variant:
        self = super().__new__(cls, _render(value))
        self.value = value
        return self

    def __repr__(self) -> str:
        return f"Variant({str.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Variant, (self.value,))

    def is_array(self) -> bool:
        return isinstance(self.value, list)

    def is_object(self) -> bool:
        return isinstance(self.value, dict)


def _render(value: Any) -> str:
    """The compact JSON text of a variant's value, object keys sorted. Written by hand: ``json``
    writes a Decimal only through float, which would lose its digits."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_render(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _render(v) for k, v in items) + "}"
    raise TypeError(f"a variant cannot hold {type(value).__name__}")
