"""Errors of the pipeline: schema changes a sink refuses, checkpoints, bad records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ferry.exceptions import FerryError, TerminalError

if TYPE_CHECKING:
    from ferry.model.events import SourcePosition


class SchemaChangeRefusedError(TerminalError):
    """The sink cannot apply a schema change and the behaviour requires it (EVOLVE, EXCEPTION)."""

    def __init__(self, message: str, *, sink: str, table: str, change: str) -> None:
        super().__init__(message)
        self.sink = sink
        self.table = table
        self.change = change


class CheckpointError(FerryError):
    """A checkpoint could not be completed."""


class BadRecordError(TerminalError):
    """A record could not be processed and ``on-bad-record`` is ``fail``."""

    def __init__(self, reason: str, position: SourcePosition) -> None:
        super().__init__(f"bad record at {position}: {reason}")
        self.topic, self.partition, self.offset = position


class NothingWrittenError(TerminalError):
    """A bounded read ended with every record it read in the dead-letter topic."""
