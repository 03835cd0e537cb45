"""Table routes: which sink tables each source table's changes go to (Flink CDC's ``route`` block).

Flink CDC's ``pipeline.route-mode`` says how routes combine: under ``ALL_MATCH`` (its default) every
route that matches a source table applies, so one source table can feed several sink tables, each
getting its rows and its schema changes; under ``FIRST_MATCH`` the first matching route wins. A
table no route matches keeps its own id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from ferry.model.schema import TableId
from ferry.model.table_patterns import RoutePattern


class RouteMode(StrEnum):
    """``pipeline.route-mode``: how the routes that match one source table combine."""

    ALL_MATCH = "ALL_MATCH"
    """Every matching route applies: the table feeds each of their sink tables."""
    FIRST_MATCH = "FIRST_MATCH"
    """The first matching route, in the order the job file lists them, applies."""


@dataclass(frozen=True, slots=True)
class Route:
    """``source_table`` is a table pattern over the id's text (:class:`RoutePattern`: ``mydb.\\.*``
    is every table of ``mydb``), matched against the whole id.

    In ``sink_table``, ``replace_symbol`` (if set) stands for the source table's name; without it,
    ``$1``, ``$2`` ... stand for the pattern's groups.
    """

    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None
    _pattern: RoutePattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pattern = RoutePattern(self.source_table, self.sink_table, self.replace_symbol)
        object.__setattr__(self, "_pattern", pattern)

    def matches(self, source: TableId) -> bool:
        return self._pattern.matches(source)

    def target(self, source: TableId) -> TableId | None:
        return self._pattern.target(source)


class TableRouter:
    """Maps source tables to their sink tables (see the module documentation)."""

    def __init__(self, routes: Iterable[Route] = (), mode: RouteMode = RouteMode.ALL_MATCH) -> None:
        self.routes = tuple(routes)
        self.mode = mode
        self._cache: dict[TableId, tuple[TableId, ...]] = {}
        self._matched: set[int] = set()

    def sink_tables(self, source: TableId) -> tuple[TableId, ...]:
        """The sink tables ``source`` feeds, in the order of their routes (at least one)."""
        targets = self._cache.get(source)
        if targets is None:
            matched = [(i, t) for i, r in enumerate(self.routes) if (t := r.target(source)) is not None]
            self._matched.update(i for i, _ in matched)
            found = [t for _, t in matched]
            if self.mode is RouteMode.FIRST_MATCH:
                found = found[:1]
            targets = tuple(dict.fromkeys(found)) or (source,)
            self._cache[source] = targets
        return targets

    @property
    def tables_read(self) -> tuple[TableId, ...]:
        """The source tables routed so far."""
        return tuple(self._cache)

    def unmatched(self) -> list[tuple[int, Route]]:
        """The routes (with their index) that match none of the tables routed so far."""
        return [(i, r) for i, r in enumerate(self.routes) if i not in self._matched]

    def sink_table(self, source: TableId) -> TableId:
        """The first of :meth:`sink_tables`: the only one under ``FIRST_MATCH``."""
        return self.sink_tables(source)[0]

    def sources_of(self, sink_table: TableId) -> list[TableId]:
        """Source tables seen so far that feed ``sink_table``."""
        return [s for s, targets in self._cache.items() if sink_table in targets]


class UnroutedTables(StrEnum):
    """``source.unrouted-tables``: what becomes of a record naming a table the job does not route."""

    DEAD_LETTER = "dead-letter"
    """The record goes to the dead-letter destination with the reason (Flink CDC's: a pipeline
    writes only the tables its source selects)."""
    CREATE = "create"
    """The table is taken as any other: created at the sink and written."""


class TableSelection:
    """Which tables a job's records may name, and the reason a record naming another is refused.

    Where each topic carries one table (Debezium's ``<prefix>.<database or schema>.<table>``, for
    fixed topics and topic patterns alike), a record's table is the one its topic's name carries:
    a record naming another (its ``source`` block, a flattened record's ``__db``/``__table``) is
    refused. A topic of fewer than three names (one a topic router such as ``ByLogicalTableRouter``
    named, ``shop.all_orders``) carries no table: its records may name any. Where a topic carries
    many tables (Canal, Maxwell), a job with routes takes the tables a route matches; one without
    takes every table of its topics.
    """

    def __init__(
        self,
        routes: TableRouter,
        *,
        topics_name_tables: bool,
        unrouted: UnroutedTables = UnroutedTables.DEAD_LETTER,
    ) -> None:
        self.routes = routes
        self.topics_name_tables = topics_name_tables
        self.unrouted = unrouted
        self._refusals: dict[tuple[str, TableId], str | None] = {}

    def refusal(self, topic: str, table: TableId) -> str | None:
        """Why a record of ``topic`` naming ``table`` is not the job's, or None when it is."""
        found = self._refusals.get((topic, table), self)
        if found is self:
            found = self._refusals[(topic, table)] = self._refuse(topic, table)
        return found  # type: ignore[return-value]

    def _refuse(self, topic: str, table: TableId) -> str | None:
        if self.unrouted is UnroutedTables.CREATE:
            return None
        if self.topics_name_tables:
            parts = topic.split(".")
            if len(parts) < 3:  # not Debezium's naming (a topic a router named): it names no table
                return None
            carried = (parts[-2], parts[-1])
            if (table.schema_name, table.table_name) == carried:
                return None
            return (
                f"unrouted table: the record names table {table}, topic {topic} carries "
                f"{'.'.join(p for p in carried if p)} (source.unrouted-tables: create takes it)"
            )
        if not self.routes.routes or any(r.target(table) is not None for r in self.routes.routes):
            return None
        return f"unrouted table: no route matches table {table} (source.unrouted-tables: create takes it)"


class UnmatchedTransforms(Protocol):
    """What :func:`unmatched_rules` asks of a job's transforms
    (:class:`~ferry.transform.blocks.TableTransforms`)."""

    def unmatched_labels(self) -> list[str]: ...


def unmatched_rules(tables: TableRouter, transforms: UnmatchedTransforms | None = None) -> list[str]:
    """The routes and transforms whose ``source-table`` matches none of the tables read so far,
    each said in a line naming them (none before a table was read). Such a rule is valid and does
    nothing: most often a pattern written as a plain regular expression (``mydb\\.orders`` is one
    part, a table without database, to a transform)."""
    read = tables.tables_read
    if not read:
        return []
    names = ", ".join(str(t) for t in read[:5]) + (", ..." if len(read) > 5 else "")
    what = f"matches none of the {len(read)} table{'s' * (len(read) != 1)} read so far ({names})"
    lines = [f"route[{i}] (source-table {r.source_table}) {what}" for i, r in tables.unmatched()]
    if transforms is not None:
        lines += [f"{label} {what}" for label in transforms.unmatched_labels()]
    return lines
