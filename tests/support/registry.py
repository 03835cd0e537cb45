"""A real schema registry for the tests of the Avro formats: Apicurio Registry, with its
Confluent-compatible API (``/apis/ccompat/v7``) and its schemas in an in-memory H2 database.

Apicurio Registry is a Quarkus application; Maven Central has its classes and dependencies as
plain jars. ``jars/registry/pom.xml`` unpacks the application jar and lets the Quarkus Maven
plugin build the runnable application from it, once, into ``<repo>/.cache/registry/app`` (stamped
with the pom's SHA-256, so that a changed pom builds again; ``FERRY_REGISTRY_CACHE`` moves the
folder). Each registry is a child JVM on a free port of 127.0.0.1 with a data directory of its
own; it starts in about five seconds::

    with SchemaRegistry() as registry:
        client = SchemaRegistryClient({"url": registry.url})
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.local.jvm import HOST
from tests.support.waiting import Deadline

__all__ = ["SchemaRegistry", "SchemaRegistryError", "converter_plugin_path", "ensure_application"]

CACHE_ENV = "FERRY_REGISTRY_CACHE"
POM = jvm.POM_FOLDER / "registry" / "pom.xml"
RUNNER = "ferry-schema-registry-0.1.0-runner.jar"
#: The Confluent-compatible API, relative to the registry's root.
CCOMPAT_PATH = "/apis/ccompat/v7"


class SchemaRegistryError(FerryError):
    """The schema registry could not be built, started or stopped."""


def _repo_root() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / POM).is_file():
            return folder
    raise SchemaRegistryError(f"{POM} not found above {Path(__file__).parent}")


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).resolve() if configured else _repo_root() / ".cache" / "registry"


def ensure_application(cache_dir: Path | None = None, *, timeout: float = 1800.0) -> Path:
    """The folder of the runnable registry (its runner jar and ``lib/``), built with Maven when it
    is missing or was built from another version of the pom."""
    cache = (cache_dir or default_cache_dir()).resolve()
    app = cache / "app"
    pom = _repo_root() / POM
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if _built(app, digest):
        return app
    cache.mkdir(parents=True, exist_ok=True)
    with jvm.file_lock(cache / ".build.lock"):
        if not _built(app, digest):
            _build(pom, digest, cache, app, timeout)
    return app


def _built(app: Path, digest: str) -> bool:
    try:
        stamp = (app / jvm.STAMP_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return stamp == digest and (app / RUNNER).is_file() and (app / "lib").is_dir()


def _build(pom: Path, digest: str, cache: Path, app: Path, timeout: float) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SchemaRegistryError("Maven (mvn) is not on PATH; it builds the schema registry once")
    staging = Path(tempfile.mkdtemp(prefix="app-building-", dir=cache))
    try:
        command = [mvn, "-q", "-B", "-f", str(pom), f"-Dregistry.build.dir={staging}", "package"]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, check=False, cwd=pom.parent
            )
        except subprocess.TimeoutExpired as exc:
            raise SchemaRegistryError(
                f"Maven did not build the schema registry within {timeout:.0f} s"
            ) from exc
        if result.returncode != 0 or not (staging / RUNNER).is_file():
            raise SchemaRegistryError(
                f"Maven failed (exit {result.returncode}) to build the schema registry with "
                f"{' '.join(command)}:\n{jvm.tail(result.stdout + result.stderr)}"
            )
        (staging / jvm.STAMP_FILE).write_text(digest + "\n", encoding="utf-8")
        if app.exists():
            shutil.rmtree(app)
        staging.rename(app)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


#: Apicurio's Avro converter for Kafka Connect, a plugin folder of jars.
_CONVERTER_JARS = jvm.MavenJars(
    "Apicurio converter",
    jvm.POM_FOLDER / "registry" / "converter" / "pom.xml",
    CACHE_ENV,
    ("apicurio-registry-utils-converter-", "apicurio-registry-serdes-avro-serde-", "avro-"),
    SchemaRegistryError,
)


#: Declares the converter to Connect's ``plugin.discovery=service_load``: Apicurio's 2.x jars
#: carry no ``META-INF/services`` entry of their own.
_SERVICES_JAR = "ferry-apicurio-converter-services.jar"
_SERVICE = "META-INF/services/org.apache.kafka.connect.storage.Converter"
_CONVERTER_CLASS = "io.apicurio.registry.utils.converter.AvroConverter"


def converter_plugin_path(cache_dir: Path | None = None) -> Path:
    """A Kafka Connect ``plugin.path`` entry that holds Apicurio's Avro converter (one plugin
    folder of jars, fetched once from Maven Central, with a service declaration jar)."""
    lib = _CONVERTER_JARS.ensure(cache_dir or default_cache_dir() / "converter")
    services = lib / _SERVICES_JAR
    if not services.is_file():
        staging = lib / f".{_SERVICES_JAR}.{os.getpid()}"
        with zipfile.ZipFile(staging, "w") as jar:
            jar.writestr(_SERVICE, _CONVERTER_CLASS + "\n")
        staging.replace(services)
    return lib.parent


class SchemaRegistry(jvm.JvmService):
    """Apicurio Registry in a child JVM; :attr:`url` is its Confluent-compatible API."""

    error = SchemaRegistryError
    title = "the schema registry"

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        startup_timeout: float = 120.0,
        data_root: Path | None = None,
        keep_data: bool = False,
    ) -> None:
        self.cache_dir = cache_dir
        self.startup_timeout = startup_timeout
        self.data_root = data_root
        self.keep_data = keep_data
        self.data_dir: Path | None = None
        self.port: int | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self._address(self.port)}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what a Confluent client takes as ``url``."""
        return self.root_url + CCOMPAT_PATH

    def converter_settings(self, side: str = "value") -> dict[str, str]:
        """Kafka Connect worker settings for the ``side`` (``key`` or ``value``) converter:
        Apicurio's Avro converter registering schemas in this registry and writing the Confluent
        wire format (the 4-byte id is the content id, which the Confluent-compatible API serves)."""
        prefix = f"{side}.converter"
        return {
            prefix: _CONVERTER_CLASS,
            f"{prefix}.apicurio.registry.url": f"{self.root_url}/apis/registry/v2",
            f"{prefix}.apicurio.registry.auto-register": "true",
            f"{prefix}.apicurio.registry.find-latest": "true",
            f"{prefix}.apicurio.registry.as-confluent": "true",
            f"{prefix}.apicurio.registry.use-id": "contentId",
        }

    @property
    def log_file(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "registry.log"

    def start(self) -> Self:
        if self._process is not None:
            raise SchemaRegistryError(f"the schema registry is already started (pid {self._process.pid})")
        began = time.monotonic()
        app = ensure_application(self.cache_dir)
        self._start_retrying(lambda: self._start_once(app))
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        try:
            if self._process is not None:
                jvm.stop_process(self._process, timeout)
        finally:
            self._process = None
            self.port = None
            self._remove_data_dir()

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = jvm.LOG_TAIL_LINES) -> str:
        return jvm.read_tail(self.log_file, lines)

    def __repr__(self) -> str:
        where = self.root_url if self.port is not None else "not started"
        return f"SchemaRegistry({where})"

    def _start_once(self, app: Path) -> None:
        self.port = jvm.free_ports(1)[0]
        self._check_ports_free((self.port,))
        data_dir = self._new_data_dir("ferry-registry-")
        java = jvm.find_java("the schema registry", SchemaRegistryError)
        command = [
            java, "-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={self.port}",
            # Fewer idle database connections than the production default of 20.
            "-Dquarkus.datasource.jdbc.min-size=1", "-Dquarkus.datasource.jdbc.initial-size=1",
            "-jar", str(app / RUNNER),
        ]  # fmt: skip
        self._process = jvm.spawn(command, data_dir / "registry.log", data_dir)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Ready when the Confluent-compatible API lists subjects (the storage is initialised)."""
        assert self._process is not None
        deadline = Deadline(self.startup_timeout)
        last_error = "its port never accepted a connection"
        while True:
            code = self._process.poll()
            if code is not None:
                message = f"the schema registry exited with code {code} while starting"
                raise SchemaRegistryError(f"{message}:\n{self.log_tail()}")
            if deadline.expired():
                raise SchemaRegistryError(
                    f"the schema registry was not ready within {self.startup_timeout:.0f} s "
                    f"({last_error}):\n{self.log_tail()}"
                )
            assert self.port is not None
            if not jvm.port_open(self.port):
                time.sleep(0.1)
                continue
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=5) as response:
                    if response.status == 200:
                        return
                    last_error = f"GET /subjects answered {response.status}"
            except (urllib.error.URLError, OSError) as exc:
                last_error = f"GET /subjects failed: {exc}"
            time.sleep(0.1)


# --------------------------------------------------------------------------------------------------
# The pytest fixture (this module is a plugin of ``tests/conftest.py``)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """A real schema registry (Apicurio Registry) on 127.0.0.1, shared by the whole session:
    ``schema_registry.url`` is its Confluent-compatible API."""
    with SchemaRegistry() as registry:
        yield registry
