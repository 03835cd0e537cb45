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

from collections.abc import Iterable
from typing import Final

from ferry.pipeline.events import DataChange, Op, Row


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


def is_partial(change: DataChange) -> bool:
    """Whether a change's new row lacks the value of a column (only an update's can)."""
    after = change.after
    return change.op is Op.UPDATE and after is not None and UNAVAILABLE in after.values()


def partial_changes(changes: Iterable[DataChange]) -> list[int]:
    """The indexes of the partial rows among ``changes`` (see :func:`is_partial`)."""
    update, unavailable = Op.UPDATE, UNAVAILABLE
    return [
        i
        for i, (_t, op, _b, after, _p, _ts) in enumerate(changes)
        if op is update and after is not None and unavailable in after.values()
    ]


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
