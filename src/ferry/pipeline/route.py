"""Table routes: which sink tables each source table's changes go to (Flink CDC's ``route`` block).

Flink CDC's ``pipeline.route-mode`` says how routes combine: under ``ALL_MATCH`` (its default) every
route that matches a source table applies, so one source table can feed several sink tables, each
getting its rows and its schema changes; under ``FIRST_MATCH`` the first matching route wins. A
table no route matches keeps its own id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ferry.pipeline.schema import TableId


class RouteMode(StrEnum):
    """``pipeline.route-mode``: how the routes that match one source table combine."""

    ALL_MATCH = "ALL_MATCH"
    """Every matching route applies: the table feeds each of their sink tables."""
    FIRST_MATCH = "FIRST_MATCH"
    """The first matching route, in the order the job file lists them, applies."""


@dataclass(frozen=True, slots=True)
class Route:
    """``source_table`` is a regular expression over ``db.table``, matched against the whole id.

    In ``sink_table``, ``replace_symbol`` (if set) stands for the source table's name and ``$1``,
    ``$2`` ... for the regular expression's groups.
    """

    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", re.compile(self.source_table))

    def target(self, source: TableId) -> TableId | None:
        match = self._pattern.fullmatch(str(source))
        if match is None:
            return None
        name = self.sink_table
        if self.replace_symbol:
            name = name.replace(self.replace_symbol, source.table_name)
        name = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", name)
        return TableId.parse(name)


class TableRouter:
    """Maps source tables to their sink tables (see the module documentation)."""

    def __init__(self, routes: Iterable[Route] = (), mode: RouteMode = RouteMode.ALL_MATCH) -> None:
        self.routes = tuple(routes)
        self.mode = mode
        self._cache: dict[TableId, tuple[TableId, ...]] = {}

    def sink_tables(self, source: TableId) -> tuple[TableId, ...]:
        """The sink tables ``source`` feeds, in the order of their routes (at least one)."""
        targets = self._cache.get(source)
        if targets is None:
            matched = (t for r in self.routes if (t := r.target(source)) is not None)
            if self.mode is RouteMode.FIRST_MATCH:
                first = next(matched, None)
                targets = (first,) if first is not None else ()
            else:
                targets = tuple(dict.fromkeys(matched))
            targets = targets or (source,)
            self._cache[source] = targets
        return targets

    def sink_table(self, source: TableId) -> TableId:
        """The first of :meth:`sink_tables`: the only one under ``FIRST_MATCH``."""
        return self.sink_tables(source)[0]

    def sources_of(self, sink_table: TableId) -> list[TableId]:
        """Source tables seen so far that feed ``sink_table``."""
        return [s for s, targets in self._cache.items() if sink_table in targets]
