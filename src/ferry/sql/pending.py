"""Operators under construction, and the aspects that several operators share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlglot import exp

from ferry.sql.lineage import Field, Filter, Relation, WindowSpec, describe_list, lineage_list
from ferry.sql.model import Aspect, Operator, OperatorKind
from ferry.sql.parser import render

__all__ = [
    "WINDOW_TVFS",
    "PendingOperator",
    "changelog_aspect",
    "conjuncts",
    "filters_aspect",
    "render_list",
    "short",
    "window_aspect",
    "window_property",
]

WINDOW_TVFS = frozenset({"TUMBLE", "HOP", "SESSION", "CUMULATE"})
"""The window table functions (and, but for CUMULATE, the legacy GROUP BY window functions)."""

_WINDOW_PROPERTY_SUFFIXES = ("_START", "_END", "_ROWTIME", "_PROCTIME")
_LABEL_LIMIT = 120


@dataclass(eq=False, slots=True)
class PendingOperator:
    """An operator under construction: some aspects depend on which columns end up being used."""

    id: str
    kind: OperatorKind
    label: str
    stateful: bool
    statement: str | None
    tables: tuple[str, ...]
    reason: str = ""
    parent: str | None = None
    fingerprint: str = ""
    aspects: list[Aspect] = field(default_factory=list)
    schemas: list[tuple[str, list[Field]]] = field(default_factory=list)
    output: Field | None = None
    emitted: bool = True

    def finalize(self, used: set[int]) -> Operator:
        aspects = list(self.aspects)
        for name, fields in self.schemas:
            kept = [f for f in fields if id(f) in used]
            aspects.append(Aspect(name=name, value=lineage_list(kept), display=describe_list(kept) or "()"))
        return Operator(
            id=self.id,
            kind=self.kind,
            label=self.label,
            stateful=self.stateful,
            statement=self.statement,
            parent=self.parent,
            fingerprint=self.fingerprint,
            aspects=tuple(aspects),
            tables=self.tables,
            reason=self.reason,
        )


def window_aspect(spec: WindowSpec) -> Aspect:
    """The aspect a window definition gives the operators that keep per-window state."""
    return Aspect(name="window", value=spec.value, display=spec.display)


def filters_aspect(filters: Iterable[Filter], side: str = "") -> Aspect:
    """The predicates applied to an operator's input since the last stateful operator."""
    kept = list(filters)
    name = f"{side} filter".strip() if side else "filter"
    return Aspect(
        name=name,
        value=" AND ".join(sorted(f.lineage for f in kept)) or "TRUE",
        display=" AND ".join(f.display for f in kept) or "(none)",
    )


def render_list(expressions: Iterable[exp.Expr]) -> str:
    """Expressions as written, comma-separated."""
    return ", ".join(render(e) for e in expressions)


def short(text: str) -> str:
    return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 3] + "..."


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return [*conjuncts(condition.this), *conjuncts(condition.expression)]
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def changelog_aspect(relation: Relation, side: str = "") -> Aspect:
    """Whether an operator's input (``side`` of a join) is a change log or inserts only."""
    return Aspect(
        name=f"{side} changelog" if side else "input changelog",
        value="updating" if relation.updating else "insert-only",
        display="updates and deletes" if relation.updating else "inserts only",
    )


def window_property(node: exp.Expr) -> tuple[str, str] | None:
    """``TUMBLE_START(ts, ...)`` and friends: the window kind and the property."""
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.upper()
    for kind in WINDOW_TVFS - {"CUMULATE"}:
        for suffix in _WINDOW_PROPERTY_SUFFIXES:
            if name == kind + suffix:
                return kind, suffix[1:].lower()
    return None
