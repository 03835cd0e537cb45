"""A client of the control plane's HTTP API: over HTTP to a server, or to the same application
run in this process over a state store (as a local editor).

``httpx`` (the ``server`` extra) is imported only when a request is sent.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ferry.exceptions import FerryError

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

    from ferry.control.service import ControlPlane


class ApiError(FerryError):
    """A request the API refused (``status`` 4xx) or could not serve (5xx, ``None``: unreachable)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def refused(self) -> bool:
        """The API refused the request (4xx): the request, not the server, is at fault."""
        return self.status is not None and 400 <= self.status < 500


class Client:
    """Sends requests to the API: remote (``server``) or in-process over a state store."""

    def __init__(self, server: str | None, token: str | None, local: Local | None) -> None:
        self.server = server
        self.token = token
        self.local = local

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


class Api:
    """The routes of one environment."""

    def __init__(self, client: Client, environment: str) -> None:
        self.client = client
        self.environment = environment

    def path(self, *parts: str) -> str:
        return "/api/v1/environments/" + "/".join(quote(p, safe="") for p in (self.environment, *parts))

    def call(self, method: str, *parts: str, **kwargs: Any) -> Any:
        return self.client.call(method, self.path(*parts), **kwargs)
