"""The Makefile's first-contact targets, as ``make -n`` prints them for a virtual environment that
does not exist yet: what each installs and that each step says what it does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, venv: Path) -> list[str]:
    make = shutil.which("make")
    assert make is not None
    result = subprocess.run(
        # no "Entering directory" lines when the suite itself runs under make (make test)
        [make, "-n", "--no-print-directory", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.splitlines()


def installs(lines: list[str]) -> list[str]:
    return [line.split(" install ", 1)[1] for line in lines if "/pip " in line and " install " in line]


@pytest.mark.parametrize(("target", "extras"), [("demo", ".[iceberg]"), ("test", ".[dev]")])
def test_what_each_target_installs(target: str, extras: str, tmp_path: Path) -> None:
    lines = dry_run(target, tmp_path / "venv")
    assert installs(lines) == ["--upgrade pip", f"-e '{extras}'"]
    for line in lines:
        if "/pip " in line:
            assert "--quiet" in line
    # no notice of setuptools' experimental ext-modules table either: the C module is in setup.py
    assert "tool.setuptools.ext-modules" not in (ROOT / "pyproject.toml").read_text()
    # a line that says what comes before every step of the install
    steps = [n for n, line in enumerate(lines) if "/pip " in line or " -m venv " in line]
    assert steps and all(lines[n - 1].startswith('echo "==> ') for n in steps), lines


def test_the_demo_reuses_what_the_test_install_installed(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    for stamp in (".installed", ".installed-demo"):
        (venv / stamp).touch()
    assert installs(dry_run("demo", venv)) == []


def test_kafka_start_prefers_the_port_the_demo_job_defaults_to(tmp_path: Path) -> None:
    lines = dry_run("kafka-start", tmp_path / "venv")
    assert lines[-1] == "scripts/kafka start --prefer-port 9092"
    assert "${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:9092}" in (ROOT / "configs" / "demo.yaml").read_text()
