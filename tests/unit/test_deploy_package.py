"""The wheel a fresh clone builds: its distribution name, its command, its extras and its files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest

import ferry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """The wheel built from a copy of the tree (setuptools writes its build folders beside the
    sources), offline: the build backend is the one installed."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src" / "ferry", tree / "src" / "ferry", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tree / "dist"
    build = "import sys, setuptools.build_meta as b; print(b.build_wheel(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", build, str(out)],
        check=False,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    name = result.stdout.strip().splitlines()[-1]
    archive = zipfile.ZipFile(out / name)
    yield archive
    archive.close()


def _dist_info(wheel: zipfile.ZipFile, file: str) -> str:
    [path] = [n for n in wheel.namelist() if n.endswith(f".dist-info/{file}")]
    return wheel.read(path).decode()


def test_the_wheel_is_published_under_a_name_of_its_own(wheel: zipfile.ZipFile) -> None:
    metadata = Parser().parsestr(_dist_info(wheel, "METADATA"))
    assert metadata["Name"] == ferry.DISTRIBUTION == "ferry-cdc"
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"iceberg", "avro", "postgres", "server", "all"} <= extras
    assert "hologres" not in extras, "hologres and postgres install the same driver: one extra"
    requires = metadata.get_all("Requires-Dist") or []
    assert any(r.startswith("prometheus-client") and "extra" not in r for r in requires)
    # the extras the package names in its own dependencies carry its own name
    assert not [r for r in requires if r.startswith("ferry[")], requires


def test_the_wheel_installs_the_ferry_command_and_only_the_ferry_package(wheel: zipfile.ZipFile) -> None:
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert "[console_scripts]\nferry = ferry.cli.main:main" in entry_points
    top = {n.split("/")[0] for n in wheel.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"ferry"}
    names = set(wheel.namelist())
    assert {"ferry/py.typed", "ferry/cli/main.py", "ferry/api/status.py"} <= names
    assert any(n.startswith("ferry/sinks/fluss/") and n.endswith(".java") for n in names)


def test_the_installed_distribution_is_the_one_the_package_names() -> None:
    assert ferry.version() != "0+unknown"
    assert ferry.install_hint("iceberg") == "pip install 'ferry-cdc[iceberg]'"
