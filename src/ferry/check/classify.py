"""Classifying a change of job: can the new version restart from the old version's state?

Schema changes are judged against the whole query: the new plan's operators are matched with the
old plan's by id, and each stateful operator compares what its state depends on (its aspects:
keys, window, join condition, input schema, input changelog, filters). ``WITH``-option changes are
judged by the changed option alone (see :mod:`ferry.sql.connectors`).

- **fully compatible**: every stateful operator finds its state (an unreferenced added column, a
  watermark change, a removed aggregate call);
- **partially compatible**: some aggregate calls lose their accumulators or start from zero while
  the others keep theirs, or a source may lose the state of its snapshot phase;
- **incompatible**: some state cannot be restored (connector changed, table renamed, a join's
  input schema changed, group keys changed, a new stateful operator).

Limitations (primary-key or upsert-key changes, sharding/chunk-key options, changelog-mode
options) are flagged whatever the verdict: their effect on state depends on data the check does
not see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ferry.sql.connectors import OptionRole, option_role
from ferry.sql.model import Operator, OperatorKind, Plan, SourceInfo, StatelessReport
from ferry.sql.parser import ColumnDef, TableDef

__all__ = [
    "ColumnChange",
    "Compatibility",
    "Limitation",
    "OperatorVerdict",
    "OptionChange",
    "Outcome",
    "Verdict",
    "classify",
]

Compatibility = Literal["fully compatible", "partially compatible", "incompatible"]
Outcome = Literal["kept", "reset", "added", "removed", "incompatible", "at-risk", "stateless"]
LimitationKind = Literal["primary-key", "sharding", "changelog-mode"]

_EXIT_CODES: Mapping[Compatibility, int] = {
    "fully compatible": 0,
    "partially compatible": 1,
    "incompatible": 2,
}

IGNORE_FILTER = "table.optimizer.state-compatibility.ignore-filter"
_STATELESS = StatelessReport(stateless=True)


@dataclass(frozen=True, slots=True)
class OperatorVerdict:
    """What happens to one operator's state when the new version restarts from the old state."""

    id: str
    kind: OperatorKind
    label: str
    outcome: Outcome
    reasons: tuple[str, ...] = ()
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """A column added, removed or redefined in a source table, and whether the query reads it."""

    table: str
    column: str
    change: Literal["added", "removed", "changed"]
    old: str | None
    new: str | None
    used: bool


@dataclass(frozen=True, slots=True)
class OptionChange:
    """A ``WITH`` option (or table hint) whose value changed, judged by itself."""

    table: str
    key: str
    old: str | None
    new: str | None
    role: OptionRole
    effect: str


@dataclass(frozen=True, slots=True)
class Limitation:
    """A change whose effect on state depends on conditions the check cannot see."""

    kind: LimitationKind
    table: str
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The result of comparing two versions of a job."""

    compatibility: Compatibility
    reasons: tuple[str, ...]
    operators: tuple[OperatorVerdict, ...]
    columns: tuple[ColumnChange, ...] = ()
    options: tuple[OptionChange, ...] = ()
    limitations: tuple[Limitation, ...] = ()
    notes: tuple[str, ...] = ()
    old_stateless: StatelessReport = _STATELESS
    new_stateless: StatelessReport = _STATELESS

    @property
    def exit_code(self) -> int:
        """0 fully compatible, 1 partially compatible, 2 incompatible."""
        return _EXIT_CODES[self.compatibility]

    def operator(self, operator_id: str) -> OperatorVerdict | None:
        """The verdict of the operator with this id (old ids included for removed operators)."""
        for verdict in self.operators:
            if verdict.id == operator_id:
                return verdict
        return None

    def by_label(self, label: str) -> list[OperatorVerdict]:
        """The verdicts of the operators with this label (``SUM(b)``), old and new."""
        return [verdict for verdict in self.operators if verdict.label == label]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "compatibility": self.compatibility,
            "exit_code": self.exit_code,
            "reasons": list(self.reasons),
            "operators": [
                {
                    "id": op.id,
                    "kind": op.kind,
                    "label": op.label,
                    "outcome": op.outcome,
                    "reasons": list(op.reasons),
                    **({"parent": op.parent} if op.parent else {}),
                }
                for op in self.operators
            ],
            "columns": [
                {
                    "table": c.table,
                    "column": c.column,
                    "change": c.change,
                    "old": c.old,
                    "new": c.new,
                    "used_by_query": c.used,
                }
                for c in self.columns
            ],
            "options": [
                {
                    "table": o.table,
                    "key": o.key,
                    "old": o.old,
                    "new": o.new,
                    "role": o.role,
                    "effect": o.effect,
                }
                for o in self.options
            ],
            "limitations": [
                {"kind": lim.kind, "table": lim.table, "message": lim.message} for lim in self.limitations
            ],
            "notes": list(self.notes),
            "stateless": {
                "old": _stateless_dict(self.old_stateless),
                "new": _stateless_dict(self.new_stateless),
            },
        }


def _stateless_dict(report: StatelessReport) -> dict[str, Any]:
    return {
        "stateless": report.stateless,
        "stateful_operators": [
            {"id": op.id, "kind": op.kind, "label": op.label, "reason": op.reason}
            for op in report.stateful_operators
        ],
    }


def _column_signature(column: ColumnDef) -> str:
    return column.describe()


def _table_signature(table: TableDef) -> tuple[str, ...]:
    return tuple(_column_signature(c) for c in table.columns)


class _Classifier:
    def __init__(self, old: Plan, new: Plan) -> None:
        self.old = old
        self.new = new
        self.verdicts: list[OperatorVerdict] = []
        self.columns: list[ColumnChange] = []
        self.options: list[OptionChange] = []
        self.limitations: list[Limitation] = []
        self.notes: list[str] = []
        self.ignore_filter = new.settings.get(IGNORE_FILTER, "false").strip().lower() == "true"
        self.renamed: dict[str, str] = {}

    # ----- sources -------------------------------------------------------------------------------

    def sources(self) -> None:
        old, new = self.old.sources, self.new.sources
        gone = [name for name in old if name not in new]
        came = [name for name in new if name not in old]
        renamed: dict[str, str] = {}
        for name in gone:
            for candidate in came:
                if candidate in renamed.values():
                    continue
                if old[name].connector == new[candidate].connector and _table_signature(
                    old[name].table
                ) == _table_signature(new[candidate].table):
                    renamed[name] = candidate
                    break
        self.renamed = renamed
        for name in gone:
            source = old[name]
            if name in renamed:
                continue
            surviving = [s for s in source.statements if s in self.new.statements]
            if surviving:
                self._source(
                    source,
                    "incompatible",
                    f"table {name} is no longer read by {', '.join(surviving)}: "
                    "the state built from its rows cannot be carried over",
                )
            else:
                self._source(
                    source, "removed", f"table {name} is no longer read: its source state is discarded"
                )
        for name, source in new.items():
            if name in old:
                self._compare_source(old[name], source)
            elif name in renamed.values():
                before = next(o for o, n in renamed.items() if n == name)
                self._source(
                    source,
                    "incompatible",
                    f"table {before} was renamed to {name}: a renamed source starts without state and the "
                    "state built from the old table cannot be attributed to it",
                )
            else:
                self._source(
                    source,
                    "added",
                    f"new source {name}: it starts from its startup options, with no state to restore",
                )

    def _source(self, source: SourceInfo, outcome: Outcome, *reasons: str) -> None:
        connector = source.connector or "unknown connector"
        self.verdicts.append(
            OperatorVerdict(
                id=f"source {source.name}",
                kind="source",
                label=f"{source.name} ({connector})",
                outcome=outcome,
                reasons=tuple(reasons),
            )
        )

    def _compare_source(self, old: SourceInfo, new: SourceInfo) -> None:
        reasons: list[str] = []
        outcome: Outcome = "kept"
        if old.connector != new.connector:
            outcome = "incompatible"
            reasons.append(
                f"connector changed from {old.connector} to {new.connector}: "
                "the source state of one connector cannot be read by another"
            )
        for key in sorted(set(old.options) | set(new.options)):
            if key == "connector" or old.options.get(key) == new.options.get(key):
                continue
            outcome = self._option(old, new, key, reasons, outcome)
        self._schema(old, new)
        if old.table.primary_key != new.table.primary_key:
            self.limitations.append(
                Limitation(
                    kind="primary-key",
                    table=new.name,
                    message=(
                        f"primary key of {new.name} changed from ({', '.join(old.table.primary_key)}) "
                        f"to ({', '.join(new.table.primary_key)}): the upsert key seen by downstream "
                        "operators changes, which can make their state incompatible"
                    ),
                )
            )
        if old.table.watermarks != new.table.watermarks:
            self.notes.append(
                f"watermark of {new.name} changed: watermarks are not part of operator state "
                "(fully compatible)"
            )
        if not reasons:
            reasons.append("keeps its read position")
        self._source(new, outcome, *reasons)

    def _option(
        self, old: SourceInfo, new: SourceInfo, key: str, reasons: list[str], outcome: Outcome
    ) -> Outcome:
        before, after = old.options.get(key), new.options.get(key)
        role, meaning = option_role(key, new.connector)
        change = f"{key}: {before!r} -> {after!r}"
        if role == "changelog" and key in {"format", "value.format"} and old.changelog == new.changelog:
            role, meaning = "other", ""
        if role == "sharding":
            effect = (
                f"{meaning} changed: the source state of the snapshot (full-scan) phase was split on "
                "the old value and cannot be used; a job still in that phase must start it again"
            )
            self.limitations.append(
                Limitation(kind="sharding", table=new.name, message=f"{change}: {effect}")
            )
            reasons.append(f"{change}: state of the snapshot phase is at risk")
            outcome = "at-risk" if outcome == "kept" else outcome
        elif role == "changelog":
            effect = (
                f"{meaning} changed: the source now emits {_changelog_text(new.changelog)} "
                f"(was {_changelog_text(old.changelog)}); stateful operators downstream see different "
                "change kinds"
            )
            self.limitations.append(
                Limitation(kind="changelog-mode", table=new.name, message=f"{change}: {effect}")
            )
        elif role == "key":
            effect = f"{meaning} changed: the upsert key downstream changes"
            self.limitations.append(
                Limitation(kind="primary-key", table=new.name, message=f"{change}: {effect}")
            )
        elif role == "startup":
            effect = "ignored when the job restarts from state: it resumes from its saved position"
        else:
            effect = "does not affect state"
        self.options.append(
            OptionChange(table=new.name, key=key, old=before, new=after, role=role, effect=effect)
        )
        return outcome

    def _schema(self, old: SourceInfo, new: SourceInfo) -> None:
        before = {c.name: c for c in old.table.columns}
        after = {c.name: c for c in new.table.columns}
        used = set(old.used_columns) | set(new.used_columns)
        for name, column in after.items():
            if name not in before:
                self.columns.append(
                    ColumnChange(new.name, name, "added", None, column.describe(), name in new.used_columns)
                )
            elif _column_signature(before[name]) != _column_signature(column):
                self.columns.append(
                    ColumnChange(
                        new.name, name, "changed", before[name].describe(), column.describe(), name in used
                    )
                )
        for name, column in before.items():
            if name not in after:
                self.columns.append(
                    ColumnChange(new.name, name, "removed", column.describe(), None, name in old.used_columns)
                )

    def sinks(self) -> None:
        for statement in self.new.statements:
            old_table = self._sink_table(self.old, statement)
            new_table = self._sink_table(self.new, statement)
            if old_table is None or new_table is None:
                continue
            if old_table.primary_key != new_table.primary_key:
                self.limitations.append(
                    Limitation(
                        kind="primary-key",
                        table=new_table.name,
                        message=(
                            f"primary key of sink {new_table.name} changed from "
                            f"({', '.join(old_table.primary_key)}) to ({', '.join(new_table.primary_key)}): "
                            "whether Flink materializes upserts in front of the sink, and by which key, "
                            "depends on it"
                        ),
                    )
                )

    def _sink_table(self, plan: Plan, statement: str) -> TableDef | None:
        return plan.sink_tables.get(statement)

    # ----- operators -----------------------------------------------------------------------------

    def operators(self) -> None:
        old_ops = {op.id: op for op in self.old.operators if op.kind != "source"}
        decided: dict[str, Outcome] = {}
        for op in self.new.operators:
            if op.kind == "source" or op.parent is not None:
                continue
            if not op.stateful:
                self.verdicts.append(OperatorVerdict(op.id, op.kind, op.label, "stateless"))
                continue
            before = old_ops.get(op.id)
            if before is None:
                reason = self._new_operator_reason(op, old_ops)
                verdict = OperatorVerdict(op.id, op.kind, op.label, "incompatible", (reason,))
            else:
                changes = self._aspect_changes(before, op)
                if changes:
                    verdict = OperatorVerdict(op.id, op.kind, op.label, "incompatible", tuple(changes))
                else:
                    verdict = OperatorVerdict(op.id, op.kind, op.label, "kept", ("restores its state",))
            decided[op.id] = verdict.outcome
            self.verdicts.append(verdict)
            self._calls(op, decided[op.id])
        new_ids = {op.id for op in self.new.operators}
        for op in self.old.operators:
            if op.kind == "source" or not op.stateful or op.id in new_ids:
                continue
            if op.parent is not None and op.parent not in new_ids:
                continue
            if op.parent is None:
                self.verdicts.append(
                    OperatorVerdict(
                        op.id, op.kind, op.label, "removed", ("no longer in the job: its state is discarded",)
                    )
                )

    def _new_operator_reason(self, op: Operator, old_ops: Mapping[str, Operator]) -> str:
        if op.statement not in self.old.statements:
            return f"the new statement {op.statement} adds state that a restored job cannot fill"
        renamed_id = op.id
        for before, after in self.renamed.items():
            renamed_id = renamed_id.replace(f"[{after}", f"[{before}").replace(f" {after}]", f" {before}]")
            renamed_id = renamed_id.replace(f"{after}]", f"{before}]")
        if renamed_id != op.id and renamed_id in old_ops:
            tables = ", ".join(f"{b} -> {a}" for b, a in self.renamed.items())
            return (
                f"reads a renamed table ({tables}): the state it built from the old table "
                "cannot be carried over"
            )
        return "new stateful operator: it would start empty while the operators around it restore theirs"

    def _aspect_changes(self, before: Operator, after: Operator) -> list[str]:
        changes: list[str] = []
        names = [a.name for a in after.aspects] + [
            a.name for a in before.aspects if after.aspect(a.name) is None
        ]
        for name in names:
            if self.ignore_filter and name.endswith("filter"):
                continue
            old, new = before.aspect(name), after.aspect(name)
            if old is not None and new is not None and old.value == new.value:
                continue
            old_text = old.display if old is not None else "(none)"
            new_text = new.display if new is not None else "(none)"
            if old_text == new_text and old is not None and new is not None:
                old_text, new_text = old.value, new.value
            changes.append(f"{name} changed: {old_text} -> {new_text}")
        return changes

    def _calls(self, parent: Operator, parent_outcome: Outcome) -> None:
        new_calls = [op for op in self.new.operators if op.parent == parent.id]
        old_calls = [op for op in self.old.operators if op.parent == parent.id]
        if parent_outcome == "incompatible":
            for call in new_calls:
                self.verdicts.append(
                    OperatorVerdict(
                        call.id,
                        call.kind,
                        call.label,
                        "incompatible",
                        ("its operator cannot restore state",),
                        parent.id,
                    )
                )
            return
        unmatched_old = list(old_calls)
        pending: list[Operator] = []
        for call in new_calls:
            same = next((o for o in unmatched_old if o.fingerprint == call.fingerprint), None)
            if same is None:
                pending.append(call)
                continue
            unmatched_old.remove(same)
            reason = "keeps its accumulated state"
            if same.label != call.label:
                reason += f" (computes the same as {same.label})"
            self.verdicts.append(
                OperatorVerdict(call.id, call.kind, call.label, "kept", (reason,), parent.id)
            )
        for call in pending:
            same_text = next((o for o in unmatched_old if o.label == call.label), None)
            if same_text is not None:
                unmatched_old.remove(same_text)
                self.verdicts.append(
                    OperatorVerdict(
                        call.id,
                        call.kind,
                        call.label,
                        "reset",
                        (
                            f"its input changed ({same_text.fingerprint} -> {call.fingerprint}): the old "
                            f"{call.label} is treated as deleted and its state discarded; "
                            "the new one starts from zero",
                        ),
                        parent.id,
                    )
                )
            else:
                self.verdicts.append(
                    OperatorVerdict(
                        call.id,
                        call.kind,
                        call.label,
                        "added",
                        ("new aggregate call: it starts accumulating from zero when the job restarts",),
                        parent.id,
                    )
                )
        for call in unmatched_old:
            self.verdicts.append(
                OperatorVerdict(
                    call.id,
                    call.kind,
                    call.label,
                    "removed",
                    ("no longer computed: its state is discarded",),
                    parent.id,
                )
            )

    # ----- verdict -------------------------------------------------------------------------------

    def verdict(self) -> Verdict:
        self.sources()
        self.operators()
        self.sinks()
        if self.ignore_filter:
            self.notes.append(
                f"{IGNORE_FILTER} is true: filter changes in front of stateful operators are ignored"
            )
        for column in self.columns:
            if column.change == "added" and not column.used:
                self.notes.append(
                    f"column {column.table}.{column.column} added and not referenced by the query: "
                    "no operator sees it"
                )
        outcomes = [v.outcome for v in self.verdicts]
        if "incompatible" in outcomes:
            compatibility: Compatibility = "incompatible"
            wanted: set[Outcome] = {"incompatible"}
        elif {"reset", "added", "at-risk"} & set(outcomes):
            compatibility = "partially compatible"
            wanted = {"reset", "added", "at-risk"}
        else:
            compatibility = "fully compatible"
            wanted = set()
        reasons: list[str] = []
        for verdict in self.verdicts:
            if verdict.outcome in wanted:
                if verdict.outcome == "added" and verdict.kind == "source":
                    continue
                reasons.extend(f"{verdict.label}: {reason}" for reason in verdict.reasons)
        if compatibility == "partially compatible":
            kept = [v.label for v in self.verdicts if v.outcome == "kept" and v.parent is not None]
            if kept:
                reasons.append(f"keep their state: {', '.join(kept)}")
        if compatibility == "fully compatible":
            reasons.append("every stateful operator restores its state")
        return Verdict(
            compatibility=compatibility,
            reasons=tuple(dict.fromkeys(reasons)),
            operators=tuple(self.verdicts),
            columns=tuple(self.columns),
            options=tuple(self.options),
            limitations=tuple(self.limitations),
            notes=tuple(dict.fromkeys(self.notes)),
            old_stateless=self.old.stateless_report(),
            new_stateless=self.new.stateless_report(),
        )


def _changelog_text(changelog: str) -> str:
    return {
        "insert-only": "inserts only",
        "all": "inserts, updates and deletes",
        "upsert": "upserts and deletes (without UPDATE_BEFORE)",
    }.get(changelog, changelog)


def classify(old: Plan, new: Plan) -> Verdict:
    """Compare the plans of two versions of a job."""
    return _Classifier(old, new).verdict()
