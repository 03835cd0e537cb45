"""``ferry status --watch``: the status table refreshed in place with rich's live display, until
Ctrl-C (or, for a test, a number of refreshes)."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ferry.cli.output import status_table
from ferry.pipeline.checkpoints import now_ms
from ferry.state import StateStore


def watch_status(
    store: StateStore,
    pipeline_name: str | None,
    interval_s: float,
    *,
    refreshes: int | None = None,
    console: Console | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Read the status every ``interval_s`` seconds and redraw the table; ``refreshes`` bounds how
    many times (None: until interrupted or ``stop`` is set)."""
    stop = stop or threading.Event()

    def table() -> Table:
        names = [pipeline_name] if pipeline_name else store.pipelines()
        return status_table(store, names, now_ms())

    shown = 0
    with Live(table(), console=console, auto_refresh=False, transient=False) as live:
        shown = 1
        try:
            while refreshes is None or shown < refreshes:
                if stop.wait(interval_s):
                    break
                live.update(table(), refresh=True)
                shown += 1
        except KeyboardInterrupt:
            pass
