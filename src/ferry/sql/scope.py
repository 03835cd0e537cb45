"""Name resolution inside a query: which field a column reference means."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ferry.sql.exceptions import SqlParseError
from ferry.sql.lineage import Field, Relation

__all__ = ["Cte", "Scope"]


@dataclass(frozen=True, slots=True)
class Cte:
    """A ``WITH name [(columns)] AS (query)`` visible in a query."""

    query: exp.Expr
    columns: tuple[str, ...] | None


@dataclass(eq=False, slots=True)
class Scope:
    """The relations a ``SELECT`` reads from, by alias, plus what the enclosing query offers.

    After an aggregation, ``group_map`` maps each grouped input field to the aggregate's output
    field and ``replacements`` maps expressions written in the query (an aggregate call, a grouped
    expression, an ``OVER`` call) to the field that holds their value.
    """

    entries: list[tuple[str, Relation]] = field(default_factory=list)
    outer: Scope | None = None
    ctes: dict[str, Cte] = field(default_factory=dict)
    aliases: dict[str, Field] = field(default_factory=dict)
    replacements: dict[str, Field] = field(default_factory=dict)
    group_map: dict[int, Field] | None = None
    pattern_variables: frozenset[str] = frozenset()
    path: str | None = None

    def child(self) -> Scope:
        """A scope for a query nested in this one (it sees this scope's CTEs and columns)."""
        return Scope(outer=self, ctes=dict(self.ctes), path=self.path)

    def with_replacements(self, replacements: dict[str, Field], group_map: dict[int, Field] | None) -> Scope:
        """This block's scope after an aggregation or ``OVER``: the same relations, with
        ``replacements`` and ``group_map`` saying which fields now hold the computed values."""
        return Scope(
            entries=self.entries,
            outer=self.outer,
            ctes=self.ctes,
            aliases=self.aliases,
            replacements=replacements,
            group_map=group_map,
            path=self.path,
        )

    def cte(self, name: str) -> Cte | None:
        """The CTE called ``name``."""
        return self.ctes.get(name)

    def relation(self, alias: str) -> Relation | None:
        """The relation read under ``alias`` (exactly, then ignoring case)."""
        for name, relation in self.entries:
            if name == alias:
                return relation
        for name, relation in self.entries:
            if name.lower() == alias.lower():
                return relation
        return None

    def all_fields(self) -> list[Field]:
        """What ``SELECT *`` expands to."""
        fields: list[Field] = []
        for _, relation in self.entries:
            fields.extend(relation.visible_fields())
        return fields

    def _lookup(self, name: str) -> Field | None:
        for _, relation in self.entries:
            if relation.open_table is None:
                found = relation.field_named(name)
                if found is not None:
                    return found
        for _, relation in self.entries:
            if relation.open_table is not None:
                return relation.field_named(name)
        return self.aliases.get(name)

    def _grouped(self, found: Field) -> Field:
        if self.group_map is None:
            return found
        return self.group_map.get(id(found), found)

    def resolve(self, column: exp.Column, path: str | None = None) -> Field:
        """The field a column reference means; an unknown column is an error with its position."""
        name = column.name
        qualifier = column.table
        if qualifier and qualifier not in self.pattern_variables:
            relation = self.relation(qualifier)
            if relation is not None:
                found = relation.field_named(name)
                if found is not None:
                    return self._grouped(found)
                raise _unknown(column, f"column {qualifier}.{name} not found", path or self.path)
            base = self._lookup(qualifier)
            if base is not None:
                # A field of a ROW column: ``r.x``.
                return Field(name=name, lineage=f"{base.lineage}.{name}", deps=(base,))
        found = self._lookup(name)
        if found is not None:
            return self._grouped(found)
        if self.outer is not None:
            return self.outer.resolve(column, path or self.path)
        raise _unknown(column, f"column {column.sql()} not found", path or self.path)


def _unknown(column: exp.Column, message: str, path: str | None) -> SqlParseError:
    identifier = column.this
    line = int(identifier.meta.get("line", 1)) if isinstance(identifier, exp.Expr) else 1
    end = int(identifier.meta.get("col", 1)) if isinstance(identifier, exp.Expr) else 1
    start = max(1, end - len(column.name) + 1)
    return SqlParseError(message, line, start, path)
