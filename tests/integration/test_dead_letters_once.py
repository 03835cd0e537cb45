"""A record goes to the dead-letter topic once, even when the run that stored it failed before its
checkpoint and the restart reads the record again (the real broker, the real dead-letter producer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory
from ferry.model.schema import TableId
from ferry.offsets import Offsets
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table, read_to_end

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def dead_letters(bootstrap: str, topic: str) -> list[tuple[str, str, str]]:
    out = []
    for message in read_to_end(bootstrap, topic):
        headers = {name: value.decode() for name, value in message.headers()}
        out.append((headers["ferry.topic"], headers["ferry.partition"], headers["ferry.offset"]))
    return out


class FailingPast(MemorySink):
    """A memory sink whose first flush of offsets past ``fail_past`` fails for good (a checkpoint of
    nothing new, due when the machine is slow to read, passes)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_past: int | None = None

    def flush(self, offsets: Offsets) -> None:
        if self.fail_past is not None and max(offsets.values(), default=0) > self.fail_past:
            self.fail_past = None
            raise SinkTerminalError("the sink went away", sink="memory")
        super().flush(offsets)


def test_a_restart_after_a_run_failed_before_its_checkpoint_sends_no_dead_letter_twice(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    job = load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id))
    dead_letter_topic = f"{group_id}.dlq"
    sink = FailingPast()

    # a first run reads a good and a bad record, and checkpoints
    produce(kafka_bootstrap, topic, [table.insert({"id": 1, "item": "a", "qty": 1}), (b'{"id":2}', b"{oops")])
    build_runner(job, sink=sink).run()
    assert dead_letters(kafka_bootstrap, dead_letter_topic) == [(topic, "0", "1")]

    # the second run stores the dead letters of two more bad records, then fails before its checkpoint
    produce(
        kafka_bootstrap,
        topic,
        [
            (b'{"id":3}', b"[]"),
            table.insert({"id": 4, "item": "d", "qty": 4}),
            (b'{"id":5}', b'{"hello":"world","payload":5}'),
        ],
    )
    sink.fail_past = 2  # the first checkpoint past what the first run read fails
    with pytest.raises(SinkTerminalError):
        build_runner(job, sink=sink).run()
    sink.pending.clear()  # what it wrote and did not commit is gone with it
    stored = [(topic, "0", "1"), (topic, "0", "2"), (topic, "0", "4")]
    # offset 2 is stored by now; offset 4 too unless that checkpoint came before it was read
    assert dead_letters(kafka_bootstrap, dead_letter_topic) in (stored[:2], stored)

    # the restart reads offsets 2 to 4 again: it writes row 4 and stores no dead letter again
    restarted = build_runner(job, sink=sink)
    restarted.run()
    assert dead_letters(kafka_bootstrap, dead_letter_topic) == stored
    assert restarted.metrics.bad_records == 2  # met and counted, not sent
    assert sorted(r["id"] for r in sink.rows(TableId.parse("inventory.orders"))) == [1, 4]
