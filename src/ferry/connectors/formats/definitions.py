"""The table schemas that Debezium's schema-change topic described, for the records that carry none.

Debezium's payload-only JSON (``schemas.enable=false``) says nothing of a column's type: an integer
is a JSON number whatever its width, a ``DECIMAL`` is base64 text, a ``DATE`` a day number. The
schema-change topic's ``tableChanges`` does say it, for every column: the runner reads that topic
and :meth:`TableDefinitions.add` s each table schema it describes (see
:mod:`~ferry.connectors.formats.debezium_schema_change`), and the ``debezium-json`` decoder asks
:meth:`TableDefinitions.match` for the schema of a record's table with the record's columns.

That topic is not ordered with the data topics, so the definition of a table may be read ahead of
its rows or behind them. The record's column names pick the version: the newest definition whose
columns are exactly the record's. When none has them, :meth:`~TableDefinitions.match` asks
``refresh`` (the runner reads the schema-change topic to its end) once per unknown shape before it
gives up.
"""

from __future__ import annotations

from collections.abc import Callable

from ferry.model.schema import Schema, TableId

__all__ = ["TableDefinitions"]


class TableDefinitions:
    """Every schema the schema-change topic described, per table, oldest first."""

    def __init__(self, refresh: Callable[[], None] | None = None) -> None:
        #: Reads the schema-change topic to its end (set by the runner that owns the decoder).
        self.refresh = refresh
        self._schemas: dict[TableId, list[Schema]] = {}
        self.refreshed: set[tuple[TableId, frozenset[str]]] = set()
        self.version = 0
        """Grows with every schema added: what a caller cached from :meth:`match` is stale when
        it changed."""

    def add(self, table_id: TableId, schema: Schema) -> None:
        """Record a schema the schema-change topic described for ``table_id`` (the newest so far).

        A schema equal to one already known keeps its place: reading the topic again from its
        start does not make old versions new.
        """
        known = self._schemas.setdefault(table_id, [])
        if schema not in known:
            known.append(schema)
            self.version += 1

    def match(self, table_id: TableId, names: frozenset[str]) -> Schema | None:
        """The newest schema of ``table_id`` whose column names are ``names``, or ``None``.

        When there is none, ``refresh`` is called (at most once for each table and set of names)
        and the definitions are searched again.
        """
        found = self._newest(table_id, names)
        if found is None and self.refresh is not None:
            shape = (table_id, names)
            if shape not in self.refreshed:
                self.refreshed.add(shape)
                self.refresh()
                found = self._newest(table_id, names)
        return found

    def latest(self, table_id: TableId) -> Schema | None:
        """The newest schema of ``table_id`` (for a delete's key, whose names match no schema)."""
        known = self._schemas.get(table_id)
        return known[-1] if known else None

    def tables(self) -> list[TableId]:
        return list(self._schemas)

    def _newest(self, table_id: TableId, names: frozenset[str]) -> Schema | None:
        for schema in reversed(self._schemas.get(table_id, ())):
            if len(schema.columns) == len(names) and all(c.name in names for c in schema.columns):
                return schema
        return None
