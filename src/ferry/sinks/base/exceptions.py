"""Errors raised by sinks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ferry import install_hint
from ferry.exceptions import FerryError, TerminalError, TransientError

if TYPE_CHECKING:
    from ferry.model.schema import Schema, TableId


class SinkError(FerryError):
    """A sink operation failed."""

    def __init__(self, message: str, *, sink: str, table: str | None = None) -> None:
        super().__init__(f"{sink} sink" + (f", table {table}" if table else "") + f": {message}")
        self.sink = sink
        self.table = table


class SinkTerminalError(SinkError, TerminalError):
    """A sink operation that will not succeed on retry (incompatible schema, refused change)."""


class SinkRowError(SinkTerminalError):
    """The destination refused a row of a write for its data (a value it cannot hold, a constraint
    it breaks): the row is to be found and set aside, not the write retried as it is."""


def incompatible_table(
    problems: Sequence[str], existing: Schema, wanted: Schema, *, sink: str, table: TableId
) -> SinkTerminalError:
    """The refusal of a create for a table that exists with a schema that cannot take its rows."""
    return SinkTerminalError(
        f"the table exists with a schema that cannot take the new table's rows "
        f"({'; '.join(problems)}); existing: {existing.describe()}; wanted: {wanted.describe()}",
        sink=sink,
        table=str(table),
    )


class SinkTransientError(SinkError, TransientError):
    """A sink operation that may succeed on retry (catalog busy, connection reset)."""


class MissingExtraError(TerminalError):
    """A sink's client library is not installed."""

    def __init__(self, sink: str, extra: str, cause: ImportError) -> None:
        super().__init__(f"the {sink} sink needs the '{extra}' extra: {install_hint(extra)} ({cause})")
        self.sink = sink
        self.extra = extra
