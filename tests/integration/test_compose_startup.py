"""compose.yaml's start-up sequence without containers: its services started in the order their
``depends_on`` gives, each as a local process running the command compose would run, with the files
compose mounts and the environment it sets; the example pipeline's rows then arrive in Iceberg.

Kafka is the project's own KRaft broker (``ferry.local.kafka_broker``), PostgreSQL a server of
its own with compose's user, database and password (``tests.support.postgres``). What only a
container has is translated: a service's host name and port become the local process's
(``kafka:9092``, ``postgres:5432``, ``ferry:8080``), a mounted file is the repository's file with
those names and the volumes' paths rewritten, a volume is a folder of the test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from ferry.local.kafka_broker import create_topic, delete_topic, produce
from ferry.local.ports import free_ports
from tests.integration.control_helpers import wait_for, wait_rows
from tests.integration.helpers import orders_table
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = {"FERRY_API_TOKEN": "compose-api-token-0123456789", "FERRY_STATE_PASSWORD": "compose-pw-0123"}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe", pure=True).load((ROOT / "compose.yaml").read_text())
    return loaded


def start_order(services: Mapping[str, Any]) -> list[str]:
    """The services in the order compose starts them: each after those it depends on."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"depends_on cycle: {' -> '.join((*path, name))}"
        if name in order:
            return
        for dependency in services[name].get("depends_on") or {}:
            visit(dependency, (*path, name))
        order.append(name)

    for name in services:
        visit(name, ())
    return order


def expand(text: str, environment: Mapping[str, str]) -> str:
    """compose's ``${NAME}`` and ``${NAME:?message}`` interpolation."""

    def value(match: re.Match[str]) -> str:
        name = match["name"]
        assert name in environment, f"compose needs {name}: {match['rest']}"
        return environment[name]

    return re.sub(r"\$\{(?P<name>\w+)(?P<rest>:[?-][^}]*)?\}", value, text)


class Translation:
    """Container names → this machine's: service addresses, mounted files and volumes."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.addresses: dict[str, str] = {}
        self.paths: dict[str, Path] = {}

    def text(self, text: str) -> str:
        for address, local in self.addresses.items():
            text = text.replace(address, local)
        for container, local in sorted(self.paths.items(), key=lambda p: -len(p[0])):
            text = text.replace(container, str(local))
        return text

    def mount(self, volume: str) -> None:
        """A ``host:container[:ro]`` bind mount (a translated copy) or a named volume (a folder)."""
        source, container = volume.split(":")[:2]
        if source.startswith("."):
            copy = self.tmp_path / "mounts" / container.lstrip("/")
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(self.text((ROOT / source).read_text()))
            self.paths[container] = copy
        else:
            folder = self.tmp_path / "volumes" / source
            folder.mkdir(parents=True, exist_ok=True)
            self.paths[container] = folder


def service_volumes(service: Mapping[str, Any]) -> list[str]:
    return [v for v in service.get("volumes") or [] if isinstance(v, str)]


@contextmanager
def process(args: list[str], log: Path, env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        child = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=log.parent
        )
        try:
            yield child
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(90)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(30)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def ferry_args(command: list[str]) -> list[str]:
    """The image's entrypoint is ``ferry``: here the same command of this interpreter's ferry."""
    return [sys.executable, "-m", "ferry.cli.main", *command]


def test_the_compose_start_up_sequence_runs_with_local_processes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    services: dict[str, Any] = compose()["services"]
    order = start_order(services)
    assert order.index("kafka") < order.index("ferry") and order.index("postgres") < order.index("ferry")
    assert order[-1] == "create-pipeline", order
    kafka_env = services["kafka"]["environment"]
    assert kafka_env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, as the test's broker
    postgres_env = {k: expand(str(v), ENVIRONMENT) for k, v in services["postgres"]["environment"].items()}
    (api_port,) = free_ports(1)
    translation = Translation(tmp_path)
    translation.addresses.update({"kafka:9092": kafka_bootstrap, "ferry:8080": f"127.0.0.1:{api_port}"})
    translation.paths["/var/lib/ferry/pipelines"] = tmp_path / "pipelines"  # the image's own folder
    table = replace(orders_table("shop"), database="app_db")
    topic = table.topic
    assert topic == "shop.app_db.orders"
    create_topic(kafka_bootstrap, topic)
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[str] = []
    with ExitStack() as stack:
        for name in order:
            service = services[name]
            environment = {
                k: expand(str(v), ENVIRONMENT) for k, v in (service.get("environment") or {}).items()
            }
            if name == "kafka":
                started.append(name)  # the session's broker
                continue
            if name == "postgres":
                server = stack.enter_context(
                    PostgresServer(
                        database=postgres_env["POSTGRES_DB"],
                        user=postgres_env["POSTGRES_USER"],
                        password=postgres_env["POSTGRES_PASSWORD"],
                    )
                )
                translation.addresses["postgres:5432"] = f"{server.host}:{server.port}"
                started.append(name)
                continue
            for volume in service_volumes(service):
                translation.mount(volume)
            command = service["command"]
            if service.get("entrypoint") == ["sh", "-c"]:
                args = ["sh", "-c", translation.text(" ".join(command))]
                path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
                result = subprocess.run(
                    args,
                    env={**os.environ, **environment, "PATH": path},
                    capture_output=True,
                    text=True,
                    timeout=180,
                    check=False,
                )
                assert result.returncode == 0, result.stdout + result.stderr
                assert "created pipeline orders" in result.stdout, result.stdout
                started.append(name)
                continue
            args = ferry_args([translation.text(part) for part in command])
            # the published port (compose's "127.0.0.1:8080:8080") is a free local one here
            config = translation.paths["/etc/ferry/server.yaml"]
            text = config.read_text()
            assert "  host: 0.0.0.0\n  port: 8080\n" in text, text
            config.write_text(
                text.replace("  host: 0.0.0.0\n  port: 8080\n", f"  host: 127.0.0.1\n  port: {api_port}\n")
            )
            child = stack.enter_context(process(args, logs / f"{name}.log", environment))
            if name == "ferry":  # create-pipeline waits for it to be healthy: the image's HEALTHCHECK
                wait_for(
                    lambda child=child: (
                        healthy(f"http://127.0.0.1:{api_port}/healthz") or child.poll() is not None
                    ),
                    120,
                    lambda: f"ferry serve healthy: {(logs / 'ferry.log').read_text()[-2000:]}",
                )
                assert child.poll() is None, (logs / "ferry.log").read_text()[-3000:]
            started.append(name)
        assert started == order

        records = [table.insert({"id": i, "item": f"item-{i}", "qty": i}) for i in range(1, 11)]
        produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
        warehouse = translation.paths["/var/lib/ferry/warehouse"]
        try:
            # the Debezium table app_db.orders (the job's namespace is for ids without a schema part)
            rows = wait_rows(warehouse, "app_db.orders", 10, timeout=240)
        except AssertionError:
            raise AssertionError(
                "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted(logs.iterdir()))
            ) from None
        assert sorted(r["id"] for r in rows) == list(range(1, 11))
        # the pipeline the one-shot service created runs under the API and both workers' state store
        again = subprocess.run(
            [*ferry_args(["pipeline", "get", "orders", "--server", f"http://127.0.0.1:{api_port}"])],
            env={**os.environ, "FERRY_TOKEN": ENVIRONMENT["FERRY_API_TOKEN"]},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 0 and "phase:    RUNNING" in again.stdout, again.stdout + again.stderr
    delete_topic(kafka_bootstrap, topic, timeout=10.0)
