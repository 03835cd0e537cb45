"""A command whose pip extra is not installed ends with one line naming the extra, exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ferry import install_hint

#: The modules each extra the commands need brings (those the commands import, and what they import).
EXTRA_MODULES = {"server": frozenset({"fastapi", "starlette", "uvicorn", "httpx", "jinja2"})}


class MissingExtraError(click.ClickException):
    """``what`` needs ``extra``, and ``module`` of it cannot be imported."""

    exit_code = 2

    def __init__(self, what: str, extra: str, module: str | None) -> None:
        super().__init__(
            f"{what} need{'s' * (not what.endswith('commands'))} the '{extra}' extra "
            f"({module or 'a module of it'} is missing): {install_hint(extra)}"
        )

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@contextmanager
def needs_extra(what: str, extra: str) -> Iterator[None]:
    """Imports under it that fail for a module of ``extra`` raise :class:`MissingExtraError`."""
    try:
        yield
    except ImportError as e:
        if (e.name or "").split(".")[0] not in EXTRA_MODULES[extra]:
            raise
        raise MissingExtraError(what, extra, e.name) from None
