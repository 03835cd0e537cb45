"""A real Kafka Connect worker (distributed mode) with the Debezium connectors, for end-to-end tests.

The worker's jars and its plugins come from Maven Central through ``jars/connect/pom.xml``, cached
in ``<repo>/.cache/connect`` (``$FERRY_CONNECT_CACHE`` moves it): the worker's classpath is
``<cache>/lib/*``, and every plugin archive the pom lists (a ``.tar.gz`` or ``.zip`` holding one
folder of jars) is unpacked into ``<cache>/plugins/<folder>``, the worker's ``plugin.path``. A
plugin is added by adding its archive to the pom.

The worker runs against an existing Kafka broker: its config, offset and status topics have names
of its own, its REST API listens on a free port of 127.0.0.1. Connectors are created, inspected
and deleted through that API::

    with KafkaConnect(broker.bootstrap_servers) as connect:
        connect.create_connector("inventory", {"connector.class": "...", ...})
        connect.wait_running("inventory")
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.local.ports import HOST
from tests.support.waiting import wait_for

__all__ = [
    "CACHE_ENV",
    "KafkaConnect",
    "KafkaConnectError",
    "default_cache_dir",
    "ensure_jars",
    "ensure_plugins",
    "wait_until",
]

CACHE_ENV = "FERRY_CONNECT_CACHE"
"""Environment variable that moves the cache folder (``lib/`` and ``plugins/`` go inside it)."""

KEEP_DATA_ENV = "FERRY_CONNECT_KEEP_DATA"
"""Set to ``1`` to keep the worker's data directory (its log and configuration) after it stops."""

POM_RELATIVE_PATH = jvm.POM_FOLDER / "connect" / "pom.xml"
REQUIRED_JAR_PREFIXES = (
    "connect-runtime-",
    "connect-json-",
    "connect-transforms-",
    "kafka-clients-",
    "log4j-core-",
    "log4j-slf4j-impl-",
)
PLUGIN_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
PLUGINS_STAMP_FILE = ".ferry-plugin-archives"

_T = TypeVar("_T")


class KafkaConnectError(FerryError):
    """The Kafka Connect worker could not be fetched, started or reached, or a connector failed."""


_JARS = jvm.MavenJars("Kafka Connect", POM_RELATIVE_PATH, CACHE_ENV, REQUIRED_JAR_PREFIXES, KafkaConnectError)


def default_cache_dir() -> Path:
    """``$FERRY_CONNECT_CACHE``, else ``<repo>/.cache/connect``, else ``~/.cache/ferry/connect``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    root = _JARS.repo_root()
    return (root / ".cache" if root is not None else Path.home() / ".cache" / "ferry") / "connect"


def ensure_jars(cache_dir: Path | None = None) -> Path:
    """The worker's jar folder, fetched with Maven when missing (what :meth:`KafkaConnect.start` uses)."""
    return _JARS.ensure((cache_dir or default_cache_dir()).resolve())


def wait_until(condition: Callable[[], _T | None], timeout: float, describe: Callable[[], str]) -> _T:
    """Poll ``condition`` until it returns something other than None or False; raise
    :class:`KafkaConnectError` with ``describe()`` once ``timeout`` is spent."""
    return wait_for(condition, timeout, describe, error=KafkaConnectError)


# --------------------------------------------------------------------------------------------------
# Plugins
# --------------------------------------------------------------------------------------------------


def _archives(lib: Path) -> list[Path]:
    return sorted(p for p in lib.iterdir() if p.is_file() and p.name.endswith(PLUGIN_ARCHIVE_SUFFIXES))


def _archive_stem(archive: Path) -> str:
    for suffix in PLUGIN_ARCHIVE_SUFFIXES:
        if archive.name.endswith(suffix):
            return archive.name[: -len(suffix)]
    return archive.stem


def _unpack(archive: Path, into: Path) -> None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(into)
    else:
        with tarfile.open(archive) as tarred:
            tarred.extractall(into, filter="data")


def ensure_plugins(lib: Path) -> Path:
    """Unpack every plugin archive of ``lib`` into ``<cache>/plugins``, one folder per plugin (the
    archive's single top folder, or the archive's name), and return that folder: Connect's
    ``plugin.path``. Nothing is unpacked again while the archives stay the same."""
    archives = _archives(lib)
    if not archives:
        raise KafkaConnectError(f"no Connect plugin archive ({', '.join(PLUGIN_ARCHIVE_SUFFIXES)}) in {lib}")
    plugins = lib.parent / "plugins"
    stamp = "\n".join(f"{a.name} {a.stat().st_size}" for a in archives) + "\n"

    def unpacked() -> bool:
        try:
            return (plugins / PLUGINS_STAMP_FILE).read_text(encoding="utf-8") == stamp
        except OSError:
            return False

    if unpacked():
        return plugins
    with jvm.file_lock(lib.parent / ".fetch.lock"):
        if unpacked():
            return plugins
        staging = Path(tempfile.mkdtemp(prefix="plugins-unpacking-", dir=lib.parent))
        try:
            for archive in archives:
                scratch = staging / f".{_archive_stem(archive)}"
                _unpack(archive, scratch)
                entries = list(scratch.iterdir())
                if len(entries) == 1 and entries[0].is_dir():
                    entries[0].rename(staging / entries[0].name)
                    scratch.rmdir()
                else:
                    scratch.rename(staging / _archive_stem(archive))
            (staging / PLUGINS_STAMP_FILE).write_text(stamp, encoding="utf-8")
            if plugins.exists():
                shutil.rmtree(plugins)
            staging.rename(plugins)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return plugins


# --------------------------------------------------------------------------------------------------
# The worker
# --------------------------------------------------------------------------------------------------

_QUIET_LOGGERS = (
    "org.apache.kafka.common.config.AbstractConfig",
    "org.apache.kafka.common.utils.AppInfoParser",
    "org.apache.kafka.clients",
    "org.apache.kafka.connect.runtime.isolation",
    "org.reflections",
    "org.eclipse.jetty",
    "io.debezium.connector.common.BaseSourceTask",
)


class KafkaConnect(jvm.JvmService):
    """A Kafka Connect worker in distributed mode, in a child JVM, against ``bootstrap_servers``.

    Its REST API is at :attr:`url`. ``properties`` add to or override the worker properties written
    for it. Stopping it (SIGTERM) stops its connectors' tasks cleanly; the connectors stay
    registered in its config topic.
    """

    error = KafkaConnectError
    title = "the Kafka Connect worker"

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        cache_dir: Path | None = None,
        properties: Mapping[str, str] | None = None,
        startup_timeout: float = 180.0,
        request_timeout: float = 60.0,
        heap_max: str = "1g",
        data_root: Path | None = None,
        keep_data: bool | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.cache_dir = (cache_dir or default_cache_dir()).resolve()
        self.properties: dict[str, str] = dict(properties or {})
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.heap_max = heap_max
        self.data_root = data_root
        self.keep_data = os.environ.get(KEEP_DATA_ENV) == "1" if keep_data is None else keep_data
        self.group_id = f"ferry-connect-{uuid.uuid4().hex[:12]}"
        self.port: int | None = None
        self.data_dir: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the REST API; raises when the worker is not started."""
        return f"http://{self._address(self.port)}"

    @property
    def log_file(self) -> Path | None:
        """The worker's log (JVM stdout and stderr), inside its data directory."""
        return None if self.data_dir is None else self.data_dir / "connect.log"

    def log_tail(self, lines: int = jvm.LOG_TAIL_LINES) -> str:
        return jvm.read_tail(self.log_file, lines)

    def start(self) -> Self:
        """Fetch the jars and unpack the plugins if needed, start the worker and wait until its REST
        API reports it healthy."""
        if self._process is not None:
            raise KafkaConnectError(f"the Kafka Connect worker is already started (pid {self._process.pid})")
        began = time.monotonic()
        lib = ensure_jars(self.cache_dir)
        plugins = ensure_plugins(lib)
        self._start_retrying(lambda: self._start_once(lib, plugins))
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the worker stops its tasks and leaves its group), SIGKILL after ``timeout``
        seconds; remove the data directory unless it is kept."""
        try:
            if self._process is not None:
                jvm.stop_process(self._process, timeout)
        finally:
            self._process = None
            self.port = None
            self._remove_data_dir()

    def worker_properties(self, plugins: Path) -> dict[str, str]:
        assert self.port is not None
        json_converter = "org.apache.kafka.connect.json.JsonConverter"
        props = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "key.converter": json_converter,
            "value.converter": json_converter,
            "config.storage.topic": f"{self.group_id}-configs",
            "offset.storage.topic": f"{self.group_id}-offsets",
            "status.storage.topic": f"{self.group_id}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            # committed source offsets are what tells that a connector's records are all acknowledged
            "offset.flush.interval.ms": "250",
            "listeners": f"http://{HOST}:{self.port}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(self.port),
            "plugin.path": str(plugins),
            "plugin.discovery": "service_load",
            # one worker: a connector is assigned at once, never held back for a returning worker
            "scheduled.rebalance.max.delay.ms": "0",
            "task.shutdown.graceful.timeout.ms": "10000",
            "topic.creation.enable": "true",
        }
        props.update(self.properties)
        return props

    def _start_once(self, lib: Path, plugins: Path) -> None:
        data_dir = self._new_data_dir("ferry-connect-")
        self.port = jvm.free_ports(1)[0]
        config = data_dir / "worker.properties"
        config.write_text(
            "".join(f"{key}={value}\n" for key, value in self.worker_properties(plugins).items()),
            encoding="utf-8",
        )
        log4j = data_dir / "log4j2.xml"
        log4j.write_text(jvm.log4j2_xml("INFO", _QUIET_LOGGERS), encoding="utf-8")
        java = jvm.find_java("Kafka Connect", KafkaConnectError)
        command = [
            java, "-Xms256m", f"-Xmx{self.heap_max}", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", str(lib / "*"), "org.apache.kafka.connect.cli.ConnectDistributed", str(config),
        ]  # fmt: skip
        assert self.log_file is not None
        self._process = jvm.spawn(command, self.log_file, data_dir)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        last = "the REST port never accepted a connection"

        def healthy() -> bool:
            nonlocal last
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise KafkaConnectError(
                    f"the Kafka Connect worker exited with code {code} while starting; {self._log_hint()}:\n"
                    f"{self.log_tail()}"
                )
            assert self.port is not None
            if not jvm.port_open(self.port):
                return False
            status, body = self.request("GET", "/health", expect=None)
            if status == 200 and isinstance(body, dict) and body.get("status") == "healthy":
                return True
            last = f"GET /health answered {status}: {body}"
            if jvm.PORT_TAKEN in self.log_tail():
                raise KafkaConnectError(f"the REST port {self.port} was taken ({jvm.PORT_TAKEN})")
            return False

        try:
            wait_until(healthy, self.startup_timeout, lambda: last)
        except KafkaConnectError as exc:
            if "exited with code" in str(exc) or jvm.PORT_TAKEN in str(exc):
                raise
            raise KafkaConnectError(
                f"the Kafka Connect worker was not healthy within {self.startup_timeout:.0f} s ({last}); "
                f"{self._log_hint()}:\n{self.log_tail()}"
            ) from None

    def _log_hint(self) -> str:
        if self.keep_data:
            return f"log {self.log_file}"
        return f"end of its log (set {KEEP_DATA_ENV}=1 to keep the whole log)"

    # -- REST API --------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, *, expect: tuple[int, ...] | None = (200,)
    ) -> tuple[int, Any]:
        """One call of the REST API: (status, decoded JSON body or None). With ``expect``, another
        status raises :class:`KafkaConnectError` naming the call and the answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout) as answer:
                status, raw = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            if expect is None:
                return 0, str(exc)
            raise KafkaConnectError(f"{method} {path} on the Kafka Connect worker failed: {exc}") from exc
        decoded: Any = None
        if raw:
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = raw.decode("utf-8", errors="replace")
        if expect is not None and status not in expect:
            raise KafkaConnectError(f"{method} {path} answered {status}: {decoded}")
        return status, decoded

    def plugins(self) -> list[dict[str, Any]]:
        """The connector plugins the worker found."""
        return list(self.request("GET", "/connector-plugins?connectorsOnly=false")[1])

    def connectors(self) -> list[str]:
        return list(self.request("GET", "/connectors")[1])

    def create_connector(self, name: str, config: Mapping[str, str], timeout: float = 60.0) -> None:
        """Create (or reconfigure) connector ``name``; retried while the worker is rebalancing."""
        path = f"/connectors/{urllib.parse.quote(name, safe='')}/config"
        answers: list[str] = []

        def created() -> bool:
            status, body = self.request("PUT", path, {"name": name, **config}, expect=None)
            if status in (200, 201):
                return True
            answers.append(f"{status}: {body}")
            if status in (409, 503, 0):  # a rebalance or the worker still starting: try again
                return False
            raise KafkaConnectError(f"creating connector {name!r} failed ({status}): {body}")

        wait_until(created, timeout, lambda: f"connector {name!r} created (last answer {answers[-1:]})")

    def delete_connector(self, name: str, timeout: float = 60.0) -> None:
        """Delete connector ``name`` (its committed offsets stay in the offset topic); a connector
        that does not exist is fine."""
        path = f"/connectors/{urllib.parse.quote(name, safe='')}"

        def deleted() -> bool:
            status, body = self.request("DELETE", path, expect=None)
            if status in (200, 204, 404):
                return True
            if status in (409, 503, 0):
                return False
            raise KafkaConnectError(f"deleting connector {name!r} failed ({status}): {body}")

        wait_until(deleted, timeout, lambda: f"connector {name!r} deleted")

    def pause_connector(self, name: str, timeout: float = 60.0) -> None:
        """Pause connector ``name`` and wait until its tasks are PAUSED (they stop reading their
        source; :meth:`resume_connector` goes on from where they were)."""
        self._set_state(name, "pause", "PAUSED", timeout)

    def resume_connector(self, name: str, timeout: float = 60.0) -> None:
        """Resume a paused connector and wait until its tasks are RUNNING."""
        self._set_state(name, "resume", "RUNNING", timeout)

    def _set_state(self, name: str, action: str, state: str, timeout: float) -> None:
        self.request(
            "PUT", f"/connectors/{urllib.parse.quote(name, safe='')}/{action}", expect=(200, 202, 204)
        )
        seen: list[Any] = [None]

        def reached() -> bool:
            status = self.connector_status(name)
            seen[0] = status
            if status is None:
                return False
            states = [status.get("connector", {}), *status.get("tasks", [])]
            return all(s.get("state") == state for s in states)

        wait_until(reached, timeout, lambda: f"connector {name!r} {state} (status {seen[0]})")

    def connector_status(self, name: str) -> dict[str, Any] | None:
        """``GET /connectors/<name>/status``, or None while the worker does not know it yet."""
        status, body = self.request(
            "GET", f"/connectors/{urllib.parse.quote(name, safe='')}/status", expect=(200, 404)
        )
        return body if status == 200 else None

    def wait_running(self, name: str, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until connector ``name`` and all its tasks (at least one) are RUNNING; a FAILED
        connector or task raises at once with its trace."""
        seen: list[Any] = [None]

        def running() -> dict[str, Any] | None:
            status = self.connector_status(name)
            seen[0] = status
            if status is None:
                return None
            states = [("connector", status.get("connector", {}))] + [
                (f"task {t.get('id')}", t) for t in status.get("tasks", [])
            ]
            for what, state in states:
                if state.get("state") == "FAILED":
                    raise KafkaConnectError(
                        f"connector {name!r}: {what} FAILED on {state.get('worker_id')}:\n"
                        f"{jvm.tail(str(state.get('trace', '')), 40)}"
                    )
            if status.get("tasks") and all(state.get("state") == "RUNNING" for _, state in states):
                return status
            return None

        return wait_until(running, timeout, lambda: f"connector {name!r} RUNNING (status {seen[0]})")

    def committed_offsets(self, name: str) -> list[dict[str, Any]]:
        """The source offsets connector ``name`` has committed, per source partition: each
        ``{"partition": {...}, "offset": {...}}``. Connect commits an offset only once every record
        before it is acknowledged by the broker."""
        body = self.request("GET", f"/connectors/{urllib.parse.quote(name, safe='')}/offsets")[1]
        return list(body.get("offsets", []))

    def fail_if_failed(self, name: str) -> None:
        """Raise with the trace when connector ``name`` or one of its tasks has FAILED."""
        status = self.connector_status(name)
        if status is None:
            return
        for state in [status.get("connector", {}), *status.get("tasks", [])]:
            if state.get("state") == "FAILED":
                raise KafkaConnectError(
                    f"connector {name!r} FAILED:\n{jvm.tail(str(state.get('trace', '')), 40)}"
                )

    def __repr__(self) -> str:
        where = self.url if self.port is not None else "not started"
        return f"KafkaConnect({where})"
