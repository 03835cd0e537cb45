"""The schema registry out of reach while new writer schemas arrive: the pipeline waits for it
under the retry policy, the wait in its status, and ends with every row once. The registry is the
real one; between it and the pipeline a gate that refuses and cuts connections while closed."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka.serialization import MessageField

from ferry.config.loader import load_job_text
from ferry.connectors.formats import decoder_for
from ferry.connectors.kafka.schema_changes import SchemaChangeReader
from ferry.local import debezium as dbz
from ferry.local.jvm import HOST
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.events import Event, SchemaHint, SchemaObserved
from ferry.model.schema import TableId
from ferry.pipeline.phase import Phase
from ferry.retry import RetryPolicy
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.outages import RETRIES, running
from tests.support import debezium_avro as avro
from tests.support.debezium_avro import AvroColumn, DebeziumAvroTable, SchemaRegistryClient
from tests.support.registry import SchemaRegistry
from tests.unit.formats.test_debezium_avro_schema_change import as_avro

pytestmark = pytest.mark.integration


class Gate:
    """A TCP forwarder to ``upstream`` on a port of its own; :meth:`closed` refuses new connections
    and cuts the open ones for the block. (Forwarding bytes is all it does: no library needed.)"""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting: threading.Thread | None = None
        self.is_open = True
        self._listen()

    def _listen(self) -> None:
        self._accepting = threading.Thread(target=self._accept, args=(self._listener,), daemon=True)
        self._accepting.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def _cut(self) -> None:
        with self._lock:
            opened, self._open = self._open, []
        for connection in opened:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def close(self) -> None:
        self.is_open = False
        with contextlib.suppress(OSError):  # wakes the accepting thread (close alone does not)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        if self._accepting is not None:
            self._accepting.join(10)
        self._cut()

    def reopen(self) -> None:
        self.is_open = True
        self._listener = socket.create_server((HOST, self.port))
        self._listen()


@pytest.fixture
def gate(schema_registry: SchemaRegistry) -> Iterator[Gate]:
    assert schema_registry.port is not None
    opened = Gate((HOST, schema_registry.port))
    yield opened
    opened.close()


def test_a_schema_registry_out_of_reach_is_waited_for(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    schema_registry: SchemaRegistry,
    gate: Gate,
) -> None:
    topic = topic_factory(1)
    url = schema_registry.url.replace(f":{schema_registry.port}/", f":{gate.port}/")
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        table = DebeziumAvroTable(
            client,
            f"s{uuid.uuid4().hex[:8]}",
            "inventory",
            "orders",
            [AvroColumn("id", "int", optional=False), AvroColumn("item", "string")],
        )
        first = [table.insert({"id": i, "item": f"i{i}"}) for i in range(1, 6)]
        table.add_column(AvroColumn("note", "string"))  # a writer schema the pipeline has not read
        second = [table.insert({"id": i, "item": f"i{i}", "note": f"n{i}"}) for i in range(6, 11)]
    produce(kafka_bootstrap, topic, [v for _, v in first], keys=[k for k, _ in first])
    text = f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  value.format: debezium-avro
  schema-registry.url: {url}
  scan.startup.mode: earliest-offset
sink:
  type: memory
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
  checkpoint.interval: 200ms
{RETRIES}"""
    sink = MemorySink()
    runner = build_runner(load_job_text(text), sink=sink)
    store = StateStore(f"sqlite:///{tmp_path}/state.db")

    def checkpointed() -> dict[tuple[str, int], int] | None:
        checkpoint = store.latest_checkpoint(group_id)
        return None if checkpoint is None else checkpoint.offsets

    try:
        with running(runner) as errors:
            wait_for(lambda: checkpointed() == {(topic, 0): 5}, 60, lambda: f"the first checkpoint, {errors}")
            gate.close()
            produce(kafka_bootstrap, topic, [v for _, v in second], keys=[k for k, _ in second])
            wait_for(
                lambda: re.search(
                    r"reading the schema registry: attempt ([2-9]|\d\d+) of", runner.status.detail
                ),
                60,
                lambda: f"the pipeline to wait for the registry (detail {runner.status.detail!r}, {errors})",
            )
            assert runner.status.phase is Phase.RUNNING and not errors
            gate.reopen()
            wait_for(lambda: checkpointed() == {(topic, 0): 10}, 60, lambda: f"the last checkpoint, {errors}")
            assert not errors and not runner.status.detail.startswith("reading the schema registry"), (
                runner.status.detail
            )
        assert not errors and runner.status.phase is Phase.STOPPED, (runner.status.detail, errors)
    finally:
        store.close()
    rows = sorted(sink.rows(TableId.parse("inventory.orders")), key=lambda r: r["id"])
    assert rows == [{"id": i, "item": f"i{i}", "note": f"n{i}" if i > 5 else None} for i in range(1, 11)]


def test_the_schema_change_topic_reader_waits_for_the_registry(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    schema_registry: SchemaRegistry,
    gate: Gate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(1)
    server = f"s{uuid.uuid4().hex[:8]}"
    json_table = dbz.DebeziumTable(
        server, "inventory", "orders", [dbz.ConnectColumn("id", dbz.INT32, optional=False)]
    )
    _, change = json_table.schema_change(json_table.add_column("note", dbz.STRING))
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        table = DebeziumAvroTable(
            client, server, "inventory", "orders", [AvroColumn("id", "int", optional=False)]
        )
        value = table.serialize(
            avro.SCHEMA_CHANGE_VALUE, as_avro(orjson.loads(change), server), MessageField.VALUE
        )
    produce(kafka_bootstrap, topic, [value], keys=[b"inventory"])
    url = schema_registry.url.replace(f":{schema_registry.port}/", f":{gate.port}/")
    decoder = decoder_for("debezium-avro-schema-change", schema_registry_url=url)
    retries = RetryPolicy(initial_s=0.1, max_s=0.4, timeout_s=60)
    reader = SchemaChangeReader(
        bootstrap_servers=kafka_bootstrap, topic=topic, decoder=decoder, retries=retries
    )
    read: list[list[Event] | BaseException] = []

    def sync() -> None:
        try:
            read.append(reader.sync(timeout=120))
        except BaseException as e:
            read.append(e)

    reader.open({})
    thread = threading.Thread(target=sync, name="sync")
    try:
        gate.close()
        with caplog.at_level(logging.WARNING, logger="ferry.retry"):
            thread.start()
            wait_for(
                lambda: (
                    any(
                        re.search(r"reading the schema registry: attempt ([2-9]|\d\d+) of", r.getMessage())
                        for r in caplog.records
                    )
                    or bool(read)
                ),
                60,
                lambda: f"the reader to wait for the registry ({read})",
            )
            assert not read, read
            gate.reopen()
            thread.join(60)
    finally:
        if not gate.is_open:
            gate.reopen()
        if thread.ident is not None:
            thread.join(60)
        reader.close()
        decoder.close()  # type: ignore[attr-defined]
    [events] = read
    assert isinstance(events, list), events
    assert [e.ddl for e in events if isinstance(e, SchemaObserved | SchemaHint)] == [
        "ALTER TABLE `orders` ADD COLUMN `note` VARCHAR(255)"
    ], events
    assert reader.positions == {0: 1}
