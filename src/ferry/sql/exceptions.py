"""Errors of the Flink SQL front end (``ferry check`` and transforms report them)."""

from __future__ import annotations

from ferry.exceptions import FerryError


class SqlError(FerryError):
    """A script, query or pipeline that cannot be read or resolved."""


class SqlParseError(SqlError):
    """Input that does not parse, with the place where reading stopped.

    ``line`` and ``column`` are 1-based; ``path`` is the file the text came from, when there is one.
    """

    def __init__(self, message: str, line: int, column: int, path: str | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.path = path
        super().__init__(self.location() + ": " + message)

    def location(self) -> str:
        """``path:line:column``, or ``line:column`` without a path."""
        prefix = f"{self.path}:" if self.path else ""
        return f"{prefix}{self.line}:{self.column}"

    def with_path(self, path: str) -> SqlParseError:
        """The same error, located in ``path``."""
        return SqlParseError(self.message, self.line, self.column, path)
