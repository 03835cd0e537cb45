"""Row changes held as columns: a run of a table's changes read from one partition with one row
shape (:class:`~ferry.model.events.ColumnChanges`), from the decoder to a sink that writes them
as columns (:class:`~ferry.sinks.base.ColumnsWriting`), without a row dict and an event per change.

A decoder gives such a run where each of its records is one that its typed decoder reads to
values that need no conversion (:class:`~ferry.connectors.formats.debezium_typed.TypedPayloads`
``plain``), of one table and schema version, keyed as its rows are, and no update holding the
unavailable-value placeholder. Anything else, and every run where the runner does more than append
the rows (the partition's rows the sink holds skipped, a rename or a column dropped and added again
in flight, a schema event in the batch, rows of the table buffered the row way), is turned into
the :class:`~ferry.model.events.DataChange` events the decoder would have given
(:func:`changes_of`): the same path as before, exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

import msgspec

from ferry.model.events import ColumnChanges, DataChange, Event, SourcePosition

_asdict = msgspec.structs.asdict
_new = tuple.__new__


def changes_of(run: ColumnChanges) -> list[DataChange]:
    """The run's changes as the decoder's events (new row dicts: a run may be read this way once)."""
    table_id, position = run.table_id, run.position
    topic, partition = position.topic, position.partition
    return [
        _new(
            DataChange,
            (
                table_id,
                op,
                None if before is None else _asdict(before),
                None if after is None else _asdict(after),
                _new(SourcePosition, (topic, partition, offset)),
                ts,
            ),
        )
        for op, before, after, offset, ts in zip(
            run.ops, run.befores, run.afters, run.offsets, run.ts_ms, strict=True
        )
    ]


def all_changes(changes: Iterable[DataChange | ColumnChanges]) -> list[DataChange]:
    """Row changes and runs of column changes, all as row changes, in their order."""
    out: list[DataChange] = []
    for item in changes:
        if type(item) is ColumnChanges:
            out.extend(changes_of(item))
        else:
            out.append(item)  # type: ignore[arg-type]
    return out


def as_rows(events: Sequence[Event]) -> list[Event]:
    """``events`` with every run of column changes turned into its row changes."""
    out: list[Event] = []
    for event in events:
        if type(event) is ColumnChanges:
            out.extend(changes_of(event))
        else:
            out.append(event)
    return out


def missing_key(runs: Iterable[ColumnChanges], keys: tuple[str, ...]) -> bool:
    """Whether a row of ``runs`` lacks a value for one of ``keys``: True where a sink could not
    match a change by them (a new row's, a delete's or an update's old row's key, as
    :meth:`~ferry.pipeline.shaping.RowShaper.shape` checks rows), and for any other row of the
    runs too (such runs are written as rows, which the shaper checks one by one)."""
    for key in keys:
        get = attrgetter(key)
        for run in runs:
            if None in map(get, filter(None, run.afters)) or None in map(get, filter(None, run.befores)):
                return True
    return False
