"""Names that become paths stay inside the data folder; secrets are hidden from viewers; tokens
can be kept in the server file as digests only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.unit.control.test_api import EDITOR, TOKENS, VIEWER, Api, Client, job, refused

from ferry.api.app import create_app
from ferry.control.config import ServerConfig, TokenConfig
from ferry.control.exceptions import ControlError
from ferry.control.names import within
from ferry.control.secrets import MASK, mask_job_text
from ferry.control.service import ControlPlane, ControlSettings

SECRET_JOB = job(
    extra="""pipeline:
  state.url: postgresql+psycopg://ferry:state-secret@db/ferry
"""
).replace(
    "  value.format: debezium-json\n",
    "  value.format: debezium-json\n  properties.sasl.username: u\n  properties.sasl.password: jaas-secret\n",
)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield Api(Client(create_app(plane, TOKENS)), plane)
    plane.close()


def test_a_viewer_reads_a_job_without_its_secrets_and_an_editor_with_them_when_asked(api: Api) -> None:
    body = {"metadata": {"name": "orders"}, "spec": {"job": SECRET_JOB}}
    assert api.request("POST", "/pipelines", EDITOR, json=body).status_code == 200
    as_viewer = api.request("GET", "/pipelines/orders", VIEWER).json()["spec"]["job"]
    listed = api.request("GET", "/pipelines", VIEWER).json()["items"][0]["spec"]["job"]
    for text in (as_viewer, listed):
        assert "jaas-secret" not in text and "state-secret" not in text
        assert f"properties.sasl.password: '{MASK}'" in text
        assert f"postgresql+psycopg://ferry:{MASK}@db/ferry" in text
        assert "properties.bootstrap.servers: 127.0.0.1:9" in text
    revealed = api.request("GET", "/pipelines/orders", EDITOR, params={"reveal": "true"})
    assert revealed.json()["spec"]["job"] == SECRET_JOB


def test_secret_bearing_keys_are_masked_wherever_they_are() -> None:
    text = mask_job_text(
        "sink:\n  type: hologres\n  password: hunter2\n  username: ferry\n"
        "  catalog.properties.s3.secret-access-key: abc\n  catalog.properties.token: t\n"
        "  tables: [{url: 'jdbc:mysql://u:p@h/db'}]\n  secret.key: ${FROM_ENV}\n"
    )
    assert "secret.key: ${FROM_ENV}" in text  # a reference names no secret
    assert "hunter2" not in text and "abc" not in text and ":p@" not in text and " t\n" not in text
    assert "username: ferry" in text and "jdbc:mysql://u:" in text


@pytest.mark.parametrize("environment", ["..", "a..b", "Prod", "x" * 3000, "a/b", "-a"])
def test_an_environment_name_that_could_become_a_path_is_refused(api: Api, environment: str) -> None:
    response = api.request("GET", "/pipelines", env=environment)
    if "/" in environment or environment == "..":  # the URL itself leads elsewhere: no route
        assert refused(response, 404)
    else:
        assert "not a valid environment name" in refused(response, 400)
    with pytest.raises(ControlError, match="not a valid environment name") as refusal:
        api.plane.create_pipeline(environment, {"metadata": {"name": "p"}, "spec": {"job": job()}})
    assert refusal.value.status == 400


def test_paths_built_from_names_never_leave_the_data_folder(tmp_path: Path) -> None:
    assert within(tmp_path, "default", "orders") == (tmp_path / "default" / "orders").resolve()
    for parts in [("..", "orders"), ("default", ".."), ("/etc",), ("a/../../b",), ("x" * 3000,)]:
        with pytest.raises(ValueError, match="not a valid path name"):
            within(tmp_path, *parts)


def test_the_server_file_refuses_environment_names_that_could_become_paths() -> None:
    with pytest.raises(ValidationError, match="not a valid environment name"):
        ServerConfig.model_validate({"environments": ["default", "../etc"]})
    with pytest.raises(ValidationError, match="not a valid environment name"):
        TokenConfig.model_validate({"name": "t", "token": EDITOR, "roles": {"..": "editor"}})


def test_a_token_kept_as_its_digest_authenticates(tmp_path: Path) -> None:
    secret = "rotated-token-0123456789"
    hashed = TokenConfig.model_validate(
        {
            "name": "hashed",
            "token-sha256": hashlib.sha256(secret.encode()).hexdigest(),
            "roles": {"*": "viewer"},
        }
    )
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    try:
        api = Api(Client(create_app(plane, [*TOKENS, hashed])), plane)
        assert api.request("GET", "/pipelines", secret).status_code == 200
        assert (
            api.request("GET", "/pipelines", hashed.token_sha256).status_code == 401
        )  # the digest is no token
    finally:
        plane.close()


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ({"token": EDITOR, "token-sha256": "0" * 64}, "either token or token-sha256"),
        ({}, "either token or token-sha256"),
        ({"token-sha256": "not-hex"}, "64 hexadecimal digits"),
    ],
)
def test_a_token_is_given_once_as_secret_or_digest(token: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TokenConfig.model_validate({"name": "t", **token})
