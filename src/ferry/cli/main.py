"""The ``ferry`` command: a thin shell over the library.

Every command renders text or JSON; errors become exit codes here and nowhere else: 0 success,
1 the pipeline failed, 2 invalid input (a job file, an argument, records the job cannot type), 4 an
unexpected error (a bug: the traceback is logged). ``ferry check`` answers with its verdict instead
(0, 1, 2) and 3 for input it cannot read (:data:`ferry.check.cli.EXIT_INPUT_ERROR`). ``ferry --help``
lists them.

``ferry --version`` and ``ferry --help`` import click and little else: the commands of other modules
are imported when run (:class:`LazyGroup`), and those here import what they use when they run.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

import ferry
from ferry.exceptions import FerryError
from ferry.logs import FORMATS, LogFormat, configure, mask_secrets, register_secrets, secrets_of
from ferry.process import STOP_GRACE_S

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_UNEXPECTED = 4


def handle_errors(func: F) -> F:
    """Map errors to a message on stderr and an exit code, in one place."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FerryError as e:
            from ferry.config.exceptions import ConfigError  # noqa: PLC0415 - loaded by then
            from ferry.connectors.exceptions import UntypedRecordsError  # noqa: PLC0415

            click.echo(f"error: {mask_secrets(str(e))}", err=True)
            sys.exit(EXIT_INVALID if isinstance(e, ConfigError | UntypedRecordsError) else EXIT_FAILED)
        except click.ClickException:
            raise
        except Exception as e:
            logging.getLogger(__name__).error("unexpected error", exc_info=e)
            click.echo(f"error: unexpected {type(e).__name__}: {mask_secrets(str(e))}", err=True)
            sys.exit(EXIT_UNEXPECTED)

    return wrapper  # type: ignore[return-value]


EXIT_CODES = """\b
Exit codes:
  0  success
  1  the pipeline failed, or could not start (the message names the sink, table
     and change, the topic, partition and offset, or the key to change)
  2  invalid input: a job file, a server file, an argument, or records the job
     file cannot read as written (payload-only records without types); or a
     command whose pip extra is not installed (the line names it)
  4  an unexpected error (a bug in ferry: the traceback is logged)
  ferry check: 0, 1, 2 fully, partially or in-compatible; 3 unreadable input"""


class LazyGroup(click.Group):
    """A group whose commands of other modules are imported when one is run (or its own help
    shown), so that ``ferry --version`` and ``ferry --help`` import no pipeline, sink or Kafka
    client. ``ferry --help`` lists them with the short help declared here, which a test keeps equal
    to the command's own."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: command name → ("module:attribute", its short help)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute = self.lazy[cmd_name][0].split(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = [
            (name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit))
            if name in self.lazy
            else (name, self.commands[name].get_short_help_str(limit))
            for name in self.list_commands(ctx)
            if name in self.lazy or not self.commands[name].hidden
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


#: The commands defined in other modules, imported when run: their short help as each says it.
LAZY_COMMANDS = {
    "check": ("ferry.check.cli:check", "Tell whether NEW can restart from the state of OLD."),
    "worker": (
        "ferry.cli.control:worker",
        "Run pipelines of the state store until SIGTERM: several workers share their partitions.",
    ),
    "serve": (
        "ferry.cli.control:serve",
        "Serve the HTTP API and supervise the pipelines until SIGTERM (one process for a small deployment).",
    ),
    "pipeline": ("ferry.cli.pipelines:pipeline", "Create, inspect, stop, resume and delete pipelines."),
    "savepoint": (
        "ferry.cli.pipelines:savepoint",
        "List, take, pin and delete the savepoints of a pipeline.",
    ),
    "replay": (
        "ferry.cli.pipelines:replay",
        "Create pipeline NAME that replays from a time, offsets or a savepoint.",
    ),
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, epilog=EXIT_CODES)
# the version is read from the installed distribution when asked for
@click.version_option(
    None,
    "--version",
    "-V",
    package_name=ferry.DISTRIBUTION,
    prog_name="ferry",
    message="%(prog)s %(version)s",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format",
    envvar="FERRY_LOG_FORMAT",
    default="text",
    show_default=True,
    show_envvar=True,
    type=click.Choice(FORMATS),
    help="json: one object a line (time, level, logger, message), for a log collector.",
)
def main(log_level: str, log_format: LogFormat) -> None:
    """ferry: change data capture pipelines from Kafka into lakehouse and warehouse tables."""
    configure(log_level, log_format)


def _check_supported(path: Path, config: Any) -> None:
    """What the job asks for and ferry does not do, refused before anything starts: at its key's
    line (a :class:`~ferry.config.ConfigError`) when the refusal names one."""
    from ferry.config.checks import UnsupportedOptionError, check_supported  # noqa: PLC0415
    from ferry.config.loader import problem_at  # noqa: PLC0415

    try:
        check_supported(config)
    except UnsupportedOptionError as e:
        if e.key_path is None:
            raise
        raise problem_at(path, e.key_path, str(e)) from None


@main.command()
@click.argument("job", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@handle_errors
def validate(job: Path) -> None:
    """Check a job file without starting anything."""
    from ferry.config.loader import read_job, validate_command  # noqa: PLC0415

    config, warnings = read_job(job)
    summary = validate_command(job)
    _check_supported(job, config)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(summary)


@main.command()
@click.argument("job", type=click.Path(exists=True, dir_okay=False, path_type=Path))
# accepted as before; a worker is one plain process either way
@click.option("--worker/--no-worker", default=True, hidden=True)
@click.option(
    "--worker-id",
    envvar="FERRY_WORKER_ID",
    default=None,
    help="This worker's name in its log lines (with parallelism N, worker i is <worker-id>-i).",
)
@click.option(
    "--status-host",
    envvar="FERRY_STATUS_HOST",
    default="127.0.0.1",
    show_default=True,
    show_envvar=True,
    help="The address pipeline.status.port listens on (0.0.0.0: every interface, as in a container).",
)
@click.option(
    "--startup-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up (exit 1) when the brokers do not answer in this time; a topic the job names is "
    "waited for as long (then source.topic-missing decides).",
)
@click.option(
    "--stop-grace",
    type=click.FloatRange(min=0, min_open=True),
    default=STOP_GRACE_S,
    show_default=True,
    metavar="SECONDS",
    help="A worker process still there this long after its pipeline failed (or, after a stop, "
    "after what its final checkpoint may wait: restart-strategy.timeout) is ended (SIGKILL).",
)
@click.option("--instance", type=click.IntRange(min=0), default=None, hidden=True)
@click.pass_context
@handle_errors
def run(
    ctx: click.Context,
    *,
    job: Path,
    worker: bool,
    worker_id: str | None,
    status_host: str,
    startup_timeout: float,
    stop_grace: float,
    instance: int | None,
) -> None:
    """Run a pipeline until it is stopped (SIGTERM/SIGINT take a final checkpoint).

    With pipeline.parallelism N above 1, N worker processes of the pipeline (one consumer group)."""
    del worker  # --no-worker once ran the hot path without the worker around it; they are one now
    from ferry.config.checks import UnsupportedOptionError  # noqa: PLC0415
    from ferry.config.loader import problem_at, read_job  # noqa: PLC0415
    from ferry.worker import check_brokers, check_client_settings, run_instances  # noqa: PLC0415

    config, warnings = read_job(job)
    register_secrets(secrets_of(config))
    for warning in warnings:
        logging.getLogger(__name__).warning("%s", warning)
    _check_supported(job, config)
    try:
        check_client_settings(config.source)
    except UnsupportedOptionError as e:
        raise e if e.key_path is None else problem_at(job, e.key_path, str(e)) from None
    check_brokers(config.source, startup_timeout)
    parallelism = config.pipeline.parallelism
    if instance is None and parallelism > 1:
        # the workers of one ferry run: worker i is <worker-id>-i and serves status.port + i
        common = [
            arg
            for name, value in (ctx.parent.params if ctx.parent else {}).items()
            for arg in (f"--{name.replace('_', '-')}", str(value))
        ]
        options = ["--status-host", status_host, "--startup-timeout", str(startup_timeout)]
        options += ["--stop-grace", str(stop_grace)]
        sys.exit(
            run_instances(
                [
                    [
                        sys.executable,
                        "-m",
                        "ferry.cli.main",
                        *common,
                        "run",
                        str(job),
                        *options,
                        "--instance",
                        str(i),
                        "--worker-id",
                        str(i) if worker_id is None else f"{worker_id}-{i}",
                    ]
                    for i in range(parallelism)
                ],
                # a worker's own bound comes first (its final checkpoint, then the grace)
                config.pipeline.restart_strategy.timeout.total_seconds() + 2 * stop_grace,
            )
        )
    if instance is not None and config.pipeline.status_port is not None:
        pipeline = config.pipeline.model_copy(update={"status_port": config.pipeline.status_port + instance})
        config = config.model_copy(update={"pipeline": pipeline})
    from ferry.worker import FerryWorker  # noqa: PLC0415

    ferry_worker = FerryWorker(
        config,
        worker_id=worker_id,
        status_host=status_host,
        startup_timeout_s=startup_timeout,
        stop_grace_s=stop_grace,
    )
    code = ferry_worker.run()
    if ferry_worker.error is not None:
        raise ferry_worker.error
    sys.exit(code)


@main.command()
@click.argument("job", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--state-url", help="SQLAlchemy URL of the state store (default: the job file's state.url).")
@click.option("--pipeline", "pipeline_name", help="Only this pipeline.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--watch",
    is_flag=True,
    help="Refresh a table in the terminal (phase, rate, records behind, ETA, rows) until Ctrl-C.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --watch: how often the table is read again.",
)
@click.option("--refreshes", type=click.IntRange(min=1), default=None, hidden=True)
@handle_errors
def status(
    *,
    job: Path | None,
    state_url: str | None,
    pipeline_name: str | None,
    output: str,
    watch: bool,
    interval: float,
    refreshes: int | None,
) -> None:
    """Phase, per-partition offsets and lag, rows written and schema-change history of pipelines;
    with --watch, a live table with the records behind and the ETA of the catch-up."""
    from ferry.config.loader import load_job  # noqa: PLC0415
    from ferry.state import StateStore  # noqa: PLC0415

    key = "--state-url" if state_url is not None else "pipeline.state.url"
    if job is not None:
        config = load_job(job)
        state_url = state_url or config.pipeline.state_url
        pipeline_name = pipeline_name or config.pipeline.name
    if state_url is None:
        raise click.UsageError("give a job file or --state-url")
    if watch and output != "text":
        raise click.UsageError("--watch renders a table: give it without --output json")
    store = StateStore(state_url, create=False, key=key)
    if watch:
        from ferry.cli.watch import watch_status  # noqa: PLC0415

        watch_status(store, pipeline_name, interval, refreshes=refreshes)
        return
    from ferry.cli.output import render_status  # noqa: PLC0415

    names = [pipeline_name] if pipeline_name else store.pipelines()
    click.echo(render_status(store, names, output))


@main.command()
def sinks() -> None:
    """What each sink does with each schema change under each behaviour (Markdown)."""
    from ferry.sinks.base.matrix import markdown  # noqa: PLC0415

    click.echo(markdown(), nl=False)


if __name__ == "__main__":
    main()
