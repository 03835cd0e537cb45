"""A real single-node Apache Kafka broker (KRaft, combined broker and controller) for tests and demos.

The broker's jars come from Maven Central through ``jars/kafka/pom.xml`` and are cached in
``<repo>/.cache/kafka/lib`` (the cache folder can be moved with the ``FERRY_KAFKA_CACHE`` environment
variable; the jars then live in ``$FERRY_KAFKA_CACHE/lib``). Each broker gets two free ports on
127.0.0.1 and its own data directory, so several brokers can run side by side.

In-process use (the pytest fixtures use this)::

    with KafkaBroker() as broker:
        create_topic(broker.bootstrap_servers, "orders", partitions=3)
        produce(broker.bootstrap_servers, "orders", [b"a", b"b"])

From a shell (``make demo`` uses this; ``scripts/kafka`` wraps it)::

    python -m ferry.local.kafka_broker fetch
    python -m ferry.local.kafka_broker start --state-file F   # prints 127.0.0.1:PORT
    python -m ferry.local.kafka_broker status --state-file F
    python -m ferry.local.kafka_broker stop --state-file F
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.exceptions import FerryError
from ferry.local import jvm
from ferry.local.jvm import HOST, LOG_TAIL_LINES
from ferry.local.ports import port_open
from ferry.logs import kafka_logger

__all__ = [
    "KafkaBroker",
    "KafkaBrokerError",
    "TopicFactory",
    "create_topic",
    "default_cache_dir",
    "delete_topic",
    "ensure_jars",
    "find_pom",
    "main",
    "produce",
]

CACHE_ENV = "FERRY_KAFKA_CACHE"
"""Environment variable that moves the jar cache folder (jars go to ``$FERRY_KAFKA_CACHE/lib``)."""

KEEP_DATA_ENV = "FERRY_KAFKA_KEEP_DATA"
"""Set to ``1`` to keep a broker's data directory (log, config, segments) after it stops."""

POM_RELATIVE_PATH = jvm.POM_FOLDER / "kafka" / "pom.xml"
REQUIRED_JAR_PREFIXES = ("kafka_2.13-", "kafka-server-", "kafka-clients-", "scala-library-", "log4j-core-")


class KafkaBrokerError(FerryError):
    """The local Kafka broker could not be fetched, started, reached or stopped."""


_JARS = jvm.MavenJars("Kafka", POM_RELATIVE_PATH, CACHE_ENV, REQUIRED_JAR_PREFIXES, KafkaBrokerError)
find_pom = _JARS.find_pom
default_cache_dir = _JARS.default_cache_dir
ensure_jars = _JARS.ensure


# --------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------


def _cluster_id() -> str:
    """A random Kafka cluster id: a UUID as URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _pid_is_broker(pid: int, data_dir: Path) -> bool:
    """True when ``pid`` is the broker that runs from ``data_dir`` (and not a recycled pid)."""
    return jvm.pid_runs(pid, b"kafka.Kafka", str(data_dir).encode())


# --------------------------------------------------------------------------------------------------
# The broker
# --------------------------------------------------------------------------------------------------

_QUIET_LOGGERS = (
    "kafka.request.logger",
    "org.apache.kafka.common.utils.AppInfoParser",
    "org.apache.kafka.common.config.AbstractConfig",
)


class KafkaBroker(jvm.JvmService):
    """A single-node Kafka broker in a child JVM, reachable at :attr:`bootstrap_servers`.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. ``port`` and
    ``controller_port`` default to free ports; ``properties`` add to or override the
    ``server.properties`` written for it. With ``detached=True`` the JVM outlives this Python
    process (see :meth:`write_state` and :meth:`from_state_file`); otherwise it is sent SIGTERM
    if this process dies without stopping it.
    """

    error = KafkaBrokerError
    title = "the Kafka broker"

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        properties: Mapping[str, str] | None = None,
        startup_timeout: float = 90.0,
        heap_min: str = "512m",
        heap_max: str = "1g",
        data_root: Path | None = None,
        keep_data: bool | None = None,
        detached: bool = False,
    ) -> None:
        self.cache_dir = (cache_dir or default_cache_dir()).resolve()
        self._requested_port = port
        self._requested_controller_port = controller_port
        self.properties: dict[str, str] = dict(properties or {})
        self.startup_timeout = startup_timeout
        self.heap_min = heap_min
        self.heap_max = heap_max
        self.data_root = data_root
        self.keep_data = os.environ.get(KEEP_DATA_ENV) == "1" if keep_data is None else keep_data
        self.detached = detached
        self.port: int | None = None
        self.controller_port: int | None = None
        self.cluster_id: str | None = None
        self.data_dir: Path | None = None
        self.pid: int | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._server_command: list[str] = []

    # -- public API ------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the PLAINTEXT listener; raises if the broker was not started."""
        return self._address(self.port)

    @property
    def log_file(self) -> Path | None:
        """The broker's own log (JVM stdout and stderr), inside its data directory."""
        return None if self.data_dir is None else self.data_dir / "broker.log"

    def start(self) -> Self:
        """Fetch the jars if needed, format storage, start the JVM and wait until clients can connect."""
        if self.pid is not None:
            raise KafkaBrokerError(f"the Kafka broker is already started (pid {self.pid})")
        began = time.monotonic()
        lib = ensure_jars(self.cache_dir)
        fixed_ports = self._requested_port is not None or self._requested_controller_port is not None
        self._start_retrying(lambda: self._start_once(lib), attempts=1 if fixed_ports else 3)
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Send SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; remove the data directory."""
        try:
            if self._process is not None:
                jvm.stop_process(self._process, timeout)
            elif self.pid is not None:
                self._stop_pid(self.pid, timeout)
        finally:
            self._process = None
            self.pid = None
            self.port = None
            self.controller_port = None
            self._remove_data_dir()

    @contextlib.contextmanager
    def stopped(self, timeout: float = 30.0) -> Iterator[None]:
        """The broker down for the block (SIGTERM: its clients' connections are cut), then up again
        on the same ports with the same data: topics, records and committed offsets are kept."""
        if self._process is None:
            raise KafkaBrokerError("only a broker started by this process can be stopped for a while")
        jvm.stop_process(self._process, timeout)
        self._process = None
        self.pid = None
        try:
            yield
        finally:
            assert self.port is not None and self.controller_port is not None
            self._check_ports_free((self.port, self.controller_port))
            self._spawn()

    def is_running(self) -> bool:
        """True while the broker's JVM is alive."""
        if self._process is not None:
            return self._process.poll() is None
        if self.pid is not None and self.data_dir is not None:
            return _pid_is_broker(self.pid, self.data_dir)
        return False

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the broker's log, or an empty string when there is none."""
        return jvm.read_tail(self.log_file, lines)

    def state(self) -> dict[str, Any]:
        """What another process needs to find and stop this broker."""
        return {
            "pid": self.pid,
            "port": self.port,
            "controller_port": self.controller_port,
            "bootstrap_servers": self.bootstrap_servers,
            "cluster_id": self.cluster_id,
            "data_dir": None if self.data_dir is None else str(self.data_dir),
            "log_file": None if self.log_file is None else str(self.log_file),
            "keep_data": self.keep_data,
        }

    def write_state(self, path: Path) -> None:
        """Write :meth:`state` as JSON to ``path`` (atomically)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(path.name + ".tmp")
        staging.write_text(json.dumps(self.state(), indent=2) + "\n", encoding="utf-8")
        staging.replace(path)

    @classmethod
    def from_state_file(cls, path: Path) -> KafkaBroker:
        """A handle on a broker started elsewhere with ``detached=True`` and :meth:`write_state`."""
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            broker = cls(keep_data=bool(state.get("keep_data", False)), detached=True)
            broker.pid = int(state["pid"])
            broker.port = int(state["port"])
            broker.controller_port = int(state["controller_port"])
            broker.cluster_id = state.get("cluster_id")
            broker.data_dir = Path(state["data_dir"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KafkaBrokerError(f"cannot read the Kafka broker state file {path}: {exc}") from exc
        return broker

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.port is not None else "not started"
        return f"KafkaBroker({where}, pid={self.pid})"

    # -- internals -------------------------------------------------------------------------------

    def _server_properties(self, data_dir: Path) -> dict[str, str]:
        listeners = f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{HOST}:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data_dir / "kraft-logs"),
            # A single node: every internal topic has one replica.
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "5",
            # Fast tests.
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            "log.cleaner.backoff.ms": "1000",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
            "num.io.threads": "4",
            "num.network.threads": "2",
        }
        props.update(self.properties)
        return props

    def _start_once(self, lib: Path) -> None:
        free = [
            port
            for port in jvm.free_ports(3)
            if port not in (self._requested_port, self._requested_controller_port)
        ]
        self.port = self._requested_port or free[0]
        self.controller_port = self._requested_controller_port or free[1]
        self._check_ports_free((self.port, self.controller_port))
        data_dir = self._new_data_dir("ferry-kafka-")
        config = data_dir / "server.properties"
        config.write_text(
            "".join(f"{key}={value}\n" for key, value in self._server_properties(data_dir).items()),
            encoding="utf-8",
        )
        log4j_broker = data_dir / "log4j2.xml"
        log4j_broker.write_text(jvm.log4j2_xml("INFO", _QUIET_LOGGERS), encoding="utf-8")
        log4j_tool = data_dir / "log4j2-tool.xml"
        log4j_tool.write_text(jvm.log4j2_xml("WARN", _QUIET_LOGGERS), encoding="utf-8")

        java = jvm.find_java("Kafka", KafkaBrokerError)
        classpath = str(lib / "*")
        self.cluster_id = _cluster_id()
        format_command = [
            java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={log4j_tool}", "-cp", classpath,
            "kafka.tools.StorageTool", "format", "--standalone",
            "--cluster-id", self.cluster_id, "--config", str(config),
        ]  # fmt: skip
        try:
            formatted = subprocess.run(
                format_command,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise KafkaBrokerError("formatting the Kafka storage did not finish within 120 s") from exc
        if formatted.returncode != 0:
            raise KafkaBrokerError(
                f"formatting the Kafka storage failed (exit {formatted.returncode}):\n"
                f"{jvm.tail(formatted.stdout + formatted.stderr)}"
            )

        self._server_command = [
            java, f"-Xms{self.heap_min}", f"-Xmx{self.heap_max}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j_broker}", "-cp", classpath,
            "kafka.Kafka", str(config),
        ]  # fmt: skip
        self._spawn()

    def _spawn(self) -> None:
        """Start the broker's JVM on its formatted storage and wait until clients can connect."""
        assert self.data_dir is not None and self._server_command
        self._process = jvm.spawn(
            self._server_command, self.data_dir / "broker.log", self.data_dir, detached=self.detached
        )
        self.pid = self._process.pid
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._process is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        admin: Any = None
        last_error = "the broker's port never accepted a connection"
        while True:
            code = self._process.poll()
            if code is not None:
                raise KafkaBrokerError(
                    f"the Kafka broker exited with code {code} while starting; {self._log_hint()}:\n"
                    f"{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaBrokerError(
                    f"the Kafka broker was not ready within {self.startup_timeout:.0f} s ({last_error}); "
                    f"{self._log_hint()}:\n{self.log_tail()}"
                )
            if admin is None:
                if not jvm.port_open(self.port):
                    time.sleep(0.2)
                    continue
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})
            try:
                admin.list_topics(timeout=min(5.0, max(remaining, 0.5)))
            except KafkaException as exc:
                last_error = f"listing topics failed: {exc}"
                time.sleep(0.3)
                continue
            return

    def _log_hint(self) -> str:
        if self.keep_data:
            return f"log {self.log_file}"
        return f"end of its log (set {KEEP_DATA_ENV}=1 to keep the whole log and data directory)"

    def _stop_pid(self, pid: int, timeout: float) -> None:
        if self.data_dir is None or not _pid_is_broker(pid, self.data_dir):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not jvm.pid_alive(pid):
                return
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while jvm.pid_alive(pid):
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"the Kafka broker (pid {pid}) did not exit after SIGKILL")
            time.sleep(0.1)


# --------------------------------------------------------------------------------------------------
# Client helpers for tests
# --------------------------------------------------------------------------------------------------


class TopicFactory(Protocol):
    """What the ``topic_factory`` test fixture gives: creates a uniquely named topic, returns its name."""

    def __call__(self, partitions: int = 1, config: Mapping[str, str] | None = None) -> str: ...


def _client(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """The settings of a client of the local broker: librdkafka writes through logging, errors only
    (its warnings while a fresh broker loads its coordinators are retried by the client itself)."""
    return {"bootstrap.servers": bootstrap, "log_level": 3, "logger": kafka_logger(__name__), **settings}


def _admin(bootstrap: str) -> Any:
    return AdminClient(_client(bootstrap))


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    exist_ok: bool = False,
    timeout: float = 30.0,
) -> None:
    """Create a topic (replication factor 1) and wait until every partition has a leader."""
    admin = _admin(bootstrap)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
    futures = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (
            exist_ok and isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
        ):
            raise KafkaBrokerError(f"cannot create topic {name!r} on {bootstrap}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(topic=name, timeout=max(1.0, deadline - time.monotonic()))
        described = metadata.topics.get(name)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) >= partitions
            and all(p.leader >= 0 for p in described.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise KafkaBrokerError(f"topic {name!r} has no leader for every partition after {timeout:.0f} s")
        time.sleep(0.1)


def delete_topic(bootstrap: str, name: str, *, missing_ok: bool = True, timeout: float = 30.0) -> None:
    """Delete a topic; a topic that does not exist is fine unless ``missing_ok`` is False."""
    admin = _admin(bootstrap)
    futures = admin.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if missing_ok and isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return
        raise KafkaBrokerError(f"cannot delete topic {name!r} on {bootstrap}: {exc}") from exc


def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes | None],
    *,
    key: bytes | str | None = None,
    keys: Sequence[bytes | str | None] | None = None,
    partition: int | None = None,
    headers: Sequence[tuple[str, bytes]] | None = None,
    timeout: float = 30.0,
) -> list[tuple[int, int]]:
    """Produce ``values`` in order (``None`` is a tombstone) and return each one's (partition, offset).

    ``key`` is used for every message, or ``keys`` gives one key per value. Without ``partition``
    the producer's partitioner chooses from the key. Raises if any message is not acknowledged.
    """
    if keys is not None and len(keys) != len(values):
        raise ValueError(f"got {len(keys)} keys for {len(values)} values")
    producer = Producer(_client(bootstrap, **{"enable.idempotence": True, "linger.ms": 5}))
    results: list[tuple[int, int] | None] = [None] * len(values)
    errors: list[str] = []

    def delivered(index: int) -> Callable[[Any, Any], None]:
        def callback(error: Any, message: Any) -> None:
            if error is not None:
                errors.append(f"message {index}: {error}")
            else:
                results[index] = (int(message.partition()), int(message.offset()))

        return callback

    for index, value in enumerate(values):
        kwargs: dict[str, Any] = {"value": value, "on_delivery": delivered(index)}
        message_key = keys[index] if keys is not None else key
        if message_key is not None:
            kwargs["key"] = message_key
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = list(headers)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        raise KafkaBrokerError(
            f"{remaining} of {len(values)} messages to {topic!r} were not delivered in {timeout} s"
        )
    if errors:
        raise KafkaBrokerError(f"producing to {topic!r} failed: " + "; ".join(errors[:5]))
    delivered_all = [result for result in results if result is not None]
    if len(delivered_all) != len(values):
        raise KafkaBrokerError(
            f"only {len(delivered_all)} of {len(values)} messages to {topic!r} were acknowledged"
        )
    return delivered_all


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def _default_state_file() -> Path:
    return default_cache_dir() / "broker.json"


def _parse_property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def main(argv: Sequence[str] | None = None) -> int:
    """``fetch`` the jars, ``start`` a detached broker, show its ``status``, or ``stop`` it."""
    parser = argparse.ArgumentParser(
        prog="python -m ferry.local.kafka_broker",
        description="Run a local single-node Apache Kafka broker (KRaft) for tests and demos.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser(
        "fetch", help="fetch the broker's jars with Maven (if not cached); print their folder"
    )
    start = commands.add_parser("start", help="start a detached broker; print its bootstrap address")
    status = commands.add_parser(
        "status", help="print the bootstrap address if the broker runs; exit 1 if not"
    )
    stop = commands.add_parser("stop", help="stop the broker and delete its data directory")
    for sub in (fetch, start):
        sub.add_argument(
            "--cache",
            type=Path,
            default=None,
            help=f"jar cache folder (default: ${CACHE_ENV} or .cache/kafka)",
        )
    for sub in (start, status, stop):
        sub.add_argument(
            "--state-file", type=Path, default=None, help="JSON state file (default: <cache>/broker.json)"
        )
    start.add_argument("--port", type=int, default=None, help="PLAINTEXT port (default: a free one)")
    start.add_argument(
        "--prefer-port", type=int, default=None, metavar="PORT",
        help="listen on PORT when it is free, else on a free port, and say which to export",
    )  # fmt: skip
    start.add_argument(
        "--controller-port", type=int, default=None, help="controller port (default: a free one)"
    )
    start.add_argument(
        "--timeout", type=float, default=90.0, help="seconds to wait for the broker (default 90)"
    )
    start.add_argument(
        "--set", dest="properties", action="append", type=_parse_property, default=[], metavar="KEY=VALUE",
        help="extra server.properties entry (repeatable)",
    )  # fmt: skip
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (default 30)")
    args = parser.parse_args(argv)
    return jvm.run_command(lambda: _command(args), KafkaBrokerError)


def _command(args: argparse.Namespace) -> int:
    """Carry out the parsed command line of :func:`main`."""
    if args.command == "fetch":
        print(ensure_jars(args.cache))
        return 0
    state_file: Path = args.state_file or _default_state_file()
    if args.command == "start":
        if state_file.exists():
            running = KafkaBroker.from_state_file(state_file)
            if running.is_running():
                print(f"a Kafka broker already runs (pid {running.pid}); reusing it", file=sys.stderr)
                print(running.bootstrap_servers)
                return 0
            running.stop()
            state_file.unlink(missing_ok=True)
        port = args.port
        if port is None and args.prefer_port is not None:
            port = None if port_open(args.prefer_port) else args.prefer_port
        broker = KafkaBroker(
            cache_dir=args.cache,
            port=port,
            controller_port=args.controller_port,
            properties=dict(args.properties),
            startup_timeout=args.timeout,
            detached=True,
        ).start()
        broker.write_state(state_file)
        print(
            f"Kafka broker ready at {broker.bootstrap_servers} (pid {broker.pid}, "
            f"{broker.startup_seconds:.1f} s); log {broker.log_file}",
            file=sys.stderr,
        )
        if args.prefer_port is not None and broker.port != args.prefer_port:
            print(
                f"port {args.prefer_port} is taken, so the broker listens on {broker.port}: "
                f"export KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap_servers} (configs/demo.yaml reads it)",
                file=sys.stderr,
            )
        print(broker.bootstrap_servers)
        return 0
    if not state_file.exists():
        if args.command == "stop":
            print(f"no Kafka broker state file at {state_file}; nothing to stop", file=sys.stderr)
            return 0
        print(f"no Kafka broker state file at {state_file}", file=sys.stderr)
        return 1
    broker = KafkaBroker.from_state_file(state_file)
    if args.command == "status":
        if broker.is_running():
            print(broker.bootstrap_servers)
            return 0
        print(f"the Kafka broker of {state_file} (pid {broker.pid}) is not running", file=sys.stderr)
        return 1
    pid = broker.pid
    broker.stop(timeout=args.timeout)
    state_file.unlink(missing_ok=True)
    print(f"Kafka broker (pid {pid}) stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def wait_for_group_coordinator(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Block until consumer groups work: the first offset commit makes a fresh broker create its
    offsets topic, which clients otherwise meet as ``GroupCoordinatorNotAvailable`` for a while."""
    consumer = Consumer(_client(bootstrap, **{"group.id": "ferry-warm-up", "enable.auto.commit": False}))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()
