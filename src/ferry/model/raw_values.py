"""Column values kept as the source wrote them until a sink writes them.

Debezium writes a timestamp as an epoch count, a date as an epoch day and a decimal as the bytes
of its unscaled integer. Turned into Python objects (``datetime``, ``date``, ``Decimal``) while a
batch is decoded, each value is then turned back into a number by a sink that writes Arrow
(Iceberg, Paimon): two conversions per value, where Arrow needs none (an epoch count *is* an Arrow
timestamp). So a decoder may leave such columns raw, and say so with a :class:`RawValues` event
ahead of the batch's rows: which rows, which columns, in what form (:class:`ColumnForm`).

The runner keeps these events per source table until the rows are written, and converts them in
place (:meth:`RawValues.materialize`) before anything reads those values: a transform, a row
adapter, a rename of the row's keys, adapting buffered rows to a new schema, a dead letter, or a
sink that does not take raw values. A sink that does (:class:`~ferry.sinks.base.RawValuesWriting`)
gets the forms beside the rows and converts each column at once, in Arrow
(:func:`ferry.sinks.base.arrow.rows_to_arrow`). Key columns are never left raw: rows are matched by them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

from ferry.model.schema import TableId

Row = dict[str, Any]


class ColumnForm(Protocol):
    """What a raw column's values are, and how they become the values the decoder would give.

    ``input`` is ``"int"`` (an epoch count: ``unit`` ``"us"``, ``"ms"`` or ``"D"`` (days), divided
    by ``divisor`` first) or ``"base64"`` (the bytes of a decimal's unscaled integer, of scale
    ``scale``, or a JSON number). ``convert`` turns a list of raw values (no None) into the decoder's
    values, and never fails on them.
    """

    @property
    def input(self) -> str: ...

    @property
    def unit(self) -> str: ...

    @property
    def divisor(self) -> int: ...

    @property
    def scale(self) -> int: ...

    @property
    def convert(self) -> Callable[[list[Any]], list[Any]]: ...


#: A raw value's Python types, per form input: a value of another type is converted already.
RAW_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "base64": (bytes, int, float)}


class RawValues(NamedTuple):
    """An event ahead of a batch's rows: ``columns`` of ``rows`` (rows of table ``table_id``, as
    the batch's row changes hold them) are raw, each in its form."""

    table_id: TableId
    columns: tuple[tuple[str, ColumnForm], ...]
    rows: list[Row]
    #: A batch's event, not a record's
    position: None = None

    def materialize(self) -> None:
        """Convert the raw columns of the rows in place (once: the rows are forgotten then)."""
        convert_columns(self.rows, self.columns)
        self.rows.clear()


def convert_columns(rows: Sequence[Row], columns: Sequence[tuple[str, ColumnForm]]) -> None:
    """Convert, in place, ``columns`` of ``rows``, all raw (or None): each column's values of all
    the rows in one call."""
    if not rows:
        return
    for name, form in columns:
        values = [row[name] for row in rows]
        if None in values:
            present = [i for i, value in enumerate(values) if value is not None]
            for i, value in zip(present, form.convert([values[i] for i in present]), strict=True):
                rows[i][name] = value
        else:
            for row, value in zip(rows, form.convert(values), strict=True):
                row[name] = value


def materialize_column(rows: Sequence[Row | None], name: str, form: ColumnForm) -> None:
    """Convert, in place, the values of column ``name`` of ``rows`` that are still raw (by their
    type: a converted value is a ``datetime``, a ``date`` or a ``Decimal``)."""
    raw_types = RAW_TYPES[form.input]
    held = [row for row in rows if row is not None and type(row.get(name)) in raw_types]
    if held:
        for row, value in zip(held, form.convert([row[name] for row in held]), strict=True):
            row[name] = value


class BufferedRawValues:
    """A runner's raw values (:class:`RawValues` events) of the rows it buffered and has not
    written, per source table, while batches are processed (:meth:`batch`)."""

    def __init__(self) -> None:
        self.tables: dict[TableId, list[RawValues]] = {}
        self._open = 0

    @contextmanager
    def batch(self) -> Iterator[None]:
        """While a batch is processed: its raw values came ahead of its rows, some of which may
        not be buffered yet when a checkpoint writes the others (a barrier)."""
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1

    def add(self, event: RawValues) -> None:
        self.tables.setdefault(event.table_id, []).append(event)

    def materialize(self, table_id: TableId) -> None:
        """Convert a table's raw values in place: something other than a sink reads its rows."""
        materialize_all(self.tables.pop(table_id, None))

    def forget(self, table_id: TableId) -> None:
        self.tables.pop(table_id, None)

    def written(self, tables: Collection[TableId], *, within_batch: bool) -> dict[TableId, list[RawValues]]:
        """The raw values of the rows of ``tables`` a checkpoint writes now (the caller forgets
        them once they are written); within a batch (``within_batch``: the rest of one is left for
        later) none: they are converted, as the batch's rows not buffered yet are written later."""
        if within_batch or self._open:
            for table_id in tables:
                self.materialize(table_id)
            return {}
        return {t: self.tables[t] for t in tables if t in self.tables}


def merged_forms(events: Sequence[RawValues]) -> dict[str, ColumnForm] | None:
    """The form of each raw column over ``events`` (of one table), or None when a column has two
    forms (rows of two schema versions: a raw value's meaning then depends on its row)."""
    forms: dict[str, ColumnForm] = {}
    for event in events:
        if not event.rows:
            continue
        for name, form in event.columns:
            known = forms.setdefault(name, form)
            if not same_form(known, form):
                return None
    return forms


def same_form(a: ColumnForm, b: ColumnForm) -> bool:
    """Whether raw values of the two forms mean the same (their conversions agree)."""
    return a is b or (a.input, a.unit, a.divisor, a.scale) == (b.input, b.unit, b.divisor, b.scale)


def materialize_all(events: Sequence[RawValues] | None) -> None:
    for event in events or ():
        event.materialize()


RawForms = Mapping[str, ColumnForm]
