"""The example server file loads, with its tokens from the environment."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ferry.config.exceptions import ConfigError
from ferry.control.config import load_server_config

EXAMPLE = Path(__file__).resolve().parents[3] / "configs" / "server" / "server.yaml"
TOKENS = {"FERRY_DEPLOYER_TOKEN": "d" * 32, "FERRY_VIEWER_TOKEN": "v" * 32}


def test_the_example_server_file_loads() -> None:
    config = load_server_config(EXAMPLE, env=TOKENS)
    assert config.state_url == "sqlite:///var/ferry/state.db"
    assert config.carry_over_offsets.timeout == timedelta(minutes=15)
    assert [(t.name, t.roles) for t in config.api.tokens] == [
        ("deployer", {"default": "editor"}),
        ("dashboards", {"*": "viewer"}),
    ]
    assert config.api.tokens[0].token.get_secret_value() == "d" * 32
    assert "d" * 32 not in repr(config)


def test_a_missing_token_variable_is_named() -> None:
    with pytest.raises(ConfigError) as error:
        load_server_config(EXAMPLE, env={"FERRY_VIEWER_TOKEN": "v" * 32})
    assert "FERRY_DEPLOYER_TOKEN" in str(error.value)
