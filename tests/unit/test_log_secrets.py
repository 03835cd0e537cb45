"""Secrets stay out of the log and out of error messages: a job's SecretStr values, passwords,
``sasl.jaas.config`` and credentials in URLs, wherever a record carries them (its message, its
arguments, its traceback, its extra fields), whichever library logged it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from click.testing import CliRunner

from ferry.cli.main import main
from ferry.config.loader import load_job_text
from ferry.control.secrets import MASK
from ferry.logs import mask_secrets, register_secrets, secrets_of

SECRETS = ("holo-pw-9931", "sasl-pw-5521", "jaas-pw-7340", "state-pw-1188")
JOB = f"""
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  properties.security.protocol: SASL_SSL
  properties.sasl.mechanism: PLAIN
  properties.sasl.username: ferry
  properties.sasl.password: {SECRETS[1]}
  properties.sasl.jaas.config: PlainLoginModule required username="ferry" password="{SECRETS[2]}";
  topic: orders
  value.format: debezium-json
sink:
  type: hologres
  endpoint: holo.example.com:80
  dbname: db
  username: ferry
  password: {SECRETS[0]}
pipeline:
  state.url: postgresql+psycopg://ferry:{SECRETS[3]}@db/ferry
"""

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from ferry.config.loader import load_job_text
    from ferry.logs import configure, register_secrets, secrets_of

    configure("DEBUG", "json")
    job = load_job_text(sys.stdin.read())
    register_secrets(secrets_of(job))
    log = logging.getLogger("ferry.pipeline.runner")
    log.info("starting with source properties %s", job.source.properties)
    log.info("sink %r", job.sink.model_dump(by_alias=True, mode="python"))
    logging.getLogger("ferry.sinks.hologres").error(
        "login refused for %s", job.sink.password.get_secret_value(), extra={"dsn": job.pipeline.state_url}
    )
    logging.getLogger("librdkafka").warning("SASL: sasl.password=%s rejected", job.source.properties["sasl.password"])
    try:
        raise RuntimeError(f"cannot connect to {job.pipeline.state_url}")
    except RuntimeError:
        logging.getLogger("ferry.worker").exception("worker crashed")
    """
)


def test_a_job_logged_with_its_secrets_shows_none_of_them() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=JOB, check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 5, result.stderr
    for secret in SECRETS:
        assert secret not in result.stderr, (secret, result.stderr)
    assert MASK in lines[0]["message"] and "'sasl.username': 'ferry'" in lines[0]["message"]
    assert lines[2]["message"] == f"login refused for {MASK}"
    assert lines[2]["dsn"] == f"postgresql+psycopg://ferry:{MASK}@db/ferry"
    assert lines[3]["logger"] == "librdkafka" and MASK in lines[3]["message"]
    assert (
        "RuntimeError: cannot connect to postgresql+psycopg://ferry:******@db/ferry" in lines[4]["exc_info"]
    )


def test_the_secrets_of_a_job_are_its_secret_values() -> None:
    found = set(secrets_of(load_job_text(JOB)))
    assert set(SECRETS[:3]) <= found  # the state URL's password is masked as a URL's
    assert "ferry" not in found and "127.0.0.1:9" not in found


def test_an_error_message_shown_to_a_user_has_no_secret() -> None:
    register_secrets(["registered-secret-1"])
    assert (
        mask_secrets("it said registered-secret-1 twice: registered-secret-1")
        == f"it said {MASK} twice: {MASK}"
    )
    result = CliRunner().invoke(
        main, ["pipeline", "list", "--server", "http://admin:server-pw-3381@127.0.0.1:9"]
    )
    assert result.exit_code == 1, result.output
    assert "cannot reach the server" in result.stderr
    assert "server-pw-3381" not in result.stderr and f"admin:{MASK}@" in result.stderr


def test_words_that_only_look_like_secret_keys_are_kept() -> None:
    for text in ("serving the API (tokens: deployer)", "token-sha256: 75c3", "passwords: 2 rotated"):
        assert mask_secrets(text) == text
