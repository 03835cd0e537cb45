"""Rendering a verdict for a person (text) or a program (JSON)."""

from __future__ import annotations

import json

from ferry.check.classify import OperatorVerdict, Outcome, Verdict

__all__ = ["render_json", "render_text"]

_OUTCOME_WORDS: dict[Outcome, str] = {
    "kept": "keeps state",
    "reset": "RESETS",
    "added": "STARTS EMPTY",
    "removed": "discarded",
    "incompatible": "INCOMPATIBLE",
    "at-risk": "AT RISK",
    "stateless": "stateless",
}


def _operator_line(verdict: OperatorVerdict) -> list[str]:
    indent = "      " if verdict.parent else "  "
    name = verdict.label if verdict.parent else f"{verdict.id}  {verdict.label}"
    if verdict.kind == "source":
        name = f"source {verdict.label}"
    lines = [f"{indent}{_OUTCOME_WORDS[verdict.outcome]:<13} {name}"]
    if verdict.outcome not in {"kept", "stateless"}:
        lines.extend(f"{indent}{'':<13}   {reason}" for reason in verdict.reasons)
    return lines


def render_text(verdict: Verdict, old: str = "old", new: str = "new") -> str:
    """A readable report: the verdict, why, and what happens to each operator."""
    lines = [f"{verdict.compatibility.upper()} ({old} -> {new})"]
    lines.extend(f"  - {reason}" for reason in verdict.reasons)
    lines.append("")
    lines.append("Operators:")
    for operator in verdict.operators:
        lines.extend(_operator_line(operator))
    if verdict.columns:
        lines.append("")
        lines.append("Schema changes:")
        for column in verdict.columns:
            used = "read by the query" if column.used else "not read by the query"
            if column.change == "added":
                lines.append(f"  + {column.table}: {column.new} ({used})")
            elif column.change == "removed":
                lines.append(f"  - {column.table}: {column.old} ({used})")
            else:
                lines.append(f"  ~ {column.table}: {column.old} -> {column.new} ({used})")
    if verdict.options:
        lines.append("")
        lines.append("Option changes (each judged by itself):")
        for option in verdict.options:
            lines.append(f"  {option.table}: {option.key}: {option.old!r} -> {option.new!r}: {option.effect}")
    if verdict.limitations:
        lines.append("")
        lines.append("Limitations (check before restarting from state):")
        lines.extend(f"  ! [{limitation.kind}] {limitation.message}" for limitation in verdict.limitations)
    if verdict.notes:
        lines.append("")
        lines.append("Notes:")
        lines.extend(f"  {note}" for note in verdict.notes)
    lines.append("")
    lines.append(f"State: old job {verdict.old_stateless.describe()}")
    lines.append(f"       new job {verdict.new_stateless.describe()}")
    return "\n".join(lines)


def render_json(verdict: Verdict) -> str:
    """The verdict as indented JSON."""
    return json.dumps(verdict.to_dict(), indent=2)
