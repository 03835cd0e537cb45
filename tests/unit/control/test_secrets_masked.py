"""Secrets are masked by their key and by what they are, for every role, and kept at rest in files
only their owner reads.

The keys are those the client libraries ferry passes settings to call secret: every setting
librdkafka flags as sensitive (``_RK_SENSITIVE`` in its ``rdkafka_conf.c``), pyiceberg's catalog
and FileIO credentials, pypaimon's file-system keys, the SQL sinks' passwords; the values those a
key does not name: PEM private keys, ``Bearer`` tokens, Azure connection strings, passwords in a
JDBC query, a password YAML repeats through an alias.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from tests.unit.control.test_api import EDITOR, TOKENS, VIEWER, Api, Client, job, refused
from tests.unit.control.test_cli_pipelines import Cli

from ferry.api.app import create_app
from ferry.control.secrets import MASK, mask_job_text, restore_secrets, write_private
from ferry.control.service import ControlPlane, ControlSettings
from ferry.logs import mask_secrets, register_secrets, secrets_of
from ferry.state import StateStore

#: librdkafka's sensitive settings, as a job's ``properties.*`` (source and Kafka sink).
LIBRDKAFKA = (  # and sasl.username, which is shown: a user name is no secret
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.ca.pem",
    "ssl.keystore.password",
    "sasl.jaas.config",  # the Java clients' (Kafka Connect's) spelling, as users copy it
    "ssl.keystore.key",
)
#: pyiceberg's catalog and FileIO properties that hold credentials (``catalog.properties.*``).
PYICEBERG = (
    "credential",
    "token",
    "header.Authorization",
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "client.access-key-id",
    "client.secret-access-key",
    "client.session-token",
    "glue.access-key-id",
    "glue.secret-access-key",
    "glue.session-token",
    "dynamodb.secret-access-key",
    "gcs.oauth2.token",
    "adls.account-key",
    "adls.sas-token",
    "adls.connection-string",
    "adls.client-secret",
    "hf.token",
)
#: pypaimon's file-system options (``catalog.properties.*`` of the Paimon sink).
PYPAIMON = (
    "fs.oss.accessKeyId",
    "fs.oss.accessKeySecret",
    "fs.oss.securityToken",
    "fs.s3.accessKeyId",
    "fs.s3.accessKeySecret",
    "dlf.access-key-secret",
    "dlf.security-token",
)
#: The SQL sinks' and the other sinks' own secret options.
SINKS = ("password", "access-key", "sts-token", "schema-registry.basic-auth.user-info")
#: Settings beside them that are no secrets, shown as they are.
NOT_SECRETS = {
    "bootstrap.servers": "broker:9092",
    "ssl.certificate.location": "/etc/ferry/client.pem",
    "sasl.mechanism": "OAUTHBEARER",
    "s3.endpoint": "http://minio:9000",
    "adls.account-name": "lake",
    "username": "ferry",
    "properties.sasl.username": "ferry",
    "bucket.key": "id",
}


def job_with(settings: dict[str, str]) -> str:
    lines = "".join(f"  {key}: '{value}'\n" for key, value in settings.items())
    return f"source:\n  type: kafka\n{lines}"


@pytest.mark.parametrize(
    "key", [*LIBRDKAFKA, *(f"catalog.properties.{k}" for k in (*PYICEBERG, *PYPAIMON)), *SINKS]
)
def test_every_secret_bearing_key_is_masked(key: str) -> None:
    value = f"value-of-{key}-8812"
    text = mask_job_text(job_with({f"properties.{key}" if key in LIBRDKAFKA else key: value, **NOT_SECRETS}))
    assert value not in text and MASK in text
    for other, shown in NOT_SECRETS.items():
        assert f"{other}: '{shown}'" in text


@pytest.mark.parametrize(
    ("value", "left"),
    [
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----\n", ""),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHD\n-----END ENCRYPTED PRIVATE KEY-----", ""),
        ("Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmZXJyeSJ9.c2ln", ""),
        ("Basic ZmVycnk6aHVudGVyMg==", ""),
        (
            "DefaultEndpointsProtocol=https;AccountName=lake;AccountKey=Zm9vYmFyYmF6cXV4==;"
            "EndpointSuffix=core.windows.net",
            "AccountName=lake;AccountKey=******;EndpointSuffix",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=c2VjcmV0Cg=",
            "SharedAccessKeyName=send;SharedAccessKey=******",
        ),
        ("jdbc:postgresql://db:5432/shop?user=ferry&password=pg-secret-31", "user=ferry&password=******"),
        (
            "clientId=ferry clientSecret=oauth-secret-77 scope=kafka",
            "clientId=ferry clientSecret=****** scope",
        ),
        ("postgresql://ferry:state-secret@db/ferry", "postgresql://ferry:******@db/ferry"),
    ],
    ids=[
        "pem",
        "encrypted-pem",
        "bearer",
        "basic",
        "azure-storage",
        "azure-service-bus",
        "jdbc-query",
        "oauth-settings",
        "url",
    ],
)
def test_a_secret_is_masked_by_what_it_is_under_any_key(value: str, left: str) -> None:
    text = mask_job_text(f"sink:\n  type: memory\n  some.option: {value!r}\n".replace("\\n", "\n    "))
    shown = text.split("some.option:", 1)[1]
    for secret in (
        "MIIEvQIBADANBgkq",
        "MIIFHD",
        "eyJ",
        "ZmVycnk6",
        "Zm9vYmFy",
        "c2VjcmV0",
        "pg-secret-31",
        "oauth-secret-77",
        "state-secret",
    ):
        assert secret not in shown
    assert left in shown


def test_a_password_an_alias_repeats_is_masked_where_it_is_repeated() -> None:
    text = mask_job_text(
        "source:\n  type: kafka\n  properties.sasl.password: &pw hunter2-alias\n"
        "sink:\n  type: starrocks\n  password: *pw\n  comment: *pw\n"
        "pipeline:\n  shared: &other shared-9921\n  password: *other\n"
    )
    assert "hunter2-alias" not in text and "shared-9921" not in text
    assert text.count(MASK) == 5


def test_an_environment_reference_is_shown_as_it_is() -> None:
    text = mask_job_text(
        "sink:\n  type: memory\n  password: ${PG_PASSWORD}\n  dsn: 'a=1;AccountKey=${KEY}'\n"
    )
    assert "password: ${PG_PASSWORD}" in text and "AccountKey=${KEY}" in text


def test_secrets_found_by_their_value_are_masked_in_the_log() -> None:
    settings = {"some.header": "Bearer log-token-5531", "dsn": "AccountName=a;AccountKey=log-key-6642"}
    register_secrets(secrets_of(settings))
    line = mask_secrets("connecting with Bearer log-token-5531 to AccountKey=log-key-6642 failed")
    assert "log-token-5531" not in line and "log-key-6642" not in line


# ----------------------------------------------------------------------------- API and CLI

SECRET_JOB = job().replace(
    "  value.format: debezium-json\n",
    "  value.format: debezium-json\n"
    "  properties.sasl.password: sink-secret-4410\n"
    "  properties.sasl.oauthbearer.config: principal=ferry token=Bearer tok-3321\n",
)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    yield Api(Client(create_app(plane, TOKENS)), plane)
    plane.close()


def test_every_role_reads_secrets_masked_and_an_editor_reveals_them_when_asked(api: Api) -> None:
    body = {"metadata": {"name": "orders"}, "spec": {"job": SECRET_JOB}}
    created = api.request("POST", "/pipelines", EDITOR, json=body)
    assert created.status_code == 200
    for token in (EDITOR, VIEWER):
        for shown in (
            created.json()["spec"]["job"],
            api.request("GET", "/pipelines/orders", token).json()["spec"]["job"],
            api.request("GET", "/pipelines", token).json()["items"][0]["spec"]["job"],
        ):
            assert "sink-secret-4410" not in shown and "tok-3321" not in shown
    revealed = api.request("GET", "/pipelines/orders", EDITOR, params={"reveal": "true"})
    assert revealed.json()["spec"]["job"] == SECRET_JOB
    assert "needs the editor role" in refused(
        api.request("GET", "/pipelines/orders", VIEWER, params={"reveal": "true"}), 403
    )


def test_a_job_sent_back_as_it_was_shown_keeps_its_secrets(api: Api) -> None:
    api.request(
        "POST", "/pipelines", EDITOR, json={"metadata": {"name": "orders"}, "spec": {"job": SECRET_JOB}}
    )
    shown = api.request("GET", "/pipelines/orders", EDITOR).json()
    spec = {**shown["spec"], "job": shown["spec"]["job"] + "# a comment\n"}
    body = {"apiVersion": "ferry/v1", "kind": "Pipeline", "metadata": {"name": "orders"}, "spec": spec}
    response = api.request("PUT", "/pipelines/orders", EDITOR, json=body)
    assert response.status_code == 200, response.text
    stored = api.plane.get_pipeline("default", "orders").spec.job
    assert "sink-secret-4410" in stored and "Bearer tok-3321" in stored and MASK not in stored
    yaml = YAML(typ="safe")
    assert yaml.load(restore_secrets(mask_job_text(SECRET_JOB), SECRET_JOB)) == yaml.load(SECRET_JOB)


def test_pipeline_get_shows_secrets_masked_unless_asked(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    try:
        cli.job.write_text(SECRET_JOB)
        cli.create("orders")
        assert "sink-secret-4410" not in cli.run("pipeline", "get", "orders", "--output", "json").stdout
        shown = cli.json("pipeline", "get", "orders", "--show-secrets")
        assert shown["spec"]["job"] == SECRET_JOB
        cli.run("pipeline", "stop", "orders")  # a PUT of the resource as GET showed it
        assert "sink-secret-4410" in cli.plane.get_pipeline("default", "orders").spec.job
    finally:
        cli.plane.close()


# ------------------------------------------------------------------------------------ at rest


def test_files_holding_jobs_are_made_readable_by_their_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask makes files readable by everyone
    try:
        job_file = tmp_path / "job-0.yaml"
        job_file.write_text("left by an earlier version")
        os.chmod(job_file, 0o644)
        write_private(job_file, SECRET_JOB)
        StateStore(f"sqlite:///{tmp_path}/data/state.db").engine.dispose()
    finally:
        os.umask(old)
    assert job_file.read_text() == SECRET_JOB
    for path in (job_file, tmp_path / "data" / "state.db"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
