"""The server file of ``ferry serve`` and ``ferry worker``: state store, carry-over settings,
supervised environments and API tokens.

```yaml
state.url: sqlite:///var/ferry/state.db
environments: [default]            # what the workers supervise (default: every environment)
carry-over-offsets:
  enabled: true
  timeout: 15 min                  # at most 6 h
api:
  host: 127.0.0.1
  port: 8080
  tokens:
    - name: deployer
      token: ${FERRY_DEPLOYER_TOKEN}
      roles: {default: editor, staging: viewer}   # "*": every environment
```

``${ENV}`` references are resolved when the file is read (as in job files); tokens are secrets,
never logged or shown. :func:`load_server_config` reads the file; its errors name the line and key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ferry.config.loader import load_model_file
from ferry.control.models import MAX_CARRY_OVER_TIMEOUT
from ferry.control.names import name_error
from ferry.control.service import ControlSettings
from ferry.options import Duration

Role = Literal["viewer", "editor"]
#: The environment name that gives a token its role in every environment.
ANY_ENVIRONMENT = "*"


class ServerModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class CarryOverConfig(ServerModel):
    enabled: bool = True
    timeout: Duration = timedelta(minutes=15)

    @field_validator("timeout")
    @classmethod
    def _at_most_six_hours(cls, value: timedelta) -> timedelta:
        if not timedelta(0) < value <= MAX_CARRY_OVER_TIMEOUT:
            raise ValueError("more than 0 and at most 6 h")
        return value


class TokenConfig(ServerModel):
    """A bearer token and the role it carries in each environment.

    The token is given as ``token`` (the secret itself, best from ``${ENV}``) or as ``token-sha256``
    (the hexadecimal SHA-256 digest of it: no secret in the file). Tokens are random strings of at
    least 16 characters, so their digest cannot be turned back into them."""

    name: str = Field(min_length=1)
    token: SecretStr | None = None
    token_sha256: str | None = Field(default=None, alias="token-sha256")
    roles: dict[str, Role] = Field(default_factory=dict)

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("a token has at least 16 characters")
        return value

    @field_validator("token_sha256")
    @classmethod
    def _a_digest(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-f]{64}", value.strip().lower()):
            raise ValueError(
                "token-sha256 is the 64 hexadecimal digits of the token's SHA-256 digest "
                '(printf %s "$TOKEN" | sha256sum)'
            )
        return None if value is None else value.strip().lower()

    @model_validator(mode="after")
    def _one_token(self) -> Self:
        if (self.token is None) == (self.token_sha256 is None):
            raise ValueError(f"token {self.name!r}: give either token or token-sha256")
        return self

    @field_validator("roles")
    @classmethod
    def _environment_names(cls, roles: dict[str, Role]) -> dict[str, Role]:
        for environment in roles:
            error = None if environment == ANY_ENVIRONMENT else name_error("environment", environment)
            if error is not None:
                raise ValueError(error)
        return roles

    @property
    def digest(self) -> bytes:
        """The SHA-256 digest of the token, which is all a server keeps of it."""
        if self.token_sha256 is not None:
            return bytes.fromhex(self.token_sha256)
        assert self.token is not None
        return hashlib.sha256(self.token.get_secret_value().encode("utf-8")).digest()

    def role(self, environment: str) -> Role | None:
        """The role in ``environment``: its own entry, else the ``"*"`` entry, else none."""
        return self.roles.get(environment, self.roles.get(ANY_ENVIRONMENT))


class ApiConfig(ServerModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    tokens: tuple[TokenConfig, ...] = ()

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ValueError("two tokens have the same name")
        digests = [t.digest for t in self.tokens]
        if len(set(digests)) != len(digests):
            raise ValueError("two tokens have the same value")
        return self


class ServerConfig(ServerModel):
    state_url: str = Field(default="sqlite:///var/ferry/state.db", alias="state.url")
    environments: tuple[str, ...] | None = None

    @field_validator("environments")
    @classmethod
    def _environment_names(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in names or ():
            error = name_error("environment", name)
            if error is not None:
                raise ValueError(error)
        return names

    data_dir: Path = Field(default=Path("var/ferry/pipelines"), alias="data.dir")
    carry_over_offsets: CarryOverConfig = Field(default_factory=CarryOverConfig, alias="carry-over-offsets")
    api: ApiConfig = Field(default_factory=ApiConfig)

    def control_settings(self) -> ControlSettings:
        return ControlSettings(
            state_url=self.state_url,
            carry_over_enabled=self.carry_over_offsets.enabled,
            carry_over_timeout=self.carry_over_offsets.timeout,
        )


def load_server_config(path: str | Path, *, env: Mapping[str, str] | None = None) -> ServerConfig:
    """Read and validate a server file; ``env`` (default: ``os.environ``) resolves ``${VAR}``.

    Raises :class:`~ferry.config.exceptions.ConfigError` naming the file, line and key.
    """
    return load_model_file(
        path,
        ServerConfig,
        what="server file",
        shape="a server file is a mapping with the keys state.url, environments, data.dir, "
        "carry-over-offsets and api",
        env=env,
    )
