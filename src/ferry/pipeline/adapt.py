"""Shaping rows to the sink table's schema when it differs from the source's.

After a schema change was skipped (LENIENT, IGNORE, a refused TRY_EVOLVE) or when several source
tables feed one sink table, rows no longer match the sink. A :class:`RowAdapter` is built once per
(source schema, sink schema) pair: a column the sink lacks is dropped from the row (and counted), a
column the source lacks is NULL, and a value whose type differs is cast only when nothing is lost;
otherwise :class:`CastError` says why and the row goes to the dead-letter destination.

A value must also fit the sink column: a string or binary value longer than the column's length
(a VARCHAR(20) column the sink kept when the source widened it to VARCHAR(100)), an integer out
of the column's range, a decimal with more digits than the column's precision or scale. Such a
row is refused here, before the write, naming the column, its type and the value's length or
digits; the rest of the batch is written.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ferry.exceptions import TerminalError
from ferry.model.defaults import column_defaults
from ferry.model.events import DataChange, Op, Row
from ferry.model.schema import Schema
from ferry.model.types import DataType, TypeRoot
from ferry.model.unavailable import UNAVAILABLE, keep_partial

Cast = Callable[[Any], Any]

_INT_RANGE = {
    TypeRoot.TINYINT: (-(2**7), 2**7 - 1),
    TypeRoot.SMALLINT: (-(2**15), 2**15 - 1),
    TypeRoot.INT: (-(2**31), 2**31 - 1),
    TypeRoot.BIGINT: (-(2**63), 2**63 - 1),
}
_TEXT = (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING)
_BINARY = (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES)
#: The longest value shown in a reason: a long value is cut (its length is named).
SHOWN_CHARS = 80


class CastError(TerminalError):
    """A value cannot be cast to the sink column's type without loss."""

    def __init__(self, column: str, value: Any, target: DataType, why: str = "") -> None:
        shown = repr(value)
        if len(shown) > SHOWN_CHARS:
            shown = shown[:SHOWN_CHARS] + "..."
        super().__init__(
            f"column {column!r}: value {shown} cannot be cast to {target} without loss"
            + (f" ({why})" if why else "")
        )
        self.column = column


def cast_for(source: DataType, target: DataType) -> Cast | None:
    """A function casting values of ``source`` to ``target`` losslessly (raising ValueError), or
    ``None`` when values pass unchanged."""
    s, t = source.root, target.root
    if source.same_ignoring_nullability(target):
        return None
    if t in _TEXT or t in _BINARY:
        convert = _to_text if t in _TEXT else _to_bytes
        within = _shorter_than(source, target)
        if within is None:
            return None if s in _TEXT and t in _TEXT else convert
        return lambda v: within(convert(v))
    if t in _INT_RANGE:
        low, high = _INT_RANGE[t]
        if s in _INT_RANGE and _INT_RANGE[s][0] >= low and _INT_RANGE[s][1] <= high:
            return None
        return lambda v: _to_int(v, low, high)
    if t in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return _to_float
    if t is TypeRoot.DECIMAL:
        quantum = decimal.Decimal(1).scaleb(-(target.scale or 0))
        digits = target.precision or 38
        return lambda v: _to_decimal(v, quantum, digits)
    if t is TypeRoot.BOOLEAN:
        return _to_bool
    if t is TypeRoot.DATE:
        return _to_date
    if t in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.TIMESTAMP_TZ):
        return _to_timestamp
    return None


def _shorter_than(source: DataType, target: DataType) -> Callable[[Any], Any] | None:
    """A check that a string (in characters) or binary value (in bytes) is no longer than the
    target column's length, or None when every value of ``source`` is (or the target has none)."""
    if target.root not in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY):
        return None
    limit = target.length
    if limit is None:
        return None
    bounded = source.root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY)
    if bounded and source.length is not None and source.length <= limit:
        return None
    unit = "bytes" if target.root in _BINARY else "characters"

    def within(v: Any) -> Any:
        if len(v) > limit:
            raise ValueError(f"{len(v)} {unit} long, longer than {limit}")
        return v

    return within


def _to_int(v: Any, low: int, high: int) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        result = v
    elif isinstance(v, float | decimal.Decimal):
        if v != int(v):
            raise ValueError("has a fraction")
        result = int(v)
    elif isinstance(v, str):
        result = int(v.strip())
        if str(result) != v.strip().lstrip("+"):
            raise ValueError("is not a plain integer")
    else:
        raise ValueError(f"is a {type(v).__name__}")
    if not low <= result <= high:
        raise ValueError(f"out of range [{low}, {high}]")
    return result


def _to_float(v: Any) -> float:
    if isinstance(v, str | int | float | decimal.Decimal) and not isinstance(v, bool):
        result = float(v)
        if isinstance(v, int) and int(result) != v:
            raise ValueError("loses precision")
        return result
    raise ValueError(f"is a {type(v).__name__}")


def _to_decimal(v: Any, quantum: decimal.Decimal, digits: int) -> decimal.Decimal:
    if isinstance(v, bool) or not isinstance(v, str | int | float | decimal.Decimal):
        raise ValueError(f"is a {type(v).__name__}")
    d = decimal.Decimal(str(v)) if isinstance(v, float) else decimal.Decimal(v)
    q = d.quantize(quantum)
    if q != d:
        raise ValueError("loses digits after the decimal point")
    if len(q.as_tuple().digits) > digits:
        raise ValueError(f"has more than {digits} digits")
    return q


def _to_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, dict | list):
        return orjson.dumps(v).decode()
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    return str(v)


def _to_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ValueError("is not a boolean")


def _to_date(v: Any) -> dt.date:
    if isinstance(v, dt.datetime):
        if v.time() != dt.time():
            raise ValueError("has a time of day")
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        return dt.date.fromisoformat(v)
    raise ValueError(f"is a {type(v).__name__}")


def _to_timestamp(v: Any) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime.combine(v, dt.time())
    if isinstance(v, str):
        return dt.datetime.fromisoformat(v)
    raise ValueError(f"is a {type(v).__name__}")


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    raise ValueError(f"is a {type(v).__name__}")


class RowAdapter:
    """Shapes rows of one source schema to one sink schema. Build once, use for many rows.

    ``renames`` (old name → new name, as DDL named them) lets a sink column that another worker
    already renamed take the value of the source column under its old name. A delete needs only
    the key: when the rest of its before-image cannot be cast, the key alone goes.

    A row that lacks a column the source gave a default (it was read before the column was added,
    or from a partition behind that change) takes the default: the source filled its existing
    rows with it. A row that has the column keeps its value, an explicit NULL included.
    """

    def __init__(
        self,
        source: Schema,
        sink_schema: Schema,
        sink_type: Callable[[DataType], DataType],
        renames: Mapping[str, str] | None = None,
    ) -> None:
        #: sink column → the source column its value comes from (the same name unless renamed)
        self.sources: dict[str, str] = {c.name: c.name for c in sink_schema.columns if c.name in source}
        for old, new in (renames or {}).items():
            if old in source and new in sink_schema and new not in source and old not in sink_schema:
                self.sources[new] = old
        taken = set(self.sources.values())
        self.dropped = tuple(c.name for c in source.columns if c.name not in taken)
        self.missing = tuple(c.name for c in sink_schema.columns if c.name not in self.sources)
        self.casts: dict[str, Cast] = {}
        self.targets = {c.name: c.type for c in sink_schema.columns}
        for col in sink_schema.columns:
            src = source.find(self.sources.get(col.name, col.name))
            if src is not None:
                cast = cast_for(sink_type(src.type), col.type)
                if cast is not None:
                    self.casts[col.name] = cast
        self.names = sink_schema.names
        self.keys = sink_schema.primary_keys
        self.renamed = any(s != n for n, s in self.sources.items())
        #: sink column → (its source column, the source's default), for the rows that lack it
        defaults = column_defaults(source.columns)
        self.defaults: dict[str, tuple[str, Any]] = {
            name: (src, defaults[src]) for name, src in self.sources.items() if src in defaults
        }
        self.width = len(source)
        #: rows pass unchanged, but for those that lack a column with a default
        self.only_defaults = (
            not self.dropped
            and not self.missing
            and not self.casts
            and not self.renamed
            and source.names == self.names
        )
        self.identity = self.only_defaults and not self.defaults

    def adapt_row(self, row: Row | None, only: tuple[str, ...] | None = None) -> Row | None:
        if row is None:
            return None
        sources = self.sources
        out = {name: row.get(sources.get(name, name)) for name in self.names}
        if len(row) < self.width:
            for name, (src, value) in self.defaults.items():
                if src not in row:
                    out[name] = value
        for name, cast in self.casts.items():
            value = out[name]
            if value is not None and value is not UNAVAILABLE and (only is None or name in only):
                try:
                    out[name] = cast(value)
                except (ValueError, ArithmeticError) as e:
                    raise CastError(name, value, self.targets[name], str(e)) from e
        if only is not None:
            out = {name: (out[name] if name in only else None) for name in self.names}
        return keep_partial(row, out)

    def adapt(self, change: DataChange) -> DataChange:
        if self.only_defaults:
            before, after, width = change.before, change.after, self.width
            if (before is None or len(before) >= width) and (after is None or len(after) >= width):
                return change
        if change.op is Op.DELETE and self.keys:
            try:
                before = self.adapt_row(change.before)
            except CastError:
                before = self.adapt_row(change.before, self.keys)  # a delete needs only the key
            return change._replace(before=before, after=None)
        return change._replace(before=self.adapt_row(change.before), after=self.adapt_row(change.after))


def adapt_to_schema(
    changes: list[DataChange], old: Schema, new: Schema, refuse: Callable[[str, DataChange], None]
) -> list[DataChange]:
    """Rows buffered under ``old`` shaped for ``new``, a schema reached without a barrier (a
    column added, a type widened). Only a value whose type widened is cast; a column added is left
    out of the rows, as it is in the rows of a partition that has not shown the column yet: when
    they are written, it is the column's default, or NULL (:class:`RowAdapter`). A row that cannot
    be cast goes to ``refuse`` with the reason."""
    adapter = RowAdapter(old, new, _same_type)
    if not adapter.casts:
        return changes
    adapted = []
    for change in changes:
        try:
            adapted.append(adapter.adapt(change))
        except CastError as e:
            refuse(str(e), change)
    return adapted


def casts_values(old: Schema, new: Schema) -> bool:
    """Whether :func:`adapt_to_schema` casts values (and so copies the rows) from ``old`` to ``new``."""
    return bool(RowAdapter(old, new, _same_type).casts)


def _same_type(source_type: DataType) -> DataType:
    return source_type
