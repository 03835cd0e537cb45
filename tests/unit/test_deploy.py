"""The Dockerfile and compose.yaml, checked without a container engine: hadolint and a parse of
each file, and every command, option, path, port and extra they name looked up in the package."""

from __future__ import annotations

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
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
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


def test_the_healthcheck_asks_a_route_ferry_serves(dockerfile: DockerfileParser) -> None:
    from ferry.api.app import create_app
    from ferry.control.service import ControlPlane, ControlSettings

    _, run = stages(dockerfile)
    [healthcheck] = values(run, "HEALTHCHECK")
    assert "--interval=" in healthcheck and "CMD" in healthcheck
    env = " ".join(values(run, "ENV"))
    url = next(w.split("=", 1)[1] for w in env.split() if w.startswith("FERRY_HEALTH_URL="))
    assert "FERRY_HEALTH_URL" in healthcheck and url == "http://127.0.0.1:8080/healthz"
    assert "FERRY_STATUS_HOST=0.0.0.0" in env.split()
    plane = ControlPlane(ControlSettings(state_url="sqlite://"))
    try:
        paths = {getattr(r, "path", None) for r in create_app(plane, []).routes}
    finally:
        plane.close()
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    assert "8080" in values(run, "EXPOSE")[0].split()


def test_compose_runs_kafka_in_kraft_mode_and_postgresql_as_the_state_store(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kafka", "postgres", "ferry", "worker", "create-pipeline"} <= set(services)
    assert not any("zookeeper" in name or "zookeeper" in str(s.get("image")) for name, s in services.items())
    kafka = services["kafka"]["environment"]
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert kafka["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
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
