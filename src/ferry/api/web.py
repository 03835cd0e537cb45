"""The web page of ``ferry serve`` at ``/``: every pipeline a token may view, server-rendered.

Per pipeline: phase, detail, lag, throughput and rows written; the schema-change timeline (what
changed, the decision, when, the barrier time); dead letters with the latest reasons; savepoints;
and a chart of the lag over the last hour, drawn as SVG on the server (no script). The page
reloads itself every :data:`REFRESH_S` seconds.

A browser signs in with one of the API's bearer tokens: the form at ``/`` posts it to
``/login``, which keeps it in an ``HttpOnly``, ``SameSite=Strict`` cookie that only the page's
routes read (the API still wants the ``Authorization`` header). The page shows what a ``GET`` of
the API would: a viewer's view masks credentials in the detail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.exceptions import HTTPException

import ferry
from ferry.api.actions import ACTIONS, add_action_routes
from ferry.control.config import ANY_ENVIRONMENT
from ferry.control.overview import PipelineOverview, overview
from ferry.control.service import iso
from ferry.control.store import Sample
from ferry.pipeline.catch_up import format_eta
from ferry.pipeline.checkpoints import now_ms

if TYPE_CHECKING:
    from ferry.api.access import Access, Principal
    from ferry.control.models import Pipeline
    from ferry.control.service import ControlPlane

COOKIE = "ferry_token"
REFRESH_S = 10
#: The lag chart's drawing area, in SVG user units.
CHART_WIDTH, CHART_HEIGHT = 640, 120
CHART_SPAN_MS = 3_600_000

_templates = Environment(
    loader=PackageLoader("ferry.api", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.filters["eta"] = format_eta
_templates.filters["utc_time"] = lambda ms: iso(int(ms))


@dataclass(frozen=True, slots=True)
class LagChart:
    """The last hour of lag samples as an SVG polyline, newest at the right."""

    points: str
    peak: int
    latest: int | None
    samples: int


def lag_chart(samples: Sequence[Sample], at_ms: int) -> LagChart:
    start = at_ms - CHART_SPAN_MS
    shown = [s for s in samples if s.at_ms >= start]
    peak = max((s.lag_records for s in shown), default=0)
    scale = CHART_HEIGHT / peak if peak else 0.0
    points = " ".join(
        f"{(s.at_ms - start) * CHART_WIDTH / CHART_SPAN_MS:.1f},{CHART_HEIGHT - s.lag_records * scale:.1f}"
        for s in shown
    )
    return LagChart(points, peak, shown[-1].lag_records if shown else None, len(shown))


def environments_of(principal: Principal, plane: ControlPlane) -> list[str]:
    """The environments the token may view: its own entries, and with ``*`` every environment that
    has pipelines."""
    named = {e for e in principal.token.roles if e != ANY_ENVIRONMENT}
    if ANY_ENVIRONMENT in principal.token.roles:
        named |= {row.environment for row in plane.store.pipelines()}
    return sorted(e for e in named if principal.may(e, "viewer"))


def notice(request: Request) -> str | None:
    """What the page says after an action redirected to it (``?done=stop&environment=...&pipeline=...``)."""
    action = ACTIONS.get(request.query_params.get("done", ""))
    if action is None:
        return None
    where = f"{request.query_params.get('environment', '')}/{request.query_params.get('pipeline', '')}"
    return f"{where}: {action.done}"


def add_web_routes(
    app: FastAPI,
    plane: ControlPlane,
    access: Access,
    as_seen_by: Callable[[Principal, str, Pipeline], Pipeline],
) -> None:
    """``/`` (the page, or the sign-in form), ``/login``, ``/logout`` and ``/static``;
    ``as_seen_by`` masks a pipeline as the API's ``GET`` would for that token."""
    app.mount("/static", StaticFiles(packages=[("ferry.api", "static")]), name="static")

    def signed_in(request: Request) -> Principal | None:
        token = request.cookies.get(COOKIE)
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
        if not token:
            return None
        try:
            return access.identify(HTTPAuthorizationCredentials(scheme="Bearer", credentials=token))
        except HTTPException:
            return None

    def sign_in_form(message: str | None, status: int) -> HTMLResponse:
        html = _templates.get_template("login.html").render(message=message, version=ferry.version())
        return HTMLResponse(html, status_code=status)

    @app.get("/", include_in_schema=False)
    def page(request: Request) -> Response:
        who = signed_in(request)
        if who is None:
            return sign_in_form(None, 401)
        at = now_ms()
        environments = []
        for environment in environments_of(who, plane):
            pipelines: list[tuple[PipelineOverview, LagChart]] = []
            for pipeline in plane.list_pipelines(environment):
                view = overview(plane, environment, pipeline.metadata.name)
                seen = as_seen_by(who, environment, view.pipeline)
                view = replace(view, pipeline=seen)
                pipelines.append((view, lag_chart(view.samples, at)))
            environments.append((environment, pipelines))
        html = _templates.get_template("page.html").render(
            who=who.name,
            environments=environments,
            refresh_s=REFRESH_S,
            version=ferry.version(),
            chart_width=CHART_WIDTH,
            chart_height=CHART_HEIGHT,
            actions=list(ACTIONS.values()),
            notice=notice(request),
        )
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    add_action_routes(app, plane, _templates, signed_in)

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        token = (form.get("token") or [""])[0].strip()
        try:
            access.identify(HTTPAuthorizationCredentials(scheme="Bearer", credentials=token))
        except HTTPException:
            return sign_in_form("unknown token", 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @app.post("/logout", include_in_schema=False)
    def logout() -> Response:
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response
