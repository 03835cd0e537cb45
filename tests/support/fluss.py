"""A real local Apache Fluss cluster for tests: ZooKeeper, one CoordinatorServer, one TabletServer.

The jars come from Maven Central through ``jars/fluss/pom.xml`` and are cached in
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

    python -m tests.support.fluss fetch    # fetch the jars (if not cached); print their folder
    python -m tests.support.fluss run      # run a cluster until Ctrl-C; print its bootstrap address
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import pytest

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.local.jvm import HOST, LOG_TAIL_LINES
from tests.support.waiting import Deadline

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

POM_RELATIVE_PATH = jvm.POM_FOLDER / "fluss" / "pom.xml"
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
# Jars
# --------------------------------------------------------------------------------------------------

_JARS = jvm.MavenJars("Fluss", POM_RELATIVE_PATH, CACHE_ENV, REQUIRED_JAR_PREFIXES, FlussClusterError)
find_pom = _JARS.find_pom
default_cache_dir = _JARS.default_cache_dir
ensure_jars = _JARS.ensure


def _server_classpath(lib: Path) -> str:
    """The Fluss servers: their shaded jar and the Log4j 2 binding of the slf4j it bundles."""
    server = [j for j in jvm.jars(lib) if j.name.startswith((SERVER_JAR, "log4j-"))]
    return os.pathsep.join(str(j) for j in server)


def _zookeeper_classpath(lib: Path) -> str:
    """ZooKeeper: every jar but Fluss's own."""
    zookeeper = [j for j in jvm.jars(lib) if not j.name.startswith((SERVER_JAR, CLIENT_JAR))]
    return os.pathsep.join(str(j) for j in zookeeper)


def client_classpath(cache_dir: Path | None = None) -> list[Path]:
    """The jars of the Fluss Java client (fetched if needed): the Fluss sink's ``alter-table.classpath``."""
    lib = ensure_jars(cache_dir)
    return [j for j in jvm.jars(lib) if j.name.startswith(CLIENT_JAR)]


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

_QUIET_LOGGERS = ("org.apache.zookeeper", "org.apache.fluss.shaded")


class FlussCluster(jvm.JvmService):
    """ZooKeeper, a CoordinatorServer and a TabletServer in child JVMs; clients use :attr:`bootstrap_servers`.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. ``properties`` add to or
    override the ``server.yaml`` of both Fluss servers. With ``sasl_users`` (user → password) each
    server also listens on a SASL/PLAIN listener for those users: :attr:`sasl_bootstrap_servers`.
    """

    error = FlussClusterError
    title = "the Fluss cluster"

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
        return self._address(self.coordinator_port)

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
        return jvm.read_tail(self.log_file(name), lines)

    def start(self) -> Self:
        """Fetch the jars if needed, start the three JVMs and wait until tables can be created."""
        if self._processes:
            raise FlussClusterError("the Fluss cluster is already started")
        began = time.monotonic()
        lib = ensure_jars(self.cache_dir)
        self._start_retrying(lambda: self._start_once(lib))
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the TabletServer, the CoordinatorServer and ZooKeeper (SIGTERM, then SIGKILL after
        ``timeout`` seconds) and remove the cluster's directory."""
        try:
            for name in reversed(list(self._processes)):
                jvm.stop_process(self._processes[name], timeout)
        finally:
            self._processes.clear()
            self.zookeeper_port = self.coordinator_port = self.tablet_port = None
            self.sasl_ports = {}
            self._remove_data_dir()

    def is_running(self) -> bool:
        """True while all three JVMs are alive."""
        return bool(self._processes) and all(p.poll() is None for p in self._processes.values())

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
        self.zookeeper_port, self.coordinator_port, self.tablet_port, *sasl = jvm.free_ports(5)
        self.sasl_ports = dict(zip(("coordinator", "tablet"), sasl, strict=True)) if self.sasl_users else {}
        ports = (self.zookeeper_port, self.coordinator_port, self.tablet_port, *self.sasl_ports.values())
        self._check_ports_free(ports)
        data_dir = self._new_data_dir("ferry-fluss-")
        (data_dir / "tmp").mkdir()
        log4j = data_dir / "log4j2.xml"
        log4j.write_text(jvm.log4j2_xml("INFO", _QUIET_LOGGERS), encoding="utf-8")
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

        java = jvm.find_java("Fluss", FlussClusterError)
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
        self._wait(lambda: jvm.port_open(self.coordinator_port or 0), "the CoordinatorServer's port")
        self._wait(lambda: jvm.port_open(self.tablet_port or 0), "the TabletServer's port")
        self._wait(self._tablet_server_live, "the CoordinatorServer to know a live TabletServer")

    def _tablet_server_live(self) -> bool:
        """The CoordinatorServer lists a live TabletServer, so tables can be created (asked through the
        Python client when it is installed, else read from the coordinator's log)."""
        try:
            import fluss  # noqa: F401 - the fluss extra
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
        self._processes[name] = jvm.spawn(command, log, self.data_dir)

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = Deadline(self.startup_timeout)
        while not ready():
            for name, process in self._processes.items():
                code = process.poll()
                if code is not None:
                    raise FlussClusterError(
                        f"the Fluss cluster's {name} exited with code {code} while waiting for {what}; "
                        f"end of its log (set {KEEP_DATA_ENV}=1 to keep it):\n{self.log_tail(name)}"
                    )
            if deadline.expired():
                raise FlussClusterError(
                    f"the Fluss cluster was not ready within {self.startup_timeout:.0f} s (waiting for "
                    f"{what}); end of the coordinator's log:\n{self.log_tail('coordinator')}\n"
                    f"end of the tablet server's log:\n{self.log_tail('tablet')}"
                )
            time.sleep(0.2)


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
    import fluss

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
    import fluss

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
        prog="python -m tests.support.fluss",
        description="Run a local Apache Fluss cluster (ZooKeeper, CoordinatorServer, TabletServer).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the jars with Maven (if not cached); print their folder")
    commands.add_parser("run", help="run a cluster until Ctrl-C or SIGTERM; print its bootstrap address")
    args = parser.parse_args(argv)
    return jvm.run_command(lambda: _command(args), FlussClusterError)


def _command(args: argparse.Namespace) -> int:
    """Carry out the parsed command line of :func:`main`."""
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


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------------------------------
# The pytest fixture (this module is a plugin of ``tests/conftest.py``)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fluss_cluster() -> Iterator[FlussCluster]:
    """A real Apache Fluss cluster (ZooKeeper, CoordinatorServer, TabletServer) on 127.0.0.1, shared by
    the whole session (and by the conformance suite's Fluss backend): ``fluss_cluster.bootstrap_servers``."""
    yield shared_cluster()
    stop_shared_cluster()
