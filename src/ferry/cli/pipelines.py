"""``ferry pipeline``, ``ferry savepoint`` and ``ferry replay``: the HTTP API from the command line.

Every command is one or two requests to the API (:mod:`ferry.api.app`): over HTTP to ``--server``
(``FERRY_SERVER``) with ``--token`` (``FERRY_TOKEN``), or, without a server, to the same
application run in-process over the state store of ``--state-url`` or ``--config``, as a local
editor. Output is text, or the resources with ``--output json``. Exit codes: 0 done, 2 refused
(HTTP 4xx, or an invalid argument), 1 the server failed or cannot be reached.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from ferry.api.client import Api, ApiError, Client, Local
from ferry.cli.extras import needs_extra
from ferry.cli.output import render_pipeline, render_pipelines, render_savepoint, render_savepoints
from ferry.control.models import API_VERSION, SavepointSource, job_label
from ferry.logs import mask_secrets

F = TypeVar("F", bound=Callable[..., Any])

EXIT_SERVER = 1
EXIT_REFUSED = 2
DEFAULT_STATE_URL = "sqlite:///var/ferry/state.db"
SOURCES = tuple(SavepointSource)


def _open_client(server: str | None, token: str | None, state_url: str | None, config: Path | None) -> Client:
    """A client of ``--server``, or of the API run in this process over ``--state-url``/``--config``."""
    _require_httpx()
    if server:
        if state_url or config:
            raise click.UsageError("give --server, or --state-url/--config to work locally, not both")
        return Client(server.rstrip("/"), token, None)
    return Client(None, None, Local.open(state_url, config))


def _require_httpx() -> None:
    with needs_extra("the pipeline commands", "server"):
        import fastapi  # noqa: F401, PLC0415
        import httpx  # noqa: F401, PLC0415


def api_command(func: F) -> F:
    """Adds the connection and output options, opens the client, and maps errors to exit codes."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        server: str | None,
        token: str | None,
        state_url: str | None,
        config: Path | None,
        environment: str,
        output: str,
        **kwargs: Any,
    ) -> None:
        from ferry.config.exceptions import ConfigError  # noqa: PLC0415

        # httpx logs every request at INFO: the command's own output says what happened.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        try:
            client = _open_client(server, token, state_url, config)
        except ConfigError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_REFUSED)
        try:
            func(*args, api=Api(client, environment), output=output, **kwargs)
        except ApiError as e:
            click.echo(f"error: {mask_secrets(e.message)}", err=True)
            sys.exit(EXIT_REFUSED if e.refused else EXIT_SERVER)
        finally:
            client.close()

    options = [
        click.option(
            "--server",
            envvar="FERRY_SERVER",
            metavar="URL",
            help="The API's base URL, e.g. http://ferry:8080 (FERRY_SERVER). Without it the command "
            "works on the state store directly.",
        ),
        click.option("--token", envvar="FERRY_TOKEN", help="The bearer token for --server (FERRY_TOKEN)."),
        click.option(
            "--state-url",
            envvar="FERRY_STATE_URL",
            help=f"Without --server: the state store's SQLAlchemy URL (default {DEFAULT_STATE_URL}).",
        ),
        click.option(
            "--config",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Without --server: the server file (its state.url and carry-over settings).",
        ),
        click.option(
            "-e",
            "--environment",
            envvar="FERRY_ENVIRONMENT",
            default="default",
            show_default=True,
            help="The environment (FERRY_ENVIRONMENT).",
        ),
        click.option(
            "-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
        ),
    ]
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def _emit(output: str, data: Any, text: Callable[[], str]) -> None:
    if output == "json":
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(text())


# --------------------------------------------------------------------------------------------------
# ferry pipeline


@click.group()
def pipeline() -> None:
    """Create, inspect, stop, resume and delete pipelines."""


@pipeline.command("create")
@click.argument("name")
@click.option(
    "--job",
    "job_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The job file; ${ENV} references in it are resolved where the pipeline runs.",
)
@click.option(
    "--initial-offset-from",
    metavar="PIPELINE",
    help="Start from the offsets of this stopped pipeline's last savepoint (carry-over offsets).",
)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="A spec property.")
@click.option("--upgrade-mode", type=click.Choice(["savepoint", "stateless"]), default=None)
@click.option("--savepoint-interval", metavar="DURATION", help="Take a SCHEDULE savepoint this often.")
@click.option("--stopped", is_flag=True, help="Create it stopped.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label (repeatable).")
@click.option("--annotation", "annotations", multiple=True, metavar="KEY=VALUE", help="An annotation.")
@api_command
def create_pipeline(
    *,
    name: str,
    job_file: Path,
    initial_offset_from: str | None,
    properties: tuple[str, ...],
    upgrade_mode: str | None,
    savepoint_interval: str | None,
    stopped: bool,
    labels: tuple[str, ...],
    annotations: tuple[str, ...],
    api: Api,
    output: str,
) -> None:
    """Create pipeline NAME from a job file."""
    spec: dict[str, Any] = {"job": _read_job(job_file), "properties": _properties(properties)}
    if initial_offset_from:
        spec["properties"]["sql.tables.initial-offset-from"] = initial_offset_from
    if upgrade_mode:
        spec["upgradeMode"] = upgrade_mode
    if savepoint_interval:
        spec["savepointInterval"] = savepoint_interval
    if stopped:
        spec["stopped"] = True
    metadata = {
        "labels": _pairs(labels, "--label"),
        "annotations": _pairs(annotations, "--annotation"),
    }
    with _in_job_file(name, job_file):
        resource = api.call("POST", "pipelines", body=_pipeline_body(name, spec, metadata))
    _emit(output, resource, lambda: f"created pipeline {name}\n{render_pipeline(resource)}")


@pipeline.command("get")
@click.argument("name")
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Show the job's secrets as they are stored (an editor's token); masked otherwise.",
)
@api_command
def get_pipeline(name: str, api: Api, output: str, show_secrets: bool) -> None:
    """Show a pipeline: phase, detail, deadline, inherited topics, latest offsets, progress."""
    resource = api.call("GET", "pipelines", name, params={"reveal": "true"} if show_secrets else None)
    _emit(output, resource, lambda: render_pipeline(resource))


@pipeline.command("list")
@api_command
def list_pipelines(api: Api, output: str) -> None:
    """List the pipelines of the environment."""
    page = api.call("GET", "pipelines")
    _emit(output, page["items"], lambda: render_pipelines(page["items"], api.environment))


@pipeline.command("stop")
@click.argument("name")
@api_command
def stop_pipeline(name: str, api: Api, output: str) -> None:
    """Stop a pipeline (taking a savepoint unless its upgrade mode is stateless)."""
    _set_stopped(api, name, True, output)


@pipeline.command("resume")
@click.argument("name")
@api_command
def resume_pipeline(name: str, api: Api, output: str) -> None:
    """Resume a stopped or failed pipeline."""
    _set_stopped(api, name, False, output)


@pipeline.command("delete")
@click.argument("name")
@api_command
def delete_pipeline(name: str, api: Api, output: str) -> None:
    """Delete a pipeline (its savepoints must be deleted first: ferry savepoint delete)."""
    api.call("DELETE", "pipelines", name)
    _emit(output, {"deleted": name}, lambda: f"deleted pipeline {name}")


def _set_stopped(api: Api, name: str, stopped: bool, output: str) -> None:
    """A PUT of the resource with ``spec.stopped`` changed, as the API expects it."""
    current = api.call("GET", "pipelines", name)
    spec = {**current["spec"], "stopped": stopped}
    resource = api.call("PUT", "pipelines", name, body=_pipeline_body(name, spec))
    verb = "stop" if stopped else "resume"
    _emit(output, resource, lambda: f"{verb} requested for pipeline {name}\n{render_pipeline(resource)}")


def _pipeline_body(
    name: str, spec: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Pipeline",
        "metadata": {"name": name, **(metadata or {})},
        "spec": dict(spec),
    }


@contextlib.contextmanager
def _in_job_file(name: str, job_file: Path | None) -> Iterator[None]:
    """A refusal of the pipeline's job, which the API places in its ``spec.job``, placed in the
    file it was read from (``job.yaml:12:5: sink.catalog.properties.type: ...``)."""
    try:
        yield
    except ApiError as e:
        label = f"{job_label(name)}:"
        if job_file is None or label not in e.message:
            raise
        raise ApiError(e.status, e.message.replace(label, f"{job_file}:")) from None


def _read_job(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise click.BadParameter(f"cannot read {path}: {e}", param_hint="--job") from None


def _properties(items: tuple[str, ...]) -> dict[str, str]:
    return _pairs(items, "--property")


def _pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=option)
        pairs[key] = value
    return pairs


# --------------------------------------------------------------------------------------------------
# ferry savepoint


@click.group()
def savepoint() -> None:
    """List, take, pin and delete the savepoints of a pipeline."""


@savepoint.command("list")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.option("--source", type=click.Choice(SOURCES), help="Only savepoints of this source.")
@api_command
def list_savepoints(pipeline_name: str, source: str | None, api: Api, output: str) -> None:
    """List the savepoints of PIPELINE."""
    page = api.call(
        "GET", "pipelines", pipeline_name, "savepoints", params={"source": source} if source else None
    )
    _emit(output, page["items"], lambda: render_savepoints(page["items"], pipeline_name))


@savepoint.command("get")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid", metavar="SAVEPOINT")
@api_command
def get_savepoint(pipeline_name: str, uid: str, api: Api, output: str) -> None:
    """Show savepoint SAVEPOINT (its uid or name): state, reason, offsets."""
    resource = api.call("GET", "pipelines", pipeline_name, "savepoints", uid)
    _emit(output, resource, lambda: render_savepoint(resource))


@savepoint.command("create")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.option("--name", "savepoint_name", help="Name it (default: manual-<uid prefix>).")
@api_command
def create_savepoint(pipeline_name: str, savepoint_name: str | None, api: Api, output: str) -> None:
    """Take a MANUAL savepoint of a running pipeline (recorded at its next checkpoint)."""
    body = None if savepoint_name is None else {"metadata": {"name": savepoint_name}}
    resource = api.call("POST", "pipelines", pipeline_name, "savepoints", body=body)
    _emit(
        output,
        resource,
        lambda: f"requested savepoint {resource['metadata']['name']} ({resource['metadata']['uid']})",
    )


@savepoint.command("delete")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid", metavar="[SAVEPOINT]", required=False)
@click.option("--source", type=click.Choice(SOURCES), help="Delete every unpinned savepoint of this source.")
@click.option("--force", is_flag=True, help="Required: a deleted savepoint can no longer be used.")
@api_command
def delete_savepoint(
    *, pipeline_name: str, uid: str | None, source: str | None, force: bool, api: Api, output: str
) -> None:
    """Delete savepoint SAVEPOINT (uid or name) of PIPELINE, or all of one --source."""
    if (uid is None) == (source is None):
        raise click.UsageError("give a savepoint (uid or name) or --source, not both")
    params = {"force": "true" if force else "false"}
    if uid is not None:
        api.call("DELETE", "pipelines", pipeline_name, "savepoints", uid, params=params)
        deleted = [uid]
    else:
        assert source is not None
        answer = api.call(
            "DELETE", "pipelines", pipeline_name, "savepoints", params={**params, "source": source}
        )
        deleted = list(answer["deleted"])
    _emit(
        output,
        {"deleted": deleted},
        lambda: (
            f"deleted {len(deleted)} savepoint(s) of pipeline {pipeline_name}"
            + "".join(f"\n  {u}" for u in deleted)
        ),
    )


@savepoint.command("pin")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid", metavar="SAVEPOINT")
@api_command
def pin_savepoint(pipeline_name: str, uid: str, api: Api, output: str) -> None:
    """Pin a savepoint: bulk deletes keep it."""
    _set_pinned(api, pipeline_name, uid, True, output)


@savepoint.command("unpin")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid", metavar="SAVEPOINT")
@api_command
def unpin_savepoint(pipeline_name: str, uid: str, api: Api, output: str) -> None:
    """Unpin a savepoint."""
    _set_pinned(api, pipeline_name, uid, False, output)


def _set_pinned(api: Api, name: str, uid: str, pinned: bool, output: str) -> None:
    resource = api.call("PATCH", "pipelines", name, "savepoints", uid, body={"spec": {"pinned": pinned}})
    _emit(output, resource, lambda: f"{'pinned' if pinned else 'unpinned'} savepoint {uid}")


# --------------------------------------------------------------------------------------------------
# ferry replay


@click.command()
@click.argument("name")
@click.option(
    "--job",
    "job_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The job file to replay with.",
)
@click.option("--like", metavar="PIPELINE", help="Replay with the job of this existing pipeline.")
@click.option(
    "--from-timestamp",
    metavar="TIME",
    help="Start at this time: ISO 8601 (UTC unless it has an offset) or epoch milliseconds.",
)
@click.option(
    "--from-offsets",
    multiple=True,
    metavar="TOPIC=OFFSETS",
    help="Start at these offsets, e.g. orders=partition:0,offset:42;partition:1,offset:7 (repeatable).",
)
@click.option(
    "--from-savepoint",
    metavar="UID",
    help="Start at the offsets of this completed savepoint (its uid; PIPELINE/NAME for one of "
    "the environment's pipelines by name).",
)
@click.option(
    "--bounded",
    metavar="END",
    help="Stop at: latest-offset, timestamp=TIME or specific-offsets=partition:0,offset:42;...",
)
@click.option(
    "--rebuild-table",
    "rebuild_tables",
    multiple=True,
    metavar="TABLE",
    help="Drop this sink table first so that the replay rebuilds it (repeatable).",
)
@click.option("--upgrade-mode", type=click.Choice(["savepoint", "stateless"]), default=None)
@click.option("--stopped", is_flag=True, help="Create it stopped.")
@api_command
def replay(
    *,
    name: str,
    job_file: Path | None,
    like: str | None,
    from_timestamp: str | None,
    from_offsets: tuple[str, ...],
    from_savepoint: str | None,
    bounded: str | None,
    rebuild_tables: tuple[str, ...],
    upgrade_mode: str | None,
    stopped: bool,
    api: Api,
    output: str,
) -> None:
    """Create pipeline NAME that replays from a time, offsets or a savepoint."""
    if (job_file is None) == (like is None):
        raise click.UsageError("give --job FILE or --like PIPELINE (one of them)")
    starts = [s for s in (from_timestamp, from_offsets or None, from_savepoint) if s is not None]
    if len(starts) != 1:
        raise click.UsageError("give one start: --from-timestamp, --from-offsets or --from-savepoint")
    if job_file is not None:
        job = _read_job(job_file)
    else:
        assert like is not None
        job = api.call("GET", "pipelines", like)["spec"]["job"]
    spec: dict[str, Any] = {
        "job": job,
        "startFrom": _start_from(api, from_timestamp, from_offsets, from_savepoint),
    }
    if bounded:
        spec["bounded"] = _bounded(bounded)
    if rebuild_tables:
        spec["rebuildTables"] = list(rebuild_tables)
    if upgrade_mode:
        spec["upgradeMode"] = upgrade_mode
    if stopped:
        spec["stopped"] = True
    with _in_job_file(name, job_file):
        resource = api.call("POST", "pipelines", body=_pipeline_body(name, spec))
    _emit(output, resource, lambda: f"created replay {name}\n{render_pipeline(resource)}")


def _savepoint_uid(api: Api, given: str) -> str:
    """``PIPELINE/NAME`` looked up to the savepoint's uid (``spec.startFrom.savepoint`` is a uid)."""
    pipeline_name, sep, savepoint_name = given.partition("/")
    if not sep:
        return given
    return str(api.call("GET", "pipelines", pipeline_name, "savepoints", savepoint_name)["metadata"]["uid"])


def _start_from(
    api: Api, timestamp: str | None, offsets: tuple[str, ...], savepoint_uid: str | None
) -> dict[str, Any]:
    if timestamp is not None:
        return {"timestampMillis": parse_millis(timestamp, "--from-timestamp")}
    if savepoint_uid is not None:
        return {"savepoint": _savepoint_uid(api, savepoint_uid)}
    by_topic: dict[str, str] = {}
    for item in offsets:
        topic, sep, value = item.partition("=")
        if not sep or not topic or not value:
            raise click.BadParameter(
                f"{item!r} is not TOPIC=partition:0,offset:42;...", param_hint="--from-offsets"
            )
        by_topic[topic] = value
    return {"offsets": by_topic}


def _bounded(text: str) -> dict[str, Any]:
    mode, _, value = text.partition("=")
    if mode == "latest-offset" and not value:
        return {"mode": mode}
    if mode == "timestamp" and value:
        return {"mode": mode, "timestampMillis": parse_millis(value, "--bounded")}
    if mode == "specific-offsets" and value:
        return {"mode": mode, "offsets": value}
    raise click.BadParameter(
        f"{text!r}: give latest-offset, timestamp=TIME or specific-offsets=partition:0,offset:42;...",
        param_hint="--bounded",
    )


def parse_millis(text: str, option: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (UTC when it has no offset)."""
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither ISO 8601 (2024-05-01T12:00:00Z) nor epoch milliseconds", param_hint=option
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)
