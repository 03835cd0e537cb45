"""Outages of the state store a pipeline waits out by itself (``pipeline.restart-strategy``), during a
run and when it starts, losing and repeating nothing."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import TableId
from ferry.pipeline.phase import Phase
from ferry.pipeline.runner import PipelineRunner
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import job_yaml, orders_table
from tests.integration.outages import RETRIES, hold_outage, running
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.integration

ORDERS = TableId.parse("inventory.orders")


def test_a_state_store_stopped_and_started_again_is_waited_for(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 21)]
    produce(kafka_bootstrap, topic, [v for _, v in records[:10]], keys=[k for k, _ in records[:10]])
    text = job_yaml(kafka_bootstrap, topic, tmp_path, group_id, bounded="unbounded", pipeline_extra=RETRIES)
    text = text.replace(
        f"state.url: sqlite:///{tmp_path}/state.db", f"state.url: '{postgres_server.sqlalchemy_url}'"
    )
    sink = MemorySink()
    runner = build_runner(load_job_text(text), sink=sink)
    store = StateStore(postgres_server.sqlalchemy_url)

    def checkpointed() -> dict[tuple[str, int], int] | None:
        checkpoint = store.latest_checkpoint(group_id)
        return None if checkpoint is None else checkpoint.offsets

    try:
        with running(runner) as errors:
            wait_for(
                lambda: checkpointed() == {(topic, 0): 10}, 30, lambda: f"the first checkpoint, {errors}"
            )
            with postgres_server.stopped():
                began = time.monotonic()
                produce(
                    kafka_bootstrap, topic, [v for _, v in records[10:]], keys=[k for k, _ in records[10:]]
                )
                wait_for(
                    lambda: re.search(
                        r"saving the checkpoint: attempt ([2-9]|\d\d+) of", runner.status.detail
                    ),
                    30,
                    lambda: (
                        f"the pipeline to wait for the state store (detail {runner.status.detail!r}, {errors})"
                    ),
                )
                hold_outage(runner, errors, began)
            wait_for(lambda: checkpointed() == {(topic, 0): 20}, 60, lambda: f"the last checkpoint, {errors}")
            assert not errors
        assert not errors and runner.status.phase is Phase.STOPPED
        assert sorted(r["id"] for r in sink.rows(ORDERS)) == list(range(1, 21))
        status = store.get_status(group_id)
        assert status is not None and status["phase"] == "STOPPED"
    finally:
        store.close()


def test_a_state_store_down_when_the_pipeline_starts_is_waited_for(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    group_id: str,
    postgres_server: PostgresServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 6)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    text = job_yaml(kafka_bootstrap, topic, tmp_path, group_id, pipeline_extra=RETRIES)
    text = text.replace(
        f"state.url: sqlite:///{tmp_path}/state.db", f"state.url: '{postgres_server.sqlalchemy_url}'"
    )
    built: list[PipelineRunner | BaseException] = []

    def build() -> None:
        try:
            built.append(build_runner(load_job_text(text), sink=sink))
        except BaseException as e:
            built.append(e)

    sink = MemorySink()
    builder = threading.Thread(target=build, name="build")
    with caplog.at_level(logging.WARNING, logger="ferry.retry"), postgres_server.stopped():
        builder.start()
        wait_for(
            lambda: (
                any(
                    re.search(r"connecting to the state store: attempt ([2-9]|\d\d+) of", r.getMessage())
                    for r in caplog.records
                )
                or bool(built)
            ),
            30,
            lambda: f"the pipeline to wait for the state store ({built})",
        )
        assert not built, built
    builder.join(60)
    [runner] = built
    assert isinstance(runner, PipelineRunner), runner
    runner.run(threading.Event())  # bounded: to the end of the topic
    assert sorted(r["id"] for r in sink.rows(ORDERS)) == [1, 2, 3, 4, 5]
    store = StateStore(postgres_server.sqlalchemy_url)
    try:
        checkpoint = store.latest_checkpoint(group_id)
        assert checkpoint is not None and checkpoint.offsets == {(topic, 0): 5}
    finally:
        store.close()
