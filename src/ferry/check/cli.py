"""The ``ferry check OLD NEW`` command: a thin shell over :mod:`ferry.check`."""

from __future__ import annotations

from pathlib import Path

import click

from ferry.check.classify import classify
from ferry.check.load import load_plan
from ferry.check.render import render_json, render_text
from ferry.sql.exceptions import SqlError, SqlParseError

__all__ = ["EXIT_INPUT_ERROR", "check"]

EXIT_INPUT_ERROR = 3
"""Exit code for input that cannot be read or parsed (0, 1 and 2 are the verdicts)."""


@click.command("check")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Report format.",
)
@click.pass_context
def check(ctx: click.Context, old: Path, new: Path, output: str) -> None:
    """Tell whether NEW can restart from the state of OLD.

    OLD and NEW are Flink SQL files, directories of .sql files, or pipeline YAML files. Exit code:
    0 fully compatible, 1 partially compatible (some operators lose state), 2 incompatible,
    3 input that cannot be read or parsed.
    """
    try:
        verdict = classify(load_plan(old), load_plan(new))
    except SqlParseError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(EXIT_INPUT_ERROR)
    except SqlError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(EXIT_INPUT_ERROR)
    if output == "json":
        click.echo(render_json(verdict))
    else:
        click.echo(render_text(verdict, str(old), str(new)))
    ctx.exit(verdict.exit_code)
