"""Who may do what through the API: bearer tokens compared in constant time, and the principal a
request is made by, with its roles per environment (a ``viewer`` may read, an ``editor`` may do
everything). The HTTP API (:mod:`ferry.api.app`) and the web page (:mod:`ferry.api.web`) share it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi.security import HTTPAuthorizationCredentials
from starlette.exceptions import HTTPException

from ferry.control.config import Role, TokenConfig

_RANKS: dict[Role, int] = {"viewer": 1, "editor": 2}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request: the token's name (never its value) and its roles."""

    name: str
    token: TokenConfig

    def may(self, environment: str, role: Role) -> bool:
        held = self.token.role(environment)
        return held is not None and _RANKS[held] >= _RANKS[role]

    def require(self, environment: str, role: Role) -> None:
        held = self.token.role(environment)
        if held is None:
            raise HTTPException(403, f"token {self.name!r} has no role in environment {environment!r}")
        if _RANKS[held] < _RANKS[role]:
            raise HTTPException(
                403,
                f"token {self.name!r} is a {held} in environment {environment!r}: this request "
                f"needs the {role} role",
            )


class Access:
    """The configured tokens, compared in constant time (by their SHA-256 digests)."""

    def __init__(self, tokens: Sequence[TokenConfig]) -> None:
        self._tokens = [(t.digest, t) for t in tokens]

    def identify(self, credentials: HTTPAuthorizationCredentials | None) -> Principal:
        if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
            raise HTTPException(
                401,
                "authentication required: send the header 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        presented = _digest(credentials.credentials)
        found: TokenConfig | None = None
        for digest, token in self._tokens:  # no early exit: every token is compared
            if hmac.compare_digest(digest, presented):
                found = token
        if found is None:
            raise HTTPException(
                401, "unknown bearer token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
            )
        return Principal(found.name, found)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
