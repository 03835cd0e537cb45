"""``make kafka-start`` (``scripts/kafka start --prefer-port 9092``): the broker listens on the
port asked for when it is free, and says which address to export when it is not."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local.kafka_broker import create_topic
from ferry.local.ports import HOST, free_ports

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def kafka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry.local.kafka_broker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def start_and_stop(state_file: Path, port: int) -> tuple[str, str]:
    """The address ``start --prefer-port port`` prints and what it says, once the broker answered."""
    started = kafka("start", "--prefer-port", str(port), "--state-file", str(state_file))
    try:
        assert started.returncode == 0, started.stderr
        address = started.stdout.strip()
        create_topic(address, "kafka-start-check")  # the broker answers there
        return address, started.stderr
    finally:
        stopped = kafka("stop", "--state-file", str(state_file))
        assert stopped.returncode == 0, stopped.stderr


def test_the_broker_listens_on_the_preferred_port_when_it_is_free(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    address, said = start_and_stop(tmp_path / "broker.json", port)
    assert address == f"{HOST}:{port}"
    assert "is taken" not in said


def test_a_taken_port_is_said_with_the_address_to_export(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        address, said = start_and_stop(tmp_path / "broker.json", port)
    assert address != f"{HOST}:{port}" and address.startswith(f"{HOST}:")
    assert f"port {port} is taken" in said
    assert f"export KAFKA_BOOTSTRAP_SERVERS={address}" in said


def test_the_demo_writes_no_raw_librdkafka_line(tmp_path: Path) -> None:
    """``make demo``'s run: its own lines and the tables; librdkafka's warnings and errors, if any,
    as ferry's log lines, never librdkafka's own ``%4|...|rdkafka#producer-1|`` lines."""
    result = subprocess.run(
        [sys.executable, "-m", "ferry.demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    raw = [line for line in (result.stdout + result.stderr).splitlines() if "|rdkafka#" in line]
    assert not raw, raw
    assert "== Iceberg table inventory.orders ==" in result.stdout
