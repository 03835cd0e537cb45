"""How long a pipeline that is behind needs to catch up: the records behind divided by the recent
rate of reading, for ``ferry status``, the web page, a replay's progress and the log.

:class:`RecentRate` smooths the rate over the last :data:`RATE_WINDOW_S` seconds (the one-second
throughput swings with every batch and checkpoint); :class:`CatchUpLog` says when to write the
catch-up line: every :data:`LOG_INTERVAL_S` seconds while at least :data:`LARGE_LAG_RECORDS` records
are behind.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: The rate an ETA divides by: records read over the last this many seconds.
RATE_WINDOW_S = 30.0
#: A lag this large is a catch-up worth a log line.
LARGE_LAG_RECORDS = 10_000
#: How often the catch-up line is written while the lag is large.
LOG_INTERVAL_S = 5.0


def eta_seconds(behind: int, rate_eps: float | None) -> float | None:
    """Seconds until ``behind`` records are read at ``rate_eps`` records/s: 0 when nothing is
    behind, None when nothing is read (no rate to tell by)."""
    if behind <= 0:
        return 0.0
    if rate_eps is None or rate_eps <= 0:
        return None
    return behind / rate_eps


def format_eta(seconds: float | None) -> str:
    """``45 s``, ``12 min 05 s``, ``3 h 07 min``; ``unknown`` without a rate."""
    if seconds is None:
        return "unknown"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class RecentRate:
    """Records per second over the last ``window_s`` seconds, from a running count."""

    window_s: float = RATE_WINDOW_S
    _seen: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, at_s: float, count: int) -> float | None:
        """Note the count at ``at_s`` (monotonic seconds); the rate since the oldest note in the
        window, or None before two notes a moment apart."""
        if self._seen and count < self._seen[-1][1]:
            self._seen.clear()  # the count started again (a restart)
        self._seen.append((at_s, count))
        while len(self._seen) > 2 and at_s - self._seen[1][0] >= self.window_s:
            self._seen.popleft()
        return self.rate()

    def rate(self) -> float | None:
        if len(self._seen) < 2:
            return None
        (since, first), (until, last) = self._seen[0], self._seen[-1]
        if until - since <= 0:
            return None
        return (last - first) / (until - since)


@dataclass
class CatchUpLog:
    """When to log catch-up progress: every ``interval_s`` while ``large`` records or more are behind."""

    large: int = LARGE_LAG_RECORDS
    interval_s: float = LOG_INTERVAL_S
    _last_s: float | None = None

    def due(self, at_s: float, behind: int) -> bool:
        if behind < self.large:
            self._last_s = None
            return False
        if self._last_s is not None and at_s - self._last_s < self.interval_s:
            return False
        self._last_s = at_s
        return True


def catch_up_line(behind: int, rate_eps: float | None) -> str:
    rate = "no records read yet" if rate_eps is None else f"{rate_eps:,.0f} records/s"
    return f"catching up: {behind:,} records behind, {rate}, ETA {format_eta(eta_seconds(behind, rate_eps))}"
