"""What the web page does to a pipeline: stop (with a savepoint), resume, take a savepoint, replay
from a savepoint or a time, delete.

Each action is two steps: ``GET /pipelines/{env}/{name}/{action}`` shows what it will do and asks
for confirmation (for a replay: from where, under which name); the confirmation posts the form back
to the same path, which does it through the :class:`~ferry.control.service.ControlPlane` calls the
API's routes make, after the API's role check (an action needs the ``editor`` role in the
environment, as every non-``GET`` request of the API does). Then the browser goes back to the page
(303), which says what was done. A refusal (the role, or the control plane's 400/404/409) shows
the API's message with its status.

The token is the page's cookie, ``SameSite=Strict``: a form posted from another site carries none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment
from starlette.exceptions import HTTPException

import ferry
from ferry.control.exceptions import ControlError
from ferry.control.models import SavepointState
from ferry.control.names import name_error
from ferry.pipeline.phase import Phase

if TYPE_CHECKING:
    from ferry.api.access import Principal
    from ferry.control.service import ControlPlane


@dataclass(frozen=True, slots=True)
class Action:
    """One button of a pipeline on the page."""

    name: str
    label: str
    #: What the confirmation says it will do (``{name}``: the pipeline).
    question: str
    #: What the page says once it was done.
    done: str
    #: The phases in which the page offers it.
    phases: frozenset[str]


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action(
            "stop",
            "Stop",
            "Stop pipeline {name}? Its processes take a final checkpoint and an UPGRADE savepoint "
            "records where it stopped.",
            "stop requested: the pipeline takes a savepoint and stops",
            frozenset({Phase.RUNNING, Phase.PENDING}),
        ),
        Action(
            "resume",
            "Resume",
            "Resume pipeline {name} from its own checkpoint?",
            "resumed",
            frozenset({Phase.STOPPED, Phase.FAILED}),
        ),
        Action(
            "savepoint",
            "Take a savepoint",
            "Take a MANUAL savepoint of pipeline {name}? Its next checkpoint completes it.",
            "savepoint requested: the next checkpoint completes it",
            frozenset({Phase.RUNNING}),
        ),
        Action(
            "replay",
            "Replay",
            "Replay pipeline {name}: a new pipeline with its job starts from a savepoint or a time.",
            "replay created",
            frozenset(Phase) - {Phase.DELETED},
        ),
        Action(
            "delete",
            "Delete",
            "Delete pipeline {name}? Its sink tables and their data stay.",
            "deleted",
            frozenset(Phase) - {Phase.DELETED},
        ),
    )
}


def parse_time(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 time (UTC when it has no offset) or of epoch milliseconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ControlError(
            400, f"time: {text!r} is neither ISO 8601 (2024-05-01T12:00:00Z) nor epoch milliseconds"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def replay_body(plane: ControlPlane, env: str, name: str, form: Mapping[str, str]) -> dict[str, Any]:
    """The ``POST .../pipelines`` body of a replay of ``name`` (``ferry replay NEW --like NAME``):
    its job and upgrade mode, from the chosen savepoint or time, bounded at the latest offset when
    asked."""
    new = form.get("replay_name", "").strip()
    if not new:
        raise ControlError(400, "replay name: give the new pipeline's name")
    error = name_error("pipeline", new)
    if error is not None:
        raise ControlError(400, f"replay name: {error}")
    spec = plane.get_pipeline(env, name).spec
    start: dict[str, Any]
    if form.get("start") == "time":
        start = {"timestampMillis": parse_time(form.get("time", ""))}
    else:
        uid = form.get("savepoint", "")
        if not uid:
            raise ControlError(400, f"savepoint: pipeline {name!r} has no completed savepoint to replay from")
        start = {"savepoint": plane.get_savepoint(env, name, uid).metadata.uid}
    body: dict[str, Any] = {"job": spec.job, "startFrom": start, "upgradeMode": spec.upgrade_mode}
    if form.get("bounded") == "latest-offset":
        body["bounded"] = {"mode": "latest-offset"}
    return {"metadata": {"name": new}, "spec": body}


def add_action_routes(
    app: FastAPI,
    plane: ControlPlane,
    templates: Environment,
    signed_in: Callable[[Request], Principal | None],
) -> None:
    """``GET`` (the confirmation) and ``POST`` (the action) of ``/pipelines/{env}/{name}/{action}``."""

    def render(template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = templates.get_template(template).render(version=ferry.version(), **values)
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def refused(status: int, message: str, env: str, name: str) -> HTMLResponse:
        return render("refused.html", status, status_code=status, message=message, env=env, name=name)

    def editor(request: Request, env: str, name: str, action: str) -> Principal | Response:
        """The editor asking for ``action``, or the page that says why not."""
        who = signed_in(request)
        if who is None:
            return RedirectResponse("/", status_code=303)
        if action not in ACTIONS:
            return refused(404, f"no action {action!r}: one of {', '.join(ACTIONS)}", env, name)
        try:
            who.require(env, "editor")  # as the API's editor routes require
        except HTTPException as e:
            return refused(e.status_code, str(e.detail), env, name)
        return who

    @app.get("/pipelines/{env}/{name}/{action}", include_in_schema=False)
    def confirm(request: Request, env: str, name: str, action: str) -> Response:
        who = editor(request, env, name, action)
        if isinstance(who, Response):
            return who
        try:
            pipeline = plane.get_pipeline(env, name)
        except ControlError as e:
            return refused(e.status, e.message, env, name)
        completed = [
            s
            for s in reversed(plane.list_savepoints(env, name))
            if s.status.state == SavepointState.COMPLETED
        ]
        return render(
            "confirm.html",
            who=who.name,
            env=env,
            name=name,
            action=ACTIONS[action],
            question=ACTIONS[action].question.format(name=name),
            phase=pipeline.status.phase,
            savepoints=completed,
            attached=len(plane.list_savepoints(env, name)),
            now=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )

    @app.post("/pipelines/{env}/{name}/{action}", include_in_schema=False)
    async def act(request: Request, env: str, name: str, action: str) -> Response:
        who = editor(request, env, name, action)
        if isinstance(who, Response):
            return who
        form = {
            k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", errors="replace")).items()
        }
        shown = name
        try:
            if action == "stop":
                plane.set_stopped(env, name, True)
            elif action == "resume":
                plane.set_stopped(env, name, False)
            elif action == "savepoint":
                plane.create_savepoint(env, name)
            elif action == "replay":
                body = replay_body(plane, env, name, form)
                shown = body["metadata"]["name"]
                plane.create_pipeline(env, body)
            else:
                if form.get("savepoints") == "delete":
                    for source in sorted({s.spec.source for s in plane.list_savepoints(env, name)}):
                        plane.delete_savepoints(env, name, source, force=True)
                plane.delete_pipeline(env, name)
        except ControlError as e:
            return refused(e.status, e.message, env, name)
        query = urlencode({"done": action, "environment": env, "pipeline": shown})
        return RedirectResponse(f"/?{query}#pipeline-{env}-{shown}", status_code=303)
