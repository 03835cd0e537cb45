"""Transforms: the projections and filters of a job's ``transform`` blocks (Flink CDC's).

A transform applies to the source tables its ``source-table`` names (a table pattern,
:class:`~ferry.model.table_patterns.TableSelector`: ``mydb.orders``, ``mydb.\\.*``); the first
transform that matches a table is the one it gets. Its
``projection`` (``*, UPPER(name) AS name_upper, price * qty AS total``) and ``filter``
(``price > 10 AND region <> 'eu'``) are parsed once with sqlglot and compiled, once per table and
source schema, into Python closures: a row costs one call per output column and none for parsing.

The projected schema is what the router and the sink see. ``*`` expands to the source's columns,
so a column added at the source flows through; a computed column gets the type its expression
has (a ``CAST`` target, arithmetic widened with :func:`~ferry.model.types.widen`, ``STRING`` for
string functions, ``BOOLEAN`` for conditions); ``primary-keys`` replaces the key. A schema change
of a source table becomes the change of its projected schema; a change that removes a column an
expression needs fails, naming the transform, the column and the table.

Evaluation follows SQL: NULL in, NULL out, three-valued ``AND``/``OR``/``NOT``, and a filter keeps
a row only when it is TRUE. Temporal functions read the session time zone (``Session``), calls to
the job's user-defined functions go to their Python callables, ``__data_event_type__`` is the kind
of the image being projected (``+I``, ``-U``, ``+U``, ``-D``), ``converter-after-transform:
SOFT_DELETE`` writes a delete as the insert of the row it removes, and ``table-options``
become the projected table's comment (``comment``) and options (the others, for the sink that
creates the table). An expression that fails on a row (a
cast that cannot be made, a division by zero) sends that row to the dead-letter destination with
the reason.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Protocol

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenType

from ferry.exceptions import TerminalError
from ferry.model.apply import apply_schema_change, diff_schemas
from ferry.model.events import (
    CreateTable,
    DataChange,
    Op,
    RenameColumn,
    Row,
    SchemaChange,
    TruncateTable,
)
from ferry.model.schema import Column, Schema, TableId
from ferry.model.table_patterns import TableSelector
from ferry.model.types import STRING
from ferry.sql import is_stateless
from ferry.sql.exceptions import SqlError
from ferry.sql.lineage import is_aggregate_call
from ferry.transform.compiled import CompileError, Fn, RowKind, Session
from ferry.transform.expressions import (
    DIALECT,
    EVENT_TYPE_COLUMN,
    METADATA_COLUMNS,
    SUPPORTED,
    Compiler,
    unsupported,
)
from ferry.transform.function_catalog import dialect_for
from ferry.transform.sqlvalues import ROW_ERRORS, ExpressionError
from ferry.transform.udf import UserFunction

#: Windowing table functions and group-window functions: they aggregate over windows of rows.
log = logging.getLogger(__name__)

_WINDOWS = frozenset(
    f"{kind}{suffix}"
    for kind in ("TUMBLE", "HOP", "SESSION", "CUMULATE")
    for suffix in ("", "_START", "_END", "_ROWTIME", "_PROCTIME")
)


class TransformError(TerminalError):
    """A transform cannot be applied to a table's schema (a missing column, a type it cannot take)."""

    def __init__(
        self, message: str, *, transform: str, table: str | None = None, column: str | None = None
    ) -> None:
        super().__init__(f"{transform}: {message}")
        self.transform = transform
        self.table = table
        self.column = column


class TrackedSchema(Protocol):
    """A source table as the schema lookup knows it: its schema now."""

    @property
    def schema(self) -> Schema: ...


class SchemaLookup(Protocol):
    """Where the schemas of the source tables are looked up: the schema tracker
    (:class:`ferry.pipeline.tracker.SchemaTracker`)."""

    @property
    def tables(self) -> Mapping[TableId, TrackedSchema]: ...


class TransformSpec(Protocol):
    """One ``transform`` block, as the job file gives it (:class:`ferry.config.job.TransformConfig`)."""

    @property
    def source_table(self) -> str: ...
    @property
    def projection(self) -> str | None: ...
    @property
    def filter(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def primary_key_columns(self) -> tuple[str, ...]: ...
    @property
    def partition_key_columns(self) -> tuple[str, ...]: ...
    @property
    def converter_after_transform(self) -> str | None: ...
    @property
    def table_option_map(self) -> dict[str, str]: ...


class JobWithTransforms(Protocol):
    """A job (:class:`ferry.config.job.JobConfig`) as far as transforms are concerned."""

    @property
    def transform(self) -> Sequence[TransformSpec]: ...


# --------------------------------------------------------------------------------------------------
# Parsing


def _parse(text: str, what: str, functions: tuple[str, ...]) -> exp.Select:
    # YAML reads a bare ``*`` as an alias, so job files write ``\*`` (as Flink CDC's do).
    sql = "SELECT " + text.replace("\\*", "*")
    try:
        parsed = dialect_for(functions).parse(sql)
    except ParseError as e:
        details = e.errors[0] if e.errors else {}
        where = max(1, int(details.get("col") or 1) - len("SELECT "))
        why = re.sub(
            r"<Token token_type: [^,]+, text: ([^,]*),[^>]*>", r"'\1'", str(details.get("description") or e)
        )
        raise ValueError(f"cannot parse the {what} near character {where}: {why}") from None
    except TokenError:
        raise ValueError(f"cannot parse the {what}: a quote is not closed") from None
    kinds = [token.token_type for token in DIALECT.tokenize(sql)]
    if any(a is b is TokenType.COMMA for a, b in pairwise(kinds)) or kinds[-1] is TokenType.COMMA:
        raise ValueError(f"the {what} has an empty item between commas")
    select = parsed[0] if len(parsed) == 1 else None
    if not isinstance(select, exp.Select) or not select.expressions:
        raise ValueError(f"the {what} is not a list of expressions")
    return select


@lru_cache(maxsize=256)
def parse_projection(text: str, functions: tuple[str, ...] = ()) -> exp.Select:
    """``SELECT <projection>``, parsed (``functions``: the names of user-defined functions);
    raises :class:`ValueError` saying where it does not parse."""
    return _parse(text, "projection", functions)


@lru_cache(maxsize=256)
def parse_filter(text: str, functions: tuple[str, ...] = ()) -> exp.Expr:
    """One condition, parsed; raises :class:`ValueError` saying where it does not parse."""
    select = _parse(text, "filter", functions)
    if len(select.expressions) != 1 or any(v for k, v in select.args.items() if k != "expressions"):
        raise ValueError("the filter is one condition, as after WHERE")
    condition: exp.Expr = select.expressions[0]
    return condition


def describe(index: int, spec: TransformSpec) -> str:
    """How errors name a transform: ``transform[0] (source-table inventory.orders)``."""
    about = f" {spec.description!r}" if spec.description else ""
    return f"transform[{index}]{about} (source-table {spec.source_table})"


# --------------------------------------------------------------------------------------------------
# Stateful constructs


def _as_written(node: exp.Expr, sql: str) -> str:
    """A call as sqlglot renders it, with its function's name spelled as in ``sql``, the text it
    was parsed from (``Count(*)``, not ``COUNT(*)``)."""
    text = node.sql(dialect=DIALECT)
    named = node
    while "start" not in named.meta and isinstance(named.this, exp.Expr):
        named = named.this  # a window's function (``lag(x) OVER (...)``)
    start, end = named.meta.get("start"), named.meta.get("end")
    if start is None or end is None:
        return text
    name = sql[start : end + 1]
    return name + text[len(name) :] if text.upper().startswith(name.upper()) else text


def _stateful_construct(
    select: exp.Select, condition: exp.Expr | None, written: tuple[str, str] = ("", "")
) -> str | None:
    """The first construct that keeps state across rows, said in words (``SUM(x) is an aggregate``);
    ``written``: the texts the projection and the filter were parsed from, for their spelling."""
    for root, sql in zip((select, condition), written, strict=True):
        for node in root.walk() if root is not None else ():
            text = _as_written(node, sql)
            if isinstance(node, exp.MatchRecognize):
                return "MATCH_RECOGNIZE is pattern matching over rows"
            if isinstance(node, exp.Window):
                return f"{text} is a window function (OVER)"
            if isinstance(node, exp.Lag | exp.Lead):
                return f"{text} reads other rows (LAG/LEAD)"
            name = node.name.upper() if isinstance(node, exp.Anonymous) else ""
            if name in _WINDOWS:
                return f"{text} is a {name.split('_')[0]} window"
            if is_aggregate_call(node):
                return f"{text} is an aggregate"
    group = select.args.get("group")
    if group is not None:
        return f"{group.sql(dialect=DIALECT).strip()} groups rows"
    return None


def stateful_reason(job: JobWithTransforms) -> str | None:
    """Why a job's transforms keep state across rows (aggregates, ``LAG``/``LEAD``, ``OVER``,
    ``GROUP BY``, ``TUMBLE``/``HOP``/``SESSION``/``CUMULATE`` windows, ``MATCH_RECOGNIZE``), or None.

    A transform is evaluated row by row, so such a job cannot run. Each transform is read as
    ``SELECT projection FROM source-table WHERE filter`` and planned by the Flink SQL front end
    (:func:`ferry.sql.is_stateless`), which says why its operators keep state; the construct is
    named from the expression itself.
    """
    problem = stateful_problem(job)
    return None if problem is None else problem[2]


def stateful_problem(job: JobWithTransforms) -> tuple[int, str, str] | None:
    """:func:`stateful_reason` with where it is: the transform's index and its key (``projection``,
    or ``filter`` when only the filter keeps state), or None."""
    for index, spec in enumerate(job.transform):
        try:
            select = parse_projection(spec.projection or "*")
            condition = parse_filter(spec.filter) if spec.filter else None
        except ValueError:
            continue  # the job file's validation reports it
        written = ("SELECT " + (spec.projection or "*").replace("\\*", "*"), "SELECT " + (spec.filter or ""))
        construct = _stateful_construct(select, condition, written)
        query = select.copy()
        if query.args.get("from") is None and query.args.get("from_") is None:
            query = query.from_(exp.Table(this=exp.to_identifier(spec.source_table, quoted=True)))
        if condition is not None:
            query = query.where(condition.copy())
        try:
            operators = is_stateless(query.sql(dialect=DIALECT)).stateful_operators
        except SqlError:
            operators = ()
        if construct is None and not operators:
            continue
        what = construct or f"{operators[0].label} is a {operators[0].kind} operator"
        why = f" ({operators[0].reason})" if operators else ""
        in_filter = bool(construct) and condition is not None and _stateful_construct(select, None) is None
        return (
            index,
            "filter" if in_filter else "projection",
            f"{describe(index, spec)}: {what}, which keeps state across rows{why}; a transform is "
            "evaluated row by row, so only projections and filters are supported",
        )
    return None


def unsupported_reason(job: JobWithTransforms, functions: Sequence[str] = ()) -> str | None:
    """Why a job's transforms cannot be evaluated, apart from state: a function or an operator that
    transforms do not support, a computed column without a name, a name given twice; or None."""
    problem = unsupported_problem(job, functions)
    return None if problem is None else problem[1]


def unsupported_problem(job: JobWithTransforms, functions: Sequence[str] = ()) -> tuple[int, str] | None:
    """:func:`unsupported_reason` with the index of its transform, or None."""
    for index, spec in enumerate(job.transform):
        try:
            rule = _Rule(index, spec, tuple(functions))
        except TransformError as e:
            return index, str(e)
        nodes = [item.node for item in rule.items or () if item.node is not None]
        for node in [*nodes, *([rule.condition] if rule.condition is not None else [])]:
            part = unsupported(node, functions)
            if part is not None:
                text = part.sql(dialect=DIALECT)
                return index, f"{rule.label}: {text} is not supported; transforms support {SUPPORTED}"
    return None


# --------------------------------------------------------------------------------------------------
# Transforms bound to a table


@dataclass(frozen=True, slots=True)
class _Item:
    """One projection item: ``*`` (``node`` None) or an expression and the name it gets."""

    node: exp.Expr | None
    name: str = "*"
    aliased: bool = False


class _Rule:
    """One transform block, parsed."""

    def __init__(self, index: int, spec: TransformSpec, functions: tuple[str, ...] = ()) -> None:
        self.label = describe(index, spec)
        self.spec = spec
        self.selector = TableSelector(spec.source_table)
        try:
            select = parse_projection(spec.projection, functions) if spec.projection else None
            self.condition = parse_filter(spec.filter, functions) if spec.filter else None
        except ValueError as e:
            raise TransformError(str(e), transform=self.label) from None
        clauses = [
            k for k, v in (select.args if select is not None else {}).items() if v and k != "expressions"
        ]
        if clauses:
            clause = clauses[0].rstrip("_").upper()
            raise TransformError(
                f"the projection is a list of expressions, as after SELECT: {clause} has no place in it",
                transform=self.label,
            )
        self.items = None if select is None else self._items(select)
        if self.items is not None and all(item.node is None for item in self.items):
            self.items = None  # ``*`` alone: the source's columns as they are

    def _items(self, select: exp.Select) -> tuple[_Item, ...]:
        items: list[_Item] = []
        for node in select.expressions:
            if isinstance(node, exp.Star) or (
                isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
            ):
                items.append(_Item(None))
                continue
            inner = node.unalias()
            if not isinstance(node, exp.Alias) and not isinstance(inner, exp.Column):
                text = inner.sql(dialect=DIALECT)
                raise TransformError(
                    f"the projection item {text} needs a name: write {text} AS <name>", transform=self.label
                )
            name = node.alias if isinstance(node, exp.Alias) else inner.name
            if isinstance(node, exp.Alias) and name in (*METADATA_COLUMNS, EVENT_TYPE_COLUMN):
                raise TransformError(
                    f"{name} is a metadata column: a projection item cannot be named so (as in Flink CDC)",
                    transform=self.label,
                    column=name,
                )
            items.append(_Item(inner, name, isinstance(node, exp.Alias)))
        return tuple(items)


class BoundTransform:
    """A transform compiled for one table and one source schema: the projected schema and the
    functions that filter and project its rows."""

    def __init__(
        self,
        rule: _Rule,
        table: TableId,
        source: Schema,
        *,
        session: Session | None = None,
        functions: Mapping[str, UserFunction] | None = None,
    ) -> None:
        self.label = rule.label
        self.table = table
        self.source = source
        kind = RowKind()
        try:
            compiler = Compiler(table, source, session=session, functions=functions, row_kind=kind)
            self._compile(rule, compiler)
            condition = rule.condition
            self.filter_text = "" if condition is None else condition.sql(dialect=DIALECT)
            filters = Compiler(
                table, source, self.aliases, session=session, functions=functions, row_kind=kind
            )
            self._keep = None if condition is None else filters.condition(condition).fn
        except CompileError as e:
            raise TransformError(
                str(e) if e.column else f"{e} (table {table})",
                transform=self.label,
                table=str(table),
                column=e.column,
            ) from None
        self._kind = kind if kind.used else None
        self._soft_delete = rule.spec.converter_after_transform == "SOFT_DELETE"
        self.identity = self._project is None and self._keep is None and not self._soft_delete

    def _compile(self, rule: _Rule, compiler: Compiler) -> None:
        """The projected columns, as Flink CDC makes them: ``*`` stands for the source's columns
        (each as if named), and an item whose name an earlier one has replaces it in its place, so
        ``*, UPPER(name) AS name`` changes ``name`` where it stands and ``UPPER(name) AS name, *``
        leaves it as the source has it, first."""
        source = self.source
        columns: list[Column] = []
        fns: list[Fn] = []
        texts: list[str] = []
        plains: list[str | None] = []  # the source column an item passes on as it is (renamed or not)
        nodes: list[exp.Expr | None] = []
        at: dict[str, int] = {}

        def put(column: Column, fn: Fn, text: str, plain: str | None, node: exp.Expr | None) -> None:
            index = at.get(column.name)
            if index is None:
                at[column.name] = len(columns)
                columns.append(column)
                fns.append(fn)
                texts.append(text)
                plains.append(plain)
                nodes.append(node)
            else:
                columns[index], fns[index], texts[index] = column, fn, text
                plains[index], nodes[index] = plain, node

        for item in rule.items or (_Item(None),):
            if item.node is None:
                for col in source.columns:
                    put(col, operator.methodcaller("get", col.name), col.name, col.name, None)
                continue
            compiled = compiler.compile(item.node)
            plain = compiler.resolve(item.node.name) if isinstance(item.node, exp.Column) else None
            text = item.node.sql(dialect=DIALECT)
            if plain is not None:
                name = item.name if item.aliased else plain.name
                put(Column(name, plain.type, plain.comment), compiled.fn, text, plain.name, item.node)
            else:
                column = Column(item.name, (compiled.type or STRING()).with_nullable(True))
                put(column, compiled.fn, text, None, item.node)
        names_of: dict[str, str] = {}  # source column → its name in the projection
        for column, passed in zip(columns, plains, strict=True):
            if passed is not None:
                names_of.setdefault(passed, column.name)
        #: What the filter reads a projected name as (the projection's expression for it).
        self.aliases = {c.name: node for c, node in zip(columns, nodes, strict=True) if node is not None}
        names = [c.name for c in columns]
        keys = rule.spec.primary_key_columns
        for key in keys:
            if key not in names:
                raise CompileError(
                    f"primary-keys names {key!r}, which the projection of table {self.table} does not have "
                    f"(its columns: {', '.join(names)})",
                    key,
                )
        if not keys:
            for key in source.primary_keys:
                if key not in names_of:
                    raise CompileError(
                        f"the projection drops primary key column {key!r} of table {self.table}: "
                        "keep it, or give the transform primary-keys",
                        key,
                    )
            keys = tuple(names_of[k] for k in source.primary_keys)
        partitions = rule.spec.partition_key_columns or tuple(
            names_of[k] for k in source.partition_keys if k in names_of
        )
        for key in partitions:
            if key not in names:
                raise CompileError(f"partition-keys names {key!r}, which the projection does not have", key)
        self._required = tuple(k for k in keys if columns[names.index(k)].type.nullable)
        for key in self._required:
            index = names.index(key)
            columns[index] = replace(columns[index], type=columns[index].type.not_null())
        table_options = rule.spec.table_option_map
        comment = table_options.pop("comment", source.comment)
        options = tuple(table_options.items()) or source.options
        self.schema = Schema(tuple(columns), tuple(keys), tuple(partitions), comment, options)
        self._described = tuple(zip(names, fns, texts, strict=True))
        if rule.items is None and not self._required:
            self._project: Callable[[Row], Row] | None = None
            return
        pairs = tuple(zip(names, fns, strict=True))
        required = self._required

        def project(row: Row) -> Row:
            out = {name: fn(row) for name, fn in pairs}
            for key in required:
                if out[key] is None:
                    raise ExpressionError(f"primary key column {key!r} is NULL")
            return out

        self._project = project

    def apply(
        self, changes: list[DataChange], on_error: Callable[[DataChange, str], None]
    ) -> list[DataChange]:
        """The changes that pass the filter, projected; a change an expression fails on goes to
        ``on_error`` with the reason. A filter looks at the row the change leaves (the row that goes,
        for a delete)."""
        if self.identity:
            return changes
        keep, project, delete, new = self._keep, self._project, Op.DELETE, tuple.__new__
        kind, soft_delete = self._kind, self._soft_delete
        out: list[DataChange] = []
        append = out.append
        for change in changes:
            table_id, op, before, after, position, ts_ms = change
            if kind is not None:
                kind.op_ts = ts_ms
            if keep is not None:
                image = before if op is delete else after
                if kind is not None:
                    kind.value = "-D" if op is delete else "+U" if op is Op.UPDATE else "+I"
                try:
                    if image is None or keep(image) is not True:
                        continue
                except ROW_ERRORS as e:
                    on_error(change, f"{self.label} on table {self.table}: filter {self.filter_text}: {e}")
                    continue
            if project is None:
                soft = soft_delete and op is delete  # the row it removes, inserted
                append(change._replace(op=Op.INSERT, before=None, after=before) if soft else change)
                continue
            try:
                if kind is not None:
                    kind.value = "-D" if op is delete else "-U"
                old = None if before is None else project(before)
                if kind is not None:
                    kind.value = "+U" if op is Op.UPDATE else "+I"
                row = None if after is None else project(after)
                if soft_delete and op is delete:
                    op, old, row = Op.INSERT, None, old
                projected = (table_id, op, old, row, position, ts_ms)
            except ROW_ERRORS as e:
                on_error(change, self._explain(change, e))
                continue
            # built as a tuple: a NamedTuple's own constructor costs twice as much per row
            append(new(DataChange, projected))
        return out

    def _explain(self, change: DataChange, error: Exception) -> str:
        """Which projection item failed on a change, for the dead-letter reason."""
        where = f"{self.label} on table {self.table}"
        for image in (change.before, change.after):
            if image is None:
                continue
            for name, fn, text in self._described:
                try:
                    fn(image)
                except ROW_ERRORS as e:
                    return f"{where}: {text} AS {name}: {e}"
        return f"{where}: {error}"


class TableTransforms:
    """The transforms of a job, per source table: the runner's transform step.

    A table no transform matches is left alone (no cost per row). For the others, rows, schemas and
    schema changes are turned into what the projection makes of them.
    """

    def __init__(
        self,
        specs: Sequence[TransformSpec],
        *,
        session: Session | None = None,
        functions: Mapping[str, UserFunction] | None = None,
    ) -> None:
        self.functions = dict(functions or {})
        names = tuple(self.functions)
        self.rules = tuple(_Rule(index, spec, names) for index, spec in enumerate(specs))
        self.session = session or Session()
        self._rule_of: dict[TableId, _Rule | None] = {}
        self._matched: set[int] = set()
        self._bound: dict[TableId, BoundTransform] = {}

    def close(self) -> None:
        """Close the user-defined functions that were opened (each one's ``close()``); a function
        that raises is logged and the others are closed still."""
        for function in self.functions.values():
            try:
                function.close()
            except Exception:  # the user's code
                log.exception("closing the user-defined function %s failed", function.name)

    def rule_for(self, table: TableId) -> _Rule | None:
        """The first transform whose ``source-table`` matches the table, or None."""
        if table not in self._rule_of:
            matching = [i for i, r in enumerate(self.rules) if r.selector.matches(table)]
            self._matched.update(matching)
            self._rule_of[table] = self.rules[matching[0]] if matching else None
        return self._rule_of[table]

    def unmatched_labels(self) -> list[str]:
        """The transforms whose ``source-table`` matches none of the tables looked up so far."""
        return [r.label for i, r in enumerate(self.rules) if i not in self._matched]

    def bind(self, table: TableId, source: Schema) -> BoundTransform | None:
        """The table's transform compiled for ``source`` (cached until the schema changes)."""
        rule = self.rule_for(table)
        if rule is None:
            return None
        bound = self._bound.get(table)
        if bound is None or (bound.source is not source and bound.source != source):
            bound = self._bound[table] = self._bind(rule, table, source)
        return bound

    def _bind(self, rule: _Rule, table: TableId, source: Schema) -> BoundTransform:
        return BoundTransform(rule, table, source, session=self.session, functions=self.functions)

    def schema(self, table: TableId, source: Schema) -> Schema:
        """The schema rows of the table have after its transform."""
        bound = self.bind(table, source)
        return source if bound is None else bound.schema

    def rows(
        self,
        table: TableId,
        source: Schema,
        changes: list[DataChange],
        on_error: Callable[[DataChange, str], None],
    ) -> list[DataChange]:
        """The table's changes, filtered and projected."""
        bound = self.bind(table, source)
        return changes if bound is None else bound.apply(changes, on_error)

    def sources(self, lookup: SchemaLookup) -> dict[TableId, Schema]:
        """The schemas of the transformed tables now: taken before a schema change is tracked."""
        return {t: tracked.schema for t, tracked in lookup.tables.items() if self.rule_for(t) is not None}

    def schema_changes(
        self, changes: Sequence[SchemaChange], sources: Mapping[TableId, Schema]
    ) -> list[SchemaChange]:
        """Source schema changes as the projected schemas see them. ``sources`` are the schemas
        the changes start from (:meth:`sources`, taken before they were tracked)."""
        current: dict[TableId, Schema | None] = dict(sources)
        out: list[SchemaChange] = []
        for change in changes:
            table = change.table_id
            rule = self.rule_for(table)
            if rule is None:
                out.append(change)
                continue
            old = current.get(table)
            new = apply_schema_change(old, change)
            current[table] = new
            out += self._projected(rule, table, change, old, new)
        return out

    def _projected(
        self, rule: _Rule, table: TableId, change: SchemaChange, old: Schema | None, new: Schema | None
    ) -> list[SchemaChange]:
        if new is None:
            self._bound.pop(table, None)
            return [change]
        if isinstance(change, TruncateTable):
            return [change]
        try:
            after = self._bind(rule, table, new)
        except TransformError as e:
            raise TransformError(
                f"{str(e).removeprefix(e.transform + ': ')}, after {change}",
                transform=e.transform,
                table=e.table,
                column=e.column,
            ) from None
        self._bound[table] = after
        if old is None or isinstance(change, CreateTable):
            return [CreateTable(table, after.schema)]
        before = self._bind(rule, table, old).schema
        changes: list[SchemaChange] = []
        if (
            isinstance(change, RenameColumn)
            and change.old_name in before
            and change.new_name in after.schema
            and change.old_name not in after.schema
            and change.new_name not in before
        ):
            rename = RenameColumn(table, change.old_name, change.new_name)
            renamed = apply_schema_change(before, rename)
            assert renamed is not None
            before, changes = renamed, [rename]
        return changes + diff_schemas(table, before, after.schema)
