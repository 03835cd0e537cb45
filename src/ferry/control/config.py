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

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ferry.config.loader import load_model_file
from ferry.control.models import MAX_CARRY_OVER_TIMEOUT
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
    """A bearer token and the role it carries in each environment."""

    name: str = Field(min_length=1)
    token: SecretStr
    roles: dict[str, Role] = Field(default_factory=dict)

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("a token has at least 16 characters")
        return value

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
        secrets = [t.token.get_secret_value() for t in self.tokens]
        if len(set(secrets)) != len(secrets):
            raise ValueError("two tokens have the same value")
        return self


class ServerConfig(ServerModel):
    state_url: str = Field(default="sqlite:///var/ferry/state.db", alias="state.url")
    environments: tuple[str, ...] | None = None
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
