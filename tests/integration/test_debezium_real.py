"""``ferry run`` on what the real Debezium connectors (Kafka Connect 4.1, Debezium 3.6.1.Final) wrote
while capturing a real MariaDB and a real PostgreSQL, into Iceberg and into Hologres (on
PostgreSQL), and the PostgreSQL captures and the MySQL flattened modes into Paimon too: every sink
table equals the source database's own final table, row for row and cell for cell.

One workload per session feeds every connector (``tests.support.fixtures.debezium_capture``). Each
capture mode's pipelines read its topics from the start up to the end Debezium reached
(``scan.bounded.mode: latest-offset``) with the schema-change topic as DDL hints (the PostgreSQL
connector has none). All pipelines run at once, next to two pipelines that are killed and
restarted again and again (the MySQL envelope mode's, and the PostgreSQL topics of 3 partitions';
the ``runs`` fixture); the tests then check one mode and sink each. Values are compared after the
normalisation of :mod:`tests.support.oracle`, with the source's final state adjusted only where a
sink declares it does not apply a change (:mod:`tests.support.expectations`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from ferry.pipeline.router import SchemaChangeBehavior
from ferry.state import StateStore
from tests.integration.helpers import start_run
from tests.support.debezium import MYSQL_MODES, POSTGRES_MODES, CaptureMode
from tests.support.expectations import SinkExpectation, compare_sink, declared, sink_expectation
from tests.support.fixtures import CapturedSource, DebeziumCapture
from tests.support.oracle import SinkComparison
from tests.support.postgres import PostgresServer
from tests.support.sinks import SinkTables, iceberg_tables, paimon_tables, postgres_tables
from tests.support.stall import StalledError, StallWatch, wait_unless_stalled

#: The first test waits for the session's capture and every pipeline: bounds of its own, generous.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

SINKS = ("iceberg", "hologres")
#: The sinks of the MySQL connector's flattened modes (``ExtractNewRecordState``): Paimon too.
FLATTENED_SINKS = ("iceberg", "paimon", "hologres")
#: The PostgreSQL captures' sinks: Paimon too.
POSTGRES_SINKS = ("iceberg", "paimon", "hologres")


def mysql_sinks(mode: CaptureMode) -> tuple[str, ...]:
    """The sinks a MySQL capture mode runs into (the flattened ones that Paimon can take)."""
    return FLATTENED_SINKS if mode.flattened and mode.refused is None else SINKS


BEHAVIOR = SchemaChangeBehavior.LENIENT
#: A run has stalled once it used this much CPU without finishing (each needs a fraction of it)...
RUN_CPU_S = 240.0
#: ... or this long passed (a run waiting on nothing uses no CPU); generous for a loaded machine.
RUN_WALL_S = 600.0
#: The same for a restarted run to make the progress it is stopped at.
PROGRESS_CPU_S = 120.0
PROGRESS_WALL_S = 400.0
#: Columns ExtractNewRecordState adds (``add.fields``, and ``__deleted`` of the rewrite mode).
ADDED_FIELD_PREFIX = "__"


# --------------------------------------------------------------------------------------------------
# Job files and what the sinks hold
# --------------------------------------------------------------------------------------------------


def job_text(
    mode: CaptureMode, source: CapturedSource, bootstrap: str, sink: str, directory: Path, name: str
) -> str:
    """The job file of one capture mode's topics into ``sink`` (YAML lines indented under ``sink:``)."""
    ddl_topic = "" if mode in POSTGRES_MODES else f"  schema-change.topic: {mode.topic_prefix}\n"
    options = "".join(f"  {key}: {value}\n" for key, value in mode.job_options.items())
    pattern = rf"{re.escape(mode.topic_prefix)}\.{re.escape(source.namespace)}\..*"
    return (
        "source:\n"
        "  type: kafka\n"
        f"  properties.bootstrap.servers: {bootstrap}\n"
        f"  topic-pattern: '{pattern}'\n"
        "  value.format: debezium-json\n"
        f"{ddl_topic}{options}"
        "  scan.startup.mode: earliest-offset\n"
        "  scan.bounded.mode: latest-offset\n"
        f"sink:\n{sink}"
        "pipeline:\n"
        f"  name: {name}\n"
        f"  schema.change.behavior: {BEHAVIOR.value}\n"
        f"  state.url: sqlite:///{directory}/state.db\n"
        "  checkpoint.interval: 1s\n"
    )


def iceberg_sink(warehouse: Path) -> str:
    return f"  type: iceberg\n  catalog.properties.warehouse: {warehouse}\n"


def paimon_sink(warehouse: Path) -> str:
    return f"  type: paimon\n  catalog.properties.warehouse: {warehouse}\n"


def hologres_sink(server: PostgresServer, database: str) -> str:
    # broaden: integers are BIGINT and strings TEXT from the start, so a widening needs no ALTER
    # (Hologres cannot alter a column's type)
    return (
        "  type: hologres\n"
        f"  endpoint: {server.host}:{server.port}\n"
        f"  dbname: {database}\n"
        f"  username: {server.user}\n"
        f"  password: '{server.password}'\n"
        "  sink.type-normalize-strategy: broaden\n"
    )


def hologres_database(server: PostgresServer, name: str) -> str:
    """A fresh database of the Hologres sink's server, owned by its user; returns its conninfo."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(server.user))
        )
    return make_conninfo(server.conninfo, dbname=name)


def dead_letters(bootstrap: str, topic: str) -> list[str]:
    """Where each record of a dead-letter topic came from and why (none when there is no topic)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    try:
        described = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if described is None or described.error is not None:
            return []
        reasons: list[str] = []
        for partition in described.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            next_offset = low
            while next_offset < high:
                message = consumer.poll(10)
                if message is None:
                    raise AssertionError(
                        f"{topic}[{partition}] did not deliver offset {next_offset} of {high}"
                    )
                if message.error() is not None:
                    continue
                headers = {
                    k: v.decode("utf-8", "replace") for k, v in message.headers() or [] if v is not None
                }
                reasons.append(
                    f"{headers.get('ferry.topic')}[{headers.get('ferry.partition')}]@{headers.get('ferry.offset')}: "
                    f"{headers.get('ferry.reason')}"
                )
                next_offset = message.offset() + 1
        return reasons
    finally:
        consumer.close()


def log_tail(log: Path, characters: int = 4000) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-characters:] if log.exists() else ""


# --------------------------------------------------------------------------------------------------
# One pipeline per mode and sink
# --------------------------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """One ``ferry run`` of a capture mode into a sink, and what came of it."""

    name: str
    mode: CaptureMode
    sink: str
    source: CapturedSource
    directory: Path
    read_sink: Callable[[], SinkTables]
    expectation: SinkExpectation
    returncode: int | None = None
    seconds: float = 0.0
    #: Why the run was killed as stalled (see :class:`StallWatch`), or None.
    stalled: str | None = None
    dead_letters: list[str] = field(default_factory=list)
    comparison: SinkComparison | None = None

    @property
    def job(self) -> Path:
        return self.directory / "job.yaml"

    @property
    def log(self) -> Path:
        return self.directory / "ferry.log"

    def compare(self, bootstrap: str) -> None:
        self.dead_letters = dead_letters(bootstrap, f"{self.name}.dlq")
        self.comparison = compare_sink(
            self.name,
            self.expectation,
            self.read_sink(),
            ignored_prefixes=(ADDED_FIELD_PREFIX,) if self.mode.flattened else (),
        )


def run_pipelines(pipelines: list[Pipeline]) -> None:
    """Run every pipeline to its end, all at once (each is one process that mostly waits); a run
    that stalls (:class:`StallWatch` with ``RUN_CPU_S`` and ``RUN_WALL_S``) is killed and marked."""
    started = time.monotonic()
    running = {}
    for p in pipelines:
        process = start_run(p.job, p.directory, p.log)
        running[p.name] = (p, process, StallWatch(process.pid, cpu_s=RUN_CPU_S, wall_s=RUN_WALL_S))
    try:
        while running:
            elapsed = time.monotonic() - started
            for name, (pipeline, process, watch) in list(running.items()):
                code = process.poll()
                if code is None and (stall := watch.stalled()) is not None:
                    process.kill()
                    code = process.wait(timeout=30)
                    pipeline.stalled = stall
                if code is not None:
                    pipeline.returncode, pipeline.seconds = code, elapsed
                    del running[name]
            time.sleep(0.1)
    finally:
        for _, process, _ in running.values():
            process.kill()
            process.wait(timeout=30)


# --------------------------------------------------------------------------------------------------
# One pipeline killed and restarted
# --------------------------------------------------------------------------------------------------

#: When each run but the last is stopped, and how: once a checkpoint recorded more records, or
#: right after the history shows one more schema change applied at the sink.
STOPS: tuple[tuple[str, signal.Signals], ...] = (
    ("checkpoint", signal.SIGKILL),
    ("schema change", signal.SIGTERM),
    ("schema change", signal.SIGKILL),
    ("checkpoint", signal.SIGTERM),
)
#: The stops of the PostgreSQL topics of 3 partitions: :data:`STOPS` and two SIGKILLs right after
#: a rename was applied at the sink. The workload renames three times; the first run is killed
#: right after the first rename and the next one at its first checkpoint, so that a rename is
#: still ahead for the third run even when the runs read far beyond their checkpoints.
POSTGRES_STOPS: tuple[tuple[str, signal.Signals], ...] = (
    ("rename", signal.SIGKILL),
    ("checkpoint", signal.SIGKILL),
    ("rename", signal.SIGKILL),
    ("schema change", signal.SIGTERM),
    ("schema change", signal.SIGKILL),
    ("checkpoint", signal.SIGTERM),
)


def _records_checkpointed(state: StateStore, pipeline: str) -> int:
    checkpoint = state.latest_checkpoint(pipeline)
    return 0 if checkpoint is None else sum(checkpoint.offsets.values())


def _changes_applied(state: StateStore, pipeline: str) -> int:
    """Schema changes other than table creations the history shows applied at the sink."""
    return sum(
        1
        for e in state.schema_history(pipeline)
        if e.outcome == "apply" and not e.change.lower().startswith("create.table")
    )


def _renames_applied(state: StateStore, pipeline: str) -> int:
    """Column renames the history shows applied at the sink."""
    return sum(
        1
        for e in state.schema_history(pipeline)
        if e.outcome == "apply" and e.change.lower().startswith("rename.column")
    )


#: What each moment of the stops counts: a run is stopped once the count grew.
MOMENTS: dict[str, Callable[[StateStore, str], int]] = {
    "checkpoint": _records_checkpointed,
    "schema change": _changes_applied,
    "rename": _renames_applied,
}


@dataclass
class RestartedPipeline:
    """A mode of :data:`RESTARTED_MODES` into Iceberg with small batches, stopped at each of its
    ``stops`` (:data:`STOPS`, :data:`POSTGRES_STOPS`), then run to its end; :meth:`run` records what
    happened (it runs in a thread of its own)."""

    pipeline: Pipeline
    stops: tuple[tuple[str, signal.Signals], ...] = STOPS
    stopped: list[str] = field(default_factory=list)
    error: str | None = None
    _aborted: threading.Event = field(default_factory=threading.Event)
    _process: subprocess.Popen[bytes] | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test, from the main thread
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._kill()

    def abort(self) -> None:
        """Stop at once (the fixture gave up waiting): kill the run under way."""
        self._aborted.set()
        self._kill()

    def _kill(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._aborted.is_set():
            raise AssertionError("aborted")
        self._process = start_run(self.pipeline.job, self.pipeline.directory, self.pipeline.log)
        return self._process

    def _run(self) -> None:
        name, log = self.pipeline.name, self.pipeline.log
        state = StateStore(f"sqlite:///{self.pipeline.directory}/state.db")
        try:
            for moment, how in self.stops:
                measure = MOMENTS[moment]
                before = measure(state, name)
                process = self._start()
                try:
                    began = time.monotonic()
                    watch = StallWatch(process.pid, cpu_s=PROGRESS_CPU_S, wall_s=PROGRESS_WALL_S)
                    while measure(state, name) <= before and process.poll() is None:
                        if self._aborted.is_set():
                            raise AssertionError(f"aborted; stopped so far: {self.stopped}")
                        if (stall := watch.stalled()) is not None:
                            raise AssertionError(
                                f"a restarted run made no progress ({moment}): it {stall}; "
                                f"stopped so far: {self.stopped}\n{log_tail(log)}"
                            )
                        time.sleep(0.05)
                    if process.poll() is None:
                        os.kill(process.pid, how)
                        self.stopped.append(
                            f"{how.name} right after a {moment} ({measure(state, name)}), "
                            f"{time.monotonic() - began:.1f} s after its start"
                        )
                    code = process.wait(timeout=300)
                    if how is signal.SIGTERM and code != 0:
                        raise AssertionError(f"ferry run exited {code} after SIGTERM:\n{log_tail(log)}")
                finally:
                    if process.poll() is None:
                        process.kill()
                        process.wait(timeout=30)
            began = time.monotonic()
            final = self._start()
            try:
                self.pipeline.returncode = wait_unless_stalled(final, cpu_s=RUN_CPU_S, wall_s=RUN_WALL_S)
            except StalledError as stalled:
                self.pipeline.stalled = str(stalled)
            finally:
                self.pipeline.seconds = time.monotonic() - began
        finally:
            state.close()


# --------------------------------------------------------------------------------------------------
# The runs, once for the module
# --------------------------------------------------------------------------------------------------


def _pipeline(
    capture: DebeziumCapture,
    source: CapturedSource,
    mode: CaptureMode,
    sink: str,
    directory: Path,
    postgres_server: PostgresServer,
    name: str,
) -> Pipeline:
    if sink == "iceberg":
        warehouse = directory / "warehouse"
        sink_yaml = iceberg_sink(warehouse)

        def read() -> SinkTables:
            return iceberg_tables(warehouse, source.namespace)
    elif sink == "paimon":
        paimon_warehouse = directory / "paimon"
        sink_yaml = paimon_sink(paimon_warehouse)

        def read() -> SinkTables:
            return paimon_tables(paimon_warehouse, source.namespace)
    else:
        database = name.replace("-", "_")
        conninfo = hologres_database(postgres_server, database)
        sink_yaml = hologres_sink(postgres_server, database)

        def read() -> SinkTables:
            return postgres_tables(conninfo, source.namespace)

    expectation = sink_expectation(
        source.tables,
        source.summary,
        declared(sink, BEHAVIOR),
        truncates_emitted=mode.emits_truncate,
        nulls_written_as_defaults=mode.nulls_written_as_defaults,
    )
    pipeline = Pipeline(name, mode, sink, source, directory, read, expectation)
    pipeline.job.write_text(
        job_text(mode, source, capture.bootstrap, sink_yaml, directory, name), encoding="utf-8"
    )
    return pipeline


#: The pipelines killed and restarted (:class:`RestartedPipeline`), into Iceberg: the MySQL envelope
#: mode's, and the PostgreSQL topics of 3 partitions'.
RESTARTED_MODES: tuple[CaptureMode, ...] = (MYSQL_MODES[0], POSTGRES_MODES[1])
RESTARTED = tuple(f"{mode.name}-restarts" for mode in RESTARTED_MODES)


@dataclass
class ModuleRuns:
    pipelines: dict[str, Pipeline]
    #: By name (:data:`RESTARTED`).
    restarted: dict[str, RestartedPipeline]


def _restarted_pipeline(
    capture: DebeziumCapture,
    mode: CaptureMode,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> RestartedPipeline:
    source = capture.postgres if mode in POSTGRES_MODES else capture.mysql
    name = f"{mode.name}-restarts"
    restarted = RestartedPipeline(
        _pipeline(capture, source, mode, "iceberg", tmp_path_factory.mktemp(name), postgres_server, name),
        POSTGRES_STOPS if mode in POSTGRES_MODES else STOPS,
    )
    # small batches and frequent checkpoints: each run has moments to be stopped at
    job = restarted.pipeline.job
    job.write_text(
        job.read_text(encoding="utf-8").replace(
            "  checkpoint.interval: 1s\n", "  checkpoint.interval: 100ms\n  batch.size: 200\n"
        ),
        encoding="utf-8",
    )
    return restarted


@pytest.fixture(scope="module")
def runs(
    debezium_capture: DebeziumCapture,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ModuleRuns]:
    """Every mode into every sink of its source, and the restarted pipelines, run at once."""
    capture = debezium_capture
    made: list[Pipeline] = []
    for source in (capture.mysql, capture.postgres):
        for mode in source.modes:
            for sink in POSTGRES_SINKS if mode in POSTGRES_MODES else mysql_sinks(mode):
                name = f"{mode.name}-{sink}"
                made.append(
                    _pipeline(
                        capture, source, mode, sink, tmp_path_factory.mktemp(name), postgres_server, name
                    )
                )
    restarted = [
        _restarted_pipeline(capture, mode, postgres_server, tmp_path_factory) for mode in RESTARTED_MODES
    ]
    began = time.monotonic()
    threads = [
        threading.Thread(target=r.run, name=f"restarted-{r.pipeline.name}", daemon=True) for r in restarted
    ]
    for thread in threads:
        thread.start()
    try:
        run_pipelines(made)
        stops = max(len(r.stops) for r in restarted)
        deadline = time.monotonic() + stops * (PROGRESS_WALL_S + 90) + RUN_WALL_S
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for r, thread in zip(restarted, threads, strict=True):
            if thread.is_alive():
                r.abort()
                thread.join(timeout=60)
    print(f"\n{len(made) + len(restarted)} pipelines run in {time.monotonic() - began:.1f} s")
    for pipeline in [*made, *(r.pipeline for r in restarted)]:
        if pipeline.mode.refused is not None:
            print(f"\n{pipeline.name}: exit {pipeline.returncode}, refused:\n{log_tail(pipeline.log, 600)}")
            continue
        pipeline.compare(capture.bootstrap)
        assert pipeline.comparison is not None
        print(
            f"\n{pipeline.name}: exit {pipeline.returncode} after {pipeline.seconds:.1f} s, "
            f"{len(pipeline.dead_letters)} dead letters\n{pipeline.comparison.report()}"
        )
    yield ModuleRuns({p.name: p for p in made}, {r.pipeline.name: r for r in restarted})


def check(pipeline: Pipeline) -> None:
    """Assert the run ended well and the sink holds exactly what it must."""
    name = pipeline.name
    if pipeline.mode.refused is not None:  # refused at validation: nothing read, exit 2, the reason
        assert pipeline.returncode == 2, (
            f"{name}: ferry run exited {pipeline.returncode}:\n{log_tail(pipeline.log)}"
        )
        assert pipeline.mode.refused in log_tail(pipeline.log), log_tail(pipeline.log)
        return
    comparison = pipeline.comparison
    assert comparison is not None
    assert pipeline.stalled is None, (
        f"{name}: ferry run stalled: it {pipeline.stalled}:\n{log_tail(pipeline.log)}"
    )
    assert pipeline.returncode == 0, (
        f"{name}: ferry run exited {pipeline.returncode}:\n{log_tail(pipeline.log)}"
    )
    assert not pipeline.dead_letters, (
        f"{name}: {len(pipeline.dead_letters)} records went to the dead-letter topic:\n"
        + "\n".join(pipeline.dead_letters[:20])
        + f"\n{comparison.report()}"
    )
    assert comparison.rows_compared > 0, comparison.report()
    assert comparison.differences == 0, comparison.report()


CASES = [
    *(f"{mode.name}-{sink}" for mode in MYSQL_MODES for sink in mysql_sinks(mode)),
    *(f"{mode.name}-{sink}" for mode in POSTGRES_MODES for sink in POSTGRES_SINKS),
]


@pytest.mark.parametrize("case", CASES)
def test_the_sink_equals_the_source_database(case: str, runs: ModuleRuns) -> None:
    check(runs.pipelines[case])


@pytest.mark.parametrize("case", RESTARTED)
def test_killed_and_restarted_runs_end_exact(case: str, runs: ModuleRuns) -> None:
    """Killed with SIGKILL and stopped with SIGTERM at several moments (two of them right after a
    schema change was applied at the sink; on the PostgreSQL topics two more SIGKILLs, right after a
    rename was), restarted each time: no stall, and the sink ends exact."""
    restarted = runs.restarted[case]
    print(f"\nstopped: {restarted.stopped}")
    assert restarted.error is None, f"{restarted.error}\nstopped: {restarted.stopped}"
    moments = [f"{how.name} right after a {moment}" for moment, how in restarted.stops]
    assert len(restarted.stopped) == len(moments), (
        f"the runs ended before they could be stopped at each of {moments}: stopped {restarted.stopped}"
    )
    assert any("schema change" in s for s in restarted.stopped), (
        f"no run was stopped right after a schema change: {restarted.stopped}"
    )
    check(restarted.pipeline)
