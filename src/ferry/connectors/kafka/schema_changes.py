"""Debezium's schema-change topic, read from the position the pipeline's checkpoint holds.

Every worker of a pipeline needs every DDL hint of the tables it reads, so the topic is not shared
through the consumer group: each runner reads all of its partitions with a consumer of its own,
assigned (not subscribed), from offsets it is given. Nothing is committed to Kafka: the position
reached is part of the pipeline's checkpoint (see :mod:`ferry.pipeline.schema_operator`), saved
with the data offsets and the tracked schemas, so a restart resumes exactly where the checkpoint
was taken.

:meth:`SchemaChangeReader.sync` reads up to the topic's current end: it asks the broker where the
end is and returns at once when that is already read. Those questions are asked again under the
pipeline's retry policy while the broker cannot answer, and records are decoded again under it
while the schema registry of an Avro topic cannot answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from ferry.connectors.formats import Decoder
from ferry.connectors.kafka.exceptions import SourceError, error_may_pass, may_pass
from ferry.logs import kafka_logger
from ferry.model.events import Event
from ferry.retry import Operation, RetryPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")


class SchemaChangeReader:
    """Reads one schema-change topic into hint events (see the module documentation)."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        topic: str,
        decoder: Decoder,
        properties: Mapping[str, Any] | None = None,
        retries: RetryPolicy | None = None,
    ) -> None:
        self.topic = topic
        self.retries = retries or RetryPolicy()
        self.decoder = decoder
        self.settings: dict[str, Any] = {
            **(properties or {}),
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"ferry-schema-changes-{topic}",  # required by the client; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
        }
        self.consumer: Consumer | None = None
        #: partition → the next offset to read
        self.positions: dict[int, int] = {}

    def open(self, start: Mapping[int, int]) -> None:
        consumer = self.consumer = Consumer(self.settings, logger=kafka_logger(__name__))
        listed = self._ask(
            lambda: consumer.list_topics(self.topic, timeout=10),
            f"reading the metadata of schema-change topic {self.topic}",
        )
        metadata = listed.topics.get(self.topic)
        partitions = sorted(metadata.partitions) if metadata is not None and metadata.error is None else []
        if not partitions:
            log.warning("schema-change topic %s does not exist (yet): reading its partition 0", self.topic)
            partitions = [0]
        assignment = [TopicPartition(self.topic, p, start.get(p, OFFSET_BEGINNING)) for p in partitions]
        self.positions = {p: start[p] for p in partitions if p in start}
        self.consumer.assign(assignment)

    def drain(self) -> list[Event]:
        """What has arrived since the last call, without waiting."""
        return self._read(0.0)

    def sync(self, timeout: float) -> list[Event]:
        """Everything written to the topic up to now; returns at once when that is read already."""
        assert self.consumer is not None, "open() first"
        ends = self._ends()
        events: list[Event] = []
        deadline = time.monotonic() + timeout
        while any(self.positions.get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                log.warning("schema-change topic %s not read to its end within %.0f s", self.topic, timeout)
                break
            events += self._read(0.2)
        return events + self._read(0.0)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None

    def _ends(self) -> dict[int, int]:
        consumer = self.consumer
        assert consumer is not None
        ends: dict[int, int] = {}
        for partition in [tp.partition for tp in consumer.assignment()]:
            low, high = self._ask(
                partial(
                    consumer.get_watermark_offsets,
                    TopicPartition(self.topic, partition),
                    timeout=10,
                    cached=False,
                ),
                f"reading the end of schema-change topic {self.topic}[{partition}]",
            )
            if high > low and self.positions.get(partition, 0) < high:
                ends[partition] = high
        return ends

    def _read(self, timeout: float) -> list[Event]:
        assert self.consumer is not None, "open() first"
        events: list[Event] = []
        while True:
            records = self.consumer.consume(num_messages=500, timeout=timeout)
            good = []
            for record in records:
                error = record.error()
                if error is not None:
                    if not error_may_pass(error):
                        where = f"{self.topic}[{record.partition()}]"
                        raise SourceError(f"Kafka error on schema-change topic {where}: {error.str()}")
                    continue
                good.append(record)
                self.positions[record.partition()] = record.offset() + 1
            if good:
                # a schema registry out of reach (Avro) is waited for: the decoder asks it first
                events += self.retries.call(
                    partial(self.decoder.decode, good),
                    "reading the schema registry",
                    operation=Operation.SCHEMA_REGISTRY_READ,
                )
            if not records:
                return events
            timeout = 0.0

    def _ask(self, request: Callable[[], T], what: str) -> T:
        """A request to the broker, asked again under the retry policy while it cannot answer."""
        try:
            return self.retries.call(request, what, operation=Operation.BROKER_REQUEST, transient=may_pass)
        except KafkaException as e:
            raise SourceError(f"{what}: {e}") from e
