"""The dead-letter topic: records that cannot be processed, kept with the reason.

Each record is produced unchanged (key and value) to ``<pipeline name>.dlq`` with headers naming
the reason and where it came from (``ferry.reason``, ``ferry.topic``, ``ferry.partition``,
``ferry.offset``, ``ferry.pipeline``). The producer is flushed before offsets are committed, so a
bad record is never lost between the two.

A record too large for the dead-letter topic would stop the pipeline at it on every restart (a
poison pill), so it is stored truncated instead: its key and value cut to fit, with
``ferry.truncated: true`` and the original sizes (``ferry.original-key-size``,
``ferry.original-value-size``) among the headers; the original stays in its own topic at the
offset the headers name. Records larger than the producer's ``message.max.bytes`` are cut before
they are produced; a topic that refuses a smaller record (its ``max.message.bytes``) gets it again
cut to :data:`REFUSED_SIZE_LIMIT`. A delivery that failed for a reason that may pass is produced
again by the next :meth:`KafkaDeadLetter.flush`; one the broker refuses for good fails the flush
with :class:`~ferry.connectors.kafka.exceptions.DeadLetterRefusedError`.

A run that fails after it stored dead letters, before its next checkpoint, reads their records
again when it restarts: :meth:`KafkaDeadLetter.stored_since` reads the topic from a time on and
names the records this pipeline's headers say it stored, which the restart does not send again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from ferry.connectors.kafka.exceptions import DeadLetterError, DeadLetterRefusedError, error_may_pass
from ferry.logs import kafka_logger

log = logging.getLogger(__name__)

#: librdkafka's default ``message.max.bytes``: the largest record the producer sends.
DEFAULT_MAX_RECORD_BYTES = 1_000_000
#: Room kept for the record's framing within the largest size.
FRAMING_BYTES = 512
#: What a record the topic refused as too large is cut to.
REFUSED_SIZE_LIMIT = 64 * 1024
#: Rounds of producing again what failed in one flush before the flush gives up (to be retried).
RESEND_ROUNDS = 3

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    """One record on its way to the dead-letter topic."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    @property
    def size(self) -> int:
        return (
            len(self.key or b"")
            + len(self.value or b"")
            + sum([len(name) + len(value) for name, value in self.headers])
        )

    def truncated(self, limit: int) -> DeadLetterRecord:
        """The record with its key and value cut so that everything fits in ``limit`` bytes, and
        headers saying so (and how large they were). The key keeps up to half of the room."""
        if self.size <= limit:
            return self
        key, value = self.key or b"", self.value or b""
        before = dict(self.headers)  # a record cut before keeps its first sizes
        extra: Headers = [
            ("ferry.truncated", b"true"),
            ("ferry.original-key-size", before.get("ferry.original-key-size", str(len(key)).encode())),
            ("ferry.original-value-size", before.get("ferry.original-value-size", str(len(value)).encode())),
        ]
        headers = tuple((n, v) for n, v in self.headers if not n.startswith(_TRUNCATION_HEADERS))
        room = max(0, limit - sum(len(n) + len(v) for n, v in (*headers, *extra)))
        kept_key = key[: max(room // 2, room - len(value))]
        kept_value = value[: room - len(kept_key)]
        return DeadLetterRecord(
            None if self.key is None else kept_key,
            None if self.value is None else kept_value,
            (*headers, *extra),
        )


_TRUNCATION_HEADERS = ("ferry.truncated", "ferry.original-")


class KafkaDeadLetter:
    """Produces bad records to the dead-letter topic (see the module documentation)."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        topic: str,
        pipeline: str,
        properties: Mapping[str, Any] | None = None,
        flush_timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.pipeline = pipeline
        #: The client settings a consumer of the topic takes (the source's security settings).
        self.client_settings = {**(properties or {}), "bootstrap.servers": bootstrap_servers}
        settings = {"enable.idempotence": True, "linger.ms": 20, **(properties or {})}
        settings["bootstrap.servers"] = bootstrap_servers
        #: The producer's configuration (the source's security settings among ``properties``).
        self.settings: Mapping[str, Any] = settings
        self.max_record_bytes = int(settings.get("message.max.bytes", DEFAULT_MAX_RECORD_BYTES))
        self.producer = Producer(settings, logger=kafka_logger())
        self.flush_timeout_s = flush_timeout_s
        self.sent = 0
        self.truncated = 0
        #: Records whose delivery failed for a reason that may pass, to be produced again.
        self._again: list[DeadLetterRecord] = []
        #: Why the broker refused records for good.
        self._refused: list[str] = []

    def send(
        self, *, reason: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        headers = (
            ("ferry.reason", reason.encode()),
            ("ferry.topic", topic.encode()),
            ("ferry.partition", str(partition).encode()),
            ("ferry.offset", str(offset).encode()),
            ("ferry.pipeline", self.pipeline.encode()),
        )
        self._produce(DeadLetterRecord(key, value, headers))
        self.sent += 1

    def _produce(self, record: DeadLetterRecord) -> None:
        fitting = record.truncated(self.max_record_bytes - FRAMING_BYTES)
        if fitting is not record:
            self.truncated += 1
            log.warning(
                "dead letter of %s too large for %s (%d bytes): stored truncated",
                _origin(record),
                self.topic,
                record.size,
            )
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    value=fitting.value,
                    key=fitting.key,
                    headers=list(fitting.headers),
                    on_delivery=self._delivered,
                )
                break
            except BufferError:  # the producer's queue is full: let it deliver some first
                self.producer.poll(0.1)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
                    raise DeadLetterError(f"cannot produce to dead-letter topic {self.topic}: {e}") from e
                fitting = fitting.truncated(REFUSED_SIZE_LIMIT)
        self.producer.poll(0)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        """The delivery report of one record (one bound method for every record, not a closure
        each): a failed one is kept to be produced again, or its refusal kept for the flush."""
        if error is None:
            return
        record = DeadLetterRecord(message.key(), message.value(), tuple(message.headers() or ()))
        if error.code() in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD):
            self.truncated += 1
            self._again.append(record.truncated(REFUSED_SIZE_LIMIT))
        elif error_may_pass(error):
            self._again.append(record)
        else:
            self._refused.append(f"{_origin(record)}: {error.str()}")

    def flush(self) -> None:
        """Wait until every record sent is stored; produce again those whose delivery failed for a
        reason that may pass (a record the topic refused as too large, cut further)."""
        for _ in range(RESEND_ROUNDS):
            remaining = self.producer.flush(self.flush_timeout_s)
            if remaining:
                raise DeadLetterError(
                    f"{remaining} record(s) not yet stored in dead-letter topic {self.topic} "
                    f"after {self.flush_timeout_s:g} s"
                )
            if self._refused:
                refused, self._refused = self._refused, []
                raise DeadLetterRefusedError(
                    f"dead-letter topic {self.topic} refused {len(refused)} record(s): "
                    + "; ".join(refused[:3])
                )
            if not self._again:
                return
            again, self._again = self._again, []
            for record in again:
                self._produce(record)
        raise DeadLetterError(f"{len(self._again)} record(s) not stored in dead-letter topic {self.topic}")

    def stored_since(self, since_ms: int | None, timeout_s: float = 30.0) -> set[tuple[str, int, int]]:
        """The (topic, partition, offset) of the records this pipeline stored in the dead-letter topic
        at or after ``since_ms`` (None: since the topic's beginning), read from their headers."""
        consumer = Consumer(
            {
                **self.client_settings,
                "group.id": f"{self.pipeline}.dead-letters",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
            },
            logger=kafka_logger(),
        )
        try:
            metadata = consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
            if metadata is None or metadata.error is not None:
                return set()  # no dead letter stored yet: the topic is made by the first
            partitions = [TopicPartition(self.topic, p) for p in sorted(metadata.partitions)]
            if since_ms is not None:
                starts = consumer.offsets_for_times(
                    [TopicPartition(self.topic, p.partition, since_ms) for p in partitions], timeout=timeout_s
                )
            else:
                starts = [TopicPartition(self.topic, p.partition, OFFSET_BEGINNING) for p in partitions]
            ends = {p.partition: consumer.get_watermark_offsets(p, timeout=timeout_s)[1] for p in partitions}
            reading = [p for p in starts if p.offset >= 0 and p.offset < ends[p.partition]]
            reading += [p for p in starts if p.offset == OFFSET_BEGINNING and ends[p.partition] > 0]
            return self._read(consumer, reading, ends, timeout_s)
        except KafkaException as e:
            raise DeadLetterError(f"cannot read dead-letter topic {self.topic}: {e}") from e
        finally:
            consumer.close()

    def _read(
        self, consumer: Consumer, reading: list[TopicPartition], ends: dict[int, int], timeout_s: float
    ) -> set[tuple[str, int, int]]:
        stored: set[tuple[str, int, int]] = set()
        if not reading:
            return stored
        consumer.assign(reading)
        left = {p.partition for p in reading}
        pipeline = self.pipeline.encode()
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise DeadLetterError(f"reading dead-letter topic {self.topic} took over {timeout_s:g} s")
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(message.error())
                headers = dict(message.headers() or ())
                if headers.get("ferry.pipeline") == pipeline:
                    with contextlib.suppress(KeyError, ValueError, UnicodeDecodeError):  # not ferry's
                        stored.add(
                            (
                                headers["ferry.topic"].decode(),
                                int(headers["ferry.partition"]),
                                int(headers["ferry.offset"]),
                            )
                        )
                if message.offset() + 1 >= ends[message.partition()]:
                    left.discard(message.partition())
        return stored

    def close(self) -> None:
        self.producer.flush(10)
        del self.producer  # the client's threads stop with the last reference


def _origin(record: DeadLetterRecord) -> str:
    headers = dict(record.headers)
    return "topic {}, partition {}, offset {}".format(
        *(headers.get(f"ferry.{n}", b"?").decode() for n in ("topic", "partition", "offset"))
    )
