"""``/metrics`` of a running pipeline, read back with ``prometheus_client``'s own parsers: names,
types, units, label escaping, the histograms of its timings, and the process's metrics."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

import ferry
from ferry.api.status import StatusServer
from ferry.connectors.base import LostRange, RetentionReporting
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import TIMESTAMP_CREATE_TIME, Record
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("shop.orders")
SCHEMA = Schema.of([Column("id", T.INT().not_null())], ["id"])
#: A pipeline name that needs escaping in a label value.
NAME = 'shop "eu"\\1'
#: The changes happened a minute before they are read, and were written to Kafka then.
AGE_S = 60.0


def decode(records: Sequence[Any]) -> list[E.Event]:
    """``create`` and ``add`` are DDL; any other value is a row whose event time is in it."""
    events: list[E.Event] = []
    for r in records:
        position = E.SourcePosition(r.topic(), r.partition(), r.offset())
        value = orjson.loads(r.value())
        if value == "create":
            events.append(E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, position))
        elif value == "add":
            events.append(
                E.SchemaHint(TID, (E.AddColumn(TID, Column("note", T.STRING())),), "ALTER", True, position)
            )
        else:
            events.append(E.DataChange(TID, E.Op.INSERT, None, {"id": value["id"]}, position, value["ts"]))
    return events


def shop_records() -> list[Record]:
    then = int((time.time() - AGE_S) * 1000)
    values: list[Any] = ["create", *({"id": i, "ts": then} for i in range(3)), "add", {"id": 9, "ts": then}]
    return [
        Record("orders", 0, offset, value=orjson.dumps(v), timestamp=(TIMESTAMP_CREATE_TIME, then))
        for offset, v in enumerate(values)
    ]


def runner_for(tmp_path: Path, name: str, records: list[Record]) -> PipelineRunner:
    # a change the sink finishes after two polls: the barrier takes a measurable time
    sink = MemorySink(pending_polls=2)
    runner = PipelineRunner(
        settings=RunnerSettings(
            name=name, tune_gc=False, batch_size=2, status_interval_s=0.0, schema_change_poll_s=0.01
        ),
        source=MemorySource(records),
        decode=decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.decode = runner.metrics.timings.watch(runner.decode)
    runner.open()
    return runner


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PipelineRunner, str]]:
    runner = runner_for(tmp_path, NAME, shop_records())
    server = StatusServer(runner, 0).start()
    yield runner, f"http://127.0.0.1:{server.port}"
    server.stop()
    runner.close()


def get(url: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers["Content-Type"], e.read().decode()


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(family: Any, sample: str, **labels: str) -> float:
    [found] = [s.value for s in family.samples if s.name == sample and labels.items() <= s.labels.items()]
    return float(found)


def test_metrics_follow_prometheus_naming_and_carry_the_pipelines_timings(
    served: tuple[PipelineRunner, str],
) -> None:
    runner, url = served
    runner.step()  # the table is created, two of six records read
    status, content_type, text = get(f"{url}/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    early = families(text)
    assert value(early["ferry_consumer_lag_records"], "ferry_consumer_lag_records", partition="0") == 4
    assert AGE_S - 5 < value(early["ferry_consumer_lag_seconds"], "ferry_consumer_lag_seconds") < AGE_S + 60
    while not runner.source.finished():
        runner.step()
    runner.checkpoint()
    runner.step()  # a status update after the last checkpoint
    found = families(get(f"{url}/metrics")[2])

    ours = {name: f for name, f in found.items() if name.startswith("ferry_")}
    for name, family in ours.items():
        assert family.documentation, f"{name} has no HELP"
        assert "_ms" not in name and "millis" not in name, f"{name}: seconds are the base unit"
        if family.type == "counter":
            assert all(s.name in (f"{name}_total", f"{name}_created") for s in family.samples), name
        if family.type == "histogram":
            assert name.endswith("_seconds"), name
        for sample in family.samples:
            if name != "ferry_build_info":
                assert sample.labels.get("pipeline") == NAME, (name, sample)
    assert {f.type for f in ours.values()} == {"counter", "gauge", "histogram"}
    assert value(found["ferry_build_info"], "ferry_build_info", version=ferry.version()) == 1
    assert value(found["ferry_records_read"], "ferry_records_read_total") == 6
    assert value(found["ferry_rows_written"], "ferry_rows_written_total", table="shop.orders") == 4
    # the table created and the column added: both applied
    assert value(found["ferry_schema_changes"], "ferry_schema_changes_total", outcome="apply") == 2
    assert value(found["ferry_pipeline_phase"], "ferry_pipeline_phase", phase="RUNNING") == 1
    assert value(found["ferry_pipeline_phase"], "ferry_pipeline_phase", phase="FAILED") == 0
    assert value(found["ferry_consumer_lag_seconds"], "ferry_consumer_lag_seconds") == 0

    checkpoints = found["ferry_checkpoint_duration_seconds"]
    # creating the table and adding a column take none: the checkpoints are those of the steps
    assert value(checkpoints, "ferry_checkpoint_duration_seconds_count") == runner.metrics.checkpoints >= 1
    assert (
        value(checkpoints, "ferry_checkpoint_duration_seconds_bucket", le="+Inf")
        == runner.metrics.checkpoints
    )
    barrier = found["ferry_schema_change_barrier_duration_seconds"]
    assert value(barrier, "ferry_schema_change_barrier_duration_seconds_count") >= 1
    # the sum is what the status row says in milliseconds
    barrier_s = value(barrier, "ferry_schema_change_barrier_duration_seconds_sum")
    assert barrier_s == pytest.approx(runner.metrics.schema_change_wait_ms / 1000) and barrier_s >= 0.02
    latency = found["ferry_end_to_end_latency_seconds"]
    assert value(latency, "ferry_end_to_end_latency_seconds_count") >= 1
    assert value(latency, "ferry_end_to_end_latency_seconds_bucket", le="30.0") == 0
    assert value(latency, "ferry_end_to_end_latency_seconds_sum") >= AGE_S

    assert value(found["process_cpu_seconds"], "process_cpu_seconds_total") > 0
    assert "python_info" in found and "python_gc_objects_collected" in found


def test_openmetrics_declares_the_units_when_the_scraper_asks_for_it(
    served: tuple[PipelineRunner, str],
) -> None:
    runner, url = served
    runner.step()
    status, content_type, text = get(f"{url}/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    found = {f.name: f for f in openmetrics_families(text)}
    assert found["ferry_checkpoint_duration_seconds"].unit == "seconds"
    assert found["ferry_consumer_lag_seconds"].unit == "seconds"
    assert found["ferry_consumer_lag_records"].unit == "records"
    assert found["ferry_records_read"].type == "counter"


def test_health_and_readiness_follow_the_phase(served: tuple[PipelineRunner, str]) -> None:
    runner, url = served
    assert runner.status.phase is Phase.RUNNING
    assert get(f"{url}/healthz")[0] == 200
    status, _, body = get(f"{url}/readyz")
    assert status == 200 and orjson.loads(body)["phase"] == "RUNNING"
    runner.status.phase, runner.status.detail = Phase.PENDING, "waiting for inherited offsets"
    status, _, body = get(f"{url}/readyz")
    assert status == 503 and orjson.loads(body)["detail"] == "waiting for inherited offsets"
    assert get(f"{url}/healthz")[0] == 200
    runner.status.phase = Phase.FAILED
    assert get(f"{url}/healthz")[0] == 503
    assert get(f"{url}/nowhere")[0] == 404


def test_each_pipeline_of_a_process_has_a_registry_of_its_own(tmp_path: Path) -> None:
    runners = [runner_for(tmp_path / name, name, shop_records()) for name in ("orders", "refunds")]
    for runner, steps in zip(runners, (1, 3), strict=True):
        for _ in range(steps):
            runner.step()
    servers = [StatusServer(runner, 0).start() for runner in runners]
    try:
        read = [
            value(
                families(get(f"http://127.0.0.1:{s.port}/metrics")[2])["ferry_records_read"],
                "ferry_records_read_total",
            )
            for s in servers
        ]
        pipelines = {
            s.labels["pipeline"]
            for server in servers
            for s in families(get(f"http://127.0.0.1:{server.port}/metrics")[2])["ferry_records_read"].samples
        }
    finally:
        for server in servers:
            server.stop()
        for runner in runners:
            runner.close()
    assert read == [2, 6] and pipelines == {"orders", "refunds"}


def test_the_status_row_keeps_the_counters_and_the_buckets_of_the_histograms(tmp_path: Path) -> None:
    runner = runner_for(tmp_path, "orders", shop_records())
    try:
        while not runner.source.finished():
            runner.step()
        runner.checkpoint()
        runner.step()
        saved = runner.state.get_status("orders")
    finally:
        runner.close()
    assert saved is not None
    checkpoints = saved["metrics"]["timings"]["ferry_checkpoint_duration_seconds"]
    assert checkpoints["count"] == runner.metrics.checkpoints >= 1
    assert checkpoints["buckets"][-1] == ["+Inf", runner.metrics.checkpoints]
    assert saved["metrics"]["schema_change_outcomes"] == {"apply": 2}
    assert orjson.loads(orjson.dumps(runner.metrics.as_dict()))["records_read"] == 6


def test_the_status_port_listens_on_the_host_it_is_given(tmp_path: Path) -> None:
    runner = runner_for(tmp_path, "orders", shop_records())
    server = StatusServer(runner, 0, "127.0.0.2").start()
    try:
        assert get(f"http://127.0.0.2:{server.port}/readyz")[0] == 200
        # the socket is bound to that address alone (not probed on 127.0.0.1, where another
        # process of the machine may listen on the same port number)
        assert server.server.socket.getsockname() == ("127.0.0.2", server.port)
    finally:
        server.stop()
        runner.close()


class RetentionLosingSource(MemorySource):
    """A memory source that says retention deleted records before a start offset."""

    def __init__(self, records: list[Record], lost: list[LostRange]) -> None:
        super().__init__(records)
        self.lost = lost


def test_the_ranges_a_source_lost_to_retention_are_in_the_counters(tmp_path: Path) -> None:
    gone = LostRange("orders", 0, wanted=0, earliest=3)
    runner = runner_for(tmp_path, "orders", shop_records())
    losing = runner_for(tmp_path / "losing", "refunds", [])
    losing.source = RetentionLosingSource([], [gone])
    try:
        assert isinstance(losing.source, RetentionReporting)
        assert not isinstance(runner.source, RetentionReporting)
        for r in (runner, losing):
            r.step()
            r.metrics.refresh(time.time(), (0.0, 0), r.source, r.partitions, r.schemas)
    finally:
        runner.close()
        losing.close()
    assert runner.metrics.lost_offsets == []
    assert losing.metrics.lost_offsets == [{"topic": "orders", "partition": 0, "wanted": 0, "earliest": 3}]
