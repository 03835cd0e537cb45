"""``ferry serve`` and ``ferry worker --config`` as real processes; the CLI talks HTTP to the server.

Pipelines are created stopped, so the server's worker has nothing to start (no Kafka needed).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from tests.support.waiting import wait_for

from ferry.cli.main import main

EDITOR = "serve-editor-token-0123456789"
VIEWER = "serve-viewer-token-0123456789"
JOB = """source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: orders
  value.format: debezium-json
sink:
  type: memory
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ferry(*args: str, env: dict[str, str] | None = None, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "ferry.cli.main", *args],
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        raise AssertionError("the process did not stop within 60 s of SIGTERM") from None


def wait_until(probe: object, what: str, timeout: float = 180.0) -> None:
    assert callable(probe)
    wait_for(lambda: bool(probe()), timeout, lambda: what)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    port = free_port()
    config = tmp_path / "server.yaml"
    config.write_text(
        f"""\
state.url: sqlite:///{tmp_path}/state.db
data.dir: {tmp_path}/pipelines
api:
  host: 127.0.0.1
  port: 1
  tokens:
    - name: deployer
      token: ${{DEPLOYER_TOKEN}}
      roles: {{default: editor}}
    - name: reader
      token: {VIEWER}
      roles: {{default: viewer}}
"""
    )
    log = tmp_path / "serve.log"
    process = ferry(
        "serve", "--config", str(config), "--port", str(port), env={"DEPLOYER_TOKEN": EDITOR}, log=log
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, "ferry serve to answer /healthz")
        yield url, process, log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def cli(*args: str, code: int = 0, **env: str) -> str:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}: {result.output}"
    return result.output


def test_the_cli_works_against_ferry_serve_which_stops_on_sigterm(
    server: tuple[str, subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    url, process, log = server
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    created = json.loads(
        cli(
            "pipeline",
            "create",
            "orders",
            "--job",
            str(job),
            "--stopped",
            "-o",
            "json",
            "--server",
            url,
            "--token",
            EDITOR,
        )
    )
    assert (created["metadata"]["name"], created["status"]["phase"]) == ("orders", "STOPPED")
    listing = cli("pipeline", "list", FERRY_SERVER=url, FERRY_TOKEN=VIEWER)
    assert "orders  STOPPED" in listing
    refused = cli("pipeline", "delete", "orders", "--server", url, "--token", VIEWER, code=2)
    assert "token 'reader' is a viewer in environment 'default'" in refused and "(HTTP 403)" in refused
    assert "(HTTP 401)" in cli("pipeline", "list", "--server", url, "--token", "x" * 20, code=2)
    response = httpx.get(f"{url}/api/v1/environments/default/pipelines/orders")
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    assert "/api/v1/environments/{env}/pipelines" in httpx.get(f"{url}/openapi.json").json()["paths"]
    assert httpx.get(f"{url}/readyz").json() == {"status": "ok"}  # the worker runs in this process
    assert 'ferry_pipelines{environment="default",phase="STOPPED"} 1.0' in httpx.get(f"{url}/metrics").text
    cli("pipeline", "delete", "orders", "--server", url, "--token", EDITOR)

    assert stop(process) == 0
    text = log.read_text()
    assert "supervising" in text, text  # the worker ran in the same process
    assert text.rstrip().endswith("ferry.cli.control: stopped"), text  # after the worker's thread ended
    assert '"DELETE /api/v1/environments/default/pipelines/orders HTTP/1.1" 204' in text, text
    for token in (EDITOR, VIEWER):
        assert token not in text


def test_worker_reads_the_server_file_and_its_flags_override_it(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(f"state.url: sqlite:///{tmp_path}/from-file.db\ndata.dir: {tmp_path}/pipelines\n")
    flag_db = tmp_path / "from-flag.db"
    log = tmp_path / "worker.log"
    process = ferry("worker", "--config", str(config), "--state-url", f"sqlite:///{flag_db}", log=log)
    try:
        wait_until(lambda: flag_db.exists() and "supervising" in log.read_text(), "the worker to start")
    finally:
        code = stop(process)
    assert code == 0, log.read_text()
    assert not (tmp_path / "from-file.db").exists()


def test_worker_and_serve_refuse_a_bad_server_file_naming_its_line(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("carry-over-offsets:\n  timeout: 7 h\n")
    for command in ("worker", "serve"):
        output = cli(command, "--config", str(config), code=2)
        assert f"{config}:2:3: carry-over-offsets.timeout: more than 0 and at most 6 h" in output
