"""A pipeline's phase is spelled once: as a member of :class:`ferry.pipeline.phase.Phase`.

Every string constant in ferry's source that equals a phase's value is an error, except the values
of enum members (``Phase`` itself, and the control plane's savepoint and instance states, which
share some words). Docstrings and longer texts that mention a phase are not constants equal to one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ferry
from ferry.pipeline.phase import Phase

SOURCE = Path(ferry.__file__).parent
PHASES = frozenset(p.value for p in Phase)


def _enum_member_values(tree: ast.Module) -> set[int]:
    """The ids of the constants that are the values of enum members (class bodies of an *Enum)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id.endswith("Enum") for b in node.bases
        ):
            for statement in node.body:
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
                    ids.add(id(statement.value))
    return ids


def phase_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of each string constant in ``source`` equal to a phase, enum members aside."""
    tree = ast.parse(source)
    members = _enum_member_values(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in PHASES
        and id(node) not in members
    ]


def test_no_phase_is_spelled_as_a_string_outside_its_enum() -> None:
    found = [
        f"{path.relative_to(SOURCE.parent)}:{line}: {value!r}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line, value in phase_literals(path.read_text(encoding="utf-8"))
    ]
    assert not found, "phases spelled as strings (use ferry.pipeline.phase.Phase):\n" + "\n".join(found)


def test_the_check_finds_a_phase_spelled_as_a_string() -> None:
    source = 'from enum import StrEnum\nclass S(StrEnum):\n    FAILED = "FAILED"\nok = status == "RUNNING"\n'
    assert phase_literals(source) == [(4, "RUNNING")]
