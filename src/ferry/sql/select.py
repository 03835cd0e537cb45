"""Planning one ``SELECT`` block: FROM and joins, WHERE, GROUP BY, OVER, projection, ORDER BY."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from sqlglot import exp

from ferry.sql.exceptions import SqlError, SqlParseError
from ferry.sql.lineage import (
    RANKING_FUNCTIONS,
    Field,
    Filter,
    Relation,
    WindowSpec,
    describe_list,
    interval_text,
    is_aggregate_call,
    lineage_list,
)
from ferry.sql.model import Aspect, OperatorKind
from ferry.sql.parser import render
from ferry.sql.pending import (
    WINDOW_TVFS,
    PendingOperator,
    changelog_aspect,
    conjuncts,
    filters_aspect,
    render_list,
    short,
    window_aspect,
    window_property,
)
from ferry.sql.scope import Scope

if TYPE_CHECKING:
    from ferry.sql.query import QueryPlanner

__all__ = ["SelectPlanner"]

_EMIT_PREFIX = "table.exec.emit."


def _emit_aspect(settings: Mapping[str, str]) -> Aspect:
    emit = sorted((k, v) for k, v in settings.items() if k.startswith(_EMIT_PREFIX))
    text = ", ".join(f"{k} = {v}" for k, v in emit)
    return Aspect(name="emit strategy", value=text or "default", display=text or "on window end")


def _key_aspect(name: str, fields: list[Field], texts: list[str]) -> Aspect:
    return Aspect(
        name=name,
        value=" ; ".join(sorted(f.lineage for f in fields)) or "()",
        display=", ".join(texts) or "()",
    )


class SelectPlanner:
    """Plans one ``SELECT`` into a relation, recording its operators."""

    def __init__(self, planner: QueryPlanner, select: exp.Select, outer: Scope) -> None:
        self.planner = planner
        self.builder = planner.builder
        self.select = select
        self.scope = Scope(outer=outer, ctes=dict(outer.ctes), path=outer.path)

    @property
    def statement(self) -> str:
        return self.builder.statement

    # ----- the block -----------------------------------------------------------------------------

    def plan(self) -> Relation:
        select = self.select
        where_node = select.args.get("where")
        where = conjuncts(where_node.this) if isinstance(where_node, exp.Where) else []
        relation = self._plan_from(where)
        filters = self._filters(where)
        if filters:
            relation = self._with_filters(relation, relation.filters + tuple(filters))
        group = select.args.get("group")
        having = select.args.get("having")
        if isinstance(group, exp.Group) or self._has_aggregates():
            relation = self._aggregate(relation, group if isinstance(group, exp.Group) else None)
            if isinstance(having, exp.Having):
                relation = self._with_filters(
                    relation, relation.filters + tuple(self._filters([having.this]))
                )
        if any(
            isinstance(node, exp.Window) for item in select.expressions for node in item.find_all(exp.Window)
        ):
            relation = self._over(relation)
        output = self._project(relation)
        if select.args.get("distinct"):
            output = self.planner._distinct(
                output, short(f"SELECT DISTINCT {render_list(select.expressions)}")
            )
        if select.args.get("order") is not None or select.args.get("limit") is not None:
            output = self._sort(output)
        return output

    def _with_filters(self, relation: Relation, filters: tuple[Filter, ...]) -> Relation:
        return dataclasses.replace(relation, filters=filters)

    def _filters(self, predicates: list[exp.Expr]) -> list[Filter]:
        made: list[Filter] = []
        for predicate in predicates:
            text, refs = self.planner.lineage(predicate, self.scope)
            self.builder.anchor(refs)
            made.append(Filter(lineage=text, display=render(predicate)))
        return made

    def _plan_from(self, where: list[exp.Expr]) -> Relation:
        from_ = self.select.args.get("from_")
        if not isinstance(from_, exp.From):
            return Relation(fields=[], path="values", tables=frozenset())
        alias, relation = self.planner._plan_from_item(from_.this, self.scope)
        match = self.select.args.get("match")
        if isinstance(match, exp.MatchRecognize):
            relation = self._match_recognize(relation, alias, match)
            match_alias = match.args.get("alias")
            alias = match_alias.name if isinstance(match_alias, exp.TableAlias) else alias
        self.scope.entries.append((alias, relation))
        for join in self.select.args.get("joins") or []:
            right_alias, right, relation = self.planner._plan_join(
                relation, self.scope, join, self.scope, where
            )
            self.scope.entries.append((right_alias, right))
        return relation

    # ----- MATCH_RECOGNIZE -----------------------------------------------------------------------

    def _match_recognize(self, relation: Relation, alias: str, match: exp.MatchRecognize) -> Relation:
        pattern = match.args.get("pattern")
        pattern_text = pattern.name if isinstance(pattern, exp.Var) else ""
        defines = [d for d in match.args.get("define") or [] if isinstance(d, exp.Alias)]
        variables = frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", pattern_text)) | {
            d.alias for d in defines
        }
        inner = Scope(entries=[(alias, relation)], outer=self.scope.outer, path=self.scope.path)
        inner.pattern_variables = frozenset(variables)
        refs: list[Field] = []

        def lineage(node: exp.Expr) -> str:
            text, found = self.planner.lineage(node, inner)
            refs.extend(found)
            return text

        partition = [inner.resolve(c, self.scope.path) for c in match.args.get("partition_by") or []]
        order_node = match.args.get("order")
        order = [lineage(o) for o in order_node.expressions] if isinstance(order_node, exp.Order) else []
        measures: list[tuple[str, str]] = []
        for measure in match.args.get("measures") or []:
            node = measure.this
            name = node.alias if isinstance(node, exp.Alias) else render(node)
            value = node.this if isinstance(node, exp.Alias) else node
            measures.append((name, lineage(value)))
        define_texts = sorted(f"{d.alias} AS {lineage(d.this)}" for d in defines)
        self.builder.anchor([*partition, *refs])
        operator_id = self.planner._operator_id("match-recognize", relation.path)
        rows = match.args.get("rows")
        after = match.args.get("after")
        aspects = [
            Aspect(name="partition", value=lineage_list(partition), display=describe_list(partition) or "()"),
            Aspect(name="order", value=", ".join(order), display=render(order_node) if order_node else "()"),
            Aspect(name="pattern", value=pattern_text, display=pattern_text),
            Aspect(
                name="define",
                value=" ; ".join(define_texts),
                display=", ".join(f"{d.alias} AS {render(d.this)}" for d in defines),
            ),
            Aspect(
                name="measures",
                value=" ; ".join(f"{n}={v}" for n, v in measures),
                display=", ".join(n for n, _ in measures),
            ),
            Aspect(
                name="output mode",
                value=" ".join(
                    (render(rows) if rows else "ONE ROW PER MATCH", render(after) if after else "")
                ).strip(),
                display=f"{rows.name if isinstance(rows, exp.Var) else 'ONE ROW PER MATCH'}",
            ),
            changelog_aspect(relation),
            filters_aspect(relation.filters),
        ]
        self.builder.add(
            PendingOperator(
                id=operator_id,
                kind="match-recognize",
                label=short(f"MATCH_RECOGNIZE PATTERN ({pattern_text})"),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason="pattern matching keeps partial matches and the rows they are made of",
                aspects=aspects,
                schemas=[("input schema", relation.fields)],
            )
        )
        fields = list(partition)
        for name, value in measures:
            fields.append(Field(name=name, lineage=f"{operator_id}:{value}", deps=tuple(refs)))
        if isinstance(rows, exp.Var) and rows.name.upper().startswith("ALL ROWS"):
            fields = [*relation.fields, *fields[len(partition) :]]
        return Relation(fields=fields, path=f"match-recognize[{relation.path}]", tables=relation.tables)

    # ----- aggregation ---------------------------------------------------------------------------

    def _has_aggregates(self) -> bool:
        having = self.select.args.get("having")
        nodes = [*self.select.expressions, *([having] if isinstance(having, exp.Having) else [])]
        return any(True for node in nodes for _ in self._calls(node, None))

    def _calls(self, node: exp.Expr, grouped: set[int] | None) -> Iterator[exp.Expr]:
        """Aggregate calls in ``node`` (not inside ``OVER`` or a subquery)."""
        if is_aggregate_call(node):
            yield node
            return
        if isinstance(node, exp.Window | exp.Query):
            return
        if (
            grouped is not None
            and isinstance(node, exp.Anonymous)
            and window_property(node) is None
            and self._reads_ungrouped(node, grouped)
        ):
            # A user-defined aggregate function: a call over columns that are not grouped.
            yield node
            return
        for child in node.iter_expressions():
            yield from self._calls(child, grouped)

    def _reads_ungrouped(self, node: exp.Expr, grouped: set[int]) -> bool:
        columns = list(node.find_all(exp.Column))
        if not columns:
            return False
        for column in columns:
            try:
                found = self.scope.resolve(column, self.scope.path)
            except SqlParseError:
                return False
            if id(found) not in grouped:
                return True
        return False

    def _legacy_window(self, call: exp.Anonymous) -> WindowSpec:
        kind = call.name.upper()
        if not call.expressions or not isinstance(call.expressions[0], exp.Column):
            raise SqlError(f"{kind} in GROUP BY needs a time column: {render(call)}")
        time_field = self.scope.resolve(call.expressions[0], self.scope.path)
        self.builder.anchor([time_field])
        return WindowSpec(
            kind=kind,
            time_lineage=time_field.lineage,
            time_display=time_field.name,
            parameters=tuple(interval_text(v) for v in call.expressions[1:]),
            display_parameters=tuple(render(v) for v in call.expressions[1:]),
        )

    def _aggregate(self, relation: Relation, group: exp.Group | None) -> Relation:
        scope = self.scope
        group_exprs = list(group.expressions) if group is not None else []
        keys: list[Field] = []
        key_texts: list[str] = []
        window_keys: list[Field] = []
        group_map: dict[int, Field] = {}
        replacements: dict[str, Field] = {}
        spec: WindowSpec | None = None
        for expression in group_exprs:
            if isinstance(expression, exp.Anonymous) and expression.name.upper() in WINDOW_TVFS - {
                "CUMULATE"
            }:
                spec = self._legacy_window(expression)
                continue
            source = self._group_source(expression)
            made = source.renamed(source.name)
            group_map[id(source)] = made
            replacements[render(expression)] = made
            if source.window is not None:
                spec = source.window
                window_keys.append(made)
            else:
                keys.append(made)
                key_texts.append(render(expression))
        self.builder.anchor([f.deps[0] for f in [*keys, *window_keys]])
        window = relation.pending_window if isinstance(relation.pending_window, PendingOperator) else None
        if spec is not None and window_keys and window is not None:
            window.emitted = False  # the window table function is part of the window aggregate
        path = f"aggregate[{relation.path}]"
        aggregate_id = self.planner._operator_id("aggregate", relation.path)
        grouped = set(group_map)
        having = self.select.args.get("having")
        nodes = [*self.select.expressions, *([having] if isinstance(having, exp.Having) else [])]
        calls: dict[str, exp.Expr] = {}
        for node in nodes:
            for call in self._calls(node, grouped if group_exprs else None):
                calls.setdefault(render(call), call)
        call_fields: list[Field] = []
        distinct: list[str] = []
        for text, call in calls.items():
            fingerprint, refs = self.planner.lineage(call, scope)
            inner = call.this if isinstance(call, exp.Filter) else call
            made = Field(name=text, lineage=f"{aggregate_id}:{fingerprint}", deps=tuple(refs))
            replacements[text] = made
            call_fields.append(made)
            if isinstance(inner.args.get("this"), exp.Distinct):
                distinct.append(fingerprint)
                self.builder.anchor(refs)
                continue
            self._add_call(
                relation,
                aggregate_id,
                kind="aggregate-call",
                output=made,
                fingerprint=fingerprint,
                reason="an accumulator per group",
            )
        properties: list[Field] = []
        for node in nodes:
            for found in node.find_all(exp.Anonymous):
                prop = window_property(found)
                if prop is not None and spec is not None:
                    made = Field(
                        name=render(found),
                        lineage=f"{spec.value}.{prop[1]}",
                        window=spec,
                        window_role=prop[1],
                    )
                    replacements[render(found)] = made
                    properties.append(made)
        aspects = [_key_aspect("group keys", keys, key_texts)]
        if spec is not None:
            aspects.append(window_aspect(spec))
            aspects.append(_emit_aspect(self.builder.settings))
        if distinct:
            aspects.append(
                Aspect(
                    name="distinct aggregates",
                    value=" ; ".join(sorted(distinct)),
                    display=", ".join(
                        t
                        for t, c in calls.items()
                        if isinstance(
                            (c.this if isinstance(c, exp.Filter) else c).args.get("this"), exp.Distinct
                        )
                    ),
                )
            )
            split = self.builder.settings.get("table.optimizer.distinct-agg.split.enabled", "false")
            aspects.append(
                Aspect(
                    name="distinct split",
                    value=split.lower(),
                    display=f"distinct-agg.split.enabled = {split}",
                )
            )
        aspects.extend([changelog_aspect(relation), filters_aspect(relation.filters)])
        label = f"GROUP BY {render_list(group_exprs)}" if group_exprs else "aggregate without GROUP BY"
        self.builder.add(
            PendingOperator(
                id=aggregate_id,
                kind="aggregate",
                label=short(label),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason=(
                    "a window aggregate keeps one accumulator per key and window"
                    if spec is not None
                    else "a group aggregate keeps one accumulator per group"
                ),
                aspects=aspects,
            )
        )
        self.scope = scope.with_replacements(replacements, group_map)
        early = any(k.startswith(_EMIT_PREFIX + "early-fire.enabled") for k in self.builder.settings)
        return Relation(
            fields=[*keys, *window_keys, *call_fields, *properties],
            path=path,
            tables=relation.tables,
            updating=spec is None or early or relation.updating,
            upsert_keys=(tuple([*keys, *window_keys]),),
        )

    def _add_call(
        self,
        relation: Relation,
        parent: str,
        *,
        kind: OperatorKind,
        output: Field,
        fingerprint: str,
        reason: str,
    ) -> None:
        """Record one call computed by the stateful operator ``parent`` (an aggregate or OVER)."""
        self.builder.add(
            PendingOperator(
                id=f"{parent}/{output.name}",
                kind=kind,
                label=output.name,
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason=reason,
                parent=parent,
                fingerprint=fingerprint,
                output=output,
            )
        )

    def _group_source(self, expression: exp.Expr) -> Field:
        if isinstance(expression, exp.Column):
            try:
                return self.scope.resolve(expression, self.scope.path)
            except SqlParseError:
                for item in self.select.expressions:
                    if isinstance(item, exp.Alias) and item.alias == expression.name:
                        return self.planner._derived(item.alias, item.this, self.scope)
                raise
        return self.planner._derived(render(expression), expression, self.scope)

    # ----- OVER ----------------------------------------------------------------------------------

    def _window_definition(self, node: exp.Window) -> exp.Window:
        if node.args.get("partition_by") or node.args.get("order") or node.args.get("spec"):
            return node
        name = node.alias
        for definition in self.select.args.get("windows") or []:
            if isinstance(definition, exp.Window) and definition.name == name:
                return definition
        return node

    def _over(self, relation: Relation) -> Relation:
        groups: dict[str, list[exp.Window]] = {}
        specs: dict[str, tuple[list[Field], str, str, str]] = {}
        orders: dict[str, str] = {}
        for item in self.select.expressions:
            for node in item.find_all(exp.Window):
                definition = self._window_definition(node)
                partition = [
                    self.planner._derived(render(p), p, self.scope)
                    for p in definition.args.get("partition_by") or []
                ]
                order_node = definition.args.get("order")
                order = (
                    self.planner.lineage(order_node, self.scope)[0]
                    if isinstance(order_node, exp.Order)
                    else ""
                )
                frame_node = definition.args.get("spec")
                frame = (
                    self.planner.lineage(frame_node, self.scope)[0]
                    if isinstance(frame_node, exp.Expr)
                    else ""
                )
                ranking = node.this.sql_name().upper() if isinstance(node.this, exp.Func) else ""
                kind = "rank" if ranking in RANKING_FUNCTIONS else "over"
                key = f"{kind}|{lineage_list(partition)}|{order}|{frame}"
                groups.setdefault(key, []).append(node)
                display = " ".join(
                    part
                    for part in (
                        f"PARTITION BY {render_list(definition.args.get('partition_by') or [])}"
                        if definition.args.get("partition_by")
                        else "",
                        render(order_node) if isinstance(order_node, exp.Order) else "",
                        render(frame_node) if isinstance(frame_node, exp.Expr) else "",
                    )
                    if part
                )
                specs[key] = (partition, order, frame, display)
                orders[key] = render(order_node) if isinstance(order_node, exp.Order) else "()"
                self.builder.anchor([d for p in partition for d in p.deps])
                if isinstance(order_node, exp.Order):
                    self.builder.anchor(self.planner.lineage(order_node, self.scope)[1])
        outputs: list[Field] = []
        updating = relation.updating
        keys = relation.upsert_keys
        replacements = dict(self.scope.replacements)
        for key, nodes in groups.items():
            partition, order, frame, display = specs[key]
            kind = key.split("|", 1)[0]
            operator_id = self.planner._operator_id(kind, relation.path)
            aspects = [
                Aspect(
                    name="partition", value=lineage_list(partition), display=describe_list(partition) or "()"
                ),
                Aspect(name="order", value=order, display=orders[key]),
                Aspect(name="window frame", value=frame or "default", display=frame or "default"),
                changelog_aspect(relation),
                filters_aspect(relation.filters),
            ]
            if kind == "rank":
                aspects.append(
                    Aspect(
                        name="rank function",
                        value=render_list(n.this for n in nodes),
                        display=render_list(n.this for n in nodes),
                    )
                )
            self.builder.add(
                PendingOperator(
                    id=operator_id,
                    kind="rank" if kind == "rank" else "over",
                    label=short(f"{'ROW_NUMBER/RANK' if kind == 'rank' else 'OVER'} ({display})"),
                    stateful=True,
                    statement=self.statement,
                    tables=tuple(sorted(relation.tables)),
                    reason=(
                        "ranking keeps the rows of each partition"
                        if kind == "rank"
                        else "an OVER aggregate keeps the rows of its frame and an accumulator per partition"
                    ),
                    aspects=aspects,
                    schemas=[("input schema", relation.fields)],
                )
            )
            for node in nodes:
                text = render(node.this)
                fingerprint, refs = self.planner.lineage(node.this, self.scope)
                made = Field(name=text, lineage=f"{operator_id}:{fingerprint}", deps=tuple(refs))
                replacements[render(node)] = made
                outputs.append(made)
                if kind == "over":
                    self._add_call(
                        relation,
                        operator_id,
                        kind="over-call",
                        output=made,
                        fingerprint=fingerprint,
                        reason="an accumulator per partition",
                    )
                else:
                    updating = True
                    keys = (tuple(d for p in partition for d in p.deps),)
        self.scope = self.scope.with_replacements(replacements, self.scope.group_map)
        return Relation(
            fields=[*relation.fields, *outputs],
            path=f"over[{relation.path}]",
            tables=relation.tables,
            updating=updating,
            upsert_keys=keys,
            filters=(),
        )

    # ----- projection and ORDER BY ---------------------------------------------------------------

    def _project(self, relation: Relation) -> Relation:
        fields: list[Field] = []
        passthrough: dict[int, Field] = {}
        trivial = True
        for item in self.select.expressions:
            if isinstance(item, exp.Star):
                expanded = self.scope.all_fields() if self.scope.entries else relation.fields
                fields.extend(expanded)
                passthrough.update({id(f): f for f in expanded})
                continue
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                owner = self.scope.relation(item.table)
                if owner is None:
                    raise SqlError(f"unknown table {item.table} in {render(item)}")
                fields.extend(owner.visible_fields())
                passthrough.update({id(f): f for f in owner.visible_fields()})
                continue
            expression = item.this if isinstance(item, exp.Alias) else item
            name = item.alias_or_name or render(expression)
            made = self.planner._derived(name, expression, self.scope)
            if isinstance(expression, exp.Column) and made.deps:
                passthrough.setdefault(id(made.deps[0]), made)
            elif render(expression) not in self.scope.replacements:
                trivial = False
            fields.append(made)
            self.scope.aliases.setdefault(name, made)
        keys = tuple(
            tuple(passthrough[id(f)] for f in key)
            for key in relation.upsert_keys
            if all(id(f) in passthrough for f in key)
        )
        where = self.select.args.get("where")
        if not trivial or isinstance(where, exp.Where) or self.select.meta.get("ferry_transform"):
            condition = f" WHERE {render(where.this)}" if isinstance(where, exp.Where) else ""
            self.planner._add_stateless(
                "calc", short(f"SELECT {render_list(self.select.expressions)}{condition}"), relation.tables
            )
        # The projection names every column it reads, so it is no longer an open table.
        return dataclasses.replace(
            relation, fields=fields, upsert_keys=keys, open_table=None, extra_fields={}
        )

    def _sort(self, relation: Relation) -> Relation:
        scope = Scope(entries=[("", relation)], outer=self.scope, path=self.scope.path)
        order = self.select.args.get("order")
        order_text = ""
        if isinstance(order, exp.Order):
            order_text, refs = self.planner.lineage(order, scope)
            self.builder.anchor(refs)
        limit = self.select.args.get("limit")
        limit_text = render(limit) if isinstance(limit, exp.Expr) else ""
        self.builder.add(
            PendingOperator(
                id=self.planner._operator_id("sort", relation.path),
                kind="sort",
                label=short(
                    " ".join(
                        p for p in (render(order) if isinstance(order, exp.Order) else "", limit_text) if p
                    )
                ),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason="sorting a stream (ORDER BY, LIMIT) keeps the rows not yet emitted",
                aspects=[
                    Aspect(
                        name="order",
                        value=order_text,
                        display=render(order) if isinstance(order, exp.Order) else "()",
                    ),
                    Aspect(name="limit", value=limit_text, display=limit_text or "(none)"),
                    changelog_aspect(relation),
                    filters_aspect(relation.filters),
                ],
                schemas=[("input schema", relation.fields)],
            )
        )
        return Relation(
            fields=relation.fields,
            path=f"sort[{relation.path}]",
            tables=relation.tables,
            updating=relation.updating or limit is not None,
            upsert_keys=relation.upsert_keys,
        )
