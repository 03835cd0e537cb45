"""Start-up errors are exit 1 or 2 with one line that names the key and what to change (exit 4 is
for ferry's own bugs): brokers that refuse every connection fail at once (a slow one is waited
for), a state store that is not there is not created by a command that only reads it, a refused
state-store login names ``pipeline.state.url`` with its password hidden, and a Java JAAS
configuration is refused at validation. Against the real broker and PostgreSQL server."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import URL

from ferry.config.loader import load_job_text
from ferry.worker import StartupError, check_brokers
from tests.integration.helpers import job_yaml
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration


def ferry(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry.cli.main", *(str(a) for a in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers: a broker that is slow, not absent."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        done.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_brokers_that_refuse_every_connection_fail_at_once_and_a_silent_one_is_waited_for(
    tmp_path: Path, silent_port: int
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused = probe.getsockname()[1]  # closed again below: nothing listens there
    job = tmp_path / "job.yaml"
    job.write_text(job_yaml(f"127.0.0.1:{refused}", "orders", tmp_path, "p"))
    # the start-up timeout is far longer than the subprocess may take: the refusal ends it first
    result = ferry("run", job, "--startup-timeout", "3600", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    [line] = error_lines(result)
    assert f"cannot reach the Kafka brokers 127.0.0.1:{refused}: every one refused the connection" in line
    assert "source.properties.bootstrap.servers" in line

    silent = load_job_text(job_yaml(f"127.0.0.1:{silent_port}", "orders", tmp_path, "p")).source
    with pytest.raises(StartupError, match=r"within 3 s") as waited:
        check_brokers(silent, 3.0)
    assert "refused" not in str(waited.value)


def test_ferry_status_creates_no_state_store_it_only_reads(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    misspelt = tmp_path / "stat" / "state.db"
    result = ferry("status", "--state-url", f"sqlite:///{misspelt}", cwd=tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    [line] = error_lines(result)
    assert f"no state store at sqlite:///{misspelt} (--state-url)" in line and "does not exist" in line
    assert not misspelt.exists() and not misspelt.parent.exists()

    job = tmp_path / "job.yaml"
    job.write_text(job_yaml("127.0.0.1:9", "orders", tmp_path / "elsewhere", "p"))
    result = ferry("status", job, cwd=tmp_path)
    assert result.returncode == 1 and "(pipeline.state.url)" in error_lines(result)[0]
    assert not (tmp_path / "elsewhere").exists()

    # a PostgreSQL database that holds no state: said so, and left without ferry's tables
    name = f"empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_server.admin_conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(postgres_server.user)
            )
        )
    url = URL.create(
        "postgresql+psycopg",
        username=postgres_server.user,
        password=postgres_server.password,
        host=postgres_server.host,
        port=postgres_server.port,
        database=name,
    ).render_as_string(hide_password=False)
    try:
        result = ferry("status", "--state-url", url, cwd=tmp_path)
        assert result.returncode == 1, (result.stdout, result.stderr)
        [line] = error_lines(result)
        assert "holds no table ferry_status" in line and postgres_server.password not in line
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (
                0,
            )
    finally:
        with psycopg.connect(postgres_server.admin_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def test_a_refused_state_store_login_is_one_line_naming_the_key(
    kafka_bootstrap: str, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    wrong = "wrong-password-not-to-be-seen"
    url = URL.create(
        "postgresql+psycopg",
        username=postgres_server.user,
        password=wrong,
        host=postgres_server.host,
        port=postgres_server.port,
        database=postgres_server.database,
    ).render_as_string(hide_password=False)
    text = job_yaml(kafka_bootstrap, "orders", tmp_path, "p").replace(
        f"state.url: sqlite:///{tmp_path}/state.db", f"state.url: {url}"
    )
    job = tmp_path / "job.yaml"
    job.write_text(text)
    for command in (["run", job, "--no-worker"], ["run", job], ["status", job]):
        result = ferry(*command, cwd=tmp_path)
        assert result.returncode == 1, (command, result.stderr[-3000:])
        [line] = error_lines(result)
        assert "(pipeline.state.url)" in line and "password authentication failed" in line, line
        assert "correct the user name and password in pipeline.state.url" in line
        assert wrong not in result.stderr and "Traceback" not in result.stderr


def test_a_java_jaas_configuration_is_refused_at_validation(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    jaas = (
        "  properties.security.protocol: SASL_PLAINTEXT\n"
        "  properties.sasl.mechanism: SCRAM-SHA-256\n"
        "  properties.sasl.jaas.config: org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="alice" password="alice-secret";\n'
    )
    job.write_text(job_yaml("127.0.0.1:9", "orders", tmp_path, "p", source_extra=jaas))
    line_number = (
        job.read_text().splitlines().index(next(x for x in job.read_text().splitlines() if "jaas" in x)) + 1
    )
    for command in ("validate", "run"):
        result = ferry(command, job, cwd=tmp_path)
        assert result.returncode == 2, (command, result.stderr[-3000:])
        [line] = error_lines(result)
        assert line.startswith(f"error: {job}:{line_number}:3: source.properties.sasl.jaas.config: "), line
        assert "properties.sasl.username: alice" in line and "properties.sasl.password" in line
        assert "properties.sasl.mechanism: SCRAM-SHA-256" in line and "alice-secret" not in result.stderr


def test_a_setting_the_kafka_client_refuses_is_invalid_input_at_its_line(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        job_yaml(kafka_bootstrap, "orders", tmp_path, "p", source_extra="  properties.fetch.max.byte: 1000\n")
    )
    line_number = next(n for n, x in enumerate(job.read_text().splitlines(), 1) if "fetch.max.byte" in x)
    result = ferry("run", job, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = error_lines(result)
    assert line.startswith(f"error: {job}:{line_number}:3: source.properties.fetch.max.byte: "), line
    assert 'No such configuration property: "fetch.max.byte"' in line and "Traceback" not in result.stderr
