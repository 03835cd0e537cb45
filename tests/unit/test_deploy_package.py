"""The wheel a fresh clone builds: its distribution name, its command, its extras and its files."""

from __future__ import annotations

import ast
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
SUPPORT = ROOT / "tests" / "support"

#: What the product itself runs locally (``make demo``, ``scripts/kafka``, the benchmark), and all
#: that ships of it: a Kafka broker and its JVM and port helpers, the Debezium event generator.
LOCAL_MODULES = {"__init__", "kafka_broker", "jvm", "ports", "debezium"}
#: What a module of ``ferry.local`` may import at its top besides the standard library and ferry.
LOCAL_IMPORTS = {"confluent_kafka", "orjson"}
#: The services only the tests run, in ``tests/support/``: PostgreSQL, MariaDB, the Fluss cluster,
#: the stand-ins for Stream Load and MaxCompute, the HTTP server under those, Kafka Connect, the
#: schema registry, the Iceberg REST catalog server, the Hive Metastore.
TEST_SERVICES = (
    "iceberg_rest",
    "hive_metastore",
    "postgres",
    "mariadb",
    "fluss",
    "stream_load",
    "maxcompute",
    "http_server",
    "connect",
    "registry",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """The wheel ``python -m build --wheel`` builds from a copy of the tree (setuptools writes its
    build folders beside the sources), offline: the build backend is the one installed."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src" / "ferry", tree / "src" / "ferry", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tree / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(tree)]
    result = subprocess.run(command, check=False, cwd=tree, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    [built] = out.glob("*.whl")
    archive = zipfile.ZipFile(built)
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


def _modules(wheel: zipfile.ZipFile) -> dict[str, ast.Module]:
    """Every Python module in the wheel, by its path, parsed."""
    return {n: ast.parse(wheel.read(n), n) for n in wheel.namelist() if n.endswith(".py")}


def _top_level_imports(module: ast.Module) -> set[str]:
    """The top-level packages a module imports at its top (not inside functions)."""
    names: set[str] = set()
    for node in module.body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_wheel_ships_every_module_of_the_package(wheel: zipfile.ZipFile) -> None:
    in_tree = {
        p.relative_to(ROOT / "src").as_posix()
        for p in (ROOT / "src" / "ferry").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    shipped = {n for n in wheel.namelist() if n.endswith(".py")}
    assert shipped == in_tree
    # what the demo, `ferry serve` and the memory pipelines run
    assert {
        "ferry/demo.py",
        "ferry/connectors/memory.py",
        "ferry/sinks/memory.py",
        *(f"ferry/local/{name}.py" for name in LOCAL_MODULES),
    } <= shipped


def test_the_wheel_ships_no_test_service(wheel: zipfile.ZipFile) -> None:
    modules = _modules(wheel)
    assert {n.split("/")[1] for n in modules if n.count("/") > 1} >= {"local", "sinks", "pipeline"}
    assert not [n for n in modules if n.startswith("ferry/testing/")]
    assert {
        n.removeprefix("ferry/local/").removesuffix(".py") for n in modules if n.startswith("ferry/local/")
    } == (LOCAL_MODULES)
    # the public classes of the test services are defined nowhere in the wheel
    service_classes: dict[str, str] = {}
    for name in TEST_SERVICES:
        path = SUPPORT / f"{name}.py"
        assert path.is_file(), f"{path} is gone: update TEST_SERVICES"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        service_classes.update(
            {n.name: name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")}
        )
    assert {"PostgresServer", "MariaDbServer", "FlussCluster", "StreamLoadServer", "MaxComputeServer"} <= set(
        service_classes
    )
    shipped_classes = {
        (node.name, path)
        for path, module in modules.items()
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef) and node.name in service_classes
    }
    assert not shipped_classes, f"test services in the wheel: {sorted(shipped_classes)}"


def test_no_shipped_module_imports_the_tests(wheel: zipfile.ZipFile) -> None:
    importing = sorted(
        path
        for path, module in _modules(wheel).items()
        for node in ast.walk(module)
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tests" for a in node.names))
        or (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "tests"
        )
    )
    assert not importing


def test_the_local_services_import_only_the_standard_library_kafka_and_ferry(wheel: zipfile.ZipFile) -> None:
    """A module of ``ferry.local`` loads with ferry's core dependencies only: no pyodps, sqlglot or
    database driver at its top."""
    allowed = set(sys.stdlib_module_names) | LOCAL_IMPORTS | {"ferry", "__future__"}
    for path, module in _modules(wheel).items():
        if path.startswith("ferry/local/"):
            imported = _top_level_imports(module)
            assert imported <= allowed, f"{path} imports {sorted(imported - allowed)} at its top"
            assert not imported & {"odps", "sqlglot", "pymysql", "psycopg", "fluss"}
