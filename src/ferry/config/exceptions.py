"""Errors raised while reading and validating a job file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ferry.exceptions import TerminalError
from ferry.options import OptionError

#: OptionError lives in ferry.options, which the sinks' options models import.
__all__ = ["ConfigError", "ConfigProblem", "OptionError"]


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem in a job file, at a 1-based line and column, named by its key path."""

    file: str
    line: int | None
    column: int | None
    key_path: str
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.key_path}: {self.message}" if self.key_path else f"{where}: {self.message}"


class ConfigError(TerminalError):
    """A job file that cannot be used: one line per problem, ``file:line:col: key.path: what``.

    ``file``, ``line``, ``column`` and ``key_path`` describe the first problem (the one nearest the
    top of the file); ``problems`` holds them all.
    """

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        if not problems:
            raise ValueError("a ConfigError needs at least one problem")
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        first = self.problems[0]
        self.file: str = first.file
        self.line: int | None = first.line
        self.column: int | None = first.column
        self.key_path: str = first.key_path
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(
        cls,
        file: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        key_path: str = "",
    ) -> ConfigError:
        """A single-problem error."""
        return cls([ConfigProblem(file, line, column, key_path, message)])
