"""``ferry pipeline``, ``ferry savepoint`` and ``ferry replay``: the HTTP API from the command line.

Every command is one or two requests to the API (:mod:`ferry.api.app`): over HTTP to ``--server``
(``FERRY_SERVER``) with ``--token`` (``FERRY_TOKEN``), or, without a server, to the same
application run in-process over the state store of ``--state-url`` or ``--config``, as a local
editor. Output is text, or the resources with ``--output json``. Exit codes: 0 done, 2 refused
(HTTP 4xx, or an invalid argument), 1 the server failed or cannot be reached.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import secrets
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import click
import orjson

from ferry.exceptions import FerryError

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

    from ferry.control.service import ControlPlane

F = TypeVar("F", bound=Callable[..., Any])

EXIT_SERVER = 1
EXIT_REFUSED = 2
DEFAULT_STATE_URL = "sqlite:///var/ferry/state.db"
SOURCES = ("UPGRADE", "MANUAL", "SCHEDULE")


class ApiError(FerryError):
    """A request the API refused (``status`` 4xx) or could not serve (5xx, ``None``: unreachable)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def exit_code(self) -> int:
        return EXIT_REFUSED if self.status is not None and 400 <= self.status < 500 else EXIT_SERVER


# --------------------------------------------------------------------------------------------------
# The client


class Client:
    """Sends requests to the API: remote (``server``) or in-process over a state store."""

    def __init__(self, server: str | None, token: str | None, local: Local | None) -> None:
        self.server = server
        self.token = token
        self.local = local

    @classmethod
    def open(
        cls, server: str | None, token: str | None, state_url: str | None, config: Path | None
    ) -> Client:
        _require_httpx()
        if server:
            if state_url or config:
                raise click.UsageError("give --server, or --state-url/--config to work locally, not both")
            return cls(server.rstrip("/"), token, None)
        return cls(None, None, Local.open(state_url, config))

    def close(self) -> None:
        if self.local is not None:
            self.local.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """The response's JSON (``None`` for 204); :class:`ApiError` for any other outcome."""
        return asyncio.run(self._call(method, path, body, params))

    async def _call(
        self, method: str, path: str, body: Mapping[str, Any] | None, params: Mapping[str, str] | None
    ) -> Any:
        import httpx  # noqa: PLC0415

        headers = {"Accept": "application/json", "User-Agent": "ferry-cli"}
        base_url: str
        token: str | None
        if self.local is not None:
            transport: httpx.AsyncBaseTransport = httpx.ASGITransport(
                app=self.local.app, raise_app_exceptions=False
            )
            base_url, token = "http://ferry.local", self.local.token
        else:
            assert self.server is not None
            transport = httpx.AsyncHTTPTransport(retries=1)
            base_url, token = self.server, self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(
            transport=transport, base_url=base_url, headers=headers, timeout=30.0
        ) as client:
            try:
                response = await client.request(method, path, json=body, params=params)
            except httpx.HTTPError as e:
                raise ApiError(None, f"cannot reach the server {base_url}: {e or type(e).__name__}") from None
        if response.status_code == 204:
            return None
        if response.is_success:
            return response.json()
        raise ApiError(response.status_code, _error_message(response))


def _error_message(response: httpx.Response) -> str:
    try:
        errors = response.json()["errors"]
        message = "; ".join(str(e["message"]) for e in errors)
    except (ValueError, KeyError, TypeError):
        message = response.text.strip()[:500] or response.reason_phrase
    return f"{message} (HTTP {response.status_code})"


class Local:
    """The API application in this process, over the state store, with a one-off editor token."""

    def __init__(self, plane: ControlPlane, app: FastAPI, token: str) -> None:
        self.plane = plane
        self.app = app
        self.token = token

    @classmethod
    def open(cls, state_url: str | None, config: Path | None) -> Local:
        from ferry.api.app import create_app  # noqa: PLC0415
        from ferry.control.config import ANY_ENVIRONMENT, ServerConfig, TokenConfig, load_server_config  # noqa: PLC0415
        from ferry.control.service import ControlPlane  # noqa: PLC0415

        server = load_server_config(config) if config is not None else ServerConfig()
        if state_url:
            server = server.model_copy(update={"state_url": state_url})
        token = secrets.token_urlsafe(32)
        plane = ControlPlane(server.control_settings())
        editor = TokenConfig(name="local", token=token, roles={ANY_ENVIRONMENT: "editor"})
        return cls(plane, create_app(plane, [editor]), token)

    def close(self) -> None:
        self.plane.close()


def _require_httpx() -> None:
    try:
        import fastapi  # noqa: F401, PLC0415
        import httpx  # noqa: F401, PLC0415
    except ImportError as e:
        raise click.ClickException(
            f"the pipeline commands need the 'server' extra ({e.name} is missing): "
            "pip install 'ferry[server]'"
        ) from None


class Api:
    """The routes of one environment."""

    def __init__(self, client: Client, environment: str) -> None:
        self.client = client
        self.environment = environment

    def path(self, *parts: str) -> str:
        return "/api/v1/environments/" + "/".join(quote(p, safe="") for p in (self.environment, *parts))

    def call(self, method: str, *parts: str, **kwargs: Any) -> Any:
        return self.client.call(method, self.path(*parts), **kwargs)


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
            client = Client.open(server, token, state_url, config)
        except ConfigError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(EXIT_REFUSED)
        try:
            func(*args, api=Api(client, environment), output=output, **kwargs)
        except ApiError as e:
            click.echo(f"error: {e.message}", err=True)
            sys.exit(e.exit_code)
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
    resource = api.call("POST", "pipelines", body=_pipeline_body(name, spec))
    _emit(output, resource, lambda: f"created pipeline {name}\n{render_pipeline(resource)}")


@pipeline.command("get")
@click.argument("name")
@api_command
def get_pipeline(name: str, api: Api, output: str) -> None:
    """Show a pipeline: phase, detail, deadline, inherited topics, latest offsets, progress."""
    resource = api.call("GET", "pipelines", name)
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


def _pipeline_body(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ferry/v1", "kind": "Pipeline", "metadata": {"name": name}, "spec": dict(spec)}


def _read_job(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise click.BadParameter(f"cannot read {path}: {e}", param_hint="--job") from None


def _properties(items: tuple[str, ...]) -> dict[str, str]:
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--property")
        properties[key] = value
    return properties


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
@click.argument("uid")
@api_command
def get_savepoint(pipeline_name: str, uid: str, api: Api, output: str) -> None:
    """Show a savepoint: state, reason, offsets."""
    resource = api.call("GET", "pipelines", pipeline_name, "savepoints", uid)
    _emit(output, resource, lambda: render_savepoint(resource))


@savepoint.command("create")
@click.argument("pipeline_name", metavar="PIPELINE")
@api_command
def create_savepoint(pipeline_name: str, api: Api, output: str) -> None:
    """Take a MANUAL savepoint of a running pipeline (recorded at its next checkpoint)."""
    resource = api.call("POST", "pipelines", pipeline_name, "savepoints")
    _emit(output, resource, lambda: f"requested savepoint {resource['metadata']['uid']}")


@savepoint.command("delete")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid", required=False)
@click.option("--source", type=click.Choice(SOURCES), help="Delete every unpinned savepoint of this source.")
@click.option("--force", is_flag=True, help="Required: a deleted savepoint can no longer be used.")
@api_command
def delete_savepoint(
    *, pipeline_name: str, uid: str | None, source: str | None, force: bool, api: Api, output: str
) -> None:
    """Delete savepoint UID of PIPELINE, or all of one --source."""
    if (uid is None) == (source is None):
        raise click.UsageError("give a savepoint UID or --source, not both")
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
@click.argument("uid")
@api_command
def pin_savepoint(pipeline_name: str, uid: str, api: Api, output: str) -> None:
    """Pin a savepoint: bulk deletes keep it."""
    _set_pinned(api, pipeline_name, uid, True, output)


@savepoint.command("unpin")
@click.argument("pipeline_name", metavar="PIPELINE")
@click.argument("uid")
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
@click.option("--from-savepoint", metavar="UID", help="Start at the offsets of this completed savepoint.")
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
        "startFrom": _start_from(from_timestamp, from_offsets, from_savepoint),
    }
    if bounded:
        spec["bounded"] = _bounded(bounded)
    if rebuild_tables:
        spec["rebuildTables"] = list(rebuild_tables)
    if upgrade_mode:
        spec["upgradeMode"] = upgrade_mode
    if stopped:
        spec["stopped"] = True
    resource = api.call("POST", "pipelines", body=_pipeline_body(name, spec))
    _emit(output, resource, lambda: f"created replay {name}\n{render_pipeline(resource)}")


def _start_from(timestamp: str | None, offsets: tuple[str, ...], savepoint_uid: str | None) -> dict[str, Any]:
    if timestamp is not None:
        return {"timestampMillis": parse_millis(timestamp, "--from-timestamp")}
    if savepoint_uid is not None:
        return {"savepoint": savepoint_uid}
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


# --------------------------------------------------------------------------------------------------
# Text output


def render_pipeline(resource: Mapping[str, Any]) -> str:
    metadata, spec, status = resource["metadata"], resource["spec"], resource.get("status") or {}
    lines = [
        f"pipeline {metadata['name']} (environment {metadata.get('environment', '?')})",
        f"  phase:    {status.get('phase', '?')}",
        f"  detail:   {status.get('detail', '')}",
    ]
    if status.get("deadline"):
        lines.append(f"  deadline: {status['deadline']}")
    reference = (spec.get("properties") or {}).get("sql.tables.initial-offset-from")
    if reference:
        lines.append(f"  inherits offsets from: {reference}")
    inherited = (status.get("traits") or {}).get("inheritedOffsetTopics") or []
    lines.append(f"  inherited topics: {', '.join(inherited) if inherited else 'none'}")
    latest = status.get("latestOffsets") or {}
    if latest:
        lines.append("  latest offsets:")
        lines += [f"    {topic}: {offsets}" for topic, offsets in sorted(latest.items())]
    progress = status.get("progress")
    if progress:
        lines.append(
            f"  progress: {progress['recordsDone']} of {progress['recordsTotal']} records "
            f"({progress['percent']}%)"
        )
    if status.get("lostOffsets"):
        lines.append(f"  lost to retention: {status['lostOffsets']}")
    metrics = status.get("metrics") or {}
    if metrics:
        written = sum((metrics.get("rows_written") or {}).values())
        lines.append(
            f"  records read: {metrics.get('records_read') or 0}, rows written: {written}, "
            f"bad records: {metrics.get('bad_records') or 0}"
        )
    replay_line = _replay_line(spec)
    if replay_line:
        lines.append(f"  replay: {replay_line}")
    lines.append(
        f"  upgrade mode: {spec.get('upgradeMode', 'savepoint')}; "
        f"stopped: {'yes' if spec.get('stopped') else 'no'}"
    )
    lines.append(f"  created {metadata.get('creationTimestamp')}, updated {metadata.get('updateTimestamp')}")
    return "\n".join(lines)


def _replay_line(spec: Mapping[str, Any]) -> str:
    start = spec.get("startFrom")
    if not start:
        return ""
    if start.get("timestampMillis") is not None:
        parts = [f"from {_iso(start['timestampMillis'])}"]
    elif start.get("savepoint"):
        parts = [f"from savepoint {start['savepoint']}"]
    else:
        parts = [f"from offsets {start.get('offsets')}"]
    end = spec.get("bounded")
    if end:
        until = {
            "timestamp": lambda: _iso(end.get("timestampMillis")),
            "specific-offsets": lambda: str(end.get("offsets")),
        }
        parts.append(f"until {end['mode']}" + (f" {until[end['mode']]()}" if end["mode"] in until else ""))
    if spec.get("rebuildTables"):
        parts.append(f"rebuilding {', '.join(spec['rebuildTables'])}")
    return ", ".join(parts)


def _iso(ms: Any) -> str:
    if not isinstance(ms, int):
        return str(ms)
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def render_pipelines(items: list[Mapping[str, Any]], environment: str) -> str:
    if not items:
        return f"no pipelines in environment {environment}"
    width = max(len("NAME"), *(len(i["metadata"]["name"]) for i in items))
    lines = [f"{'NAME':<{width}}  {'PHASE':<8}  DETAIL"]
    for item in items:
        status = item.get("status") or {}
        lines.append(
            f"{item['metadata']['name']:<{width}}  {status.get('phase', '?'):<8}  {status.get('detail', '')}"
        )
    return "\n".join(lines)


def render_savepoint(resource: Mapping[str, Any]) -> str:
    metadata, spec, status = resource["metadata"], resource["spec"], resource["status"]
    lines = [
        f"savepoint {metadata['uid']} of pipeline {metadata['pipeline']}",
        f"  source: {spec['source']}; pinned: {'yes' if spec['pinned'] else 'no'}",
        f"  state:  {status['state']}" + (f" ({status['reason']})" if status.get("reason") else ""),
        f"  requested {metadata.get('creationTimestamp')}, completed {status.get('completionTimestamp')}",
    ]
    for topic, offsets in sorted((status.get("offsets") or {}).items()):
        lines.append(f"  {topic}: {offsets}")
    return "\n".join(lines)


def render_savepoints(items: list[Mapping[str, Any]], pipeline_name: str) -> str:
    if not items:
        return f"no savepoints of pipeline {pipeline_name}"
    lines = [f"{'UID':<36}  {'SOURCE':<8}  {'STATE':<9}  PINNED  REQUESTED"]
    for item in items:
        status, spec = item["status"], item["spec"]
        reason = f"  {status['reason']}" if status.get("reason") else ""
        lines.append(
            f"{item['metadata']['uid']:<36}  {spec['source']:<8}  {status['state']:<9}  "
            f"{'yes' if spec['pinned'] else 'no':<6}  {item['metadata'].get('creationTimestamp')}{reason}"
        )
    return "\n".join(lines)
