"""Deriving the operator plan of a Flink SQL script.

The planner walks each statement's query the way Flink's planner lays out operators: sources,
projections and filters (stateless ``calc``), group and window aggregates with one entry per
aggregate call, joins (regular, interval, temporal; a lookup join keeps no state), ``OVER``
aggregates, ranking, sorting, ``MATCH_RECOGNIZE``, set operations, the ChangelogNormalize that an
upsert source needs, and the upsert materializer in front of a sink whose primary key the incoming
change log does not match. Columns are pruned as Flink prunes them: a join keeps in its state only
the columns used above it or in its condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from ferry.sql.connectors import source_changelog
from ferry.sql.exceptions import SqlError, SqlParseError
from ferry.sql.lineage import Field, Relation, lineage_list, substitute
from ferry.sql.model import Aspect, Operator, Plan, SourceInfo
from ferry.sql.parser import InsertDef, QueryDef, Script, Statement, TableDef, hint_options
from ferry.sql.pending import PendingOperator
from ferry.sql.query import QueryPlanner

__all__ = ["PlanBuilder", "build_plan"]


@dataclass(slots=True)
class _SourceUse:
    table: TableDef
    defined: bool
    hints: dict[str, str] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    scans: list[Relation] = field(default_factory=list)


def _ttl_enabled(settings: Mapping[str, str]) -> str:
    value = settings.get("table.exec.state.ttl", "0").strip().lower()
    return "disabled" if value in {"", "0", "0 ms", "0ms", "0 s", "0s"} else "enabled"


class PlanBuilder:
    """Collects operators across the statements of one script."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.settings: Mapping[str, str] = script.settings
        self.pending: list[PendingOperator] = []
        self.anchors: list[Field] = []
        self.roots: list[Field] = []
        self.sources: dict[str, _SourceUse] = {}
        self.statement = ""
        self.sink_tables: dict[str, TableDef] = {}
        self._ids: dict[str, int] = {}

    # ----- operators -----------------------------------------------------------------------------

    def unique_id(self, base: str) -> str:
        """``base``, or ``base#n`` when the statement already has an operator with that id."""
        count = self._ids.get(base, 0) + 1
        self._ids[base] = count
        return base if count == 1 else f"{base}#{count}"

    def add(self, operator: PendingOperator) -> PendingOperator:
        """Record an operator; stateful ones also depend on the state TTL setting."""
        if operator.stateful and operator.parent is None:
            operator.aspects.append(
                Aspect(
                    name="state TTL",
                    value=_ttl_enabled(self.settings),
                    display=f"table.exec.state.ttl = {self.settings.get('table.exec.state.ttl', '0')}",
                )
            )
        self.pending.append(operator)
        return operator

    def anchor(self, fields: Iterable[Field]) -> None:
        """Mark fields as read by an operator (a key, a condition), whatever happens above."""
        self.anchors.extend(fields)

    # ----- sources -------------------------------------------------------------------------------

    def scan(self, name: str, table: exp.Table | None) -> Relation:
        """The relation a table reference reads, registering the source."""
        definition = self.script.table(name)
        # A table without columns (a catalog table, a pipeline's source table) has an unknown schema.
        defined = definition is not None and bool(definition.columns)
        if definition is None:
            definition = TableDef(name=name, columns=(), primary_key=(), watermarks=(), options={})
        use = self.sources.get(definition.name)
        if use is None:
            use = _SourceUse(table=definition, defined=defined)
            self.sources[definition.name] = use
        if table is not None:
            for key, value in hint_options(table).items():
                use.hints.setdefault(key, value)
        if self.statement not in use.statements:
            use.statements.append(self.statement)
        relation = self._scan_relation(definition, defined, use)
        use.scans.append(relation)
        return relation

    def _scan_relation(self, table: TableDef, defined: bool, use: _SourceUse) -> Relation:
        name = table.name
        rowtime = {watermark.column for watermark in table.watermarks}
        fields: list[Field] = []
        by_name: dict[str, Field] = {}
        for column in table.columns:
            if column.kind == "computed":
                continue
            lineage = f"{name}.{column.name}:{column.type}"
            if column.kind == "metadata":
                lineage += f" METADATA '{column.metadata_key}'"
            made = Field(name=column.name, lineage=lineage, type=column.type)
            by_name[column.name] = made
        for column in table.columns:
            if column.kind != "computed":
                made = by_name[column.name]
            else:
                made = self._computed_field(table, column.name, column.expression, by_name)
            if column.name in rowtime:
                made.time = "rowtime"
            fields.append(made)
        options = {**table.options, **use.hints}
        changelog = source_changelog(table.connector, options, bool(table.primary_key))
        key_fields = tuple(by_name[k] for k in table.primary_key if k in by_name)
        relation = Relation(
            fields=fields,
            path=name,
            tables=frozenset({name}),
            updating=changelog != "insert-only",
            upsert_keys=(key_fields,) if key_fields else (),
            open_table=None if defined else name,
        )
        duplicates = self.settings.get("table.exec.source.cdc-events-duplicate", "false").lower() == "true"
        if changelog == "upsert" or (duplicates and changelog == "all" and key_fields):
            self._changelog_normalize(table, relation, key_fields, changelog)
        return relation

    def _computed_field(
        self, table: TableDef, name: str, expression: exp.Expr | None, columns: Mapping[str, Field]
    ) -> Field:
        assert expression is not None
        refs: list[Field] = []

        def replace(node: exp.Expr) -> exp.Expr | None:
            if isinstance(node, exp.Column):
                target = columns.get(node.name)
                if target is None:
                    raise SqlError(
                        f"computed column {table.name}.{name} refers to unknown column {node.name}"
                    )
                refs.append(target)
                return exp.Var(this=target.lineage)
            return None

        lineage = substitute(expression, replace)
        proctime = isinstance(expression, exp.Anonymous) and expression.name.upper() == "PROCTIME"
        return Field(
            name=name, lineage=f"({lineage})", deps=tuple(refs), time="proctime" if proctime else None
        )

    def _changelog_normalize(
        self, table: TableDef, relation: Relation, keys: tuple[Field, ...], changelog: str
    ) -> None:
        why = (
            "the source emits upserts: Flink keeps the last row of each key to restore UPDATE_BEFORE"
            if changelog == "upsert"
            else "table.exec.source.cdc-events-duplicate: Flink keeps the last row of each key"
        )
        operator = PendingOperator(
            id=self.unique_id(f"{self.statement}/changelog-normalize[{table.name}]"),
            kind="changelog-normalize",
            label=f"ChangelogNormalize of {table.name} (key {', '.join(table.primary_key) or 'none'})",
            stateful=True,
            statement=self.statement,
            tables=(table.name,),
            reason=why,
            aspects=[
                Aspect(
                    name="primary key",
                    value=lineage_list(keys),
                    display=", ".join(table.primary_key) or "(none)",
                )
            ],
            schemas=[("input schema", relation.fields)],
        )
        self.add(operator)
        self.anchor(keys)

    # ----- statements ----------------------------------------------------------------------------

    def plan_statements(self) -> None:
        queries = 0
        for statement in self.script.statements:
            if isinstance(statement, InsertDef):
                self.statement = self.unique_id(statement.target)
            else:
                queries += 1
                self.statement = f"query#{queries}"
            try:
                self._plan_statement(statement)
            except SqlParseError as error:
                if self.script.path and not error.path:
                    raise error.with_path(self.script.path) from error
                raise

    def _plan_statement(self, statement: Statement) -> None:
        planner = QueryPlanner(self)
        relation = planner.plan_root(statement.query)
        self.roots.extend(relation.fields)
        if isinstance(statement, QueryDef):
            self.add(
                PendingOperator(
                    id=f"{self.statement}/sink",
                    kind="sink",
                    label="SELECT (results collected by the client)",
                    stateful=False,
                    statement=self.statement,
                    tables=tuple(sorted(relation.tables)),
                )
            )
            return
        self._plan_sink(statement, relation)

    def _plan_sink(self, statement: InsertDef, relation: Relation) -> None:
        target = self.script.table(statement.target)
        options = {**(target.options if target else {}), **statement.hint_options}
        connector = f" ({options['connector']})" if "connector" in options else ""
        self.add(
            PendingOperator(
                id=f"{self.statement}/sink",
                kind="sink",
                label=f"INSERT INTO {statement.target}{connector}",
                stateful=False,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
            )
        )
        if target is not None:
            self.sink_tables[self.statement] = target
        if target is None or not target.primary_key:
            return
        if statement.columns is not None:
            columns = list(statement.columns)
        else:
            columns = [
                c.name
                for c in target.columns
                if c.kind == "physical" or (c.kind == "metadata" and not c.virtual)
            ]
        positions = [columns.index(k) for k in target.primary_key if k in columns]
        key_fields = {id(relation.fields[p]) for p in positions if p < len(relation.fields)}
        mode = self.settings.get("table.exec.sink.upsert-materialize", "AUTO").strip().upper()
        matched = any(key and {id(f) for f in key} <= key_fields for key in relation.upsert_keys) or any(
            not key for key in relation.upsert_keys
        )
        needed = mode == "FORCE" or (mode == "AUTO" and relation.updating and not matched)
        if not needed:
            return
        self.add(
            PendingOperator(
                id=f"{self.statement}/upsert-materializer",
                kind="upsert-materializer",
                label=(
                    f"upsert materializer in front of {statement.target} "
                    f"(key {', '.join(target.primary_key)})"
                ),
                stateful=True,
                statement=self.statement,
                tables=tuple(sorted(relation.tables)),
                reason=(
                    "the sink's primary key is not the upsert key of the change log it receives: "
                    "Flink keeps the rows of each key to order the changes"
                ),
                aspects=[
                    Aspect(
                        name="sink primary key",
                        value=", ".join(target.primary_key),
                        display=", ".join(target.primary_key),
                    ),
                    Aspect(name="input changelog", value="updating", display="updates and deletes"),
                ],
                schemas=[("input schema", relation.fields)],
            )
        )
        self.anchor(relation.fields)

    # ----- result --------------------------------------------------------------------------------

    def used_fields(self) -> set[int]:
        used: set[int] = set()
        work = [*self.roots, *self.anchors]
        while work:
            current = work.pop()
            if id(current) in used:
                continue
            used.add(id(current))
            work.extend(current.deps)
        return used

    def build(self) -> Plan:
        self.plan_statements()
        used = self.used_fields()
        operators: list[Operator] = []
        infos: dict[str, SourceInfo] = {}
        for name, use in self.sources.items():
            options = {**use.table.options, **use.hints}
            columns: list[str] = []
            for relation in use.scans:
                for f in [*relation.fields, *relation.extra_fields.values()]:
                    if id(f) in used and f.name not in columns:
                        columns.append(f.name)
            changelog = source_changelog(
                options.get("connector", "").lower() or None, options, bool(use.table.primary_key)
            )
            infos[name] = SourceInfo(
                table=use.table,
                options=options,
                changelog=changelog,
                used_columns=tuple(columns),
                statements=tuple(use.statements),
                defined=use.defined,
            )
            connector = options.get("connector", "unknown connector")
            operators.append(
                Operator(
                    id=f"source {name}",
                    kind="source",
                    label=f"{name} ({connector})",
                    stateful=False,
                    tables=(name,),
                    reason="keeps the read position (offsets, splits) in its state",
                )
            )
        kept = [
            pending
            for pending in self.pending
            if pending.emitted and (pending.output is None or id(pending.output) in used)
        ]
        children: dict[str, list[PendingOperator]] = {}
        for pending in kept:
            if pending.parent is not None:
                children.setdefault(pending.parent, []).append(pending)
        for pending in kept:
            if pending.parent is None:
                operators.append(pending.finalize(used))
                operators.extend(child.finalize(used) for child in children.get(pending.id, []))
        statements = tuple(dict.fromkeys(op.statement for op in operators if op.statement))
        return Plan(
            operators=tuple(operators),
            sources=infos,
            settings=dict(self.settings),
            statements=statements,
            sink_tables=dict(self.sink_tables),
        )


def build_plan(script: Script) -> Plan:
    """The operator plan of a parsed script."""
    return PlanBuilder(script).build()
