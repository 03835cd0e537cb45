"""Errors of the pipeline core: schemas, schema changes, checkpoints."""

from __future__ import annotations

from ferry.exceptions import FerryError, TerminalError


class SchemaError(TerminalError):
    """A schema change cannot be applied to a schema (unknown column, duplicate name, ...)."""

    def __init__(self, message: str, *, table: str | None = None, change: str | None = None) -> None:
        where = f" (table {table}" + (f", change {change}" if change else "") + ")" if table else ""
        super().__init__(message + where)
        self.table = table
        self.change = change


class TypeWideningError(SchemaError):
    """Two types have no common supertype that loses nothing."""


class SchemaChangeRefusedError(TerminalError):
    """The sink cannot apply a schema change and the behaviour requires it (EVOLVE, EXCEPTION)."""

    def __init__(self, message: str, *, sink: str, table: str, change: str) -> None:
        super().__init__(message)
        self.sink = sink
        self.table = table
        self.change = change


class CheckpointError(FerryError):
    """A checkpoint could not be completed."""
