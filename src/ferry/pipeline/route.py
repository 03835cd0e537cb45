"""Table routes: which sink table each source table's changes go to (Flink CDC's ``route`` block)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ferry.pipeline.schema import TableId


@dataclass(frozen=True, slots=True)
class Route:
    """``source_table`` is a regular expression over ``db.table``; the first route that matches wins.

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
    """Maps source tables to sink tables; a table no route matches keeps its own id."""

    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self.routes = tuple(routes)
        self._cache: dict[TableId, TableId] = {}

    def sink_table(self, source: TableId) -> TableId:
        target = self._cache.get(source)
        if target is None:
            target = next((t for r in self.routes if (t := r.target(source)) is not None), source)
            self._cache[source] = target
        return target

    def sources_of(self, sink_table: TableId) -> list[TableId]:
        """Source tables seen so far that feed ``sink_table``."""
        return [s for s, t in self._cache.items() if t == sink_table]
