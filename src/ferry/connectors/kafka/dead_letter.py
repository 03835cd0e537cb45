"""The dead-letter topic: records that cannot be processed, kept with the reason.

Each record is produced unchanged (key and value) to ``<pipeline name>.dlq`` with headers naming
the reason and where it came from (``ferry.reason``, ``ferry.topic``, ``ferry.partition``,
``ferry.offset``, ``ferry.pipeline``). The producer is flushed before offsets are committed, so a
bad record is never lost between the two.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, Message, Producer

from ferry.connectors.kafka.exceptions import DeadLetterError

log = logging.getLogger(__name__)


class KafkaDeadLetter:
    def __init__(self, *, bootstrap_servers: str, topic: str, pipeline: str) -> None:
        self.topic = topic
        self.pipeline = pipeline
        self.producer = Producer(
            {"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "linger.ms": 20}
        )
        self.sent = 0
        self._errors: list[str] = []

    def send(
        self, *, reason: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        headers = [
            ("ferry.reason", reason.encode()),
            ("ferry.topic", topic.encode()),
            ("ferry.partition", str(partition).encode()),
            ("ferry.offset", str(offset).encode()),
            ("ferry.pipeline", self.pipeline.encode()),
        ]
        self.producer.produce(self.topic, value=value, key=key, headers=headers, on_delivery=self._delivered)
        self.producer.poll(0)
        self.sent += 1

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._errors.append(error.str())

    def flush(self) -> None:
        remaining = self.producer.flush(30)
        if remaining or self._errors:
            errors, self._errors = self._errors, []
            raise DeadLetterError(
                f"{remaining} record(s) not stored in dead-letter topic {self.topic}: "
                + "; ".join(errors[:3])
            )

    def close(self) -> None:
        self.producer.flush(10)
        del self.producer  # the client's threads stop with the last reference
