"""Rows shaped to their sink tables at a checkpoint: each table's transform, then its adapter.

A row an expression fails on, one that cannot be cast to the sink's types, or one without a value
for a key column of its sink table goes to the dead-letter destination (``bad_row``); the others
are grouped per sink table, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ferry.model.columns import missing_key
from ferry.model.events import ColumnChanges, DataChange, Op
from ferry.model.raw_values import RawForms, RawValues, materialize_all, merged_forms
from ferry.model.schema import Schema, TableId
from ferry.model.types import TypeRoot
from ferry.model.unavailable import keep_partial, partial_changes, unavailable_reason
from ferry.pipeline.adapt import CastError, RowAdapter
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.route import TableRouter
from ferry.pipeline.schema_operator import SchemaOperator
from ferry.sinks.base import ColumnsWriting, PartialRowsWriting, RawValuesWriting, Sink

if TYPE_CHECKING:
    from ferry.transform.blocks import TableTransforms

#: The types of the columns a source may leave without a value (see :mod:`ferry.model.unavailable`).
_PARTIAL_TYPES = frozenset(
    (
        TypeRoot.STRING,
        TypeRoot.VARCHAR,
        TypeRoot.CHAR,
        TypeRoot.BYTES,
        TypeRoot.VARBINARY,
        TypeRoot.BINARY,
        TypeRoot.ARRAY,
        TypeRoot.MAP,
        TypeRoot.VARIANT,
    )
)


class RowShaper:
    """Shapes buffered rows for the sink (see the module documentation)."""

    def __init__(
        self,
        *,
        schemas: SchemaOperator,
        tables: TableRouter,
        sink: Sink,
        transforms: TableTransforms | None,
        metrics: Metrics,
        bad_row: Callable[[str, DataChange], None],
    ) -> None:
        self.schemas = schemas
        self.tables = tables
        self.sink = sink
        self.transforms = transforms
        self.metrics = metrics
        self.bad_row = bad_row
        #: (source table, sink table) → its adapter
        self._adapters: dict[tuple[TableId, TableId], RowAdapter] = {}

    def forget(self, source_tables: Collection[TableId] | None = None) -> None:
        """The sink tables of these source tables (None: all) changed: adapters are built anew."""
        if source_tables is None:
            self._adapters.clear()
            return
        sources = set(source_tables)
        for key in [k for k in self._adapters if k[0] in sources]:
            del self._adapters[key]

    def write(
        self,
        buffers: Mapping[TableId, list[DataChange]],
        raw: Mapping[TableId, Sequence[RawValues]] | None = None,
    ) -> dict[str, int]:
        """Shape the buffered rows and write them, per sink table; returns the rows written per
        table. ``raw``: per source table, its rows whose columns are raw (see
        :mod:`ferry.model.raw_values`): converted first unless they reach a sink that takes them
        as they are, unchanged."""
        written: dict[str, int] = {}
        forms = self._raw_forms(buffers, raw or {})
        for sink_table, shaped in self.shape(buffers).items():
            sink_schema = self.schemas.sink_schema(sink_table)
            assert sink_schema is not None
            changes = self._complete(sink_table, sink_schema, shaped)
            if changes:
                table_forms = forms.get(sink_table)
                if table_forms:
                    assert isinstance(self.sink, RawValuesWriting)
                    self.sink.write_raw(sink_table, sink_schema, changes, table_forms)
                else:
                    self.sink.write(sink_table, sink_schema, changes)
                written[str(sink_table)] = len(changes)
        return written

    def write_columns(
        self, source_table: TableId, changes: list[DataChange | ColumnChanges]
    ) -> dict[str, int] | None:
        """Write a source table's changes, runs of column changes among its rows (see
        :mod:`ferry.model.columns`), as they are where its rows would reach the sink unchanged:
        its one sink table, of its columns, neither transformed nor adapted, no partial row (a run
        holds none: the decoder reads those as rows), a value for every key column; returns the
        rows written per sink table, or None where they must be written as rows."""
        sink = self.sink
        targets = self.tables.sink_tables(source_table)
        if not isinstance(sink, ColumnsWriting) or self.transforms is not None or len(targets) != 1:
            return None
        sink_table = targets[0]
        sink_schema = self.schemas.sink_schema(sink_table)
        if sink_schema is None or self.tables.sources_of(sink_table) != [source_table]:
            return None
        names, keys = sink_schema.names, sink_schema.primary_keys
        runs = [c for c in changes if type(c) is ColumnChanges]
        rows = [c for c in changes if type(c) is DataChange]
        if not keys or any(run.names != names for run in runs) or missing_key(runs, keys):
            return None
        if not self._adapter(source_table, sink_table, sink_schema).identity:
            return None
        if partial_changes(rows) or len(self._keyed(sink_table, keys, rows, refuse=False)) < len(rows):
            return None
        sink.write_columns(sink_table, sink_schema, changes)
        return {str(sink_table): len(rows) + sum(len(run.ops) for run in runs)}

    def _complete(
        self, sink_table: TableId, sink_schema: Schema, changes: list[DataChange]
    ) -> list[DataChange]:
        """The changes a sink table gets: its partial rows (see :mod:`ferry.model.unavailable`)
        completed by the sink, or sent to the dead-letter destination where it cannot write them
        exactly."""
        if not changes or not any(c.type.root in _PARTIAL_TYPES for c in sink_schema):
            return changes
        partial = partial_changes(changes)
        if not partial:
            return changes
        if isinstance(self.sink, PartialRowsWriting):
            rejected = dict(self.sink.complete_rows(sink_table, sink_schema, changes, partial))
        else:
            rejected = {i: unavailable_reason(changes[i]) for i in partial}
        if not rejected:
            return changes
        for index, reason in sorted(rejected.items()):
            self.bad_row(f"{sink_table}: {reason}", changes[index])
        return [c for i, c in enumerate(changes) if i not in rejected]

    def _raw_forms(
        self, buffers: Mapping[TableId, list[DataChange]], raw: Mapping[TableId, Sequence[RawValues]]
    ) -> dict[TableId, RawForms]:
        """Per sink table, the forms of its rows' raw columns, where they reach it as they are
        (its only source table's rows, neither transformed nor adapted, into a sink that takes
        them); the other raw rows are converted here."""
        forms: dict[TableId, RawForms] = {}
        for source_table, events in raw.items():
            merged = merged_forms(events) if isinstance(self.sink, RawValuesWriting) else None
            if (
                merged
                and buffers.get(source_table)
                and self._as_they_are(source_table, buffers[source_table])
            ):
                for sink_table in self.tables.sink_tables(source_table):
                    forms[sink_table] = merged
            else:
                materialize_all(events)
        return forms

    def _as_they_are(self, source_table: TableId, changes: list[DataChange]) -> bool:
        """Whether a source table's rows reach each of its sink tables unchanged, and alone (rows
        that lack a column with a default are not: they are written with it)."""
        if self.transforms is not None:
            return False
        for sink_table in self.tables.sink_tables(source_table):
            sink_schema = self.schemas.sink_schema(sink_table)
            if sink_schema is None or self.tables.sources_of(sink_table) != [source_table]:
                return False
            adapter = self._adapter(source_table, sink_table, sink_schema)
            if not adapter.identity and not (
                adapter.only_defaults and _have_every_column(changes, adapter.width)
            ):
                return False
        return True

    def shape(self, buffers: Mapping[TableId, list[DataChange]]) -> dict[TableId, list[DataChange]]:
        """The buffered rows of each source table, shaped, per sink table."""
        per_sink: dict[TableId, list[DataChange]] = {}
        for source_table, changes in buffers.items():
            if not changes:
                continue
            # a source table routed to several sink tables (route-mode ALL_MATCH) feeds each of them
            targets = [(t, self.schemas.sink_schema(t)) for t in self.tables.sink_tables(source_table)]
            missing = [str(t) for t, schema in targets if schema is None]
            if missing:
                for change in changes:
                    self.bad_row(f"sink table {', '.join(missing)} does not exist", change)
                if len(missing) == len(targets):
                    continue
            rows = self._transform(source_table, changes)
            for sink_table, sink_schema in targets:
                if sink_schema is not None:
                    adapted = self._adapt(source_table, sink_table, sink_schema, rows)
                    if sink_schema.primary_keys:
                        adapted = self._keyed(sink_table, sink_schema.primary_keys, adapted)
                    per_sink.setdefault(sink_table, []).extend(adapted)
        return per_sink

    def _transform(self, source_table: TableId, changes: list[DataChange]) -> list[DataChange]:
        """A table's rows filtered and projected by its transform (none: the rows as they are)."""
        schema = self.schemas.tracker.schema(source_table)
        if self.transforms is None or schema is None:
            return changes
        partial = partial_changes(changes)
        if partial:  # an expression cannot be computed from a value that was not sent
            for index in partial:
                reason = f"{unavailable_reason(changes[index])}; a transform reads the row"
                self.bad_row(reason, changes[index])
            kept = set(partial)
            changes = [c for i, c in enumerate(changes) if i not in kept]
        return self.transforms.rows(source_table, schema, changes, self._transform_failed)

    def _transform_failed(self, change: DataChange, reason: str) -> None:
        self.bad_row(reason, change)

    def _adapter(self, source_table: TableId, sink_table: TableId, sink_schema: Schema) -> RowAdapter:
        adapter = self._adapters.get((source_table, sink_table))
        if adapter is None:
            source_schema = self.schemas.source_schema(source_table) or sink_schema
            adapter = self._adapters[(source_table, sink_table)] = RowAdapter(
                source_schema, sink_schema, self.sink.sink_type, self.schemas.tracker.renames(source_table)
            )
        return adapter

    def _keyed(
        self, sink_table: TableId, keys: tuple[str, ...], changes: list[DataChange], *, refuse: bool = True
    ) -> list[DataChange]:
        """The rows with a value for each of the sink table's key columns; a row without one (a
        record that names no key, or a null one) cannot be written by key: it is a bad row (when
        ``refuse``; else only left out)."""
        keyed = []
        delete, update = Op.DELETE, Op.UPDATE
        for change in changes:
            op = change.op
            missing = _missing_key(change.before if op is delete else change.after, keys)
            if missing is None and op is update:
                missing = _missing_key(change.before, keys)  # an update's old key is deleted by it
            if missing is None:
                keyed.append(change)
            elif refuse:
                reason = f"the row has no value for primary key column {missing!r} of sink table {sink_table}"
                self.bad_row(reason, change)
        return keyed if len(keyed) < len(changes) else changes

    def _adapt(
        self, source_table: TableId, sink_table: TableId, sink_schema: Schema, changes: list[DataChange]
    ) -> list[DataChange]:
        adapter = self._adapter(source_table, sink_table, sink_schema)
        if adapter.identity:
            return changes
        if adapter.dropped:
            key = str(source_table)
            self.metrics.columns_dropped[key] = self.metrics.columns_dropped.get(key, 0) + len(changes)
        adapted = []
        for change in changes:
            try:
                adapted.append(adapter.adapt(change))
            except CastError as e:
                self.bad_row(f"sink table {sink_table}: {e}", change)
        return adapted


def _missing_key(row: dict[str, object] | None, keys: tuple[str, ...]) -> str | None:
    """The first key column ``row`` has no value for (None when it has them all, or is no row)."""
    if row is not None:
        for key in keys:
            if row.get(key) is None:
                return key
    return None


def _have_every_column(changes: list[DataChange], width: int) -> bool:
    """Whether every row of ``changes`` has all ``width`` columns of its schema."""
    return all(
        (c.before is None or len(c.before) >= width) and (c.after is None or len(c.after) >= width)
        for c in changes
    )


def in_table_names(change: DataChange, names: Mapping[str, str]) -> DataChange:
    """A row read with a schema whose renames the table does not show yet, in the table's names."""
    before, after = change.before, change.after
    return change._replace(
        before=None if before is None else {names.get(k, k): v for k, v in before.items()},
        after=None if after is None else keep_partial(after, {names.get(k, k): v for k, v in after.items()}),
    )


def without_values(change: DataChange, columns: Mapping[str, tuple[str, Any]]) -> DataChange:
    """A row written before ``columns`` were dropped and added again (each name the row may carry
    one under → the table's name of the new column, the value the row has in it: its default, or
    NULL): those values instead of the old columns'. A row written before the old column was added
    (it lacks every name of it) takes the new one's default all the same."""
    before, after = change.before, change.after
    return change._replace(
        before=None if before is None else _new_values(before, columns),
        after=None if after is None else keep_partial(after, _new_values(after, columns)),
    )


def _new_values(row: Mapping[str, Any], columns: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    # under the new column's name: a row older than a rename carries the old one, which the
    # table may no longer know (the column was added again under the name renamed to)
    out = {columns[k][0] if k in columns else k: columns[k][1] if k in columns else v for k, v in row.items()}
    carried = {columns[k][0] for k in row if k in columns}
    for name, value in dict(columns.values()).items():
        if value is not None and name not in carried and name not in out:
            out[name] = value
    return out


def change_bytes(change: DataChange) -> bytes:
    """ferry's rendering of a row change (for a dead letter whose record cannot be read again)."""
    return orjson.dumps(
        {
            "table": str(change.table_id),
            "op": change.op.value,
            "before": change.before,
            "after": change.after,
        },
        default=str,
    )
