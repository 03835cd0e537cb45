"""Fields, relations and expression lineage used while planning a query.

Every column a query computes is a :class:`Field` whose ``lineage`` is its expression written down
to the source columns it comes from (``MyTable.b:BIGINT``, ``(MyTable.d:BIGINT + 1)``). Two plans
that compute a value the same way give it the same lineage, whatever the aliases in between; a
column whose definition changes gets a new lineage. ``deps`` link a field to the fields it is
computed from, so that the planner can tell which source columns a query really reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from ferry.sql.parser import render

__all__ = [
    "AGGREGATE_NAMES",
    "RANKING_FUNCTIONS",
    "Field",
    "Filter",
    "Relation",
    "WindowSpec",
    "describe_list",
    "interval_millis",
    "interval_text",
    "is_aggregate_call",
    "lineage_list",
    "substitute",
]

TimeKind = Literal["rowtime", "proctime"]

RANKING_FUNCTIONS = frozenset({"ROW_NUMBER", "RANK", "DENSE_RANK", "PERCENT_RANK", "CUME_DIST", "NTILE"})
"""Window functions that rank rows: Flink plans them as a Rank operator that keeps rows."""

_NOT_GROUP_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Lag,
    exp.Lead,
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.Ntile,
    exp.NthValue,
)

AGGREGATE_NAMES = frozenset(
    {
        "COLLECT",
        "LISTAGG",
        "JSON_OBJECTAGG",
        "JSON_ARRAYAGG",
        "ARRAY_AGG",
        "FIRST_VALUE",
        "LAST_VALUE",
        "STDDEV_POP",
        "STDDEV_SAMP",
        "VAR_POP",
        "VAR_SAMP",
        "APPROX_COUNT_DISTINCT",
        "SUM0",
        "PERCENTILE",
        "MAX_BY",
        "MIN_BY",
    }
)
"""Flink aggregate functions that sqlglot reads as plain (anonymous) function calls."""

_UNIT_MILLIS = {
    "MILLISECOND": 1,
    "SECOND": 1_000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
    "WEEK": 604_800_000,
}


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A window definition: its kind, time attribute and sizes, normalised for comparison."""

    kind: str
    time_lineage: str
    time_display: str
    parameters: tuple[str, ...]
    display_parameters: tuple[str, ...]
    partition: tuple[str, ...] = ()

    @property
    def value(self) -> str:
        """What is compared between plans."""
        partition = f" PARTITION BY {', '.join(self.partition)}" if self.partition else ""
        return f"{self.kind}({self.time_lineage}{partition}, {', '.join(self.parameters)})"

    @property
    def display(self) -> str:
        """What a person reads."""
        return f"{self.kind}({', '.join((self.time_display, *self.display_parameters))})"


@dataclass(eq=False, slots=True)
class Field:
    """One column of a relation. Fields are compared by identity; ``lineage`` by value."""

    name: str
    lineage: str
    type: str | None = None
    deps: tuple[Field, ...] = ()
    time: TimeKind | None = None
    window: WindowSpec | None = None
    window_role: str | None = None

    def describe(self) -> str:
        """The field's name and, when known, its type."""
        return f"{self.name} {self.type}" if self.type else self.name

    def renamed(self, name: str) -> Field:
        """This field's value under another name: same lineage, type and time, depending on it."""
        return Field(
            name=name,
            lineage=self.lineage,
            type=self.type,
            deps=(self,),
            time=self.time,
            window=self.window,
            window_role=self.window_role,
        )


@dataclass(frozen=True, slots=True)
class Filter:
    """A predicate applied to rows on their way to a stateful operator."""

    lineage: str
    display: str


@dataclass(eq=False, slots=True)
class Relation:
    """An intermediate result while planning: its fields and what downstream state depends on.

    ``path`` names the chain of stateful operators the rows went through (it makes operator ids);
    ``updating`` says whether the rows are a change log (updates and deletes) rather than inserts;
    ``upsert_keys`` are the field sets that identify a row; ``filters`` are the predicates applied
    since the last stateful operator. ``open_table`` marks a table whose columns are not known.
    """

    fields: list[Field]
    path: str
    tables: frozenset[str]
    updating: bool = False
    upsert_keys: tuple[tuple[Field, ...], ...] = ()
    filters: tuple[Filter, ...] = ()
    open_table: str | None = None
    pending_window: object | None = None
    extra_fields: dict[str, Field] = field(default_factory=dict)

    def field_named(self, name: str) -> Field | None:
        """The field called ``name`` (exactly, then ignoring case); an open table makes one up."""
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        lowered = name.lower()
        for candidate in self.fields:
            if candidate.name.lower() == lowered:
                return candidate
        if self.open_table is not None:
            made = self.extra_fields.get(name)
            if made is None:
                made = Field(name=name, lineage=f"{self.open_table}.{name}")
                self.extra_fields[name] = made
            return made
        return None

    def visible_fields(self) -> list[Field]:
        """The fields ``SELECT *`` expands to; for an open table, one field standing for all."""
        if self.open_table is not None and not self.fields:
            return [self.field_named("*") or Field(name="*", lineage=f"{self.open_table}.*")]
        return list(self.fields)


def interval_millis(interval: exp.Interval) -> int | None:
    """An ``INTERVAL 'n' UNIT`` literal in milliseconds, when it is a fixed length."""
    unit = interval.args.get("unit")
    value = interval.this
    if not isinstance(unit, exp.Var) or not isinstance(value, exp.Literal):
        return None
    name = unit.name.upper().rstrip("S") if unit.name.upper() != "S" else "SECOND"
    millis = _UNIT_MILLIS.get(name)
    try:
        amount = float(str(value.this).strip())
    except ValueError:
        return None
    if millis is None:
        return None
    return round(amount * millis)


def interval_text(value: exp.Expr) -> str:
    """A window parameter for comparison: a fixed-length interval in milliseconds, else as written."""
    millis = interval_millis(value) if isinstance(value, exp.Interval) else None
    return f"{millis}ms" if millis is not None else render(value)


def is_aggregate_call(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate function call (not a ranking or navigation function)."""
    if isinstance(node, exp.Filter):
        return is_aggregate_call(node.this)
    if isinstance(node, _NOT_GROUP_AGGREGATES):
        return False
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and node.name.upper() in AGGREGATE_NAMES


def substitute(expression: exp.Expr, replace: Callable[[exp.Expr], exp.Expr | None]) -> str:
    """Render ``expression`` with nodes replaced; ``replace`` returns ``None`` to keep a node.

    Intervals of fixed length are written in milliseconds so that ``INTERVAL '60' MINUTE`` and
    ``INTERVAL '1' HOUR`` compare equal.
    """

    def visit(node: exp.Expr) -> exp.Expr:
        replaced = replace(node)
        if replaced is not None:
            return replaced
        if isinstance(node, exp.Interval):
            millis = interval_millis(node)
            if millis is not None:
                return exp.Var(this=f"INTERVAL {millis}ms")
        return node

    return render(expression.transform(visit, copy=True))


def lineage_list(fields: Iterable[Field]) -> str:
    """Field lineages joined for comparison."""
    return ", ".join(f.lineage for f in fields)


def describe_list(fields: Iterable[Field]) -> str:
    """Field names (and types) joined for a person."""
    return ", ".join(f.describe() for f in fields)
