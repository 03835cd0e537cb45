"""The server file of ``ferry serve``/``ferry worker``: ${ENV} resolved, errors at file:line and key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ferry.config.exceptions import ConfigError
from ferry.control.config import load_server_config

TOKEN = "deployer-secret-0123456789"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.yaml"
    path.write_text(text)
    return path


def failure(path: Path, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        load_server_config(path, env=env or {})
    return error.value


def test_a_server_file_is_read_with_its_variables_resolved(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
state.url: sqlite:///${DATA:-/srv/ferry}/state.db
environments: [default, staging]
data.dir: ${DATA:-/srv/ferry}/pipelines
carry-over-offsets:
  enabled: false
  timeout: 2 h
api:
  port: 9090
  tokens:
    - name: deployer
      token: ${DEPLOYER_TOKEN}
      roles: {default: editor, "*": viewer}
""",
    )
    config = load_server_config(path, env={"DEPLOYER_TOKEN": TOKEN})
    assert config.state_url == "sqlite:////srv/ferry/state.db"
    assert config.data_dir == Path("/srv/ferry/pipelines")
    assert config.environments == ("default", "staging")
    assert (config.carry_over_offsets.enabled, config.carry_over_offsets.timeout) == (
        False,
        timedelta(hours=2),
    )
    assert (config.api.host, config.api.port) == ("127.0.0.1", 9090)
    (token,) = config.api.tokens
    assert token.token.get_secret_value() == TOKEN
    assert (token.role("default"), token.role("staging")) == ("editor", "viewer")
    assert TOKEN not in repr(config)
    settings = config.control_settings()
    assert (settings.state_url, settings.carry_over_enabled) == ("sqlite:////srv/ferry/state.db", False)
    assert load_server_config(path, env={"DEPLOYER_TOKEN": TOKEN, "DATA": "/data"}).state_url == (
        "sqlite:////data/state.db"
    )


def test_defaults_need_no_keys(tmp_path: Path) -> None:
    config = load_server_config(write(tmp_path, "api: {}\n"), env={})
    assert config.state_url == "sqlite:///var/ferry/state.db" and config.api.tokens == ()
    assert config.carry_over_offsets.timeout == timedelta(minutes=15)


def test_an_unknown_key_is_named_with_its_line_and_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "state.url: sqlite:///x.db\napi:\n  prot: 8080\n")
    error = failure(path)
    assert str(error) == f"{path}:3:3: api.prot: unknown key (did you mean 'port'?)"


def test_an_unset_variable_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "api:\n  tokens:\n    - name: a\n      token: ${MISSING_TOKEN}\n")
    error = failure(path)
    assert (error.line, error.key_path) == (4, "api.tokens[0].token")
    assert "environment variable MISSING_TOKEN is not set" in str(error)


def test_a_short_token_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = write(tmp_path, "api:\n  tokens:\n    - name: a\n      token: short-secret\n")
    error = failure(path)
    assert (error.line, error.key_path) == (4, "api.tokens[0].token")
    assert "at least 16 characters" in str(error) and "short-secret" not in str(error)


def test_tokens_are_distinct_and_roles_known(tmp_path: Path) -> None:
    twice = f"    - name: a\n      token: {TOKEN}\n"
    error = failure(write(tmp_path, "api:\n  tokens:\n" + twice + twice))
    assert "two tokens have the same name" in str(error) and TOKEN not in str(error)
    error = failure(
        write(tmp_path, f"api:\n  tokens:\n    - name: a\n      token: {TOKEN}\n      roles: {{x: owner}}\n")
    )
    assert error.key_path == "api.tokens[0].roles.x" and error.line == 5


def test_a_carry_over_timeout_over_six_hours_is_refused(tmp_path: Path) -> None:
    error = failure(write(tmp_path, "carry-over-offsets:\n  timeout: 7 h\n"))
    assert (error.line, error.key_path) == (2, "carry-over-offsets.timeout")
    assert "at most 6 h" in str(error)


def test_a_file_that_is_not_a_mapping_or_not_there(tmp_path: Path) -> None:
    assert "a server file is a mapping" in str(failure(write(tmp_path, "- a\n- b\n")))
    assert "cannot read the server file" in str(failure(tmp_path / "missing.yaml"))
