"""Bad input: each record that cannot be processed names where it was and reaches the dead-letter topic."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import TableId
from ferry.pipeline.exceptions import BadRecordError
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table, read_all

pytestmark = pytest.mark.integration


def bad_stream(table_topic: str) -> list[tuple[bytes | None, bytes | None]]:
    table = orders_table()
    good = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 4)]
    contradicting = table.insert({"id": 9, "item": "x", "qty": 1})[1].replace(b'"qty":1', b'"qty":"many"')
    return [
        good[0],
        (b'{"id":5}', b'{"payload": {"op": "c", '),  # malformed JSON
        good[1],
        (b'{"id":6}', good[2][1].replace(b'"op":"c"', b'"op":"x"')),  # unknown op
        (b'{"id":7}', None),  # tombstone
        (b'{"id":9}', contradicting),  # contradicts its declared schema
        good[2],
    ]


def test_bad_records_go_to_the_dead_letter_topic_and_the_pipeline_goes_on(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    stream = bad_stream(topic)
    produce(kafka_bootstrap, topic, [v for _, v in stream], keys=[k for k, _ in stream])
    sink = MemorySink()
    runner = build_runner(load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id)), sink=sink)
    runner.run()

    assert sorted(r["id"] for r in sink.rows(TableId.parse("inventory.orders"))) == [1, 2, 3]
    dead = read_all(kafka_bootstrap, f"{group_id}.dlq", expected=3)
    # the tombstone (offset 4) is not a bad record: it is counted and passed over
    assert [int(dict(m.headers())["ferry.offset"]) for m in dead] == [1, 3, 5]
    assert runner.metrics.tombstones == 1
    reasons = [dict(m.headers())["ferry.reason"].decode() for m in dead]
    assert "malformed JSON" in reasons[0]
    assert "'x'" in reasons[1] and "op" in reasons[1]
    assert "qty" in reasons[2]
    for m in dead:
        headers = dict(m.headers())
        assert headers["ferry.topic"].decode() == topic
        assert headers["ferry.partition"] == b"0"
    # the record itself is kept unchanged
    assert dead[0].value() == stream[1][1]
    assert runner.metrics.bad_records == 3


def test_on_bad_record_fail_stops_the_pipeline_naming_the_position(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    stream = bad_stream(topic)
    produce(kafka_bootstrap, topic, [v for _, v in stream], keys=[k for k, _ in stream])
    job = load_job_text(
        job_yaml(kafka_bootstrap, topic, tmp_path, group_id, pipeline_extra="  on-bad-record: fail")
    )
    runner = build_runner(job, sink=MemorySink())
    with pytest.raises(BadRecordError, match=f"topic {topic}, partition 0, offset 1: malformed JSON"):
        runner.run()
    assert runner.status.phase == "FAILED"
    status = runner.state.get_status(group_id)
    assert status is not None and status["phase"] == "FAILED" and "offset 1" in status["detail"]


def test_a_value_that_cannot_be_cast_to_the_sink_column_reaches_the_dead_letter_topic(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    from ferry.local import debezium as dbz

    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": 1, "item": "a", "qty": 1})]
    table.change_type("qty", dbz.INT64)
    records += [
        table.insert({"id": 2, "item": "b", "qty": 2}),
        table.insert({"id": 3, "item": "c", "qty": 2**40}),
    ]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    sink = MemorySink()
    sink.refuse_tags = {"alter.column.type"}  # the sink refuses the widening when it is applied
    job = load_job_text(
        job_yaml(
            kafka_bootstrap, topic, tmp_path, group_id, pipeline_extra="  schema.change.behavior: TRY_EVOLVE"
        )
    )
    runner = build_runner(job, sink=sink)
    runner.run()

    assert sorted(r["id"] for r in sink.rows(TableId.parse("inventory.orders"))) == [1, 2]
    [dead] = read_all(kafka_bootstrap, f"{group_id}.dlq", expected=1)
    headers = dict(dead.headers())
    assert headers["ferry.offset"] == b"2" and headers["ferry.topic"].decode() == topic
    assert "column 'qty': value 1099511627776 cannot be cast to INT" in headers["ferry.reason"].decode()
    history = runner.state.schema_history(group_id)
    assert any(
        h.change.startswith("alter.column.type") and h.outcome == "skip" and "refused" in h.reason
        for h in history
    )
