"""``ferry worker``: supervise the pipelines of the state store (start, stop, savepoint them);
``ferry serve``: the HTTP API and a worker in one process."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from ferry.cli.extras import needs_extra

if TYPE_CHECKING:
    from ferry.control.config import ServerConfig

log = logging.getLogger(__name__)


def _server_config(path: Path | None) -> ServerConfig:
    from ferry.config.exceptions import ConfigError  # noqa: PLC0415
    from ferry.control.config import ServerConfig, load_server_config  # noqa: PLC0415

    if path is None:
        return ServerConfig()
    try:
        return load_server_config(path)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None


def _given(name: str) -> bool:
    """Whether an option was set on the command line or by its environment variable."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


_CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The server file (state.url, environments, data.dir, carry-over-offsets, api); "
    "options given on the command line override it.",
)


@click.command()
@click.option(
    "--state-url",
    default="sqlite:///var/ferry/state.db",
    show_default=True,
    help="SQLAlchemy URL of the state store holding the pipelines.",
)
@click.option(
    "--environment",
    "environments",
    multiple=True,
    help="Supervise only this environment (repeatable; default: every environment).",
)
@click.option(
    "--data-dir",
    default="var/ferry/pipelines",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Where the pipeline processes' job files and logs go.",
)
@click.option(
    "--carry-over/--no-carry-over",
    default=True,
    show_default=True,
    help="Whether pipelines may inherit offsets (sql.tables.initial-offset-from).",
)
@click.option(
    "--carry-over-timeout",
    default="15 min",
    show_default=True,
    help="How long a pipeline waits for its reference's offsets (at most 6 h).",
)
@click.option("--worker-id", default=None, help="This worker's name (default: host, pid and a random part).")
@_CONFIG_OPTION
def worker(  # noqa: PLR0917 - one parameter per option, as click passes them
    state_url: str,
    environments: tuple[str, ...],
    data_dir: Path,
    carry_over: bool,
    carry_over_timeout: str,
    worker_id: str | None,
    config_path: Path | None,
) -> None:
    """Run pipelines of the state store until SIGTERM: several workers share their partitions."""
    from ferry.control.service import ControlPlane  # noqa: PLC0415
    from ferry.control.supervisor import Supervisor  # noqa: PLC0415

    config = _server_config(config_path)
    overrides: dict[str, object] = {}
    if _given("state_url"):
        overrides["state_url"] = state_url
    if _given("environments"):
        overrides["environments"] = environments
    if _given("data_dir"):
        overrides["data_dir"] = data_dir
    carry = config.carry_over_offsets
    if _given("carry_over"):
        carry = carry.model_copy(update={"enabled": carry_over})
    if _given("carry_over_timeout"):
        from ferry.options import parse_duration  # noqa: PLC0415

        try:
            timeout = parse_duration(carry_over_timeout)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--carry-over-timeout") from None
        carry = carry.model_copy(update={"timeout": timeout})
    config = config.model_copy(update={**overrides, "carry_over_offsets": carry})
    try:
        settings = config.control_settings()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--carry-over-timeout") from None
    plane = ControlPlane(settings)
    supervisor = Supervisor(
        plane,
        environments=frozenset(config.environments or ()) or None,
        worker=worker_id,
        data_dir=config.data_dir,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        supervisor.run(stop)
    finally:
        plane.close()


@click.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The server file: state store, environments, carry-over settings, API address and tokens.",
)
@click.option("--host", default=None, help="Listen on this address (default: the file's api.host).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="Listen on this port (api.port).")
@click.option(
    "--worker/--no-worker",
    "run_worker",
    default=True,
    show_default=True,
    help="Also supervise the pipelines in this process; --no-worker serves the API alone.",
)
@click.option("--worker-id", default=None, help="This worker's name (default: host, pid and a random part).")
def serve(
    config_path: Path, host: str | None, port: int | None, run_worker: bool, worker_id: str | None
) -> None:
    """Serve the HTTP API and supervise the pipelines until SIGTERM (one process for a small deployment)."""
    with needs_extra("ferry serve", "server"):
        import uvicorn  # noqa: PLC0415

        from ferry.api.app import create_app  # noqa: PLC0415
    from ferry.control.service import ControlPlane  # noqa: PLC0415
    from ferry.control.supervisor import Supervisor  # noqa: PLC0415

    config = _server_config(config_path)
    plane = ControlPlane(config.control_settings())
    thread: threading.Thread | None = None

    def not_ready() -> str | None:
        if run_worker and (thread is None or not thread.is_alive()):
            return "the worker of this process is not running"
        return None

    app = create_app(plane, config.api.tokens, not_ready)
    host = host or config.api.host
    port = config.api.port if port is None else port
    if not config.api.tokens:
        log.warning("api.tokens is empty: every request but /healthz, /readyz and /metrics is refused (401)")
    stop = threading.Event()
    # uvicorn handles SIGINT/SIGTERM while it serves, then restores these handlers and raises the
    # signal again: it reaches them once the server has stopped.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if run_worker:
        supervisor = Supervisor(
            plane,
            environments=frozenset(config.environments) if config.environments else None,
            worker=worker_id,
            data_dir=config.data_dir,
        )
        thread = threading.Thread(target=supervisor.run, args=(stop,), name="ferry-supervisor")
        thread.start()
    names = ", ".join(t.name for t in config.api.tokens) or "none"
    log.info("serving the API on http://%s:%d (tokens: %s)", host, port, names)
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="off", server_header=False)
    )
    try:
        server.run()
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        plane.close()
        log.info("stopped")
