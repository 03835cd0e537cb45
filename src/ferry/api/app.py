"""The control plane's HTTP API: pipelines and savepoints as resources, bearer tokens with roles.

An ASGI application (FastAPI) over :class:`~ferry.control.service.ControlPlane`, shaped after the
CMF Statements API: ``/api/v1/environments/{env}/pipelines[/{name}[/savepoints[/{uid}]]]``. A
refused request answers with the status of its :class:`~ferry.control.exceptions.ControlError`
(400, 404, 409, 422) and CMF's error body ``{"errors": [{"message": "..."}]}``.

Every route under ``/api/v1`` needs ``Authorization: Bearer <token>`` (``/healthz``, ``/readyz``
and ``/metrics`` need none; the web page at ``/``, :mod:`ferry.api.web`, signs in with the same
tokens); the token's role in the environment decides: a ``viewer`` may read, an ``editor`` may do
everything. ``ferry serve`` runs this app with uvicorn; the ``ferry pipeline`` commands call it
over HTTP, or in-process when no server is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import text
from starlette.exceptions import HTTPException

import ferry
from ferry.api.access import Access, Principal
from ferry.api.metrics import registry_for
from ferry.api.web import add_web_routes
from ferry.api.yaml_bodies import YAML_MEDIA_TYPE, accept_yaml
from ferry.control.config import TokenConfig
from ferry.control.exceptions import ControlError
from ferry.control.models import (
    INITIAL_OFFSET_FROM,
    Document,
    Pipeline,
    PipelineMetadata,
    PipelineSpec,
    Savepoint,
    SavepointSource,
)
from ferry.control.names import name_error
from ferry.control.secrets import mask_job_text, mask_url_credentials, restore_secrets
from ferry.control.service import ControlPlane
from ferry.logs import mask_secrets

log = logging.getLogger(__name__)

PREFIX = "/api/v1/environments/{env}"

DESCRIPTION = """\
Pipelines and savepoints of ferry's control plane, in the shape of the CMF Statements API.

**Authentication**: every route but `/healthz`, `/readyz` and `/metrics` needs `Authorization:
Bearer <token>` (401 without one or with an unknown one). A token has a role per environment:
`viewer` may `GET`, `editor` may do everything (403 otherwise). Creating a pipeline that inherits
offsets (`spec.properties["sql.tables.initial-offset-from"]`) needs view permission on the
reference's environment too.

**Replays**: `POST .../pipelines` with `spec.startFrom` (`timestampMillis`, `offsets` or
`savepoint`) creates a replay; `spec.bounded` ends it (`latest-offset`, `timestamp`,
`specific-offsets`) and `spec.rebuildTables` drops sink tables first so that they are rebuilt from
the replayed events. Its `status.progress` counts the records done of the records to read.

**Errors**: `{"errors": [{"message": ...}]}` with 400 (an unusable request or savepoint), 401, 403,
404 (not found), 409 (a conflict: a savepoint still being recorded, savepoints attached, deleting
savepoints without `force=true`) and 422 (an update that sets a read-only field).
"""


# --------------------------------------------------------------------------------------------------
# Schemas of the OpenAPI document


class Schema(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ErrorMessage(Schema):
    message: str


class RestError(Schema):
    """What every refused request answers (CMF's ``RestError``)."""

    errors: list[ErrorMessage]


class PipelineRequest(Schema):
    """The body of ``POST`` and ``PUT``: a pipeline as a ``GET`` returns it, or its metadata and spec."""

    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: Literal["Pipeline"] | None = None
    metadata: PipelineMetadata
    spec: PipelineSpec
    status: dict[str, Any] | None = Field(
        default=None, description="Read-only: ignored by PUT, refused by POST (422)."
    )


class SavepointRequestMetadata(Schema):
    name: str | None = Field(
        default=None, description="The savepoint's name (default <source>-<uid prefix>)."
    )


class SavepointRequest(Schema):
    """The optional body of ``POST .../savepoints``."""

    metadata: SavepointRequestMetadata | None = None


class ListMetadata(Schema):
    size: int


class PipelineList(Schema):
    metadata: ListMetadata
    items: list[Pipeline]


class SavepointList(Schema):
    metadata: ListMetadata
    items: list[Savepoint]


class PinSpec(Schema):
    pinned: bool


class SavepointPatch(Schema):
    """``{"spec": {"pinned": true}}``: a pinned savepoint is kept by bulk deletes."""

    spec: PinSpec


class DeletedSavepoints(Schema):
    deleted: list[str] = Field(description="The uids of the deleted savepoints.")


class Health(Schema):
    status: Literal["ok"]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: "An unusable request (a bad spec or job, an unusable savepoint).",
        401: "No bearer token, or an unknown one.",
        403: "The token's role in this environment does not allow the request.",
        404: "The pipeline, savepoint or reference was not found.",
        409: "A conflict: a savepoint still being recorded, savepoints attached, force not given.",
        422: "The request sets a read-only field.",
    }
    return {code: {"model": RestError, "description": described[code]} for code in (401, 403, *codes)}


# --------------------------------------------------------------------------------------------------
# Authentication and roles


_bearer = HTTPBearer(
    auto_error=False,
    description="A token of the server file's api.tokens; its roles say what it may do where.",
)


def principal(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    access: Access = request.app.state.access
    return access.identify(credentials)


def _environment(env: str) -> None:
    error = name_error("environment", env)
    if error is not None:
        raise HTTPException(400, error)


def viewer(env: str, who: Annotated[Principal, Depends(principal)]) -> Principal:
    _environment(env)
    who.require(env, "viewer")
    return who


def editor(env: str, who: Annotated[Principal, Depends(principal)]) -> Principal:
    _environment(env)
    who.require(env, "editor")
    return who


def _as_seen_by(who: Principal, env: str, pipeline: Pipeline, reveal: bool = False) -> Pipeline:
    """The pipeline as ``who`` reads it: its job's secrets and any credentials in its status detail
    masked, for every role, unless an editor asks to see them (``reveal``)."""
    if reveal:
        who.require(env, "editor")
        return pipeline
    spec = pipeline.spec.model_copy(update={"job": mask_job_text(pipeline.spec.job)})
    status = pipeline.status.model_copy(update={"detail": mask_url_credentials(pipeline.status.detail)})
    metrics = status.metrics
    if metrics is not None and (metrics.get("recent_errors") or metrics.get("retry")):
        # an error may quote a URL's password or a secret of the job
        errors = [{**e, "error": _masked(e["error"])} for e in metrics.get("recent_errors") or []]
        retry = metrics.get("retry")
        if retry:
            retry = {**retry, "error": _masked(retry["error"])}
        status.metrics = {**metrics, "recent_errors": errors, "retry": retry}
    return pipeline.model_copy(update={"spec": spec, "status": status})


def _masked(text: str) -> str:
    return mask_secrets(mask_url_credentials(text))


Viewer = Annotated[Principal, Depends(viewer)]
Editor = Annotated[Principal, Depends(editor)]


# --------------------------------------------------------------------------------------------------
# Errors


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """CMF's error body; secrets a message may quote (a job's, a URL's password) masked."""
    return JSONResponse({"errors": [{"message": mask_secrets(message)}]}, status_code=status, headers=headers)


async def _control_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ControlError)
    return _error(exc.status, exc.message)


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404 and exc.detail == "Not Found":
        return _error(404, "no such route: see /openapi.json for the routes")
    return _error(exc.status_code, str(exc.detail), exc.headers)


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return _error(400, "; ".join(_validation_message(e) for e in exc.errors()))


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__}); the server log has the details")


def _validation_message(error: dict[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ())]
    where, rest = (loc[0], loc[1:]) if loc else ("body", [])
    if error.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    if where == "body" and not rest:
        return (
            "the request body is required: a JSON object"
            if error.get("type") == "missing"
            else (f"the request body: {error.get('msg')}")
        )
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if where == "body":
        return f"{'.'.join(rest)}: {message}"
    return f"{where} parameter {'.'.join(rest)}: {message}"


# --------------------------------------------------------------------------------------------------
# The application


def create_app(
    plane: ControlPlane,
    tokens: Sequence[TokenConfig],
    not_ready: Callable[[], str | None] = lambda: None,
) -> FastAPI:
    """The API over ``plane``; ``tokens`` are the bearer tokens it accepts; ``not_ready`` says why
    the process cannot do its work yet (``/readyz`` answers 503 with it), or None."""
    app = FastAPI(
        title="ferry control plane",
        version=_version(),
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
    )
    app.state.access = Access(tokens)
    app.state.plane = plane
    app.add_exception_handler(ControlError, _control_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)
    accept_yaml(app)
    _health_routes(app, plane, not_ready)
    _pipeline_routes(app, plane)
    _savepoint_routes(app, plane)
    add_web_routes(app, plane, app.state.access, _as_seen_by)
    _document_400_not_422(app)
    return app


def _document_400_not_422(app: FastAPI) -> None:
    """FastAPI documents invalid parameters as 422 ``HTTPValidationError``; this API answers them
    with 400 and :class:`RestError` (422 is kept for updates of read-only fields)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.get("responses", {})
                schema = responses.get("422", {}).get("content", {}).get("application/json", {})
                if schema.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                    del responses["422"]
                    responses.setdefault(
                        "400",
                        {
                            "description": "An invalid parameter or body.",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/RestError"}}
                            },
                        },
                    )
        schemas = document.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _version() -> str:
    return ferry.version()


def _json(content: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(content, status_code=status)


def _resource(resource: Document) -> JSONResponse:
    return _json(resource.document())


def _page(items: Sequence[Document]) -> JSONResponse:
    return _json({"metadata": {"size": len(items)}, "items": [item.document() for item in items]})


def _body(request: PipelineRequest) -> dict[str, Any]:
    """The request as the control plane takes it: only what the client sent."""
    return request.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _health_routes(app: FastAPI, plane: ControlPlane, not_ready: Callable[[], str | None]) -> None:
    registry = registry_for(plane)

    def unreachable() -> JSONResponse | None:
        try:
            with plane.store.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as e:  # any driver error means the same to a health check
            log.warning("health check: the state store cannot be reached: %s", type(e).__name__)
            return _error(503, f"the state store cannot be reached ({type(e).__name__})")
        return None

    @app.get(
        "/healthz",
        tags=["health"],
        response_model=Health,
        responses={503: {"model": RestError, "description": "The state store cannot be reached."}},
        summary="Liveness and state-store reachability (no authentication).",
        operation_id="getHealth",
    )
    def healthz() -> Response:
        return unreachable() or _json({"status": "ok"})

    @app.get(
        "/readyz",
        tags=["health"],
        response_model=Health,
        responses={
            503: {
                "model": RestError,
                "description": "The state store cannot be reached, or the worker is not running.",
            }
        },
        summary="Readiness: the state store reachable and, with a worker, the worker running "
        "(no authentication).",
        operation_id="getReadiness",
    )
    def readyz() -> Response:
        refusal = unreachable()
        if refusal is not None:
            return refusal
        reason = not_ready()
        return _error(503, reason) if reason is not None else _json({"status": "ok"})

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format."}},
        summary="Pipelines per environment and phase, and the process's metrics (no authentication).",
        operation_id="getMetrics",
    )
    def metrics(request: Request) -> Response:
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)


RevealParam = Annotated[
    bool,
    Query(description="Show the job's secrets as they are stored (editors only; masked otherwise)."),
]


def _pipeline_routes(app: FastAPI, plane: ControlPlane) -> None:
    route = _router(app, ["pipelines"])

    @route("GET", "/pipelines", PipelineList, (), "List the pipelines.", operation="getPipelines")
    def list_pipelines(env: str, who: Viewer, reveal: RevealParam = False) -> Response:
        return _page([_as_seen_by(who, env, p, reveal) for p in plane.list_pipelines(env)])

    @route(
        "POST",
        "/pipelines",
        Pipeline,
        (400, 404, 409, 422),
        "Create a pipeline (with spec.startFrom: a replay). The body is JSON or YAML.",
        operation="createPipeline",
        yaml_body=PipelineRequest,
    )
    def create_pipeline(env: str, who: Editor, body: Annotated[PipelineRequest, Body()]) -> Response:
        reference = body.spec.properties.get(INITIAL_OFFSET_FROM)
        if reference is not None:
            ref_env = reference.rpartition("/")[0] or env
            who.require(ref_env, "viewer")
        return _resource(_as_seen_by(who, env, plane.create_pipeline(env, _body(body))))

    @route("GET", "/pipelines/{name}", Pipeline, (404,), "Get a pipeline.", operation="getPipeline")
    def get_pipeline(env: str, name: str, who: Viewer, reveal: RevealParam = False) -> Response:
        return _resource(_as_seen_by(who, env, plane.get_pipeline(env, name), reveal))

    @route(
        "PUT",
        "/pipelines/{name}",
        Pipeline,
        (400, 404, 409, 422),
        "Update a pipeline: the whole resource as GET returns it, without metadata.updateTimestamp. "
        "spec.stopped stops (with a savepoint) or resumes it. metadata.labels and annotations, "
        "when given, replace the pipeline's. The body is JSON or YAML.",
        operation="updatePipeline",
        yaml_body=PipelineRequest,
    )
    def update_pipeline(
        env: str, name: str, who: Editor, body: Annotated[PipelineRequest, Body()]
    ) -> Response:
        update = _body(body)
        job = update.get("spec", {}).get("job")
        if isinstance(job, str):  # a job sent back as GET showed it keeps the secrets it masked
            stored = plane.get_pipeline(env, name).spec.job
            update["spec"]["job"] = restore_secrets(job, stored)
        return _resource(_as_seen_by(who, env, plane.update_pipeline(env, name, update)))

    @route(
        "DELETE",
        "/pipelines/{name}",
        None,
        (404, 409),
        "Delete a pipeline (409 while it has savepoints: delete them first).",
        operation="deletePipeline",
    )
    def delete_pipeline(env: str, name: str, _: Editor) -> Response:
        plane.delete_pipeline(env, name)
        return Response(status_code=204)


SourceParam = Annotated[
    SavepointSource | None,
    Query(description="Only the savepoints of this source."),
]
SavepointParam = Annotated[str, Path(description="The savepoint's uid or metadata.name.")]
ForceParam = Annotated[
    bool,
    Query(description="Required to delete savepoints (they can no longer be resumed from or inherited)."),
]


def _savepoint_routes(app: FastAPI, plane: ControlPlane) -> None:
    route = _router(app, ["savepoints"])

    @route(
        "GET",
        "/pipelines/{name}/savepoints",
        SavepointList,
        (400, 404),
        "List a pipeline's savepoints.",
        operation="getSavepoints",
    )
    def list_savepoints(env: str, name: str, _: Viewer, source: SourceParam = None) -> Response:
        return _page(plane.list_savepoints(env, name, source))

    @route(
        "POST",
        "/pipelines/{name}/savepoints",
        Savepoint,
        (400, 404, 409),
        "Take a MANUAL savepoint of a running pipeline (completed by its next checkpoint), named by "
        "the optional body's metadata.name.",
        operation="createSavepoint",
    )
    def create_savepoint(
        env: str, name: str, _: Editor, body: Annotated[SavepointRequest | None, Body()] = None
    ) -> Response:
        savepoint_name = None if body is None or body.metadata is None else body.metadata.name
        return _resource(plane.create_savepoint(env, name, savepoint_name))

    @route(
        "DELETE",
        "/pipelines/{name}/savepoints",
        DeletedSavepoints,
        (400, 404, 409),
        "Delete every unpinned savepoint of one source (force=true required).",
        operation="deleteSavepoints",
    )
    def delete_savepoints(
        env: str,
        name: str,
        _: Editor,
        source: Annotated[SavepointSource, Query(description="The source.")],
        force: ForceParam = False,
    ) -> Response:
        return _json({"deleted": plane.delete_savepoints(env, name, source, force)})

    @route(
        "GET",
        "/pipelines/{name}/savepoints/{savepoint}",
        Savepoint,
        (404,),
        "Get a savepoint by its uid or name.",
        operation="getSavepoint",
    )
    def get_savepoint(env: str, name: str, savepoint: SavepointParam, _: Viewer) -> Response:
        return _resource(plane.get_savepoint(env, name, savepoint))

    @route(
        "PATCH",
        "/pipelines/{name}/savepoints/{savepoint}",
        Savepoint,
        (400, 404),
        'Pin or unpin a savepoint (by uid or name): {"spec": {"pinned": true}}.',
        operation="updateSavepoint",
    )
    def patch_savepoint(
        env: str, name: str, savepoint: SavepointParam, _: Editor, body: Annotated[SavepointPatch, Body()]
    ) -> Response:
        return _resource(plane.set_pinned(env, name, savepoint, body.spec.pinned))

    @route(
        "DELETE",
        "/pipelines/{name}/savepoints/{savepoint}",
        None,
        (404, 409),
        "Delete a savepoint by uid or name (force=true required; 409 while pinned or being recorded).",
        operation="deleteSavepoint",
    )
    def delete_savepoint(
        env: str, name: str, savepoint: SavepointParam, _: Editor, force: ForceParam = False
    ) -> Response:
        plane.delete_savepoint(env, name, savepoint, force)
        return Response(status_code=204)


Endpoint = Callable[..., Response]


def _router(app: FastAPI, tags: list[str]) -> Callable[..., Callable[[Endpoint], Endpoint]]:
    """A decorator registering one route under the environment prefix, with its documentation:
    ``operation`` is its stable ``operationId`` (CMF's style: ``getPipelines``, ``createPipeline``),
    ``yaml_body`` documents the body in YAML too."""

    def route(
        method: str,
        path: str,
        model: type[BaseModel] | None,
        codes: Sequence[int],
        summary: str,
        *,
        operation: str,
        yaml_body: type[BaseModel] | None = None,
    ) -> Callable[[Endpoint], Endpoint]:
        def register(endpoint: Endpoint) -> Endpoint:
            app.add_api_route(
                PREFIX + path,
                endpoint,
                methods=[method],
                tags=list(tags),
                summary=summary,
                operation_id=operation,
                response_model=model,
                status_code=200 if model is not None else 204,
                responses=_errors(*codes),
                openapi_extra=None if yaml_body is None else _yaml_request(yaml_body),
            )
            return endpoint

        return register

    return route


def _yaml_request(model: type[BaseModel]) -> dict[str, Any]:
    """The request body documented in YAML beside JSON (:func:`ferry.api.yaml_bodies.accept_yaml`)."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}, YAML_MEDIA_TYPE: {"schema": schema}},
        }
    }
