"""``ferry pipeline``/``savepoint``/``replay`` without a server: the API app in-process over a
SQLite state store (the same requests as over HTTP). No pipeline runs: what a worker would record
is set in the store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ferry.cli.main import main
from ferry.control.service import ControlPlane, ControlSettings
from ferry.offsets import encode_offsets

JOB = """source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: orders
  value.format: debezium-json
sink:
  type: memory
"""


class Cli:
    def __init__(self, tmp_path: Path) -> None:
        self.url = f"sqlite:///{tmp_path}/state.db"
        self.job = tmp_path / "job.yaml"
        self.job.write_text(JOB)
        self.plane = ControlPlane(ControlSettings(state_url=self.url))

    def run(self, *args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
        result = CliRunner().invoke(main, [*args, "--state-url", self.url], env=env, catch_exceptions=False)
        assert result.exit_code == code, f"exit {result.exit_code}: {result.output}"
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--output", "json").stdout)

    def create(self, name: str, *args: str) -> Any:
        return self.json("pipeline", "create", name, "--job", str(self.job), *args)

    def set_phase(self, name: str, phase: str, **values: Any) -> None:
        row = self.plane.store.pipeline("default", name)
        assert row is not None
        assert self.plane.store.update_pipeline(row, phase=phase, **values)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    tool = Cli(tmp_path)
    yield tool
    tool.plane.close()


def test_create_list_get_stop_resume_delete(cli: Cli) -> None:
    created = cli.create("orders")
    assert created["metadata"]["name"] == "orders" and created["spec"]["job"] == JOB
    listing = cli.run("pipeline", "list").stdout
    assert listing.splitlines()[0].split() == ["NAME", "PHASE", "DETAIL"]
    assert "orders  PENDING   waiting for a worker to start it" in listing
    assert [p["metadata"]["name"] for p in cli.json("pipeline", "list")] == ["orders"]
    stopped = cli.json("pipeline", "stop", "orders")
    assert (stopped["spec"]["stopped"], stopped["status"]["phase"]) == (True, "STOPPED")
    assert "phase:    STOPPED" in cli.run("pipeline", "get", "orders").stdout
    assert cli.json("pipeline", "resume", "orders")["status"]["phase"] == "PENDING"
    assert cli.run("pipeline", "delete", "orders").stdout.strip() == "deleted pipeline orders"
    result = cli.run("pipeline", "get", "orders", code=2)
    assert "error: pipeline 'orders' not found in environment 'default' (HTTP 404)" in result.stderr


def test_get_shows_deadline_inherited_topics_latest_offsets_and_progress(cli: Cli) -> None:
    cli.create("orders-v1")
    cli.set_phase("orders-v1", "RUNNING", latest_offsets={"orders": "partition:0,offset:42"})
    cli.create("orders-v2", "--initial-offset-from", "orders-v1")
    text = cli.run("pipeline", "get", "orders-v2").stdout
    deadline = cli.json("pipeline", "get", "orders-v2")["status"]["deadline"]
    assert f"  deadline: {deadline}" in text
    assert "waiting for the offsets of pipeline 'orders-v1'" in text
    assert "inherits offsets from: orders-v1" in text and "inherited topics: none" in text
    assert (
        "latest offsets:\n    orders: partition:0,offset:42" in cli.run("pipeline", "get", "orders-v1").stdout
    )

    cli.json("replay", "replay", "--like", "orders-v1", "--from-timestamp", "0", "--bounded", "latest-offset")
    traits = {
        "inheritedOffsetTopics": ["orders"],
        "startOffsets": encode_offsets({("orders", 0): 0}),
        "endOffsets": encode_offsets({("orders", 0): 200}),
    }
    cli.set_phase("replay", "RUNNING", traits=traits)
    cli.plane.state.set_status(
        "default.replay",
        "RUNNING",
        "reading",
        {
            "records_read": 50,
            "offsets": encode_offsets({("orders", 0): 50}),
            "rate_eps": 10.0,
            "records_behind": 150,
            "eta_s": 15.0,
        },
    )
    text = cli.run("pipeline", "get", "replay").stdout
    assert (
        "progress: 50 of 200 records (25.0%), 10.0 records/s, ETA 15 s\n    orders[0]: 50 of 200 (25.0%)"
        in text
    )
    assert "catching up: 150 records behind at 10.0 records/s, ETA 15 s" in text
    progress = cli.json("pipeline", "get", "replay")["status"]["progress"]
    assert (progress["ratePerSecond"], progress["etaSeconds"]) == (10.0, 15.0)
    assert "inherited topics: orders" in text and "records read: 50" in text
    assert "replay: from 1970-01-01T00:00:00.000+00:00, until latest-offset" in text

    # the end: what was read and written
    cli.set_phase("replay", "COMPLETED", traits=traits)
    done = {
        "records_read": 200,
        "rows_written": {"app.orders": 199},
        "offsets": encode_offsets({("orders", 0): 200}),
    }
    cli.plane.state.set_status("default.replay", "STOPPED", "bounded read reached its end", done)
    text = cli.run("pipeline", "get", "replay").stdout
    assert "progress: COMPLETED: 200 of 200 records (100.0%); read 200 records, wrote 199 rows" in text
    progress = cli.json("pipeline", "get", "replay")["status"]["progress"]
    assert (progress["state"], progress["etaSeconds"], progress["partitions"][0]["recordsDone"]) == (
        "COMPLETED",
        0.0,
        200,
    )


def test_replay_options_become_the_spec(cli: Cli) -> None:
    replay = cli.json(
        "replay",
        "r1",
        "--job",
        str(cli.job),
        "--from-timestamp",
        "2024-05-01T12:00:00+02:00",
        "--bounded",
        "timestamp=2024-05-01T13:00:00",
    )["spec"]
    assert replay["startFrom"]["timestampMillis"] == 1_714_557_600_000
    assert (replay["bounded"]["mode"], replay["bounded"]["timestampMillis"]) == (
        "timestamp",
        1_714_568_400_000,
    )
    replay = cli.json(
        "replay",
        "r2",
        "--job",
        str(cli.job),
        "--from-offsets",
        "orders=partition:0,offset:42;partition:1,offset:7",
        "--bounded",
        "specific-offsets=partition:0,offset:100",
    )["spec"]
    offsets = replay["startFrom"]["offsets"]["orders"]
    assert offsets in ("partition:0,offset:42;partition:1,offset:7", {"0": 42, "1": 7})
    assert replay["bounded"]["mode"] == "specific-offsets"


def test_replay_refusals_exit_2_with_the_message(cli: Cli) -> None:
    result = cli.run("replay", "r", "--job", str(cli.job), "--from-savepoint", "nope", code=2)
    assert "savepoint 'nope' not found in environment 'default' (HTTP 404)" in result.stderr
    result = cli.run("replay", "r", "--like", "missing", "--from-timestamp", "0", code=2)
    assert "pipeline 'missing' not found" in result.stderr
    result = cli.run("replay", "r", "--job", str(cli.job), "--from-timestamp", "yesterday", code=2)
    assert "neither ISO 8601" in result.output
    result = cli.run(
        "replay", "r", "--job", str(cli.job), "--from-timestamp", "0", "--from-savepoint", "x", code=2
    )
    assert "give one start" in result.output
    result = cli.run("replay", "r", "--job", str(cli.job), "--from-offsets", "orders=partition:zero", code=2)
    assert "spec.startFrom.offsets.orders" in result.stderr
    result = cli.run(
        "replay", "r", "--job", str(cli.job), "--from-timestamp", "0", "--bounded", "forever", code=2
    )
    assert "--bounded" in result.output


def test_savepoints_list_pin_and_delete(cli: Cli) -> None:
    cli.create("orders")
    cli.set_phase("orders", "STOPPED")
    upgrade = cli.plane.store.insert_savepoint("default", "orders", "UPGRADE", state="COMPLETED")
    manual = cli.plane.store.insert_savepoint("default", "orders", "MANUAL", state="COMPLETED")
    listing = cli.run("savepoint", "list", "orders").stdout
    assert upgrade.uid in listing and manual.uid in listing
    assert [s["metadata"]["uid"] for s in cli.json("savepoint", "list", "orders", "--source", "MANUAL")] == [
        manual.uid
    ]
    assert (
        cli.run("savepoint", "pin", "orders", manual.uid).stdout.strip() == f"pinned savepoint {manual.uid}"
    )
    assert cli.json("savepoint", "get", "orders", manual.uid)["spec"]["pinned"] is True
    result = cli.run("pipeline", "delete", "orders", code=2)
    assert "2 savepoint(s) attached" in result.stderr and "(HTTP 409)" in result.stderr
    assert (
        "needs force=true" in cli.run("savepoint", "delete", "orders", "--source", "UPGRADE", code=2).stderr
    )
    assert cli.json("savepoint", "delete", "orders", "--source", "UPGRADE", "--force") == {
        "deleted": [upgrade.uid]
    }
    assert (
        "pinned: unpin it first"
        in cli.run("savepoint", "delete", "orders", manual.uid, "--force", code=2).stderr
    )
    cli.run("savepoint", "unpin", "orders", manual.uid)
    cli.run("savepoint", "delete", "orders", manual.uid, "--force")
    cli.run("pipeline", "delete", "orders")
    assert cli.json("pipeline", "list") == []


def test_a_manual_savepoint_of_a_running_pipeline(cli: Cli) -> None:
    cli.create("orders")
    assert (
        "only a running pipeline takes a savepoint" in cli.run("savepoint", "create", "orders", code=2).stderr
    )
    cli.set_phase("orders", "RUNNING")
    uid = cli.json("savepoint", "create", "orders")["metadata"]["uid"]
    assert "state:  PENDING" in cli.run("savepoint", "get", "orders", uid).stdout


def test_a_bad_job_is_refused_with_its_line(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB + "pipeline:\n  bogus: 1\n")
    result = cli.run("pipeline", "create", "orders", "--job", str(bad), code=2)
    assert f"error: {bad}:9:3: pipeline.bogus: unknown key" in result.stderr


STATEFUL = "transform:\n  - source-table: db.orders\n    projection: id, Count(*) AS n\n"


def test_a_job_ferry_cannot_run_is_refused_in_its_file_as_ferry_validate_refuses_it(
    cli: Cli, tmp_path: Path
) -> None:
    job = tmp_path / "stateful.yaml"
    job.write_text(JOB + STATEFUL)
    validated = CliRunner().invoke(main, ["validate", str(job)])
    assert validated.exit_code == 2, validated.output
    [refusal] = [line for line in validated.stderr.splitlines() if line.startswith("error: ")]
    assert refusal.startswith(f"error: {job}:10:5: transform[0].projection: ") and "Count(*)" in refusal
    for command in (["pipeline", "create", "orders"], ["replay", "orders-replay", "--from-timestamp", "0"]):
        created = cli.run(*command, "--job", str(job), code=2)
        assert created.stderr.splitlines() == [f"{refusal} (HTTP 400)"]
    assert cli.json("pipeline", "list") == []


def test_environments_are_separate(cli: Cli) -> None:
    cli.create("orders")
    assert cli.json("pipeline", "list", "-e", "staging") == []
    cli.json("pipeline", "create", "orders", "--job", str(cli.job), "--environment", "staging")
    listed = cli.run("pipeline", "list", "-o", "json", env={"FERRY_ENVIRONMENT": "staging"}).stdout
    assert [p["metadata"]["environment"] for p in json.loads(listed)] == ["staging"]


def test_an_unreachable_server_exits_1(cli: Cli) -> None:
    result = CliRunner().invoke(
        main, ["pipeline", "list", "--server", "http://127.0.0.1:9", "--token", "t" * 20]
    )
    assert result.exit_code == 1, result.output
    assert "cannot reach the server http://127.0.0.1:9" in result.stderr


def test_a_server_and_a_local_state_store_are_exclusive(cli: Cli) -> None:
    result = cli.run("pipeline", "list", "--server", "http://127.0.0.1:9", code=2)
    assert "not both" in result.output


def test_a_bad_server_file_exits_2_naming_its_line(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("state.url: sqlite:///x.db\nstate.ulr: y\n")
    result = CliRunner().invoke(main, ["pipeline", "list", "--config", str(config)])
    assert result.exit_code == 2 and f"{config}:2:1: state.ulr: unknown key" in result.stderr


def test_a_server_error_exits_1(cli: Cli) -> None:
    # A stored spec no model accepts (written around the API) makes the control plane fail: 500.
    row = cli.plane.store.insert_pipeline("default", "broken", {"job": ""}, "")
    assert cli.plane.store.update_pipeline(row, phase="RUNNING")
    result = cli.run("savepoint", "create", "broken", code=1)
    assert "internal error (ValidationError); the server log has the details (HTTP 500)" in result.stderr


def test_labels_annotations_and_named_savepoints_from_the_command_line(cli: Cli) -> None:
    created = cli.create("orders", "--label", "team=payments", "--annotation", "owner=ops@example.com")
    assert created["metadata"]["labels"] == {"team": "payments"}
    assert created["metadata"]["annotations"] == {"owner": "ops@example.com"}
    shown = cli.run("pipeline", "get", "orders").stdout
    assert "labels: team=payments" in shown and "annotations: owner=ops@example.com" in shown
    assert "bounded: no; append-only: no" in shown
    assert (
        "'team' is not KEY=VALUE"
        in cli.run("pipeline", "create", "other", "--job", str(cli.job), "--label", "team", code=2).stderr
    )
    cli.set_phase("orders", "RUNNING")
    said = cli.run("savepoint", "create", "orders", "--name", "before-upgrade").stdout
    assert said.startswith("requested savepoint before-upgrade (")
    assert "savepoint before-upgrade (" in cli.run("savepoint", "get", "orders", "before-upgrade").stdout
    listing = cli.run("savepoint", "list", "orders").stdout
    assert listing.splitlines()[0].split()[:2] == ["NAME", "UID"] and "before-upgrade" in listing
    uid = cli.json("savepoint", "get", "orders", "before-upgrade")["metadata"]["uid"]
    cli.plane.store.finish_savepoint(uid, "COMPLETED")
    assert cli.json("pipeline", "stop", "orders")["metadata"]["labels"] == {"team": "payments"}
    replay = cli.json(
        "replay", "again", "--like", "orders", "--from-savepoint", "orders/before-upgrade", "--stopped"
    )
    assert replay["spec"]["startFrom"] == {"savepoint": uid}
    cli.run("savepoint", "delete", "orders", "before-upgrade", "--force")
    names = [s["metadata"]["name"] for s in cli.json("savepoint", "list", "orders")]
    assert "before-upgrade" not in names and all(n.startswith("upgrade-") for n in names), names
