"""The listings of ``ferry pipeline list`` and ``ferry savepoint list``: rich's table on a terminal,
plain columns (the same text as ever) where stdout is a pipe or a file."""

from __future__ import annotations

import re

import pytest

from ferry.cli.output import render_pipelines, render_savepoints

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG = "waiting for a worker to start it [bold]not markup[/bold] " + "x" * 150

PIPELINES = [
    {"metadata": {"name": "orders"}, "status": {"phase": "PENDING", "detail": LONG}},
    {"metadata": {"name": "o"}, "status": {"phase": "STOPPING", "detail": ""}},
    {"metadata": {"name": "customers-eu"}},
]
SAVEPOINTS = [
    {
        "metadata": {"uid": "0" * 36, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"source": "MANUAL", "pinned": True},
        "status": {"state": "FAILED", "reason": "the brokers did not answer"},
    },
    {
        "metadata": {"name": "nightly", "uid": "1" * 36, "creationTimestamp": "2026-01-02T00:00:00Z"},
        "spec": {"source": "UPGRADE", "pinned": False},
        "status": {"state": "COMPLETED"},
    },
]


def test_plain_listings_are_columns_two_spaces_apart_never_wrapped() -> None:
    assert render_pipelines(PIPELINES, "default", terminal=False).splitlines() == [
        "NAME          PHASE     DETAIL",
        f"orders        PENDING   {LONG}",
        "o             STOPPING",
        "customers-eu  ?",
    ]
    assert render_savepoints(SAVEPOINTS, "orders", terminal=False).splitlines() == [
        f"NAME     UID{' ' * 35}SOURCE    STATE      PINNED  REQUESTED",
        f"         {'0' * 36}  MANUAL    FAILED     yes     2026-01-01T00:00:00Z  the brokers did not answer",
        f"nightly  {'1' * 36}  UPGRADE   COMPLETED  no      2026-01-02T00:00:00Z",
    ]


def test_empty_listings_say_so() -> None:
    assert render_pipelines([], "staging", terminal=False) == "no pipelines in environment staging"
    assert render_savepoints([], "orders", terminal=True) == "no savepoints of pipeline orders"


@pytest.mark.parametrize("columns", [60, 200])
def test_a_terminal_gets_a_table_that_fits_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = render_savepoints(SAVEPOINTS, "orders", terminal=True)
    assert "\x1b[1m" in text, "headers in bold"
    plain = ANSI.sub("", text)
    lines = plain.splitlines()
    assert any(set(line) == {"─"} for line in lines), "a rule under the headers"
    assert all(len(line) <= columns for line in lines)
    # a cell too wide folds onto the next lines: every character is still there, in order
    for value in ("0" * 36, "1" * 36, "the brokers did not answer", "2026-01-02T00:00:00Z", "COMPLETED"):
        assert _folded(value, lines), value
    listing = ANSI.sub("", render_pipelines(PIPELINES, "default", terminal=True))
    assert "[bold]" in listing, "a cell's brackets are its text, not markup"


def _folded(value: str, lines: list[str]) -> bool:
    """Whether ``value`` (its spaces aside) is in one column of the table, on one line or cut
    across consecutive lines (columns are at least two spaces apart)."""
    wanted = value.replace(" ", "")
    for start in range(len(lines)):
        for column in range(len(lines[start])):
            rest = wanted
            for line in lines[start:]:
                piece = line[column:].split("  ")[0].replace(" ", "")
                if not piece or not rest.startswith(piece):
                    break
                rest = rest[len(piece) :]
                if not rest:
                    return True
    return False
