"""Planning one query: relations, their fields and the operators between them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlglot import exp

from ferry.sql.dialect import TableArgument
from ferry.sql.exceptions import SqlError
from ferry.sql.lineage import (
    Field,
    Relation,
    WindowSpec,
    describe_list,
    interval_text,
    lineage_list,
    substitute,
)
from ferry.sql.model import Aspect, OperatorKind
from ferry.sql.parser import render
from ferry.sql.pending import (
    WINDOW_TVFS,
    PendingOperator,
    changelog_aspect,
    conjuncts,
    filters_aspect,
    short,
    window_aspect,
)
from ferry.sql.scope import Cte, Scope
from ferry.sql.select import SelectPlanner

if TYPE_CHECKING:
    from ferry.sql.plan import PlanBuilder

__all__ = ["QueryPlanner"]


def _join_aspects(
    join_type: str,
    condition_texts: list[str],
    condition_display: str,
    left: Relation,
    right: Relation,
    *,
    unique_keys: list[Aspect] | None = None,
) -> list[Aspect]:
    """What a join keeps state for: its type and condition, then each input's changelog, unique
    keys (when given) and filters."""
    return [
        Aspect(name="join type", value=join_type, display=join_type),
        Aspect(
            name="join condition",
            value=" AND ".join(sorted(condition_texts)) or "TRUE",
            display=condition_display,
        ),
        changelog_aspect(left, "left"),
        changelog_aspect(right, "right"),
        *(unique_keys or []),
        filters_aspect(left.filters, "left"),
        filters_aspect(right.filters, "right"),
    ]


def _unique_keys_aspect(relation: Relation, side: str) -> Aspect:
    return Aspect(
        name=f"{side} unique keys",
        value=" ; ".join(lineage_list(k) for k in relation.upsert_keys) or "(none)",
        display=" ; ".join(describe_list(k) for k in relation.upsert_keys) or "(none)",
    )


class QueryPlanner:
    """Plans the query of one statement into operators recorded on a :class:`PlanBuilder`."""

    def __init__(self, builder: PlanBuilder) -> None:
        self.builder = builder

    # ----- helpers -------------------------------------------------------------------------------

    @property
    def statement(self) -> str:
        return self.builder.statement

    def lineage(self, expression: exp.Expr, scope: Scope) -> tuple[str, list[Field]]:
        """The lineage of an expression in ``scope`` and the fields it reads."""
        refs: list[Field] = []

        def replace(node: exp.Expr) -> exp.Expr | None:
            if scope.replacements and not isinstance(node, exp.Literal | exp.Identifier):
                found = scope.replacements.get(render(node))
                if found is not None:
                    refs.append(found)
                    return exp.Var(this=found.lineage)
            if isinstance(node, exp.Column):
                resolved = scope.resolve(node, self.builder.script.path)
                refs.append(resolved)
                return exp.Var(this=resolved.lineage)
            if isinstance(node, exp.Query) and node is not expression:
                sub = self._plan_subquery_predicate(node, scope)
                refs.extend(sub.fields)
                return exp.Var(this=f"subquery[{sub.path}]")
            return None

        return substitute(expression, replace), refs

    def _derived(self, name: str, expression: exp.Expr, scope: Scope) -> Field:
        if isinstance(expression, exp.Column) and not scope.replacements:
            return scope.resolve(expression, self.builder.script.path).renamed(name)
        text, refs = self.lineage(expression, scope)
        single = refs[0] if len(refs) == 1 and isinstance(expression, exp.Column) else None
        return Field(
            name=name,
            lineage=text,
            type=single.type if single else None,
            deps=tuple(refs),
            time=single.time if single else None,
            window=single.window if single else None,
            window_role=single.window_role if single else None,
        )

    def _operator_id(self, kind: str, path: str) -> str:
        return self.builder.unique_id(f"{self.statement}/{kind}[{path}]")

    def _add_stateless(
        self, kind: OperatorKind, label: str, tables: frozenset[str], path: str | None = None
    ) -> None:
        """Record an operator that keeps no state (its id names ``path`` when there is one)."""
        self.builder.add(
            PendingOperator(
                id=self._operator_id(kind, path)
                if path is not None
                else self.builder.unique_id(f"{self.statement}/{kind}"),
                kind=kind,
                label=label,
                stateful=False,
                statement=self.statement,
                tables=tuple(sorted(tables)),
            )
        )

    # ----- queries -------------------------------------------------------------------------------

    def plan_root(self, query: exp.Expr) -> Relation:
        return self.plan_query(query, Scope(path=self.builder.script.path))

    def plan_query(self, node: exp.Expr, scope: Scope) -> Relation:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            scope = scope.child()
            for cte in with_.expressions:
                alias = cte.args.get("alias")
                columns = tuple(c.name for c in alias.columns) if isinstance(alias, exp.TableAlias) else ()
                scope.ctes[cte.alias] = Cte(query=cte.this, columns=columns or None)
        if isinstance(node, exp.Subquery | exp.Paren):
            return self.plan_query(node.this, scope)
        if isinstance(node, exp.Select):
            return self._plan_select(node, scope)
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            return self._plan_set_operation(node, scope)
        if isinstance(node, exp.Values):
            return self._plan_values(node, None)
        raise SqlError(f"cannot plan {type(node).__name__}: {short(render(node))}")

    def _plan_values(self, node: exp.Values, alias: exp.TableAlias | None) -> Relation:
        rows = [row.expressions if isinstance(row, exp.Tuple) else [row] for row in node.expressions]
        width = len(rows[0]) if rows else 0
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        fields = []
        for index in range(width):
            values = " | ".join(render(row[index]) for row in rows if index < len(row))
            name = names[index] if index < len(names) else f"EXPR${index}"
            fields.append(Field(name=name, lineage=f"VALUES({values})"))
        return Relation(fields=fields, path="values", tables=frozenset())

    def _plan_set_operation(self, node: exp.Union | exp.Intersect | exp.Except, scope: Scope) -> Relation:
        left = self.plan_query(node.this, scope.child())
        right = self.plan_query(node.expression, scope.child())
        kind = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}[type(node)]
        distinct = bool(node.args.get("distinct"))
        fields = [
            Field(name=lf.name, lineage=f"{kind}({lf.lineage} | {rf.lineage})", type=lf.type, deps=(lf, rf))
            for lf, rf in zip(left.fields, right.fields, strict=False)
        ]
        tables = left.tables | right.tables
        if isinstance(node, exp.Union):
            relation = Relation(
                fields=fields,
                path=f"union[{left.path}, {right.path}]",
                tables=tables,
                updating=left.updating or right.updating,
                filters=left.filters + right.filters,
            )
            self._add_stateless(
                "union", "UNION ALL" if not distinct else "UNION", tables, f"{left.path}, {right.path}"
            )
            if distinct:
                return self._distinct(relation, "UNION (distinct rows)")
            return relation
        path = f"{kind.lower()}[{left.path}, {right.path}]"
        self.builder.add(
            PendingOperator(
                id=self._operator_id(kind.lower(), f"{left.path}, {right.path}"),
                kind="set-operation",
                label=f"{kind}{'' if distinct else ' ALL'}",
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(tables)),
                reason=f"{kind} keeps the rows of both inputs",
                aspects=[changelog_aspect(left), filters_aspect(left.filters + right.filters)],
                schemas=[("left input schema", left.fields), ("right input schema", right.fields)],
            )
        )
        self.builder.anchor([*left.fields, *right.fields])
        return Relation(fields=fields, path=path, tables=tables, updating=True)

    def _distinct(self, relation: Relation, label: str) -> Relation:
        path = f"aggregate[{relation.path}]"
        keys = [Field(name=f.name, lineage=f.lineage, type=f.type, deps=(f,)) for f in relation.fields]
        self.builder.add(
            PendingOperator(
                id=self._operator_id("aggregate", relation.path),
                kind="aggregate",
                label=label,
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason="DISTINCT keeps every distinct row seen so far",
                aspects=[
                    Aspect(
                        name="group keys",
                        value=" ; ".join(sorted(f.lineage for f in relation.fields)),
                        display=describe_list(relation.fields),
                    ),
                    changelog_aspect(relation),
                    filters_aspect(relation.filters),
                ],
            )
        )
        self.builder.anchor(relation.fields)
        return Relation(
            fields=keys, path=path, tables=relation.tables, updating=True, upsert_keys=(tuple(keys),)
        )

    # ----- FROM ----------------------------------------------------------------------------------

    def _plan_from_item(self, item: exp.Expr, scope: Scope) -> tuple[str, Relation]:
        alias = item.alias if isinstance(item, exp.Expr) else ""
        if isinstance(item, exp.Table):
            function = item.this
            if isinstance(function, exp.Anonymous) and function.name.upper() == "TABLE":
                inner = function.expressions[0] if function.expressions else None
                if isinstance(inner, exp.Anonymous) and inner.name.upper() in WINDOW_TVFS:
                    return alias or inner.name, self._plan_window_tvf(inner, scope)
                if inner is not None:
                    return alias or "T", self._plan_correlate(inner, item.args.get("alias"), scope)
            name = ".".join(part.name for part in item.parts)
            relation = self._plan_named(name, item, scope)
            return alias or item.name, relation
        if isinstance(item, exp.Subquery):
            relation = self.plan_query(item.this, scope.child())
            return alias, self._renamed(relation, item.args.get("alias"))
        if isinstance(item, exp.Lateral | exp.Unnest):
            call = item.this if isinstance(item, exp.Lateral) else item
            if isinstance(call, exp.Anonymous) and call.name.upper() == "TABLE" and call.expressions:
                call = call.expressions[0]
            if isinstance(call, exp.Query):
                relation = self.plan_query(call, scope.child())
                return alias, self._renamed(relation, item.args.get("alias"))
            return alias or "T", self._plan_correlate(call, item.args.get("alias"), scope)
        if isinstance(item, exp.Values):
            return alias, self._plan_values(item, item.args.get("alias"))
        raise SqlError(f"cannot read FROM item {short(render(item))}")

    def _plan_named(self, name: str, table: exp.Table, scope: Scope) -> Relation:
        cte = scope.cte(name)
        if cte is not None:
            relation = self.plan_query(cte.query, scope.child())
            return self._renamed_columns(relation, cte.columns)
        view = self.builder.script.view(name)
        if view is not None and self.builder.script.table(name) is None:
            relation = self.plan_query(view.query, Scope(path=self.builder.script.path))
            return self._renamed_columns(relation, view.column_names)
        return self.builder.scan(name, table)

    def _renamed(self, relation: Relation, alias: exp.Expr | None) -> Relation:
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return self._renamed_columns(relation, tuple(c.name for c in alias.columns))
        return relation

    def _renamed_columns(self, relation: Relation, names: tuple[str, ...] | None) -> Relation:
        if not names:
            return relation
        renamed: list[Field] = []
        mapping: dict[int, Field] = {}
        for index, original in enumerate(relation.fields):
            if index < len(names):
                made = original.renamed(names[index])
                mapping[id(original)] = made
                renamed.append(made)
            else:
                renamed.append(original)
        keys = tuple(tuple(mapping.get(id(f), f) for f in key) for key in relation.upsert_keys)
        return dataclasses.replace(relation, fields=renamed, upsert_keys=keys, extra_fields={})

    def _plan_correlate(self, call: exp.Expr, alias: exp.Expr | None, scope: Scope) -> Relation:
        text, refs = self.lineage(call, scope)
        names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) and alias.columns else []
        names = names or ["f0"]
        fields = [Field(name=n, lineage=f"{text}.{n}", deps=tuple(refs)) for n in names]
        self._add_stateless("correlate", short(f"LATERAL {render(call)}"), frozenset())
        return Relation(fields=fields, path="correlate", tables=frozenset())

    def _plan_window_tvf(self, call: exp.Anonymous, scope: Scope) -> Relation:
        kind = call.name.upper()
        positional: list[exp.Expr] = []
        named: dict[str, exp.Expr] = {}
        for argument in call.expressions:
            if isinstance(argument, exp.Kwarg):
                named[argument.this.name.upper()] = argument.expression
            else:
                positional.append(argument)
        data = named.get("DATA") or (positional.pop(0) if positional else None)
        time = named.get("TIMECOL") or (positional.pop(0) if positional else None)
        if not isinstance(data, TableArgument):
            raise SqlError(f"{kind} needs a TABLE argument: {short(render(call))}")
        table = data.this
        name = ".".join(part.name for part in table.parts) if isinstance(table, exp.Table) else render(table)
        source = self._plan_named(name, table, scope) if isinstance(table, exp.Table) else None
        if source is None:
            raise SqlError(f"cannot read the table of {short(render(call))}")
        inner = Scope(entries=[(name, source)], outer=scope, path=scope.path)
        if isinstance(time, exp.Anonymous) and time.name.upper() == "DESCRIPTOR" and time.expressions:
            time = time.expressions[0]
        if not isinstance(time, exp.Column):
            raise SqlError(f"{kind} needs DESCRIPTOR(time column): {short(render(call))}")
        time_field = inner.resolve(time, scope.path)
        names = {"TUMBLE": ["SIZE", "OFFSET"], "HOP": ["SLIDE", "SIZE", "OFFSET"], "SESSION": ["GAP"]}
        names["CUMULATE"] = ["STEP", "SIZE", "OFFSET"]
        parameters: list[str] = []
        shown: list[str] = []
        for parameter in names[kind]:
            value = named.get(parameter) or (positional.pop(0) if positional else None)
            if value is None:
                continue
            parameters.append(f"{parameter}={interval_text(value)}")
            shown.append(render(value))
        partition: list[Field] = []
        for column in data.args.get("partition_by") or []:
            if isinstance(column, exp.Column):
                partition.append(inner.resolve(column, scope.path))
        spec = WindowSpec(
            kind=kind,
            time_lineage=time_field.lineage,
            time_display=time_field.name,
            parameters=tuple(parameters),
            display_parameters=tuple(shown),
            partition=tuple(f.lineage for f in partition),
        )
        self.builder.anchor([time_field, *partition])
        window_fields = [
            Field(
                name=f"window_{role}", lineage=f"window_{role}({spec.value})", window=spec, window_role=role
            )
            for role in ("start", "end", "time")
        ]
        window_fields[2].time = "rowtime" if time_field.time == "rowtime" else time_field.time
        pending = self.builder.add(
            PendingOperator(
                id=self._operator_id("window", source.path),
                kind="window",
                label=f"window table function {spec.display}",
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(source.tables)),
                reason="a window keeps the rows or accumulators of every open window",
                aspects=[window_aspect(spec), changelog_aspect(source), filters_aspect(source.filters)],
                schemas=[("input schema", source.fields)],
            )
        )
        return Relation(
            fields=[*source.fields, *window_fields],
            path=f"window[{source.path}]",
            tables=source.tables,
            updating=source.updating,
            upsert_keys=source.upsert_keys,
            filters=source.filters,
            pending_window=pending,
        )

    # ----- joins ---------------------------------------------------------------------------------

    def _plan_join(
        self,
        left: Relation,
        left_scope: Scope,
        join: exp.Join,
        scope: Scope,
        where: list[exp.Expr],
    ) -> tuple[str, Relation, Relation]:
        item = join.this
        right_alias, right = self._plan_from_item(item, scope)
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        joined = Scope(
            entries=[*left_scope.entries, (right_alias, right)], outer=scope.outer, path=scope.path
        )
        joined.ctes = scope.ctes
        if isinstance(item, exp.Lateral | exp.Unnest) or (
            isinstance(item, exp.Table)
            and isinstance(item.this, exp.Anonymous)
            and item.this.name.upper() == "TABLE"
            and not (
                item.this.expressions
                and isinstance(item.this.expressions[0], exp.Anonymous)
                and item.this.expressions[0].name.upper() in WINDOW_TVFS
            )
        ):
            combined = Relation(
                fields=[*left.fields, *right.fields],
                path=left.path,
                tables=left.tables | right.tables,
                updating=left.updating,
                upsert_keys=(),
                filters=left.filters,
            )
            return right_alias, right, combined
        condition = join.args.get("on")
        conditions = conjuncts(condition)
        using = join.args.get("using") or []
        if not conditions and not using and kind != "CROSS" and where:
            # ``FROM a, b WHERE a.k = b.k``: Flink turns the predicates on both inputs into the condition.
            left_fields = {id(f) for f in left.fields}
            right_fields = {id(f) for f in right.fields}
            for predicate in list(where):
                _, refs = self.lineage(predicate, joined)
                ids = {id(f) for f in refs}
                if ids & left_fields and ids & right_fields:
                    conditions.append(predicate)
                    where.remove(predicate)
        condition_texts: list[str] = []
        condition_refs: list[Field] = []
        for predicate in conditions:
            text, refs = self.lineage(predicate, joined)
            condition_texts.append(text)
            condition_refs.extend(refs)
        for column in using:
            name = column.name
            lf, rf = left_scope._lookup(name), right.field_named(name)
            if lf is not None and rf is not None:
                condition_texts.append(f"{lf.lineage} = {rf.lineage}")
                condition_refs.extend([lf, rf])
        self.builder.anchor(condition_refs)
        version = item.args.get("version") if isinstance(item, exp.Table) else None
        join_type = f"{side or 'INNER'} JOIN" if kind != "CROSS" else "CROSS JOIN"
        tables = left.tables | right.tables
        condition_display = " AND ".join(render(c) for c in conditions) or "TRUE"
        if isinstance(version, exp.Version):
            return (
                right_alias,
                right,
                self._temporal_join(
                    left=left,
                    right=right,
                    version=version,
                    scope=joined,
                    join_type=join_type,
                    condition_texts=condition_texts,
                    condition_display=condition_display,
                ),
            )
        left_ids = {id(f) for f in left.fields}
        right_ids = {id(f) for f in right.fields}
        interval = any(
            {id(f) for f in refs if f.time == "rowtime"} & left_ids
            and {id(f) for f in refs if f.time == "rowtime"} & right_ids
            for refs in (self.lineage(p, joined)[1] for p in conditions)
        )
        label = f"{'interval ' if interval else ''}{join_type} ON {condition_display}"
        path = f"join[{left.path}, {right.path}]"
        operator = PendingOperator(
            id=self._operator_id("join", f"{left.path}, {right.path}"),
            kind="join",
            label=short(label),
            stateful=True,
            statement=self.statement,
            tables=tuple(sorted(tables)),
            reason=(
                "an interval join keeps the rows of both inputs within the interval"
                if interval
                else "a join keeps the rows of both inputs"
            ),
            aspects=_join_aspects(
                join_type,
                condition_texts,
                condition_display,
                left,
                right,
                unique_keys=[_unique_keys_aspect(left, "left"), _unique_keys_aspect(right, "right")],
            ),
            schemas=[("left input schema", left.fields), ("right input schema", right.fields)],
        )
        self.builder.add(operator)
        outer = side in {"LEFT", "RIGHT", "FULL"}
        keys: tuple[tuple[Field, ...], ...] = ()
        if side in {"", "LEFT"} and self._unique_on(right, condition_refs):
            keys = left.upsert_keys
        elif side in {"", "RIGHT"} and self._unique_on(left, condition_refs):
            keys = right.upsert_keys
        combined = Relation(
            fields=[*left.fields, *right.fields],
            path=path,
            tables=tables,
            updating=left.updating or right.updating or (outer and not interval),
            upsert_keys=keys,
        )
        return right_alias, right, combined

    @staticmethod
    def _unique_on(relation: Relation, condition_refs: list[Field]) -> bool:
        referenced = {id(f) for f in condition_refs}
        return any(key and {id(f) for f in key} <= referenced for key in relation.upsert_keys)

    def _temporal_join(
        self,
        *,
        left: Relation,
        right: Relation,
        version: exp.Version,
        scope: Scope,
        join_type: str,
        condition_texts: list[str],
        condition_display: str,
    ) -> Relation:
        moment = version.expression
        time_refs = self.lineage(moment, scope)[1] if isinstance(moment, exp.Expr) else []
        self.builder.anchor(time_refs)
        proctime = any(f.time == "proctime" for f in time_refs)
        tables = left.tables | right.tables
        at = render(moment) if isinstance(moment, exp.Expr) else "?"
        # Either way the rows are the left input's, each joined with one version of the right table.
        joined = Relation(
            fields=[*left.fields, *right.fields],
            path=left.path,
            tables=tables,
            updating=left.updating,
            upsert_keys=left.upsert_keys,
            filters=left.filters,
        )
        if proctime:
            self._add_stateless(
                "lookup-join",
                short(f"lookup {join_type} FOR SYSTEM_TIME AS OF {at} ON {condition_display}"),
                tables,
                f"{left.path}, {right.path}",
            )
            return joined
        self.builder.add(
            PendingOperator(
                id=self._operator_id("join", f"{left.path}, {right.path}"),
                kind="join",
                label=short(f"temporal {join_type} FOR SYSTEM_TIME AS OF {at} ON {condition_display}"),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(tables)),
                reason=(
                    "an event-time temporal join keeps the versions of the versioned table and pending rows"
                ),
                aspects=_join_aspects(
                    f"temporal {join_type}", condition_texts, condition_display, left, right
                ),
                schemas=[("left input schema", left.fields), ("right input schema", right.fields)],
            )
        )
        return dataclasses.replace(joined, path=f"join[{left.path}, {right.path}]", filters=())

    def _plan_subquery_predicate(self, node: exp.Query, scope: Scope) -> Relation:
        sub = self.plan_query(node, scope.child())
        self.builder.anchor(sub.fields)
        current = scope.entries[0][1] if scope.entries else None
        self.builder.add(
            PendingOperator(
                id=self._operator_id("join", f"{current.path if current else ''}, {sub.path}"),
                kind="join",
                label=short(f"subquery join ({render(node)})"),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(sub.tables | (current.tables if current else frozenset()))),
                reason="a subquery in a condition is a semi-join that keeps the rows of both inputs",
                aspects=[Aspect(name="subquery", value=lineage_list(sub.fields), display=render(node))],
                schemas=[("left input schema", current.fields if current else [])],
            )
        )
        return sub

    # ----- SELECT --------------------------------------------------------------------------------

    def _plan_select(self, select: exp.Select, outer: Scope) -> Relation:
        return SelectPlanner(self, select, outer).plan()
