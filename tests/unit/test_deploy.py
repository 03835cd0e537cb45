"""The Dockerfile and compose.yaml, checked without a container engine: hadolint and a parse of
each file, and every command, option, path, port and extra they name looked up in the package."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
from dockerfile_parse import DockerfileParser
from ruamel.yaml import YAML

from ferry.cli.main import main
from ferry.config.checks import check_supported
from ferry.config.loader import load_job
from ferry.control.config import load_server_config

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t" * 32
SECRETS = {"FERRY_API_TOKEN": TOKEN, "FERRY_STATE_PASSWORD": "p" * 16}


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(str(ROOT / "Dockerfile"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe", pure=True).load((ROOT / "compose.yaml").read_text())
    return loaded


def stages(dockerfile: DockerfileParser) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    for instruction in dockerfile.structure:
        if instruction["instruction"] == "FROM":
            out.append([])
        if out and instruction["instruction"] != "COMMENT":
            out[-1].append(instruction)
    return out


def values(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def invoke_line(args: list[str]) -> tuple[click.Command, list[str]]:
    """The ``ferry`` (sub)command that ``args`` (without ``ferry``) runs, and the rest of them."""
    command: click.Command = main
    rest = list(args)
    # get_command, not .commands: the main group loads its subcommands when they are asked for
    while isinstance(command, click.Group) and rest:
        sub = command.get_command(click.Context(command), rest[0])
        if sub is None:
            break
        rest.pop(0)
        command = sub
    assert not isinstance(command, click.Group), f"no command in {args}"
    return command, rest


def options_of(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def check_command(args: list[str]) -> click.Command:
    command, rest = invoke_line(args)
    known = options_of(command)
    for arg in rest:
        if arg.startswith("-"):
            assert arg.split("=")[0] in known, f"{command.name} has no option {arg}"
    return command


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", "Dockerfile"], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_the_image_is_built_in_two_stages_from_slim_python_and_runs_unprivileged(
    dockerfile: DockerfileParser,
) -> None:
    build, run = stages(dockerfile)
    for stage in (build, run):
        [base] = values(stage, "FROM")
        assert base.startswith("python:${PYTHON_VERSION}-slim"), base
    assert values(build, "FROM")[0].endswith(" AS build")
    # the final stage takes the installed environment only, not the sources
    assert values(run, "COPY") == ["--from=build /opt/ferry /opt/ferry"]
    [user] = values(run, "USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    assert any(f"--uid {uid}" in r for r in values(run, "RUN"))
    [entrypoint] = values(run, "ENTRYPOINT")
    assert json.loads(entrypoint) == ["ferry"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["ferry"] == "ferry.cli.main:main"
    [cmd] = values(run, "CMD")
    assert check_command(json.loads(cmd)).name == "serve"


def test_the_extras_are_a_build_argument_naming_extras_the_package_offers(
    dockerfile: DockerfileParser,
) -> None:
    build, _ = stages(dockerfile)
    [default] = [v.split("=", 1)[1] for v in values(build, "ARG") if v.startswith("EXTRAS=")]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(default.split(",")) <= set(extras), default
    assert {"postgres", "server"} <= set(default.split(","))  # the state store and `ferry serve`
    assert any('".[${EXTRAS}]"' in r for r in values(build, "RUN"))


def test_what_the_build_copies_exists_and_is_not_ignored(dockerfile: DockerfileParser) -> None:
    build, _ = stages(dockerfile)
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignore = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for copy in values(build, "COPY"):
        *sources, _ = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert f"!{source.rstrip('/')}" in [i.rstrip("/") for i in ignore], f"{source} is ignored"
    assert ignore[0] == "*"  # everything else (.venv, var, .cache, tests) stays out of the context


def healthcheck_module() -> Any:
    """docker/healthcheck.py, the script the image's HEALTHCHECK runs."""
    spec = importlib.util.spec_from_file_location("ferry_healthcheck", ROOT / "docker" / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_healthcheck_asks_what_each_role_serves(dockerfile: DockerfileParser, tmp_path: Path) -> None:
    from ferry.api.app import create_app
    from ferry.control.service import ControlPlane, ControlSettings

    build, run = stages(dockerfile)
    [healthcheck] = values(run, "HEALTHCHECK")
    assert "--interval=" in healthcheck and "CMD" in healthcheck
    # the script the check runs is in the environment the final stage copies from the build stage
    script = json.loads(healthcheck.split("CMD", 1)[1])[-1]
    assert f"docker/healthcheck.py {script}" in values(build, "COPY") and script.startswith("/opt/ferry/")
    assert "FERRY_STATUS_HOST=0.0.0.0" in " ".join(values(run, "ENV")).split()
    health_url = healthcheck_module().health_url
    plane = ControlPlane(ControlSettings(state_url="sqlite://"))
    try:
        paths = {getattr(r, "path", None) for r in create_app(plane, []).routes}
    finally:
        plane.close()
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    assert "8080" in values(run, "EXPOSE")[0].split()
    # serve (the image's CMD): its API's /healthz on the port the image exposes
    [cmd] = values(run, "CMD")
    server_file = tmp_path / "server.yaml"
    server_file.write_text((ROOT / "configs/compose/server.yaml").read_text())
    serve = ["/opt/ferry/bin/ferry", *json.loads(cmd)]
    assert serve[-2:] == ["--config", "/etc/ferry/server.yaml"]
    serve[-1] = str(server_file)
    assert health_url(serve, SECRETS) == "http://127.0.0.1:8080/healthz"
    assert health_url([*serve, "--port", "8181"], SECRETS) == "http://127.0.0.1:8181/healthz"
    server_file.write_text(server_file.read_text().replace("  port: 8080", "  port: 8282"))
    assert health_url(serve, SECRETS) == "http://127.0.0.1:8282/healthz"
    # run: the pipeline's status port when the job has one, its process alone when not
    job = tmp_path / "job.yaml"
    job.write_text(
        "source: {type: kafka, topic: t, properties.bootstrap.servers: 'k:9092'}\n"
        "sink: {type: 'null'}\npipeline: {name: p, status.port: 9249}\n"
    )
    assert health_url(["/opt/ferry/bin/ferry", "run", str(job)], {}) == "http://127.0.0.1:9249/healthz"
    job.write_text(job.read_text().replace(", status.port: 9249", ""))
    assert health_url(["/opt/ferry/bin/ferry", "run", "--worker-id", "w", str(job)], {}) is None
    assert "9249" in values(run, "EXPOSE")[0].split()
    assert health_url(["/opt/ferry/bin/ferry", "--log-level", "DEBUG", *serve[1:]], SECRETS) == (
        "http://127.0.0.1:8282/healthz"
    )
    # worker: no HTTP of its own
    assert health_url(["/opt/ferry/bin/ferry", "worker", "--config", "/etc/ferry/server.yaml"], {}) is None
    # FERRY_HEALTH_URL overrides
    assert health_url(serve, {"FERRY_HEALTH_URL": "http://127.0.0.1:1/x"}) == "http://127.0.0.1:1/x"
    for role in ("serve", "run", "worker"):
        assert check_command([role]).name == role


def test_the_dependencies_are_installed_in_a_layer_before_the_sources(dockerfile: DockerfileParser) -> None:
    build, _ = stages(dockerfile)
    steps = [(i["instruction"], i["value"]) for i in build]
    copy_src = steps.index(("COPY", "src ./src"))
    [(at, install)] = [(n, v) for n, (kind, v) in enumerate(steps) if kind == "RUN" and "--requirement" in v]
    assert at < copy_src, steps
    assert "requirements.py" in install
    # after the sources, ferry alone
    [after] = [v for kind, v in steps[copy_src:] if kind == "RUN" and "pip install" in v]
    assert "--no-deps" in after
    # the requirements the script lists for the image's extras: every dependency of the package and
    # of those extras, what pip would resolve from ".[EXTRAS]"
    [extras] = [v.split("=", 1)[1] for v in values(build, "ARG") if v.startswith("EXTRAS=")]
    listed = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "requirements.py"), extras],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = set(project["dependencies"])
    for extra in extras.split(","):
        expected |= set(project["optional-dependencies"][extra])
    assert set(listed) == expected
    everything = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "requirements.py"), "all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert not [r for r in everything if r.startswith(project["name"])]  # ferry-cdc[...] expanded
    assert set(project["optional-dependencies"]["fluss"]) <= set(everything)


def test_compose_runs_kafka_in_kraft_mode_and_postgresql_as_the_state_store(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kafka", "postgres", "ferry", "worker", "create-pipeline"} <= set(services)
    assert not any("zookeeper" in name or "zookeeper" in str(s.get("image")) for name, s in services.items())
    kafka = services["kafka"]["environment"]
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    advertised = kafka["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert advertised == ["PLAINTEXT://kafka:9092", "HOST://127.0.0.1:9094"]
    assert services["kafka"]["ports"] == ["127.0.0.1:9094:9094"]  # the HOST listener, for the host
    assert services["postgres"]["image"].startswith("postgres:")
    for name in ("kafka", "postgres"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"


def test_compose_runs_ferry_serve_and_a_worker_from_the_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, command in (("ferry", "serve"), ("worker", "worker")):
        service = services[name]
        assert service["build"]["context"] == "."
        assert check_command(service["command"]).name == command
        assert {"kafka", "postgres"} <= set(service["depends_on"])
        assert all(d["condition"] == "service_healthy" for d in service["depends_on"].values())
    assert services["ferry"]["ports"] == ["127.0.0.1:8080:8080"]
    assert services["create-pipeline"]["depends_on"]["ferry"]["condition"] == "service_healthy"


def test_every_file_compose_mounts_exists_and_loads(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    mounted: dict[str, Path] = {}
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source, target, *_ = volume.split(":")
            if source.startswith("./"):
                assert (ROOT / source).is_file(), source
                mounted[target] = ROOT / source
            else:
                assert source in declared, f"volume {source} is not declared"
    server = load_server_config(mounted["/etc/ferry/server.yaml"], env=SECRETS)
    assert (
        server.state_url.startswith("postgresql+psycopg://ferry:") and "@postgres:5432/" in server.state_url
    )
    assert (server.api.host, server.api.port) == ("0.0.0.0", 8080)
    assert [t.token.get_secret_value() for t in server.api.tokens] == [TOKEN]
    assert str(server.data_dir).startswith("/var/lib/ferry/")
    job = load_job(mounted["/etc/ferry/jobs/orders-to-iceberg.yaml"], env=SECRETS)
    check_supported(job)
    assert job.sink.type == "iceberg" and job.source.bootstrap_servers == "kafka:9092"
    # the catalog and the data files are on the warehouse volume, where the services mount it
    warehouse = next(
        v.split(":")[1] for v in compose["services"]["ferry"]["volumes"] if v.startswith("warehouse:")
    )
    for key in ("uri", "warehouse"):
        assert warehouse in job.sink.catalog_properties[key], key


def test_the_pipeline_is_created_through_the_api_with_commands_ferry_has(compose: dict[str, Any]) -> None:
    service = compose["services"]["create-pipeline"]
    assert service["entrypoint"] == ["sh", "-c"]
    [script] = service["command"]
    lines = [shlex.split(part) for part in script.split("||")]
    assert [line[0] for line in lines] == ["ferry", "ferry"]
    commands = [check_command(line[1:]) for line in lines]
    assert [c.name for c in commands] == ["get", "create"]
    create = lines[1]
    job = create[create.index("--job") + 1]
    assert any(v.endswith(f":{job}:ro") for v in service["volumes"])
    assert create[create.index("--server") + 1] == "http://ferry:8080"
    assert "FERRY_TOKEN" in service["environment"]  # the pipeline commands read their token from it


# --------------------------------------------------------------------------------------------------
# The captured database, Kafka Connect with Debezium, and what an operator reaches from the host


def test_every_service_has_an_image_or_a_build_that_hadolint_accepts(compose: dict[str, Any]) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    for name, service in compose["services"].items():
        image = service.get("image", "")
        assert image or "build" in service, f"{name}: neither image nor build"
        if "build" in service:
            context = ROOT / service["build"]["context"]
            assert (context / "Dockerfile").is_file(), name
            result = subprocess.run(
                [str(hadolint), "--no-color", "Dockerfile"],
                cwd=context,
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0 and not result.stdout.strip(), f"{name}: {result.stdout}"
        else:
            # a released image, named by its version: `docker compose up` pulls the same one each time
            assert ":" in image and not image.endswith(":latest"), f"{name}: {image}"


def test_connect_runs_the_kafka_and_debezium_versions_the_tests_fetch(compose: dict[str, Any]) -> None:
    pom = (ROOT / "jars" / "connect" / "pom.xml").read_text()
    kafka_version = pom.split("<kafka.version>")[1].split("<")[0]
    debezium_version = pom.split("<debezium.version>")[1].split("<")[0]
    connect = DockerfileParser(str(ROOT / compose["services"]["connect"]["build"]["context"] / "Dockerfile"))
    args = dict(
        i["value"].split("=", 1) for i in connect.structure if i["instruction"] == "ARG" and "=" in i["value"]
    )
    assert args["KAFKA_VERSION"] == kafka_version and args["DEBEZIUM_VERSION"] == debezium_version
    assert compose["services"]["kafka"]["image"] == f"apache/kafka:{kafka_version}"
    froms = [i["value"] for i in connect.structure if i["instruction"] == "FROM"]
    assert froms[-1] == "apache/kafka:${KAFKA_VERSION}"
    [add] = [i["value"] for i in connect.structure if i["instruction"] == "ADD"]
    assert add.startswith(
        "https://repo1.maven.org/maven2/io/debezium/debezium-connector-postgres/${DEBEZIUM_VERSION}/"
        "debezium-connector-postgres-${DEBEZIUM_VERSION}-plugin.tar.gz "
    )
    properties = dict(
        line.split("=", 1)
        for line in (ROOT / "configs" / "compose" / "connect-distributed.properties").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert properties["bootstrap.servers"] == "kafka:9092"
    assert properties["plugin.path"] == "/opt/kafka/plugins"
    assert any(line.startswith("COPY --from=plugins /plugins /opt/kafka/plugins") for line in connect.lines)
    assert properties["listeners"] == "http://0.0.0.0:8083"
    [cmd] = [json.loads(i["value"]) for i in connect.structure if i["instruction"] == "CMD"]
    assert any(v.endswith(f":{cmd[0]}:ro") for v in compose["services"]["connect"]["volumes"])


def test_services_start_in_the_order_of_what_they_need(compose: dict[str, Any]) -> None:
    services = compose["services"]

    def needs(name: str) -> dict[str, str]:
        return {k: v["condition"] for k, v in (services[name].get("depends_on") or {}).items()}

    assert needs("connect") == {"kafka": "service_healthy", "shop-db": "service_healthy"}
    assert needs("register-connector") == {"connect": "service_healthy"}
    assert needs("workload") == {"register-connector": "service_completed_successfully"}
    assert needs("create-pipeline") == {
        "ferry": "service_healthy",
        "register-connector": "service_completed_successfully",
    }
    # a service_healthy condition needs a health check on that service (the image's for ferry's)
    for name in services:
        for dependency, condition in needs(name).items():
            assert dependency in services, f"{name} depends on an unknown {dependency}"
            if condition == "service_healthy":
                check = services[dependency].get("healthcheck", {})
                assert not check.get("disable") and (check.get("test") or dependency in ("ferry", "worker"))
            if condition == "service_completed_successfully":
                assert services[dependency].get("restart") == "no", dependency
    shop = services["shop-db"]
    assert "wal_level=logical" in shop["command"]  # pgoutput's logical decoding
    hba = shop["command"][shop["command"].index("-c", 3) + 1].split("=", 1)[1]
    assert any(v.startswith(f"./configs/compose/shop-db/pg_hba.conf:{hba}:") for v in shop["volumes"])
    rules = [line.split() for line in (ROOT / "configs/compose/shop-db/pg_hba.conf").read_text().splitlines()]
    assert [
        "host",
        "replication",
        "all",
        "all",
        "scram-sha-256",
    ] in rules  # Debezium's replication connection


def test_the_ports_an_operator_needs_are_published_on_the_loopback(compose: dict[str, Any]) -> None:
    published = {
        name: [p.split(":") for p in service.get("ports", [])]
        for name, service in compose["services"].items()
    }
    assert {name for name, ports in published.items() if ports} == {"kafka", "shop-db", "connect", "ferry"}
    for name, ports in published.items():
        for host, _, _ in ports:
            assert host == "127.0.0.1", name  # nothing reachable from another machine by default
    assert published["ferry"] == [["127.0.0.1", "8080", "8080"]]  # the API and the web page
    assert published["connect"] == [["127.0.0.1", "8083", "8083"]]
    assert published["shop-db"] == [["127.0.0.1", "5433", "5432"]]  # beside a local PostgreSQL's 5432
    listeners = compose["services"]["kafka"]["environment"]["KAFKA_LISTENERS"].split(",")
    assert "HOST://:9094" in listeners and published["kafka"] == [["127.0.0.1", "9094", "9094"]]


def connector_config(compose: dict[str, Any]) -> dict[str, str]:
    """The connector the one-shot service registers, and the URL it registers it at."""
    service = compose["services"]["register-connector"]
    command: list[str] = service["command"]
    data = command[command.index("--data") + 1]
    assert data.startswith("@")
    [source] = [v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == data[1:]]
    loaded: dict[str, str] = json.loads((ROOT / source).read_text())
    return loaded


def test_the_connector_captures_the_shop_database_into_the_pipelines_topic(compose: dict[str, Any]) -> None:
    services = compose["services"]
    command = services["register-connector"]["command"]
    assert command[command.index("--request") + 1] == "PUT"  # create or update: idempotent
    assert command[-1] == "http://connect:8083/connectors/shop/config"
    config = connector_config(compose)
    assert all(isinstance(v, str) for v in config.values())  # Connect's REST API takes strings
    assert config["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    shop = services["shop-db"]
    assert config["database.hostname"] in services and config["database.hostname"] == "shop-db"
    assert config["database.port"] == shop["ports"][0].split(":")[-1]
    environment = shop["environment"]
    assert (config["database.user"], config["database.password"], config["database.dbname"]) == (
        environment["POSTGRES_USER"],
        environment["POSTGRES_PASSWORD"],
        environment["POSTGRES_DB"],
    )
    assert config["plugin.name"] == "pgoutput"
    # Debezium names the topic <topic.prefix>.<schema>.<table>: the pipeline's topic
    init = (ROOT / "configs/compose/shop-db/init.sql").read_text()
    assert f"CREATE TABLE {config['schema.include.list']}.orders (" in init
    topic = f"{config['topic.prefix']}.{config['schema.include.list']}.orders"
    job_file = next(v.split(":")[0] for v in services["create-pipeline"]["volumes"] if v.endswith(".yaml:ro"))
    job = load_job(ROOT / job_file, env=SECRETS)
    assert job.source.topic == (topic,)
    assert job.source.value_format == "debezium-json" and job.source.topic_missing == "wait"
    workload = services["workload"]
    assert workload["environment"]["PGHOST"] == "shop-db"
    script = next(v.split(":")[0] for v in workload["volumes"])
    text = (ROOT / script).read_text()
    assert "ALTER TABLE app_db.orders ADD COLUMN" in text and "ALTER COLUMN qty TYPE" in text
