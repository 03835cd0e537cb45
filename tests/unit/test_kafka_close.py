"""Closing a Kafka consumer is bounded: a close that returns is waited for, one that waits on a
broker or a group that does not answer is left to end with the process after the bound."""

from __future__ import annotations

import threading

from confluent_kafka import Consumer

from ferry.connectors.kafka.source import close_bounded


def test_a_close_that_returns_is_waited_for() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g"})
    assert close_bounded(consumer, 30.0)


class HangingClose:
    """A consumer whose close waits until it is let go (librdkafka's waiting on a group leave)."""

    def __init__(self) -> None:
        self.let_go = threading.Event()

    def close(self) -> None:
        self.let_go.wait()


def test_a_close_that_hangs_is_left_behind_after_the_bound() -> None:
    consumer = HangingClose()
    try:
        assert not close_bounded(consumer, 0.2)  # type: ignore[arg-type]
    finally:
        consumer.let_go.set()
