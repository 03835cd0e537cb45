"""A ferry worker: a plain process around the batch hot path.

The hot path (:class:`~ferry.pipeline.runner.PipelineRunner`) takes whole batches from
confluent-kafka, so its framework cost is per batch; Debezium's schema-change topic is read by
confluent-kafka too (:class:`~ferry.connectors.kafka.schema_changes.SchemaChangeReader`), its DDL
hints drained by the runner between batches. Around it, :class:`FerryWorker` is what a process
needs and nothing more: SIGTERM and SIGINT stop it after a final checkpoint, the status port is
served from a thread, and the process's end is bounded. A worker joins no consumer group but the
pipeline's and creates no topic but those the job names (dead letters, the Kafka sink's): the
Kafka clients are the job's own.

:func:`build_runner` assembles a runner from a job file; tests and the benchmark call it directly.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ferry.arenas import keep_freed_arenas
from ferry.config.checks import (  # noqa: F401 - earlier callers import the error and the refusal here
    UnsupportedOptionError,
    accepted_schema_changes,
    behavior_refusal,
    check_supported,
)
from ferry.config.job import DeleteTombstoneHandling, JobConfig, KafkaSourceConfig, ValueFormat
from ferry.config.loader import reads, writes
from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.formats.source_order import record_source_order
from ferry.connectors.kafka.dead_letter import KafkaDeadLetter
from ferry.connectors.kafka.schema_changes import SchemaChangeReader
from ferry.connectors.kafka.source import EndPosition, KafkaSource, StartPosition, kafka_reason
from ferry.exceptions import TerminalError
from ferry.logs import kafka_logger, mask_secrets
from ferry.model.events import Event
from ferry.offsets import describe_offsets
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import Route, TableRouter, TableSelection
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.schema_operator import HintSource
from ferry.pipeline.settings import RunnerSettings
from ferry.process import STOP_GRACE_S, parent_death_hook
from ferry.retry import Operation, RetryPolicy
from ferry.sinks import Sink
from ferry.sinks.base import PlaceholderWriting
from ferry.sinks.base.registry import sink_class
from ferry.state import StateStore
from ferry.state.store import open_error

if TYPE_CHECKING:
    from ferry.transform.blocks import TableTransforms

log = logging.getLogger(__name__)

#: How long ``ferry run`` waits for the brokers, and for a topic the job names, before it gives up.
DEFAULT_STARTUP_TIMEOUT_S = 60.0

#: Consumer settings that also apply to the other clients of the source's brokers (the client that
#: checks them, the dead-letter producer): security (SASL, SSL), sockets, the client's id.
_CLIENT_SETTING_PREFIXES = ("security.", "sasl.", "ssl.", "enable.ssl.", "socket.", "client.", "broker.")


def client_settings(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The source's ``properties`` that every client of its brokers needs (see
    :data:`_CLIENT_SETTING_PREFIXES`); consumer-only settings are left out."""
    return {k: v for k, v in properties.items() if k.startswith(_CLIENT_SETTING_PREFIXES)}


class StartupError(TerminalError):
    """A pipeline could not start: its brokers cannot be reached.

    ``ferry run`` exits with the message instead of waiting, so a supervisor can restart it."""


def check_client_settings(source: KafkaSourceConfig) -> None:
    """Refuse (:class:`UnsupportedOptionError` at the key) a ``properties.*`` setting the Kafka
    client does not take: an unknown name, a value out of its range, a mechanism it lacks."""
    from confluent_kafka import Consumer, KafkaException  # noqa: PLC0415

    from ferry.connectors.kafka.source import DEFAULT_CONSUMER_SETTINGS, close_bounded  # noqa: PLC0415

    settings = {**DEFAULT_CONSUMER_SETTINGS, **source.properties, "group.id": "ferry-settings-check"}
    try:
        consumer = Consumer({**settings, "log_level": 0}, logger=kafka_logger())
    except KafkaException as e:
        reason = kafka_reason(e)
        named = re.search(r'"([^"]+)"', reason)
        key = named[1] if named and named[1] in source.properties else None
        where = f"source.properties.{key}" if key else "source.properties"
        raise UnsupportedOptionError(
            ("" if key else f"{where}: ") + f"the Kafka client refuses it: {reason}; correct or remove it "
            "(the settings are librdkafka's: https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md)",
            where if key else None,
        ) from None
    close_bounded(consumer)


#: What librdkafka says of a connection no broker takes: refused, or a host name that resolves to
#: nothing. A broker that is merely slow says neither, and is waited for.
_REFUSALS = ("connection refused", "failed to resolve", "name or service not known")


def check_brokers(source: KafkaSourceConfig, timeout_s: float) -> None:
    """Raise :class:`StartupError` unless the source's brokers answer within ``timeout_s``; at once
    when every broker refused the connection (librdkafka's ``_ALL_BROKERS_DOWN`` after refusals
    only): nothing listens there, waiting cannot help."""
    from confluent_kafka import KafkaError, KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    refusals: list[str] = []
    others: list[str] = []
    all_down = threading.Event()

    def client_error(error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            all_down.set()
        elif error.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE):
            text = error.str()
            (refusals if any(r in text.lower() for r in _REFUSALS) else others).append(text)

    settings = client_settings(source.properties)
    admin = AdminClient(
        {**settings, "bootstrap.servers": source.bootstrap_servers, "log_level": 0, "error_cb": client_error},
        logger=kafka_logger(),
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=min(1.0, max(deadline - time.monotonic(), 0.01)))
            return
        except KafkaException as e:
            reason = kafka_reason(e)
        admin.poll(0)  # the client's errors are told here
        if all_down.is_set() and refusals and not others:
            raise StartupError(
                f"cannot reach the Kafka brokers {source.bootstrap_servers}: every one refused the "
                f"connection ({refusals[-1]}); correct source.properties.bootstrap.servers, or start "
                "the brokers"
            )
        if time.monotonic() >= deadline:
            raise StartupError(
                f"cannot reach the Kafka brokers {source.bootstrap_servers} within {timeout_s:g} s: "
                f"{reason}; check source.properties.bootstrap.servers, or give the brokers more time "
                "(--startup-timeout)"
            )


def build_sink(job: JobConfig) -> Sink:
    cls: Any = sink_class(job.sink.type)
    sink: Sink = cls(job.sink, pipeline=job.pipeline.name)
    return sink


def _transforms(job: JobConfig) -> TableTransforms | None:
    """The runner's transform step, or None without transforms (sqlglot is then not loaded)."""
    if not job.transform:
        return None
    from ferry.transform.blocks import TableTransforms  # noqa: PLC0415
    from ferry.transform.compiled import Session  # noqa: PLC0415

    session = Session(job.pipeline.time_zone, decimal_precision=job.pipeline.decimal_precision)
    return TableTransforms(job.transform, session=session, functions=job.user_functions())


def build_runner(
    job: JobConfig,
    *,
    sink: Sink | None = None,
    hints: HintSource | None = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
) -> PipelineRunner:
    """Everything a pipeline needs, from its job file; a topic named that does not exist is waited
    for up to ``startup_timeout_s`` (then ``source.topic-missing`` decides)."""
    check_supported(job)
    source_config, pipeline = job.source, job.pipeline
    properties = {
        k: v
        for k, v in source_config.consumer_properties().items()
        if k not in ("bootstrap.servers", "group.id")
    }
    group_id = source_config.properties.get("group.id", pipeline.kafka_name)

    def start_of(options: Any) -> StartPosition:
        return StartPosition(
            options.scan_startup_mode.value,
            options.scan_startup_timestamp_millis,
            dict(options.scan_startup_specific_offsets or {}),
        )

    retries = pipeline.restart_strategy.policy()
    source = KafkaSource(
        bootstrap_servers=source_config.bootstrap_servers,
        group_id=group_id,
        topics=source_config.topic or (),
        topic_pattern=source_config.topic_pattern,
        properties=properties,
        start=start_of(source_config),
        start_per_topic={t.topic: start_of(t) for t in source_config.tables},
        end=EndPosition(
            source_config.scan_bounded_mode.value,
            source_config.scan_bounded_timestamp_millis,
            dict(source_config.scan_bounded_specific_offsets or {}),
        ),
        retries=retries,
        topic_missing=source_config.topic_missing,
        topic_wait_s=startup_timeout_s,
    )
    options = source_config.decoder_options()
    definitions = None
    if source_config.value_format.value == "debezium-json" and source_config.schema_change_topic:
        # payload-only records are typed by the table definitions the schema-change topic carries
        definitions = TableDefinitions()
        options = {**options, "definitions": definitions}
    if source_config.value_format.value == "debezium-json":
        # epoch and decimal columns stay raw until a sink that takes them converts them (Arrow)
        options = {
            **options,
            "raw_values": True,
            "infer_types": source_config.infer_types,
            # ExtractNewRecordState writes each delete as a tombstone alone
            "tombstone_deletes": source_config.delete_tombstone_handling_mode
            is DeleteTombstoneHandling.DELETE_TO_TOMBSTONE,
        }
    if source_config.value_format.value.startswith("debezium-"):
        placeholder = source_config.debezium_unavailable_value_placeholder
        options = {**options, "unavailable_value_placeholder": placeholder}
    decoder = decoder_for(source_config.value_format.value, **options)
    if hints is None and source_config.schema_change_topic:
        hints = SchemaChangeReader(
            bootstrap_servers=source_config.bootstrap_servers,
            topic=source_config.schema_change_topic,
            decoder=decoder_for(source_config.schema_change_format, **source_config.decoder_options()),
            properties=properties,
            retries=retries,
        )
    sink = sink or build_sink(job)
    if isinstance(sink, PlaceholderWriting):
        sink.unavailable_value_placeholder = source_config.debezium_unavailable_value_placeholder
    router = SchemaChangeRouter(
        sink,
        pipeline.schema_change_behavior,
        accepted_schema_changes(job.sink.include_schema_changes, job.sink.exclude_schema_changes),
        create_tables=job.sink.auto_create_tables,
    )
    tables = TableRouter(
        (Route(r.source_table, r.sink_table, r.replace_symbol, r.description) for r in job.route),
        pipeline.route_mode,
    )
    dead_letter = KafkaDeadLetter(
        bootstrap_servers=source_config.bootstrap_servers,
        topic=pipeline.dead_letter_topic,
        pipeline=pipeline.name,
        # a secured cluster takes dead letters with the source's credentials
        properties=client_settings(properties),
    )
    settings = RunnerSettings(
        name=pipeline.name,
        batch_size=pipeline.batch_size,
        checkpoint_interval_s=pipeline.checkpoint_interval.total_seconds(),
        # an SQLite database in memory is one per thread: its checkpoints are saved where they are read
        concurrent_checkpoints=pipeline.checkpoint_concurrent and not _in_memory(pipeline.state_url),
        schema_change_timeout_s=pipeline.schema_operator_rpc_timeout.total_seconds(),
        fail_on_bad_record=pipeline.on_bad_record == "fail",
        retries=retries,
    )
    runner = PipelineRunner(
        settings=settings,
        source=source,
        decode=decoder.decode,
        sink=sink,
        # a state store down when the pipeline starts is waited for as one that goes down later
        state=_open_state_store(pipeline.state_url, retries),
        router=router,
        tables=tables,
        dead_letter=dead_letter,
        hints=hints,
        definitions=definitions,
        transforms=_transforms(job),
        # Debezium's JSON records say where each change stands in the source's log
        source_order=record_source_order if source_config.value_format.value == "debezium-json" else None,
        selection=TableSelection(
            tables,
            topics_name_tables=source_config.topics_name_tables,
            unrouted=source_config.unrouted_tables,
        ),
    )
    if definitions is not None:
        definitions.refresh = runner.sync_hints
    if source_config.value_format is ValueFormat.DEBEZIUM_AVRO:
        _wait_for_the_registry(runner, retries)
    # the times of each batch, for the latency and lag on /metrics
    runner.decode = runner.metrics.timings.watch(runner.decode)
    keep_freed_arenas()  # each checkpoint's rows reuse the memory of the last one's (ferry.arenas)
    return runner


def _open_state_store(url: str, retries: RetryPolicy) -> StateStore:
    """The state store, waited for under the retry policy while it cannot be reached; a store that
    cannot be opened (or is still down once the policy gives up) is a :class:`StateStoreError`
    naming ``pipeline.state.url``."""
    from sqlalchemy.exc import DBAPIError  # noqa: PLC0415

    try:
        return retries.call(
            lambda: StateStore(url),
            "connecting to the state store",
            operation=Operation.STATE_STORE,
            transient=StateStore.is_transient,
        )
    except DBAPIError as e:
        raise open_error(url, e) from None


def _in_memory(state_url: str) -> bool:
    """Whether the state store is an SQLite database in memory (SQLAlchemy gives each thread its own)."""
    return state_url.startswith("sqlite") and (state_url.rstrip("/") == "sqlite:" or ":memory:" in state_url)


def _wait_for_the_registry(runner: PipelineRunner, retries: RetryPolicy) -> None:
    """A batch that needs a schema the registry cannot give now is decoded again under the retry
    policy, the wait shown in the status as the runner's own waits are. The Avro decoder asks the
    registry before it decodes anything of a batch, so a batch that failed emitted nothing."""
    decode = runner.decode

    def decode_when_the_registry_answers(records: Sequence[Any]) -> list[Event]:
        events = retries.call(
            lambda: decode(records),
            "reading the schema registry",
            operation=Operation.SCHEMA_REGISTRY_READ,
            on_wait=runner.status.waiting,  # the runner's status detail while it waits
        )
        runner.status.waited()
        return events

    runner.decode = decode_when_the_registry_answers


def ended(runner: PipelineRunner, elapsed_s: float, *, failed: bool) -> str:
    """What a run did, for its last log line: records read, rows written per sink table, bad
    records, schema changes, checkpoints, and the offsets of the last checkpoint."""
    metrics = runner.metrics
    rows = f"{sum(metrics.rows_written.values())} rows"
    if metrics.rows_written:
        rows += " (" + ", ".join(f"{table} {n}" for table, n in sorted(metrics.rows_written.items())) + ")"
    last = describe_offsets(runner.checkpoints.checkpointed)
    return (
        f"{'failed' if failed else 'stopped'} after {elapsed_s:.1f} s: read {metrics.records_read} "
        f"records, wrote {rows}, {_count(metrics.bad_records, 'bad record')}, "
        f"{_count(metrics.schema_changes, 'schema change')}, {_count(metrics.checkpoints, 'checkpoint')}; "
        f"last checkpoint at {last}"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def run_with_status(
    runner: PipelineRunner, status_port: int | None, stop: threading.Event, status_host: str = "127.0.0.1"
) -> None:
    """Run a pipeline, serving its status over HTTP on ``status_host`` while it runs when a port
    is configured."""
    from ferry.api.status import StatusServer  # noqa: PLC0415

    server = StatusServer(runner, status_port, status_host).start() if status_port else None
    try:
        runner.run(stop)
    finally:
        if server is not None:
            server.stop()


def run_instances(commands: Sequence[Sequence[str]], grace_s: float = STOP_GRACE_S) -> int:
    """Run the worker processes of one ``ferry run`` (``pipeline.parallelism``), one per command.

    SIGTERM and SIGINT are passed on to each (each takes its final checkpoint). When one fails, the
    others are stopped the same way, and the exit code is the first failure's; 0 when all stopped
    cleanly (a bounded read, a stop). A process still there ``grace_s`` after it was told to stop
    is killed (SIGKILL): it restarts from its last checkpoint.
    """
    running = {
        process.pid: process
        for process in (
            subprocess.Popen(list(command), preexec_fn=parent_death_hook(signal.SIGTERM))  # noqa: PLW1509
            for command in commands
        )
    }
    #: When the processes told to stop are killed (``time.monotonic()``), once they were told.
    kill_at: list[float] = []

    def forward(sig: int, frame: object) -> None:
        for process in running.values():
            process.send_signal(sig)
        if not kill_at:
            kill_at.append(time.monotonic() + grace_s)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    failure, killed, tick = 0, False, threading.Event()
    try:
        while running:
            for pid, process in list(running.items()):
                code = process.poll()
                if code is None:
                    continue
                del running[pid]
                if code != 0 and failure == 0:
                    failure = code if code > 0 else 1
                    log.error("worker process %d exited with %d: stopping the others", pid, code)
                    forward(signal.SIGTERM, None)
            if running and kill_at and not killed and time.monotonic() >= kill_at[0]:
                killed = True
                for pid, process in running.items():
                    log.error("worker process %d did not stop within %g s: killing it", pid, grace_s)
                    process.kill()
            tick.wait(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return failure


class FerryWorker:
    """Runs one pipeline in this process; :meth:`run` returns when the pipeline stops.

    A worker is a plain process around the hot path: the runner reads on the calling thread,
    SIGTERM and SIGINT (when it is the main thread) stop it after a final checkpoint, the status
    port (``pipeline.status.port``, on ``status_host``) is served from a thread, and a thread
    bounds the process's end (:meth:`_watch_the_end`). The change events are shared through the
    pipeline's consumer group; Debezium's schema-change topic is read by each runner from the
    position its checkpoint holds (:class:`~ferry.connectors.kafka.schema_changes.SchemaChangeReader`),
    so a worker needs no group or topic of its own. ``worker_id`` names the worker in its log.
    """

    def __init__(
        self,
        job: JobConfig,
        *,
        worker_id: str | None = None,
        status_host: str = "127.0.0.1",
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.job = job
        self.stop_grace_s = stop_grace_s
        self.worker_id = worker_id
        self.status_host = status_host
        self.stop_event = threading.Event()
        self.runner: PipelineRunner | None = None
        self.error: BaseException | None = None
        self.startup_timeout_s = startup_timeout_s
        self._done = threading.Event()

    def stop(self) -> None:
        """Stop the pipeline after a final checkpoint (what SIGTERM does)."""
        self.stop_event.set()

    def run(self) -> int:
        """Run the pipeline until it stops; 0 when it stopped cleanly (a bounded read, a stop)."""
        previous = self._handle_signals()
        threading.Thread(target=self._watch_the_end, name="ferry-stop-bound", daemon=True).start()
        started = time.monotonic()
        name = self.job.pipeline.name
        who = f"pipeline '{name}'" + (f" (worker {self.worker_id})" if self.worker_id else "")
        log.info("%s: %s", who, reads(self.job))
        log.info("%s: %s", who, writes(self.job))
        try:
            self.runner = build_runner(self.job, startup_timeout_s=self.startup_timeout_s)
            run_with_status(self.runner, self.job.pipeline.status_port, self.stop_event, self.status_host)
        except BaseException as e:
            self.error = e
            log.error("%s failed: %s", who, e)
        finally:
            self._done.set()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.runner is not None:
            log.info(
                "%s %s", who, ended(self.runner, time.monotonic() - started, failed=self.error is not None)
            )
        return 1 if self.error is not None else 0

    def _handle_signals(self) -> dict[int, Any]:
        """SIGTERM and SIGINT stop the pipeline after a final checkpoint; only the main thread
        takes signals, so a worker run on another one is stopped by :meth:`stop`."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {
            sig: signal.signal(sig, lambda *_: self.stop_event.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }

    def _watch_the_end(self) -> None:
        """End the process when it outlives its pipeline: ``stop_grace_s`` after the pipeline
        failed or ended, or after a stop beyond what its final checkpoint may wait for (the retry
        policy's timeout). Closing a client or a thread a library left behind can keep a process
        alive; a restart resumes from the last checkpoint."""
        final_s = self.job.pipeline.restart_strategy.timeout.total_seconds()
        tick = threading.Event()
        deadline: float | None = None
        while deadline is None or time.monotonic() < deadline:
            tick.wait(0.2)
            if deadline is not None:
                continue
            if self._failed_now():
                deadline = time.monotonic() + self.stop_grace_s
            elif self.stop_event.is_set():
                deadline = time.monotonic() + final_s + self.stop_grace_s
            elif self._done.is_set():
                deadline = time.monotonic() + self.stop_grace_s
        log.error(
            "the worker of pipeline %s did not end within %g s of its pipeline: exiting",
            self.job.pipeline.name,
            self.stop_grace_s,
        )
        logging.shutdown()
        if self.error is not None:  # the one line ``ferry run`` would have printed
            sys.stderr.write(f"error: {mask_secrets(str(self.error))}\n")
            sys.stderr.flush()
        os._exit(1 if self._failed_now() else 0)

    def _failed_now(self) -> bool:
        runner = self.runner
        return self.error is not None or (runner is not None and runner.status.phase is Phase.FAILED)
