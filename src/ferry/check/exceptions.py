"""Errors raised by ``ferry.check``."""

from __future__ import annotations

from ferry.exceptions import FerryError


class CheckError(FerryError):
    """A script or pipeline that ``ferry check`` cannot read or resolve."""


class CheckParseError(CheckError):
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

    def with_path(self, path: str) -> CheckParseError:
        """The same error, located in ``path``."""
        return CheckParseError(self.message, self.line, self.column, path)
