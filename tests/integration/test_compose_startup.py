"""compose.yaml's start-up sequence without containers: its services started in the order their
``depends_on`` gives, each as a local process running the command compose would run, with the files
compose mounts and the environment it sets; the shop database's rows, captured by the real Debezium
connector compose registers, then arrive in Iceberg through the pipeline compose creates.

Kafka is the project's own KRaft broker (``ferry.local.kafka_broker``), PostgreSQL a server of
its own with compose's user, database and password (``tests.support.postgres``), the shop database
a database of the session's logical-decoding PostgreSQL set up by compose's ``init.sql``, Kafka
Connect the session's worker with Debezium 3.6.1 (``tests.support.connect``), given the connector
configuration compose registers. What only a container has is translated: a service's host name and
port become the local process's (``kafka:9092``, ``postgres:5432``, ``ferry:8080``, ``shop-db:5432``),
a mounted file is the repository's file with those names and the volumes' paths rewritten, a volume
is a folder of the test. The workload's endless loop is not run: the test makes the same kinds of
change (rows, then a column added) once and compares the table with the database's own rows.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from ferry.local.kafka_broker import delete_topic
from ferry.local.ports import free_ports
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import iceberg_rows
from tests.support.connect import KafkaConnect
from tests.support.postgres import PostgresServer
from tests.support.sources import superuser_conninfo

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


#: The services of the capture side, each brought up here by the test itself (see the module's text).
CAPTURE = ("shop-db", "connect", "register-connector", "workload")


@contextmanager
def shop_database(server: PostgresServer) -> Iterator[str]:
    """A database of the session's logical-decoding server set up by compose's init.sql, dropped
    afterwards with the replication slot and publication the connector made in it."""
    import psycopg

    name = f"shop_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.admin_conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        init = (ROOT / "configs/compose/shop-db/init.sql").read_text()
        with psycopg.connect(shop_conninfo(server, name), autocommit=True) as conn:
            conn.execute(init)
        yield name
    finally:
        with psycopg.connect(server.admin_conninfo, autocommit=True) as admin:
            slots = admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,))
            for (slot,) in slots.fetchall():
                wait_for(
                    lambda slot=slot: (
                        not admin.execute(
                            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                        ).fetchone()[0]
                    ),
                    60,
                    lambda: "the connector to release its replication slot",
                )
                admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def shop_conninfo(server: PostgresServer, database: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(superuser_conninfo(server), dbname=database)


def connector_registration(service: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The connector name (from the URL the one-shot service PUTs to) and its configuration."""
    command: list[str] = service["command"]
    url = command[-1]
    assert url.startswith("http://connect:8083/connectors/") and url.endswith("/config"), url
    data = command[command.index("--data") + 1].removeprefix("@")
    [source] = [v.split(":")[0] for v in service_volumes(service) if v.split(":")[1] == data]
    config: dict[str, str] = json.loads((ROOT / source).read_text())
    return url.split("/")[-2], config


def shop_rows(conninfo: str) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(conninfo, row_factory=dict_row) as conn:
        return list(conn.execute("SELECT * FROM app_db.orders ORDER BY id").fetchall())


def test_the_compose_start_up_sequence_runs_with_local_processes(
    kafka_bootstrap: str,
    kafka_connect: KafkaConnect,
    logical_postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    services: dict[str, Any] = compose()["services"]
    order = start_order(services)
    assert order.index("kafka") < order.index("ferry") and order.index("postgres") < order.index("ferry")
    assert order.index("register-connector") < order.index("create-pipeline")
    assert order.index("connect") < order.index("register-connector") < order.index("workload")
    kafka_env = services["kafka"]["environment"]
    assert kafka_env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, as the test's broker
    postgres_env = {k: expand(str(v), ENVIRONMENT) for k, v in services["postgres"]["environment"].items()}
    (api_port,) = free_ports(1)
    translation = Translation(tmp_path)
    translation.addresses.update({"kafka:9092": kafka_bootstrap, "ferry:8080": f"127.0.0.1:{api_port}"})
    translation.paths["/var/lib/ferry/pipelines"] = tmp_path / "pipelines"  # the image's own folder
    connector_name, connector = connector_registration(services["register-connector"])
    topic = f"{connector['topic.prefix']}.{connector['schema.include.list']}.orders"
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[str] = []
    shop = ""
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
            if name == "shop-db":
                shop = stack.enter_context(shop_database(logical_postgres_server))
                started.append(name)
                continue
            if name == "connect":
                started.append(name)  # the session's worker, on the same broker
                continue
            if name == "register-connector":
                from psycopg.conninfo import conninfo_to_dict

                local = conninfo_to_dict(shop_conninfo(logical_postgres_server, shop))
                # what names compose's network and its database's user: this machine's
                translated = {
                    **connector,
                    "database.hostname": str(local["host"]),
                    "database.port": str(local["port"]),
                    "database.user": str(local["user"]),
                    "database.password": str(local["password"]),
                    "database.dbname": shop,
                }
                # every setting is one the connector (or Connect) defines, and none is refused
                _, validation = kafka_connect.request(
                    "PUT",
                    f"/connector-plugins/{connector['connector.class']}/config/validate",
                    {"name": connector_name, **translated},
                )
                defined = {c["definition"]["name"] for c in validation["configs"]}
                # the default topic-creation group's two settings are not listed by the validation
                # (Connect's SourceConnectorConfig adds a group's settings from topic.creation.groups)
                assert "topic.creation.groups" in defined
                defined |= {"topic.creation.default.partitions", "topic.creation.default.replication.factor"}
                assert set(connector) <= defined, sorted(set(connector) - defined)
                refused = [c["value"] for c in validation["configs"] if (c["value"] or {}).get("errors")]
                assert validation["error_count"] == 0, refused
                kafka_connect.create_connector(connector_name, translated)
                stack.callback(kafka_connect.delete_connector, connector_name)
                kafka_connect.wait_running(connector_name)
                started.append(name)
                continue
            if name == "workload":
                started.append(name)  # its kinds of change are made below, once
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
        stack.callback(delete_topic, kafka_bootstrap, topic, timeout=10.0)

        import psycopg

        conninfo = shop_conninfo(logical_postgres_server, shop)
        warehouse = translation.paths["/var/lib/ferry/warehouse"]

        def arrived(expected: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            rows = sorted(iceberg_rows(warehouse, "app_db.orders"), key=lambda r: r["id"])
            return rows if rows == expected else None

        def wait_same_rows() -> list[dict[str, Any]]:
            expected = shop_rows(conninfo)
            try:
                return wait_for(
                    lambda: arrived(expected),
                    240,
                    lambda: (
                        f"the shop's rows in Iceberg: {expected}\n"
                        f"have {sorted(iceberg_rows(warehouse, 'app_db.orders'), key=lambda r: r['id'])}"
                    ),
                )
            except AssertionError as e:
                logs_text = "\n".join(
                    f"--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted(logs.iterdir())
                )
                raise AssertionError(f"{e}\n{logs_text}") from None

        # the snapshot of init.sql's ten orders, as the database holds them
        assert [r["id"] for r in wait_same_rows()] == list(range(1, 11))
        # the workload's kinds of change: rows placed, changed and deleted; a column added
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("INSERT INTO app_db.orders (item, qty) VALUES ('item-11', 3)")
            conn.execute("UPDATE app_db.orders SET qty = qty + 1 WHERE id = 2")
            conn.execute("DELETE FROM app_db.orders WHERE id = 1")
            conn.execute("ALTER TABLE app_db.orders ADD COLUMN IF NOT EXISTS note text")
            conn.execute("INSERT INTO app_db.orders (item, qty, note) VALUES ('item-12', 4, 'round 12')")
            conn.execute("UPDATE app_db.orders SET note = 'round 12' WHERE id = 3")
        rows = wait_same_rows()
        assert rows[0]["id"] == 2 and rows[-1] == {"id": 12, "item": "item-12", "qty": 4, "note": "round 12"}
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
