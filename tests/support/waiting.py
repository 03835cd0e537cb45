"""Waiting for a condition, with a bound that a loaded machine stretches.

A test waits for a condition, never for a duration; the bound only ends a wait that would never
end. On a machine whose load is many times its cores, work that takes a second idle takes ten, so
a bound on the clock fails a test that was merely slowed. :class:`Deadline` counts the bound in
the time the machine gave each runnable process instead: a second of the clock counts
``1 / max(1, load ÷ cores)`` seconds (the one-minute load average), so an idle machine spends
the bound at the clock's pace and one loaded ten times over spends it ten times slower. A process
that waits on nothing still runs out of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

CORES = os.cpu_count() or 1


def load_factor() -> float:
    """How many times over the machine's cores are asked for (at least 1)."""
    try:
        return max(1.0, os.getloadavg()[0] / CORES)
    except OSError:  # no load average on this platform: the clock's pace
        return 1.0


class Deadline:
    """``seconds`` of the machine's time for each runnable process, from now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self._tick = self.started
        self._spent = 0.0

    def spent(self) -> float:
        """The bound used so far (seconds of the clock scaled down by the load while they passed)."""
        now = time.monotonic()
        self._spent += (now - self._tick) / load_factor()
        self._tick = now
        return self._spent

    def expired(self) -> bool:
        return self.spent() > self.seconds

    def remaining(self) -> float:
        """What is left of the bound (never below 0), for a call that takes its own timeout."""
        return max(0.0, self.seconds - self.spent())

    def elapsed(self) -> float:
        """Seconds of the clock since the deadline was set (for messages)."""
        return time.monotonic() - self.started

    def __str__(self) -> str:
        return f"{self.seconds:g} s (after {self.elapsed():.0f} s of the clock)"


def wait_for(
    probe: Callable[[], T | bool | None],
    timeout: float,
    describe: Callable[[], str],
    *,
    interval: float = 0.05,
    error: Callable[[str], Exception] = AssertionError,
) -> T:
    """``probe()``'s first value other than None and False; ``error`` (AssertionError by default)
    naming ``describe()`` once ``timeout`` (a :class:`Deadline`) is spent."""
    deadline = Deadline(timeout)
    pause = interval
    while True:
        value = probe()
        if value is not None and value is not False:
            return value  # type: ignore[return-value]
        if deadline.expired():
            raise error(f"timed out after {deadline} waiting for {describe()}")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)
