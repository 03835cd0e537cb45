"""Errors raised by sinks."""

from __future__ import annotations

from ferry import install_hint
from ferry.exceptions import FerryError, TerminalError, TransientError


class SinkError(FerryError):
    """A sink operation failed."""

    def __init__(self, message: str, *, sink: str, table: str | None = None) -> None:
        super().__init__(f"{sink} sink" + (f", table {table}" if table else "") + f": {message}")
        self.sink = sink
        self.table = table


class SinkTerminalError(SinkError, TerminalError):
    """A sink operation that will not succeed on retry (incompatible schema, refused change)."""


class SinkTransientError(SinkError, TransientError):
    """A sink operation that may succeed on retry (catalog busy, connection reset)."""


class MissingExtraError(TerminalError):
    """A sink's client library is not installed."""

    def __init__(self, sink: str, extra: str, cause: ImportError) -> None:
        super().__init__(f"the {sink} sink needs the '{extra}' extra: {install_hint(extra)} ({cause})")
        self.sink = sink
        self.extra = extra
