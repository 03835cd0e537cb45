"""Request bodies in YAML, as CMF accepts them: ``Content-Type: application/yaml`` (or
``application/x-yaml``, ``text/yaml``) is read with ruamel.yaml and handed on as the JSON it
means, so every route validates one shape. A body that is not YAML is refused with 400 naming its
line and column, in the API's error shape."""

from __future__ import annotations

import orjson
from fastapi import FastAPI
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

YAML_MEDIA_TYPE = "application/yaml"
YAML_MEDIA_TYPES = frozenset({YAML_MEDIA_TYPE, "application/x-yaml", "text/yaml"})


def yaml_to_json(body: bytes) -> bytes:
    """The JSON of a YAML document; ``ValueError`` naming the line and column of what is wrong."""
    try:
        data = YAML(typ="safe", pure=True).load(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"the request body is not UTF-8 (byte {e.start})") from None
    except MarkedYAMLError as e:
        mark = e.problem_mark
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        raise ValueError(f"the request body is not valid YAML{where}: {e.problem}") from None
    except YAMLError as e:
        raise ValueError(f"the request body is not valid YAML: {e}") from None
    return orjson.dumps(data, default=str)


class YamlBodies:
    """ASGI middleware: a YAML request body becomes the JSON body the routes read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _media_type(scope) not in YAML_MEDIA_TYPES:
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            converted = yaml_to_json(body) if body.strip() else b""
        except ValueError as e:
            await _refuse(send, str(e))
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(converted)).encode())]
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": converted, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def _media_type(scope: Scope) -> str:
    for key, value in scope["headers"]:
        if key == b"content-type":
            return str(value.decode("latin-1").split(";")[0].strip().lower())
    return ""


async def _refuse(send: Send, message: str) -> None:
    body = orjson.dumps({"errors": [{"message": message}]})
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def accept_yaml(app: FastAPI) -> None:
    app.add_middleware(YamlBodies)


__all__ = ["YAML_MEDIA_TYPE", "YamlBodies", "accept_yaml", "yaml_to_json"]
