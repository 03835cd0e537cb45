"""A real local Apache Fluss cluster for tests: ZooKeeper, one CoordinatorServer, one TabletServer.

The jars come from Maven Central through ``docker/fluss/pom.xml`` and are cached in
``<repo>/.cache/fluss/lib`` (the cache folder can be moved with the ``FERRY_FLUSS_CACHE``
environment variable; the jars then live in ``$FERRY_FLUSS_CACHE/lib``). ``fluss-server`` and
``fluss-client`` are self-contained (shaded) jars; ZooKeeper is the ``org.apache.zookeeper``
server. Each process is a JVM of its own on free ports of 127.0.0.1, with its configuration, data
and log in one temporary directory, so several clusters can run side by side. The JVMs get
SIGTERM when this Python process dies.

In-process use (the ``fluss_cluster`` pytest fixture uses this)::

    with FlussCluster() as cluster:
        cluster.bootstrap_servers          # "127.0.0.1:PORT", the CoordinatorServer
        client_classpath()                 # the Java client's jars (the sink adds columns with it)

From a shell::

    python -m ferry.testing.fluss fetch    # fetch the jars (if not cached); print their folder
    python -m ferry.testing.fluss run      # run a cluster until Ctrl-C; print its bootstrap address
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ferry.exceptions import FerryError

__all__ = [
    "FlussCluster",
    "FlussClusterError",
    "client_classpath",
    "default_cache_dir",
    "drop_database",
    "ensure_jars",
    "find_pom",
    "main",
    "read_rows",
    "shared_cluster",
    "stop_shared_cluster",
    "with_connection",
]

CACHE_ENV = "FERRY_FLUSS_CACHE"
"""Environment variable that moves the jar cache folder (jars go to ``$FERRY_FLUSS_CACHE/lib``)."""

KEEP_DATA_ENV = "FERRY_FLUSS_KEEP_DATA"
"""Set to ``1`` to keep a cluster's directory (configuration, logs, data) after it stops."""

POM_RELATIVE_PATH = Path("docker") / "fluss" / "pom.xml"
STAMP_FILE = ".ferry-pom-sha256"
SERVER_JAR = "fluss-server-"
CLIENT_JAR = "fluss-client-"
REQUIRED_JAR_PREFIXES = (
    SERVER_JAR,
    CLIENT_JAR,
    "zookeeper-",
    "zookeeper-jute-",
    "metrics-core-",
    "snappy-java-",
    "log4j-core-",
    "log4j-slf4j-impl-",
)
LOG_TAIL_LINES = 60
HOST = "127.0.0.1"
#: What the CoordinatorServer logs when it learns of a TabletServer (at its start, or later), for
#: when the Python client is not installed to ask it.
TABLET_SERVER_SEEN = ("Received CHILD_ADDED event for server", "New tablet server callback for tablet server")
#: Arrow (inside Fluss) reads direct buffers through reflection, which Java 17 must allow.
_JVM_OPENS = ("--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED")
_COORDINATOR_MAIN = "org.apache.fluss.server.coordinator.CoordinatorServer"
_TABLET_MAIN = "org.apache.fluss.server.tablet.TabletServer"
_ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class FlussClusterError(FerryError):
    """The local Fluss cluster could not be fetched, started or stopped."""


# --------------------------------------------------------------------------------------------------
# Small process and network helpers
# --------------------------------------------------------------------------------------------------


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so that concurrent sessions do not fetch into the cache at once."""
    import fcntl  # noqa: PLC0415 - POSIX only, needed only while fetching

    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (all held open together, so they differ)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _parent_death_hook() -> Callable[[], None] | None:
    """A pre-exec hook that makes the child get SIGTERM when this process dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent already died between fork and prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


# --------------------------------------------------------------------------------------------------
# Jars
# --------------------------------------------------------------------------------------------------


def _repo_root() -> Path | None:
    """The checkout that holds ``docker/fluss/pom.xml``: searched from this file, then from the cwd."""
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / POM_RELATIVE_PATH).is_file():
                return folder
    return None


def find_pom() -> Path | None:
    """The pom that lists the cluster's jars, or None when no checkout of the project can be found."""
    root = _repo_root()
    return None if root is None else root / POM_RELATIVE_PATH


def default_cache_dir() -> Path:
    """``$FERRY_FLUSS_CACHE`` if set, else ``<repo>/.cache/fluss``, else ``~/.cache/ferry/fluss``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    root = _repo_root()
    if root is not None:
        return root / ".cache" / "fluss"
    return Path.home() / ".cache" / "ferry" / "fluss"


def _jars(lib: Path) -> list[Path]:
    return sorted(p for p in lib.iterdir() if p.name.endswith(".jar")) if lib.is_dir() else []


def _complete(lib: Path) -> bool:
    names = [jar.name for jar in _jars(lib)]
    return all(any(name.startswith(prefix) for name in names) for prefix in REQUIRED_JAR_PREFIXES)


def _read_stamp(lib: Path) -> str | None:
    try:
        return (lib / STAMP_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def ensure_jars(cache_dir: Path | None = None, *, pom: Path | None = None, timeout: float = 1800.0) -> Path:
    """Make sure the cluster's jars are in ``<cache_dir>/lib`` and return that folder.

    They are fetched with Maven when the folder is missing, incomplete, or was filled from another
    version of the pom; otherwise nothing is fetched. Outside a checkout (no pom) a complete folder
    is used as it is.
    """
    cache = (cache_dir or default_cache_dir()).resolve()
    lib = cache / "lib"
    pom = pom or find_pom()
    if pom is None:
        if _complete(lib):
            return lib
        raise FlussClusterError(
            f"Fluss jars are missing from {lib} and {POM_RELATIVE_PATH} cannot be found to fetch them: "
            f"run from a checkout of ferry, or point {CACHE_ENV} at a folder whose lib/ holds the jars"
        )
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if _complete(lib) and _read_stamp(lib) == digest:
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache / ".fetch.lock"):
        if _complete(lib) and _read_stamp(lib) == digest:
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FlussClusterError(
                f"Maven (mvn) is not on PATH; it is needed once to fetch the Fluss jars into {lib}"
            )
        staging = Path(tempfile.mkdtemp(prefix="lib-fetching-", dir=cache))
        try:
            print(f"Fetching Apache Fluss jars with Maven into {lib} ...", file=sys.stderr, flush=True)
            command = [
                mvn, "-q", "-B", "-f", str(pom.resolve()), "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
            ]  # fmt: skip
            try:
                result = subprocess.run(
                    command, capture_output=True, text=True, timeout=timeout, check=False, cwd=pom.parent
                )
            except subprocess.TimeoutExpired as exc:
                raise FlussClusterError(f"Maven did not fetch the Fluss jars within {timeout:.0f} s") from exc
            if result.returncode != 0:
                raise FlussClusterError(
                    f"Maven failed (exit {result.returncode}) to fetch the Fluss jars with "
                    f"{' '.join(command)}:\n{_tail(result.stdout + result.stderr)}"
                )
            if not _complete(staging):
                found = ", ".join(jar.name for jar in _jars(staging)) or "nothing"
                raise FlussClusterError(
                    f"Maven ran but the Fluss jars are incomplete; expected jars starting with "
                    f"{', '.join(REQUIRED_JAR_PREFIXES)}, found: {found}"
                )
            (staging / STAMP_FILE).write_text(digest + "\n", encoding="utf-8")
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return lib


def _server_classpath(lib: Path) -> str:
    """The Fluss servers: their shaded jar and the Log4j 2 binding of the slf4j it bundles."""
    jars = [j for j in _jars(lib) if j.name.startswith((SERVER_JAR, "log4j-"))]
    return os.pathsep.join(str(j) for j in jars)


def _zookeeper_classpath(lib: Path) -> str:
    """ZooKeeper: every jar but Fluss's own."""
    jars = [j for j in _jars(lib) if not j.name.startswith((SERVER_JAR, CLIENT_JAR))]
    return os.pathsep.join(str(j) for j in jars)


def client_classpath(cache_dir: Path | None = None) -> list[Path]:
    """The jars of the Fluss Java client (fetched if needed): the Fluss sink's ``alter-table.classpath``."""
    lib = ensure_jars(cache_dir)
    return [j for j in _jars(lib) if j.name.startswith(CLIENT_JAR)]


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise FlussClusterError(
            "Java is not installed (no java on PATH and no JAVA_HOME); Fluss needs Java 17+"
        )
    return java


def _zookeeper_ok(port: int) -> bool:
    """ZooKeeper answers ``imok`` to the ``ruok`` four-letter word once it serves clients."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


# --------------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------------

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="STDOUT" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="INFO">
      <AppenderRef ref="STDOUT"/>
    </Root>
    <Logger name="org.apache.zookeeper" level="WARN"/>
    <Logger name="org.apache.fluss.shaded" level="WARN"/>
  </Loggers>
</Configuration>
"""


class FlussCluster:
    """ZooKeeper, a CoordinatorServer and a TabletServer in child JVMs; clients use :attr:`bootstrap_servers`.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. ``properties`` add to or
    override the ``server.yaml`` of both Fluss servers. With ``sasl_users`` (user → password) each
    server also listens on a SASL/PLAIN listener for those users: :attr:`sasl_bootstrap_servers`.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        properties: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
        heap: str = "512m",
        data_root: Path | None = None,
        keep_data: bool | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.cache_dir = (cache_dir or default_cache_dir()).resolve()
        self.properties = dict(properties or {})
        self.sasl_users = dict(sasl_users or {})
        self.startup_timeout = startup_timeout
        self.heap = heap
        self.data_root = data_root
        self.keep_data = os.environ.get(KEEP_DATA_ENV) == "1" if keep_data is None else keep_data
        self.zookeeper_port: int | None = None
        self.coordinator_port: int | None = None
        self.tablet_port: int | None = None
        #: role → port of its SASL listener (with ``sasl_users``)
        self.sasl_ports: dict[str, int] = {}
        self.data_dir: Path | None = None
        self.startup_seconds: float | None = None
        #: name → process, in start order (zookeeper, coordinator, tablet)
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    # -- public API ------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the CoordinatorServer; raises if the cluster was not started."""
        if self.coordinator_port is None:
            raise FlussClusterError("the Fluss cluster is not started")
        return f"{HOST}:{self.coordinator_port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the CoordinatorServer's SASL/PLAIN listener (with ``sasl_users``)."""
        if "coordinator" not in self.sasl_ports:
            raise FlussClusterError("the Fluss cluster has no SASL listener (started without sasl_users)")
        return f"{HOST}:{self.sasl_ports['coordinator']}"

    def log_file(self, name: str) -> Path | None:
        """The log of ``zookeeper``, ``coordinator`` or ``tablet`` (its JVM's output)."""
        return None if self.data_dir is None else self.data_dir / f"{name}.log"

    def log_tail(self, name: str, lines: int = LOG_TAIL_LINES) -> str:
        log = self.log_file(name)
        try:
            return "" if log is None else _tail(log.read_text(encoding="utf-8", errors="replace"), lines)
        except OSError:
            return ""

    def start(self) -> FlussCluster:
        """Fetch the jars if needed, start the three JVMs and wait until tables can be created."""
        if self._processes:
            raise FlussClusterError("the Fluss cluster is already started")
        began = time.monotonic()
        lib = ensure_jars(self.cache_dir)
        for attempt in range(1, 4):
            try:
                self._start_once(lib)
            except FlussClusterError as exc:
                self._cleanup_after_failure()
                if "Address already in use" in str(exc) and attempt < 3:
                    continue
                raise
            except BaseException:
                self._cleanup_after_failure()
                raise
            break
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the TabletServer, the CoordinatorServer and ZooKeeper (SIGTERM, then SIGKILL after
        ``timeout`` seconds) and remove the cluster's directory."""
        try:
            for name in reversed(list(self._processes)):
                _stop_child(self._processes[name], timeout)
        finally:
            self._processes.clear()
            self.zookeeper_port = self.coordinator_port = self.tablet_port = None
            self.sasl_ports = {}
            if self.data_dir is not None and not self.keep_data:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def is_running(self) -> bool:
        """True while all three JVMs are alive."""
        return bool(self._processes) and all(p.poll() is None for p in self._processes.values())

    def __enter__(self) -> FlussCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.coordinator_port is not None else "not started"
        return f"FlussCluster({where})"

    # -- internals -------------------------------------------------------------------------------

    def _server_yaml(self, role: str, port: int) -> str:
        assert self.data_dir is not None
        listeners = f"FLUSS://{HOST}:{port}"
        sasl: dict[str, str] = {}
        if self.sasl_users:
            listeners += f",CLIENT://{HOST}:{self.sasl_ports[role]}"
            users = " ".join(f'user_{user}="{password}"' for user, password in self.sasl_users.items())
            sasl = {
                # servers talk to each other on FLUSS (plaintext); clients may use CLIENT (SASL/PLAIN)
                "internal.listener.name": "FLUSS",
                "security.protocol.map": "CLIENT:SASL",
                "security.sasl.enabled.mechanisms": "PLAIN",
                "security.sasl.plain.jaas.config": (
                    f"org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required {users};"
                ),
            }
        settings = {
            "zookeeper.address": f"{HOST}:{self.zookeeper_port}",
            "bind.listeners": listeners,
            **sasl,
            "data.dir": str(self.data_dir / role / "data"),
            "remote.data.dir": str(self.data_dir / "remote"),
            # one TabletServer: every bucket has one replica
            "default.bucket.number": "1",
            "default.replication.factor": "1",
            **({"tablet-server.id": "0"} if role == "tablet" else {}),
            **self.properties,
        }
        return "".join(f"{key}: {value}\n" for key, value in settings.items())

    def _start_once(self, lib: Path) -> None:
        self.zookeeper_port, self.coordinator_port, self.tablet_port, *sasl = _free_ports(5)
        self.sasl_ports = dict(zip(("coordinator", "tablet"), sasl, strict=True)) if self.sasl_users else {}
        for port in (self.zookeeper_port, self.coordinator_port, self.tablet_port, *self.sasl_ports.values()):
            if _port_open(port):
                raise FlussClusterError(f"port {HOST}:{port} is in use (Address already in use)")
        if self.data_root is not None:
            self.data_root.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir = Path(tempfile.mkdtemp(prefix="ferry-fluss-", dir=self.data_root)).resolve()
        (data_dir / "tmp").mkdir()
        log4j = data_dir / "log4j2.xml"
        log4j.write_text(_LOG4J2_XML, encoding="utf-8")
        zoo_cfg = data_dir / "zookeeper.cfg"
        zoo_cfg.write_text(
            f"tickTime=2000\ndataDir={data_dir / 'zookeeper'}\nclientPort={self.zookeeper_port}\n"
            f"clientPortAddress={HOST}\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n"
            "maxClientCnxns=0\n",
            encoding="utf-8",
        )
        for role, port in (("coordinator", self.coordinator_port), ("tablet", self.tablet_port)):
            (data_dir / role).mkdir()
            (data_dir / role / "server.yaml").write_text(self._server_yaml(role, port), encoding="utf-8")

        java = _java()
        common = [
            "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true", f"-Djava.io.tmpdir={data_dir / 'tmp'}",
            f"-Dlog4j2.configurationFile={log4j}",
        ]  # fmt: skip
        self._spawn("zookeeper", [java, "-Xmx256m", *common, "-cp", _zookeeper_classpath(lib),
                                  _ZOOKEEPER_MAIN, str(zoo_cfg)])  # fmt: skip
        self._wait(lambda: _zookeeper_ok(self.zookeeper_port or 0), "ZooKeeper to answer ruok")
        server_cp = _server_classpath(lib)
        for role, main_class in (("coordinator", _COORDINATOR_MAIN), ("tablet", _TABLET_MAIN)):
            self._spawn(role, [java, f"-Xmx{self.heap}", *_JVM_OPENS, *common, "-cp", server_cp,
                               main_class, "--configDir", str(data_dir / role)])  # fmt: skip
        self._wait(lambda: _port_open(self.coordinator_port or 0), "the CoordinatorServer's port")
        self._wait(lambda: _port_open(self.tablet_port or 0), "the TabletServer's port")
        self._wait(self._tablet_server_live, "the CoordinatorServer to know a live TabletServer")

    def _tablet_server_live(self) -> bool:
        """The CoordinatorServer lists a live TabletServer, so tables can be created (asked through the
        Python client when it is installed, else read from the coordinator's log)."""
        try:
            import fluss  # noqa: PLC0415, F401 - the fluss extra
        except ImportError:
            log = self.log_tail("coordinator", 1000)
            return any(marker in log for marker in TABLET_SERVER_SEEN)

        async def nodes(connection: Any) -> list[str]:
            return [node.server_type for node in await connection.get_admin().get_server_nodes()]

        try:
            return "TabletServer" in with_connection(self.bootstrap_servers, nodes, 10.0)
        except Exception:  # not answering yet
            return False

    def _spawn(self, name: str, command: list[str]) -> None:
        log = self.log_file(name)
        assert log is not None and self.data_dir is not None
        with log.open("ab") as out:
            self._processes[name] = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
                preexec_fn=_parent_death_hook(),  # noqa: PLW1509 - sets PR_SET_PDEATHSIG only
            )

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while not ready():
            for name, process in self._processes.items():
                code = process.poll()
                if code is not None:
                    raise FlussClusterError(
                        f"the Fluss cluster's {name} exited with code {code} while waiting for {what}; "
                        f"end of its log (set {KEEP_DATA_ENV}=1 to keep it):\n{self.log_tail(name)}"
                    )
            if time.monotonic() > deadline:
                raise FlussClusterError(
                    f"the Fluss cluster was not ready within {self.startup_timeout:.0f} s (waiting for "
                    f"{what}); end of the coordinator's log:\n{self.log_tail('coordinator')}\n"
                    f"end of the tablet server's log:\n{self.log_tail('tablet')}"
                )
            time.sleep(0.2)

    def _cleanup_after_failure(self) -> None:
        keep = self.keep_data
        try:
            self.stop(timeout=10.0)
        finally:
            if self.data_dir is not None and not keep:
                shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


def _stop_child(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=30)


# --------------------------------------------------------------------------------------------------
# One cluster per process
# --------------------------------------------------------------------------------------------------

_shared: FlussCluster | None = None
_shared_lock = threading.Lock()


def shared_cluster() -> FlussCluster:
    """This process's cluster, started on first use and stopped at exit at the latest: what the
    test fixtures and the conformance suite's backend share."""
    global _shared  # noqa: PLW0603 - one cluster per process
    with _shared_lock:
        if _shared is None or not _shared.is_running():
            if _shared is not None:
                _shared.stop()
            else:
                atexit.register(stop_shared_cluster)
            # a SASL/PLAIN listener beside the plaintext one, so credentials can be tested
            _shared = FlussCluster(sasl_users={"ferry": secrets.token_urlsafe(16)}).start()
        return _shared


def stop_shared_cluster() -> None:
    """Stop the cluster :func:`shared_cluster` started, if any."""
    global _shared  # noqa: PLW0603
    with _shared_lock:
        if _shared is not None:
            _shared.stop()
            _shared = None


# --------------------------------------------------------------------------------------------------
# Reading a table back (needs the ``fluss`` extra)
# --------------------------------------------------------------------------------------------------


def with_connection(bootstrap_servers: str, work: Callable[[Any], Any], timeout: float) -> Any:
    """``await work(connection)`` with a connection of its own, on an event loop of its own thread."""
    import fluss  # noqa: PLC0415 - the fluss extra is needed only to talk to the cluster

    async def run() -> Any:
        connection = await fluss.FlussConnection.create(
            fluss.Config({"bootstrap.servers": bootstrap_servers})
        )
        try:
            return await work(connection)
        finally:
            await connection.close()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fluss-test-client", daemon=True)
    thread.start()
    try:
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)
    finally:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()


async def _cancel_all() -> None:
    """Cancel what still runs on this loop (a call that timed out) and let it finish."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def read_rows(
    bootstrap_servers: str, database: str, table: str, *, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Every row of a Fluss table as it is now, through the Python client.

    A primary-key table is read from its key-value store, bucket by bucket (its current rows); a log
    table from its log, from the earliest offset to the latest. A MAP value comes back as a list of
    (key, value) pairs, as the client gives it.
    """
    import fluss  # noqa: PLC0415

    async def read(connection: Any) -> list[dict[str, Any]]:
        handle = await connection.get_table(fluss.TablePath(database, table))
        info = handle.get_table_info()
        rows: list[dict[str, Any]] = []
        if info.has_primary_key():
            for bucket in range(info.num_buckets):
                scan = handle.new_scan().limit(1_000_000)
                scanner = scan.create_bucket_batch_scanner(fluss.TableBucket(info.table_id, bucket))
                rows += (await scanner.to_arrow()).to_pylist()
            return rows
        scanner = await handle.new_scan().with_fixed_schema(True).create_record_batch_log_scanner()
        scanner.subscribe_buckets({bucket: fluss.EARLIEST_OFFSET for bucket in range(info.num_buckets)})
        rows += (await scanner.to_arrow()).to_pylist()
        return rows

    result: list[dict[str, Any]] = with_connection(bootstrap_servers, read, timeout)
    return result


def drop_database(bootstrap_servers: str, database: str, *, timeout: float = 60.0) -> None:
    """Drop a database and its tables, if it exists."""

    async def drop(connection: Any) -> None:
        await connection.get_admin().drop_database(database, ignore_if_not_exists=True, cascade=True)

    with_connection(bootstrap_servers, drop, timeout)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``fetch`` the jars, or ``run`` a cluster in the foreground until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m ferry.testing.fluss",
        description="Run a local Apache Fluss cluster (ZooKeeper, CoordinatorServer, TabletServer).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the jars with Maven (if not cached); print their folder")
    commands.add_parser("run", help="run a cluster until Ctrl-C or SIGTERM; print its bootstrap address")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(ensure_jars())
            return 0
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        with FlussCluster() as cluster:
            print(cluster.bootstrap_servers, flush=True)
            print(f"Fluss cluster ready in {cluster.startup_seconds:.1f} s; Ctrl-C stops it", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                stopping.wait()
        return 0
    except FlussClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
