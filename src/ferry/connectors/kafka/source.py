"""The Kafka source: batches of records from confluent-kafka, start and end positions per topic.

The hot path is ``Consumer.consume(num_messages=N)``: one call returns a whole batch, and offsets
are committed explicitly, only after the sink flushed (``enable.auto.commit`` is off). The fetch
queue back-off is lowered from librdkafka's 1 s default, which otherwise caps a consumer that
decodes in Python at about 110k records/s.

Start positions follow Flink's Kafka options (``scan.startup.mode``), per topic; offsets from a
checkpoint win over them. A bounded read (``scan.bounded.mode``) ends at positions fixed when the
partitions are assigned.

Several workers with the same job share the partitions through the consumer group. A rebalance
happens inside :meth:`KafkaSource.poll`, and the :class:`~ferry.connectors.base.RebalanceListener`
hears of it there: revoked partitions are checkpointed before they go; an assigned partition that
the pipeline has read before starts from the newer of the offset the group committed for it and
the one in the pipeline's latest checkpoint (read again at each assignment, since another worker
may have moved it).

A broker that cannot be reached is waited for: the source's requests to it (ends and starts of
partitions, committed offsets, topic metadata) are asked again under the pipeline's retry policy
(``pipeline.restart-strategy``), and the consumer's own reconnection errors are warnings, and an
outage (:attr:`KafkaSource.outage`) the pipeline's status shows until the brokers answer again
(asked once a second). Offsets are committed to the group asynchronously: the pipeline's state
store holds them already, so a checkpoint (or a schema change's barrier) never waits for the broker
to take them.

Topics named (``topic``, not ``topic-pattern``) must exist: :meth:`KafkaSource.wait_for_topics`
waits for them up to the start-up timeout, then fails naming them, or (``topic-missing: wait``)
waits on, saying so. Closing is bounded: librdkafka's close leaves the group and may wait on a
broker or a group that does not answer; after :data:`CLOSE_TIMEOUT_S` the consumer is left to end
with the process.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from ferry.connectors.base import KeyValue, LostRange, Position, RebalanceListener, offset_runs
from ferry.connectors.kafka.exceptions import SourceError, error_may_pass, may_pass
from ferry.logs import kafka_logger
from ferry.retry import Operation, RetryPolicy, RetryWait

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Records read again, and passed over, between two records wanted again in one pass rather than
#: two (a pass costs a broker round trip).
FETCH_GAP = 1000
#: How long the broker may hold a read-again fetch at the partition's end (ms).
READER_FETCH_WAIT_MS = 10

DEFAULT_CONSUMER_SETTINGS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.queue.backoff.ms": 10,
    "enable.partition.eof": False,
    # a worker that died is noticed in 10 s rather than librdkafka's 45 s (set
    # properties.group.instance.id for static membership: a restarted worker then takes its
    # partitions back at once)
    "session.timeout.ms": 10_000,
}

#: The client's errors that say the brokers cannot be reached now.
UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})
#: How often the brokers are asked whether they answer again during an outage (seconds).
PROBE_S = 1.0
#: How long closing a consumer may take before it is left to end with the process (seconds).
CLOSE_TIMEOUT_S = 10.0


def kafka_reason(error: KafkaException) -> str:
    """The client's own text of ``error`` (its :class:`KafkaError`), else the exception's text."""
    first = error.args[0] if error.args else None
    return first.str() if isinstance(first, KafkaError) else str(error)


def close_bounded(consumer: Consumer, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Close ``consumer`` within ``timeout_s``; False (logged) when its close did not end then.

    librdkafka's close leaves the consumer group and waits for the broker's answer; a broker or a
    group coordinator that does not answer can keep it waiting far longer than a pipeline may take
    to stop. The close runs on a daemon thread, which the process does not wait for."""
    thread = threading.Thread(target=consumer.close, name="ferry-kafka-close", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.warning(
            "closing the Kafka consumer did not end within %g s (the broker or the group does not "
            "answer); leaving it to end with the process",
            timeout_s,
        )
        return False
    return True


@dataclass(frozen=True, slots=True)
class StartPosition:
    """Where a topic is read from when no checkpoint says otherwise (``scan.startup.*``)."""

    mode: str = "group-offsets"
    timestamp_ms: int | None = None
    specific_offsets: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EndPosition:
    """Where a bounded read stops (``scan.bounded.*``); mode ``unbounded`` never stops."""

    mode: str = "unbounded"
    timestamp_ms: int | None = None
    specific_offsets: Mapping[int, int] = field(default_factory=dict)


def offset_at(
    consumer: Consumer, topic: str, partition: int, timestamp_ms: int, retries: RetryPolicy | None = None
) -> int | None:
    """The first offset of a partition whose record is at or after ``timestamp_ms``; None when
    every record is older. Asked again under ``retries`` while the broker cannot answer."""
    [found] = (retries or RetryPolicy(attempts=1)).call(
        lambda: consumer.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)], timeout=10),
        f"finding the offset of {topic}[{partition}] at {timestamp_ms}",
        operation=Operation.BROKER_REQUEST,
        transient=may_pass,
    )
    return int(found.offset) if found.offset >= 0 else None


class KafkaSource:
    """Reads topics (a list or a pattern) as one consumer of a consumer group."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        group_id: str,
        topics: Sequence[str] = (),
        topic_pattern: str | None = None,
        properties: Mapping[str, Any] | None = None,
        start: StartPosition | None = None,
        start_per_topic: Mapping[str, StartPosition] | None = None,
        end: EndPosition | None = None,
        retries: RetryPolicy | None = None,
        topic_missing: str = "fail",
        topic_wait_s: float = 60.0,
    ) -> None:
        if not topics and not topic_pattern:
            raise SourceError("a Kafka source needs topics or a topic pattern")
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self.subscription = [*topics] if topics else ["^" + topic_pattern.lstrip("^")]  # type: ignore[union-attr]
        self.settings: dict[str, Any] = {
            **DEFAULT_CONSUMER_SETTINGS,
            **(properties or {}),
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "on_commit": self._committed,
            # the client's own errors (brokers unreachable) are told here, inside consume()
            "error_cb": self._client_error,
        }
        self.retries = retries or RetryPolicy()
        self.start = start or StartPosition()
        self.start_per_topic = dict(start_per_topic or {})
        self.end = end or EndPosition()
        self.consumer: Consumer | None = None
        #: Reads partitions again from an offset (a truncate put in order), made when first needed.
        self._reader: Consumer | None = None
        self.assigned: list[tuple[str, int]] = []
        self.end_offsets: dict[tuple[str, int], int] = {}
        self.lost: list[LostRange] = []
        self._checkpoint_offsets: dict[tuple[str, int], int] = {}
        self._start_offsets: dict[tuple[str, int], int] = {}
        self._last_end_check = 0.0
        self._finished = False
        self._listener: RebalanceListener | None = None
        self._rebalanced = False
        #: Every partition of the topics subscribed to, listed once per assignment (reads_alone).
        self._subscribed: set[tuple[str, int]] | None = None
        #: A named topic that does not exist: ``fail`` after ``topic_wait_s``, or ``wait`` on.
        self.topic_missing = topic_missing
        self.topic_wait_s = topic_wait_s
        #: The brokers unreachable: since when (``time.time()``), the attempts and the last error.
        self._outage: RetryWait | None = None
        self._outage_since = 0.0
        self._next_probe = 0.0
        #: Told while a request to the brokers is retried, and once it succeeded after a retry.
        self.on_wait: Callable[[RetryWait], None] = lambda wait: None
        self.on_waited: Callable[[], None] = lambda: None
        #: A fatal error the client told of: raised by the next poll.
        self._fatal: SourceError | None = None

    # ------------------------------------------------------------------------------ Source

    def set_rebalance_listener(self, listener: RebalanceListener | None) -> None:
        self._listener = listener

    @property
    def outage(self) -> RetryWait | None:
        return self._outage

    def wait_for_topics(self, on_wait: Callable[[str], None], stop: threading.Event) -> None:
        named = [t for t in self.subscription if not t.startswith("^")]
        if not named:
            return
        settings = {k: v for k, v in self.settings.items() if k not in ("on_commit", "error_cb")}
        probe = Consumer(settings, logger=kafka_logger(__name__))
        began = time.monotonic()
        try:
            while not stop.is_set():
                listed = self._ask(partial(probe.list_topics, None, timeout=10), "listing the topics")
                missing = [t for t in named if t not in listed.topics or listed.topics[t].error is not None]
                if not missing:
                    return
                waited = time.monotonic() - began
                names = ", ".join(repr(t) for t in missing)
                what = "topic " + names if len(missing) == 1 else "topics " + names
                if waited < self.topic_wait_s:
                    on_wait(f"waiting for {what} to be created (for up to {self.topic_wait_s:g} s)")
                elif self.topic_missing == "fail":
                    raise SourceError(
                        f"{what} of source.topic does not exist (waited {waited:.0f} s): create it, "
                        "correct source.topic, or set source.topic-missing: wait"
                    )
                else:
                    on_wait(f"waiting for {what} to be created (source.topic-missing: wait)")
                stop.wait(0.5)
        finally:
            close_bounded(probe)

    def open(self, start_offsets: Mapping[tuple[str, int], int]) -> None:
        self._checkpoint_offsets = dict(start_offsets)
        self.consumer = Consumer(self.settings, logger=kafka_logger(__name__))
        self.consumer.subscribe(
            self.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def poll(self, max_records: int, timeout: float) -> Sequence[Any]:
        assert self.consumer is not None, "open() first"
        try:
            records = self.consumer.consume(num_messages=max_records, timeout=timeout)
        except KafkaException as e:
            raise SourceError(f"consuming from {self.subscription}: {e}") from e
        if self._fatal is not None:
            raise self._fatal
        if self._outage is not None and (records or time.monotonic() >= self._next_probe):
            self._probe(bool(records))
        for record in records:
            if record.error() is not None:
                records = self._without_errors(records)
                break
        if self._rebalanced:
            # nothing of a partition that went elsewhere during this call is handed out
            self._rebalanced = False
            owned = set(self.assigned)
            records = [r for r in records if (r.topic(), r.partition()) in owned]
        if self.end_offsets and records and self._past_the_end():
            ends = self.end_offsets
            records = [r for r in records if r.offset() < ends.get((r.topic(), r.partition()), 1 << 62)]
        return records  # type: ignore[no-any-return]

    def _past_the_end(self) -> bool:
        """Whether the records just consumed may reach beyond a partition's end: the consumer's
        position (past its last record handed out) is past the end in one of them. Asked once per
        poll, so that the records are looked at one by one only in the polls that need it."""
        assert self.consumer is not None
        ends = self.end_offsets
        positions = self.consumer.position([TopicPartition(t, p) for t, p in self.assigned])
        return any(tp.offset > ends.get((tp.topic, tp.partition), 1 << 62) for tp in positions)

    def keep_alive(self) -> Sequence[Any]:
        """A poll that keeps the group membership while a long batch is processed: the partitions
        are paused so it takes no record of them (rebalance callbacks may run in it)."""
        assert self.consumer is not None, "open() first"
        paused = [TopicPartition(t, p) for t, p in self.assigned]
        self.consumer.pause(paused)
        try:
            records = self.poll(1000, 0)
        finally:
            still = set(self.assigned)
            resume = [tp for tp in paused if (tp.topic, tp.partition) in still]
            if resume:
                self.consumer.resume(resume)
        return records

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        if self.consumer is None or not offsets:
            return
        assigned = set(self.assigned)
        partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items() if (t, p) in assigned]
        if partitions:
            try:
                self.consumer.commit(offsets=partitions, asynchronous=True)
            except KafkaException as e:
                log.warning("committing offsets to the consumer group failed: %s", e)

    def _committed(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if error is not None and error.code() != KafkaError._NO_OFFSET:
            # the broker was away or the group moved on (a rebalance): the state store has the offsets
            log.warning("committing offsets to the consumer group failed: %s", error.str())

    def lag(self, since: Mapping[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
        if self.consumer is None or not self.assigned:
            return {}
        positions = self.consumer.position([TopicPartition(t, p) for t, p in self.assigned])
        out = {}
        for tp in positions:
            key = (tp.topic, tp.partition)
            # the high watermark of the last fetch response: a broker round trip per partition
            # (about 0.2 s here) would cost the hot path more than the status is worth
            _low, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if high < 0:
                continue
            if since is not None:
                # the run ended: what a restart reads again (from the checkpoint, or from where
                # this run started) is still to be written
                position = since.get(key, self._start_offsets.get(key, tp.offset))
            else:
                position = tp.offset if tp.offset >= 0 else self._checkpoint_offsets.get(key, 0)
            out[key] = max(high - position, 0)
        return out

    def high_watermarks(self, topics: Collection[str]) -> dict[tuple[str, int], int]:
        """The end, now (a broker round trip each), of the partitions of ``topics`` assigned here."""
        if self.consumer is None:
            return {}
        wanted = set(topics)
        out: dict[tuple[str, int], int] = {}
        for topic, partition in self.assigned:
            if topic in wanted:
                _low, high = self._watermarks(self.consumer, TopicPartition(topic, partition))
                out[(topic, partition)] = int(high)
        return out

    def fetch_many(self, positions: Collection[Position]) -> dict[Position, KeyValue]:
        """The key and value of the records at ``positions``, read again (:meth:`read_from`): one
        pass over each run of a partition's offsets whose gaps are at most :data:`FETCH_GAP`
        records, not one per record; a record gone (or a read that failed) is left out."""
        wanted: dict[tuple[str, int], set[int]] = {}
        for topic, partition, offset in positions:
            wanted.setdefault((topic, partition), set()).add(offset)
        out: dict[Position, KeyValue] = {}
        for (topic, partition), offsets in wanted.items():
            for first, last in offset_runs(sorted(offsets), FETCH_GAP):
                try:
                    records = self.read_from((topic, partition), first, last - first + 1)
                except (SourceError, KafkaException) as e:
                    log.warning(
                        "reading %s[%d] offsets %d-%d again failed: %s", topic, partition, first, last, e
                    )
                    continue
                for record in records:
                    if record.offset() in offsets:
                        out[(topic, partition, record.offset())] = (record.key(), record.value())
        return out

    def read_from(self, partition: tuple[str, int], offset: int, count: int) -> list[Any]:
        """Up to ``count`` records of ``partition`` from ``offset`` on, with a consumer of its own
        (kept for the next call), up to the partition's end now."""
        topic, number = partition
        if self._reader is None:
            settings = {k: v for k, v in self.settings.items() if k != "error_cb"}
            settings |= {
                "group.id": f"{self.group_id}-reader",
                "enable.partition.eof": True,
                # a fetch the broker holds at the partition's end (500 ms by default) would delay
                # the next read from another offset by as much
                "fetch.wait.max.ms": READER_FETCH_WAIT_MS,
            }
            self._reader = Consumer(settings, logger=kafka_logger(__name__))
        reader = self._reader
        reader.assign([TopicPartition(topic, number, offset)])
        out: list[Any] = []
        deadline = time.monotonic() + 30.0
        while len(out) < count and time.monotonic() < deadline:
            batch = reader.consume(num_messages=min(count - len(out), 500), timeout=0.5)
            for record in batch:
                error = record.error()
                if error is None:
                    out.append(record)
                elif error.code() == KafkaError._PARTITION_EOF:
                    return out[:count]
                else:
                    raise SourceError(
                        f"reading {topic}[{number}] again from offset {offset} failed: {error.str()}"
                    )
        return out[:count]

    def finished(self) -> bool:
        """All partitions of the read topics reached their end: the ones assigned here by position,
        the others (held by another worker, or by one that died and still holds them) by the offsets
        the group committed for them."""
        if self.end.mode == "unbounded" or self.consumer is None or not self.assigned:
            return False
        if self._finished:
            return True
        now = time.monotonic()
        if now - self._last_end_check < 0.5:
            return False
        self._last_end_check = now
        consumer = self.consumer
        positions = consumer.position([TopicPartition(t, p) for t, p in self.assigned])
        for tp in positions:
            key = (tp.topic, tp.partition)
            position = tp.offset if tp.offset >= 0 else self._start_offsets.get(key, 0)
            if position < self.end_offsets.get(key, 0):
                return False
        others = [TopicPartition(t, p) for t, p in sorted(self._topic_partitions() - set(self.assigned))]
        if others:
            self._fix_end_offsets(consumer, others)
            committed = self._ask(
                lambda: consumer.committed(others, timeout=10),
                f"reading the offsets group {self.group_id} committed",
            )
            for tp in committed:
                if tp.offset < self.end_offsets[(tp.topic, tp.partition)]:
                    return False
        self._finished = True
        return True

    def _topic_partitions(self) -> set[tuple[str, int]]:
        """Every partition of the topics this source reads (those seen assigned, for a pattern)."""
        consumer = self.consumer
        assert consumer is not None
        topics = {t for t, _ in self.assigned} | {t for t in self.subscription if not t.startswith("^")}
        if not topics:
            return set()
        # one metadata request, whatever the number of topics: each takes the client about as long
        # (half a second here), and a pipeline may read hundreds of topics
        only = next(iter(topics)) if len(topics) == 1 else None
        listed = self._ask(
            partial(consumer.list_topics, only, timeout=10),
            f"listing the partitions of {only or f'{len(topics)} topics'}",
        )
        out: set[tuple[str, int]] = set()
        for topic in topics:
            metadata = listed.topics.get(topic)
            if metadata is not None and metadata.error is None:
                out |= {(topic, p) for p in metadata.partitions}
        return out

    def reads_alone(self) -> bool:
        """Whether every partition of the topics subscribed to (named, or matching the pattern) is
        assigned here: no other worker of the group reads any now. One metadata request per
        assignment; a topic gaining partitions, or a worker joining, rebalances the group first."""
        consumer = self.consumer
        if consumer is None:
            return False
        if self._subscribed is None:
            listed = self._ask(partial(consumer.list_topics, None, timeout=10), "listing the topics")
            named = {t for t in self.subscription if not t.startswith("^")}
            patterns = [re.compile(t) for t in self.subscription if t.startswith("^")]
            self._subscribed = {
                (topic, partition)
                for topic, metadata in listed.topics.items()
                if metadata.error is None and (topic in named or any(p.match(topic) for p in patterns))
                for partition in metadata.partitions
            }
        return self._subscribed <= set(self.assigned)

    def close(self) -> None:
        # leaving the group revokes the partitions: the pipeline has taken its final checkpoint
        # (or failed, and must not take one), so nobody is told
        self._listener = None
        if self._reader is not None:
            close_bounded(self._reader)
            self._reader = None
        if self.consumer is not None:
            close_bounded(self.consumer)
            self.consumer = None

    # ------------------------------------------------------------------------------ positions

    def _without_errors(self, records: Sequence[Any]) -> list[Any]:
        good = []
        for record in records:
            error = record.error()
            if error is None:
                good.append(record)
            elif error.code() == KafkaError._PARTITION_EOF:
                continue
            elif error.code() == KafkaError._MAX_POLL_EXCEEDED:
                # the group moved the partitions on; the consumer rejoins at its next poll
                log.warning("left the consumer group (%s); rejoining", error.str())
            elif error.code() in UNREACHABLE and not record.topic():
                self._unreachable(error)
            elif not error_may_pass(error):
                where = (
                    f"{record.topic()}[{record.partition()}]"
                    if record.topic()
                    else f"consumer group {self.group_id} ({', '.join(self.subscription)})"
                )
                raise SourceError(f"Kafka error on {where}: {error.str()}")
            else:
                log.warning("Kafka error (will retry): %s", error.str())
        return good

    def _client_error(self, error: KafkaError) -> None:
        """An error of the client itself (not of a partition), told during a call to it."""
        if error.code() in UNREACHABLE:
            self._unreachable(error)
        elif error.fatal():
            self._fatal = SourceError(f"Kafka error on consumer group {self.group_id}: {error.str()}")
        else:
            log.warning("Kafka error (will retry): %s", error.str())

    def _unreachable(self, error: KafkaError) -> None:
        """The client reports that brokers cannot be reached: an outage until they answer again."""
        if self._outage is not None:
            # the client reports each reconnection that failed: the probes count the attempts, and
            # the next one stays due when it was (put off at each report, it might never come)
            return
        now = time.time()
        self._outage_since = now
        log.warning("the Kafka brokers %s cannot be reached: %s", self.bootstrap_servers, error.str())
        self._set_outage(1, f"KafkaError: {error.str()}", now)

    def _set_outage(self, attempt: int, error: str, now: float) -> None:
        self._next_probe = time.monotonic() + PROBE_S
        since = time.strftime("%H:%M:%S", time.gmtime(self._outage_since))
        self._outage = RetryWait(
            f"reading from the Kafka brokers {self.bootstrap_servers} (unreachable since {since} UTC; "
            "the consumer reconnects by itself)",
            attempt,
            0,
            error,
            PROBE_S,
            int((now + PROBE_S) * 1000),
            None,
            operation=Operation.BROKER_CONNECT,
        )

    def _probe(self, answered: bool) -> None:
        """During an outage: records arrived (``answered``), or the brokers are asked for metadata."""
        assert self.consumer is not None and self._outage is not None
        if not answered:
            only = next((t for t in self.subscription if not t.startswith("^")), None)
            try:
                self.consumer.list_topics(only, timeout=PROBE_S)
            except KafkaException as e:
                reason = kafka_reason(e)
                self._set_outage(self._outage.attempt + 1, f"KafkaError: {reason}", time.time())
                return
        log.info("the Kafka brokers %s answer again", self.bootstrap_servers)
        self._outage = None

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalanced = True
        self._subscribed = None
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        if self._listener is not None and revoked:
            # still ours while this runs: what was read from them is checkpointed and committed
            self._listener.partitions_revoked(sorted(tp for tp in self.assigned if tp in revoked))
        self.assigned = [tp for tp in self.assigned if tp not in revoked]
        if revoked:
            log.info("revoked %s", ", ".join(f"{t}[{p}]" for t, p in sorted(revoked)))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalanced = True
        self._subscribed = None
        lost = {(tp.topic, tp.partition) for tp in partitions}
        log.warning(
            "lost %s (this worker left the group, e.g. it was not heard from for session.timeout.ms)",
            ", ".join(f"{t}[{p}]" for t, p in sorted(lost)),
        )
        if self._listener is not None and lost:
            self._listener.partitions_lost(sorted(tp for tp in self.assigned if tp in lost))
        self.assigned = [tp for tp in self.assigned if tp not in lost]

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalanced = True
        self._subscribed = None
        if self._listener is not None:
            self._checkpoint_offsets = dict(self._listener.checkpointed_offsets())
        committed = self._group_offsets(consumer, partitions)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            tp.offset = self._absolute(consumer, tp, self._start_offset(consumer, tp, committed.get(key)))
            self._start_offsets[key] = tp.offset
        self._report_retention_loss(consumer, partitions)
        consumer.assign(partitions)
        self.assigned = [(tp.topic, tp.partition) for tp in partitions]
        if self.end.mode != "unbounded":
            self._fix_end_offsets(consumer, partitions)
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in partitions))
        if self._listener is not None:
            self._listener.partitions_assigned(
                {(tp.topic, tp.partition): tp.offset for tp in partitions if tp.offset >= 0}
            )

    def _group_offsets(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> dict[tuple[str, int], int]:
        """What the consumer group committed for the partitions a checkpoint also has an offset for."""
        known = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        known = [tp for tp in known if (tp.topic, tp.partition) in self._checkpoint_offsets]
        if not known:
            return {}
        try:
            found = consumer.committed(known, timeout=10)
        except KafkaException as e:
            log.warning("reading the group's committed offsets failed (using the checkpoint's): %s", e)
            return {}
        return {(tp.topic, tp.partition): int(tp.offset) for tp in found if tp.offset >= 0}

    def _absolute(self, consumer: Consumer, tp: TopicPartition, offset: int) -> int:
        """Logical start offsets (beginning, end) as numbers, so positions are known before a fetch."""
        if offset in (OFFSET_BEGINNING, OFFSET_END):
            low, high = self._watermarks(consumer, tp)
            return int(low if offset == OFFSET_BEGINNING else high)
        if offset == OFFSET_STORED:
            [found] = self._ask(
                lambda: consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=10),
                f"reading the offset group {self.group_id} committed for {tp.topic}[{tp.partition}]",
            )
            if found.offset >= 0:
                return int(found.offset)
            low, _high = self._watermarks(consumer, tp)
            return int(low)  # auto.offset.reset=earliest
        return offset

    def _start_offset(self, consumer: Consumer, tp: TopicPartition, committed: int | None = None) -> int:
        """The newer of the checkpoint's offset and the group's: both are written only once the sink
        holds everything before them, so the newer one is safe and replays the least. The startup
        options decide for a partition the pipeline has never checkpointed."""
        checkpointed = self._checkpoint_offsets.get((tp.topic, tp.partition))
        if checkpointed is not None:
            return checkpointed if committed is None else max(checkpointed, committed)
        start = self.start_per_topic.get(tp.topic, self.start)
        match start.mode:
            case "earliest-offset":
                return int(OFFSET_BEGINNING)
            case "latest-offset":
                return int(OFFSET_END)
            case "timestamp":
                assert start.timestamp_ms is not None
                found = offset_at(consumer, tp.topic, tp.partition, start.timestamp_ms, self.retries)
                return int(OFFSET_END) if found is None else found
            case "specific-offsets":
                return int(start.specific_offsets.get(tp.partition, OFFSET_STORED))
        return int(OFFSET_STORED)

    def _report_retention_loss(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            if tp.offset < 0:
                continue
            low, _high = self._watermarks(consumer, tp)
            if tp.offset < low:
                self.lost.append(LostRange(tp.topic, tp.partition, tp.offset, low))
                log.warning(
                    "records %s[%d] offsets %d..%d were deleted by retention; reading from %d",
                    tp.topic,
                    tp.partition,
                    tp.offset,
                    low - 1,
                    low,
                )
                tp.offset = low

    def _fix_end_offsets(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in self.end_offsets:
                continue
            _low, high = self._watermarks(consumer, tp)
            if self.end.mode == "latest-offset":
                self.end_offsets[key] = int(high)
            elif self.end.mode == "timestamp":
                assert self.end.timestamp_ms is not None
                found = offset_at(consumer, tp.topic, tp.partition, self.end.timestamp_ms, self.retries)
                self.end_offsets[key] = int(high) if found is None else found
            else:
                self.end_offsets[key] = int(self.end.specific_offsets.get(tp.partition, high))

    # ------------------------------------------------------------------------------ the broker

    def _ask(self, request: Callable[[], T], what: str) -> T:
        """A request to the broker, asked again under the retry policy while it cannot answer; a
        client error that does not pass (or the policy's end) is a :class:`SourceError`."""
        waits: list[RetryWait] = []

        def on_wait(wait: RetryWait) -> None:
            waits.append(wait)
            self.on_wait(wait)

        try:
            answer = self.retries.call(
                request, what, operation=Operation.BROKER_REQUEST, transient=may_pass, on_wait=on_wait
            )
        except KafkaException as e:
            raise SourceError(f"{what}: {e}") from e
        if waits:
            self.on_waited()
        return answer

    def _watermarks(self, consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
        """The first and the next offset of a partition, asked of its leader now."""
        low, high = self._ask(
            lambda: consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=10, cached=False
            ),
            f"reading the ends of {tp.topic}[{tp.partition}]",
        )
        return int(low), int(high)
