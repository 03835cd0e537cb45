"""The tests' waits: a bound that a loaded machine stretches, spent at the clock's pace when idle."""

from __future__ import annotations

import itertools

import pytest
from tests.support import waiting


def test_a_bound_is_spent_at_the_clocks_pace_divided_by_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 110.0, 130.0, 130.0])
    monkeypatch.setattr(waiting.time, "monotonic", lambda: next(clock))
    loads = iter([1.0, 4.0, 4.0])
    monkeypatch.setattr(waiting, "load_factor", lambda: next(loads))
    deadline = waiting.Deadline(16)
    assert deadline.spent() == pytest.approx(10.0)  # 10 s idle
    # 20 s more at 4 × the cores count 5 s: 15 s of the bound, though 30 s of the clock passed
    assert not deadline.expired()
    assert deadline.remaining() == pytest.approx(1.0)


def test_an_idle_machine_spends_the_bound_at_the_clocks_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = itertools.count(0.0, 1.0)
    monkeypatch.setattr(waiting.time, "monotonic", lambda: next(ticks))
    monkeypatch.setattr(waiting.time, "sleep", lambda _s: None)
    monkeypatch.setattr(waiting, "load_factor", lambda: 1.0)
    with pytest.raises(AssertionError, match=r"timed out after 5 s .* waiting for the answer"):
        waiting.wait_for(lambda: None, 5, lambda: "the answer")


def test_the_first_value_that_is_neither_none_nor_false_is_returned() -> None:
    answers = iter([None, False, 0, 42])
    assert waiting.wait_for(lambda: next(answers), 60, lambda: "an answer") == 0


def test_the_load_factor_is_never_below_one() -> None:
    assert waiting.load_factor() >= 1.0
