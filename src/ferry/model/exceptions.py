"""Errors of the event and schema model: changes that cannot be applied, types that do not widen."""

from __future__ import annotations

from ferry.exceptions import TerminalError


class SchemaError(TerminalError):
    """A schema change cannot be applied to a schema (unknown column, duplicate name, ...)."""

    def __init__(self, message: str, *, table: str | None = None, change: str | None = None) -> None:
        where = f" (table {table}" + (f", change {change}" if change else "") + ")" if table else ""
        super().__init__(message + where)
        self.table = table
        self.change = change


class TypeWideningError(SchemaError):
    """Two types have no common supertype that loses nothing."""
