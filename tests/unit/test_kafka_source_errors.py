"""Errors of the Kafka source name where they happened: a topic and partition, or the consumer group."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.connectors.kafka.exceptions import SourceError, may_pass
from ferry.connectors.kafka.source import KafkaSource


class ErrorEvent:
    """What confluent-kafka hands out for an error: a message whose error() is set."""

    def __init__(self, error: KafkaError, topic: str | None, partition: int | None) -> None:
        self._error, self._topic, self._partition = error, topic, partition

    def error(self) -> KafkaError:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition


def source() -> KafkaSource:
    return KafkaSource(bootstrap_servers="127.0.0.1:9", group_id="shop", topics=["shop.inventory.orders"])


def test_an_error_of_the_consumer_names_its_group_and_topics_not_none() -> None:
    event = ErrorEvent(KafkaError(KafkaError._FATAL, "fenced", fatal=True), None, None)
    with pytest.raises(SourceError, match=r"consumer group shop \(shop.inventory.orders\): .*fenced") as e:
        source()._without_errors([event])
    assert "None" not in str(e.value)


def test_an_error_of_a_partition_names_it() -> None:
    event = ErrorEvent(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "shop.inventory.orders", 2)
    with pytest.raises(SourceError, match=r"shop.inventory.orders\[2\]"):
        source()._without_errors([event])


def test_leaving_the_group_after_a_long_batch_is_not_fatal() -> None:
    event = ErrorEvent(KafkaError(KafkaError._MAX_POLL_EXCEEDED), None, None)
    assert source()._without_errors([event]) == []


def test_a_broker_away_is_waited_for_and_a_refusal_is_not() -> None:
    away = [KafkaError(KafkaError._TRANSPORT), KafkaError(KafkaError._ALL_BROKERS_DOWN)]
    assert source()._without_errors([ErrorEvent(e, None, None) for e in away]) == []
    assert all(may_pass(KafkaException(e)) for e in away)
    assert may_pass(KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)))
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert not may_pass(KafkaException(refused)) and not may_pass(ValueError("no"))
    assert not may_pass(KafkaException(KafkaError(KafkaError._TRANSPORT, "fenced", fatal=True)))
