"""The operator plan of a job: what each operator is, what its state depends on, and how it is named.

Operators carry a stable identity (``id``) built from the shape of the query, not from the order
of columns or the text of aliases, so that the plans of an old and a new version of a job can be
matched operator by operator. Sources are named after their table (``source MyTable``); every other
operator after its statement (the sink it writes to, or ``query#n`` for a plain ``SELECT``) and the
stateful operators below it (``query#1/aggregate[MyTable]``); an aggregate call after its
aggregate and the call as written (``query#1/aggregate[MyTable]/SUM(b)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ferry.sql.parser import TableDef

__all__ = [
    "Aspect",
    "Changelog",
    "Operator",
    "OperatorKind",
    "Plan",
    "SourceInfo",
    "StatefulOperator",
    "StatelessReport",
]

OperatorKind = Literal[
    "source",
    "changelog-normalize",
    "calc",
    "correlate",
    "values",
    "union",
    "window",
    "aggregate",
    "aggregate-call",
    "over",
    "over-call",
    "rank",
    "sort",
    "join",
    "lookup-join",
    "match-recognize",
    "set-operation",
    "sink",
    "upsert-materializer",
]

Changelog = Literal["insert-only", "all", "upsert"]
"""What a source emits: inserts only, every change kind, or upserts (no UPDATE_BEFORE)."""


@dataclass(frozen=True, slots=True)
class Aspect:
    """One thing an operator's state depends on; the state cannot be restored if it changes.

    ``value`` is compared between plans; ``display`` is what a person reads.
    """

    name: str
    value: str
    display: str


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator of the plan.

    ``aspects`` hold what the state layout depends on (keys, input schema, window, ...): a change in
    any of them makes the state unusable. A call of an aggregate (``aggregate-call``,
    ``over-call``) has a ``parent`` and a ``fingerprint``, the lineage of its arguments down to the
    source columns: a call whose fingerprint changes loses its accumulator, its siblings keep theirs.
    """

    id: str
    kind: OperatorKind
    label: str
    stateful: bool
    statement: str | None = None
    parent: str | None = None
    fingerprint: str = ""
    aspects: tuple[Aspect, ...] = ()
    tables: tuple[str, ...] = ()
    reason: str = ""

    def aspect(self, name: str) -> Aspect | None:
        """The aspect called ``name``, if the operator has one."""
        for aspect in self.aspects:
            if aspect.name == name:
                return aspect
        return None


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A source table as the job reads it: its definition, effective options and changelog."""

    table: TableDef
    options: Mapping[str, str]
    changelog: Changelog
    used_columns: tuple[str, ...]
    statements: tuple[str, ...]
    defined: bool = True

    @property
    def name(self) -> str:
        """The table's name."""
        return self.table.name

    @property
    def connector(self) -> str | None:
        """The effective ``connector`` option, lower-cased."""
        value = self.options.get("connector")
        return value.lower() if value is not None else None


@dataclass(frozen=True, slots=True)
class StatefulOperator:
    """An operator that keeps state, and why it does."""

    id: str
    kind: OperatorKind
    label: str
    reason: str


@dataclass(frozen=True, slots=True)
class StatelessReport:
    """Whether a job keeps no operator state (so that only its source offsets matter)."""

    stateless: bool
    stateful_operators: tuple[StatefulOperator, ...] = ()

    def describe(self) -> str:
        """One line for a person."""
        if self.stateless:
            return "stateless: no aggregate, LAG, window, pattern matching, join or upsert materialisation"
        kinds = sorted({operator.kind for operator in self.stateful_operators})
        return "stateful: " + ", ".join(kinds)


@dataclass(frozen=True, slots=True)
class Plan:
    """The operators of a job, its sources and its settings."""

    operators: tuple[Operator, ...]
    sources: Mapping[str, SourceInfo]
    settings: Mapping[str, str] = field(default_factory=dict)
    statements: tuple[str, ...] = ()
    sink_tables: Mapping[str, TableDef] = field(default_factory=dict)

    def operator(self, operator_id: str) -> Operator | None:
        """The operator with this id, if there is one."""
        for operator in self.operators:
            if operator.id == operator_id:
                return operator
        return None

    def stateless_report(self) -> StatelessReport:
        """Which operators keep state; none means the job is stateless."""
        stateful = tuple(
            StatefulOperator(id=op.id, kind=op.kind, label=op.label, reason=op.reason)
            for op in self.operators
            if op.stateful and op.parent is None
        )
        return StatelessReport(stateless=not stateful, stateful_operators=stateful)
