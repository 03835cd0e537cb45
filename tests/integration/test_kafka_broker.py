"""The session's real Kafka broker: topics, producing and consuming."""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from ferry.local.kafka_broker import KafkaBroker, TopicFactory, produce
from tests.support.waiting import Deadline

pytestmark = pytest.mark.integration


def test_broker_is_running_on_loopback(kafka_broker: KafkaBroker, kafka_bootstrap: str) -> None:
    assert kafka_broker.is_running()
    assert kafka_bootstrap == kafka_broker.bootstrap_servers
    assert kafka_bootstrap.startswith("127.0.0.1:")
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert list(metadata.brokers) == [1]


def test_produce_and_consume_100_messages_over_3_partitions(
    kafka_bootstrap: str, topic_factory: TopicFactory, group_id: str
) -> None:
    topic = topic_factory(partitions=3)
    values = [f"message-{i}".encode() for i in range(100)]
    sent: list[tuple[int, int]] = []
    for partition in range(3):
        batch = values[partition::3]
        acks = produce(kafka_bootstrap, topic, batch, key=f"k{partition}", partition=partition)
        assert [p for p, _ in acks] == [partition] * len(batch)
        assert [offset for _, offset in acks] == list(range(len(batch)))
        sent.extend(acks)
    assert len(sent) == 100

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    received: dict[int, list[bytes]] = defaultdict(list)
    try:
        consumer.subscribe([topic])
        deadline = Deadline(60)
        while sum(len(v) for v in received.values()) < 100 and not deadline.expired():
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            assert message.key() == f"k{message.partition()}".encode()
            received[message.partition()].append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    assert sorted(received) == [0, 1, 2]
    for partition in range(3):
        assert received[partition] == values[partition::3]  # per-partition order is kept
    assert sorted(v for vs in received.values() for v in vs) == sorted(values)


def test_topic_factory_topics_are_distinct(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    first = topic_factory()
    second = topic_factory(partitions=2, config={"retention.ms": "60000"})
    assert first != second
    assert first.startswith("t-") and second.startswith("t-")
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert len(topics[first].partitions) == 1
    assert len(topics[second].partitions) == 2


def test_group_ids_are_unique(group_id: str) -> None:
    assert group_id.startswith("g-")
    assert len(group_id) > 10
