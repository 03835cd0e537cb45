"""Per-table start positions (scan.startup.mode) and bounded reads on the real broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.model.schema import TableId
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration
ORDERS = TableId.parse("inventory.orders")


def fill(bootstrap: str, topic: str, ids: range, partition: int = 0) -> None:
    table = orders_table()
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in ids]
    produce(bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records], partition=partition)


def ids_read(bootstrap: str, topic: str, tmp_path: Path, name: str, **kw: str) -> list[int]:
    sink = MemorySink()
    build_runner(load_job_text(job_yaml(bootstrap, topic, tmp_path, name, **kw)), sink=sink).run()
    return sorted(r["id"] for r in sink.rows(ORDERS))


def test_earliest_offset_reads_everything(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 11))
    assert ids_read(kafka_bootstrap, topic, tmp_path, group_id) == list(range(1, 11))


def test_specific_offsets_per_partition(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(2)
    fill(kafka_bootstrap, topic, range(1, 11), partition=0)
    fill(kafka_bootstrap, topic, range(11, 21), partition=1)
    got = ids_read(
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        startup="specific-offsets",
        source_extra="  scan.startup.specific-offsets: partition:0,offset:7;partition:1,offset:2",
    )
    assert got == [8, 9, 10, *range(13, 21)]


def test_timestamp_starts_at_the_first_record_at_or_after_it(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 6))
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    fill(kafka_bootstrap, topic, range(6, 11))
    got = ids_read(
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        startup="timestamp",
        source_extra=f"  scan.startup.timestamp-millis: {middle}",
    )
    assert got == list(range(6, 11))


def test_per_topic_start_wins_over_the_source_default(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 11))
    extra = f"""  tables:
    - topic: {topic}
      scan.startup.mode: specific-offsets
      scan.startup.specific-offsets: partition:0,offset:5"""
    got = ids_read(kafka_bootstrap, topic, tmp_path, group_id, source_extra=extra)
    assert got == list(range(6, 11))


def test_group_offsets_resume_where_the_last_run_committed(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 6))
    assert ids_read(kafka_bootstrap, topic, tmp_path / "a", group_id, startup="group-offsets") == [
        1,
        2,
        3,
        4,
        5,
    ]
    fill(kafka_bootstrap, topic, range(6, 9))
    # a fresh state store: only the consumer group remembers where the last run stopped
    got = ids_read(kafka_bootstrap, topic, tmp_path / "b", group_id, startup="group-offsets")
    assert got == [6, 7, 8]


def test_latest_offset_skips_what_is_there(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 6))
    fill(kafka_bootstrap, topic, range(6, 8))
    got = ids_read(
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        startup="latest-offset",
        bounded="specific-offsets",
        source_extra="  scan.bounded.specific-offsets: partition:0,offset:7",
    )
    assert got == []


def test_bounded_timestamp_stops_at_records_after_it(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    fill(kafka_bootstrap, topic, range(1, 6))
    time.sleep(0.05)
    end = int(time.time() * 1000)
    time.sleep(0.05)
    fill(kafka_bootstrap, topic, range(6, 11))
    got = ids_read(
        kafka_bootstrap,
        topic,
        tmp_path,
        group_id,
        bounded="timestamp",
        source_extra=f"  scan.bounded.timestamp-millis: {end}",
    )
    assert got == [1, 2, 3, 4, 5]


def test_a_bounded_read_of_many_topics_ends_with_every_record_of_each(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    # their partitions are listed in one metadata request at the end (bench/README.md: 128 topics)
    topics = [topic_factory(2) for _ in range(6)]
    for number, topic in enumerate(topics):
        fill(kafka_bootstrap, topic, range(number * 10 + 1, number * 10 + 4))
    got = ids_read(kafka_bootstrap, ";".join(topics), tmp_path, group_id)
    assert got == [n * 10 + i for n in range(6) for i in (1, 2, 3)]
