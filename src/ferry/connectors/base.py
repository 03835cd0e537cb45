"""What the pipeline needs of a source and of a dead-letter destination."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ferry.offsets import Offsets
from ferry.retry import RetryWait


class Source(Protocol):
    """A partitioned, replayable source of records (Kafka)."""

    def open(self, start_offsets: Offsets) -> None:
        """Start reading; ``start_offsets`` (the next offset per partition) win over startup modes."""
        ...

    def poll(self, max_records: int, timeout: float) -> Sequence[Any]:
        """Up to ``max_records`` records (objects with confluent-kafka ``Message`` accessors)."""
        ...

    def commit(self, offsets: Offsets) -> None:
        """Record the next offsets to read (after the sink made everything before them durable)."""
        ...

    def lag(self, since: Offsets | None = None) -> dict[tuple[str, int], int]:
        """Records not yet read, per assigned partition; with ``since`` (the offsets a restart reads
        from, once a run ended), the records from those offsets on."""
        ...

    def finished(self) -> bool:
        """True when a bounded read has reached its end on every partition."""
        ...

    def close(self) -> None: ...


class RebalanceListener(Protocol):
    """Told when partitions move between the workers of one consumer group.

    The calls come from inside :meth:`Source.poll`, on the thread that polls.
    """

    def checkpointed_offsets(self) -> Offsets:
        """The offsets of the pipeline's latest checkpoint, read now (another worker may have moved
        them since this one started)."""
        ...

    def partitions_assigned(self, starts: Offsets) -> None:
        """These partitions are now read here, from these offsets."""
        ...

    def partitions_revoked(self, partitions: Sequence[tuple[str, int]]) -> None:
        """These partitions go to another worker once this returns: checkpoint what was read."""
        ...

    def partitions_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        """These partitions already belong to another worker: forget them, commit nothing."""
        ...


@runtime_checkable
class Watermarking(Protocol):
    """A source that tells how far its partitions reach now."""

    def high_watermarks(self, topics: Collection[str]) -> dict[tuple[str, int], int]:
        """The offset after the last record written, now, of each partition of ``topics`` read here."""
        ...


@dataclass(frozen=True, slots=True)
class LostRange:
    """Records deleted by retention between a wanted start offset and the earliest one still there."""

    topic: str
    partition: int
    wanted: int
    earliest: int


@runtime_checkable
class RetentionReporting(Protocol):
    """A source that tells which records retention deleted before they were read (a start offset
    carried over from a savepoint may point at records that are gone)."""

    @property
    def lost(self) -> Sequence[LostRange]:
        """The ranges lost since the source opened, oldest first."""
        ...


#: Where a record is: (topic, partition, offset).
Position = tuple[str, int, int]
#: A record's key and value.
KeyValue = tuple[bytes | None, bytes | None]


@runtime_checkable
class RecordFetching(Protocol):
    """A source that can read records again (for dead letters that must carry them as they were)."""

    def fetch_many(self, positions: Collection[Position]) -> dict[Position, KeyValue]:
        """The key and value of each record at these (topic, partition, offset) positions, read
        again in as few passes as it takes; a record that is gone is missing from the result."""
        ...


def offset_runs(offsets: Sequence[int], gap: int) -> list[tuple[int, int]]:
    """Sorted ``offsets`` as (first, last) runs, a run going on over gaps of at most ``gap``."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and offset - runs[-1][1] <= gap + 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


@runtime_checkable
class RecordReading(Protocol):
    """A source that can read a partition again from an offset (to put a truncate in order)."""

    def read_from(self, partition: tuple[str, int], offset: int, count: int) -> Sequence[Any]:
        """Up to ``count`` records of ``partition`` from the first one at or after ``offset`` (none
        past the partition's current end), as ``poll`` returns them."""
        ...


@runtime_checkable
class TopicWaiting(Protocol):
    """A source that reads topics by name, which must exist before it reads."""

    def wait_for_topics(self, on_wait: Callable[[str], None], stop: threading.Event) -> None:
        """Return once every topic named exists (or ``stop`` is set); meanwhile tell ``on_wait``
        what is missing. Raise when the source is told to give up on a missing topic."""
        ...


@runtime_checkable
class OutageReporting(Protocol):
    """A source whose client reconnects to its brokers by itself: it tells while it cannot."""

    #: Told while a request to the brokers is retried, and once it succeeded after a retry.
    on_wait: Callable[[RetryWait], None]
    on_waited: Callable[[], None]

    @property
    def outage(self) -> RetryWait | None:
        """What the client retries now (the brokers unreachable), or None while they answer."""
        ...


@runtime_checkable
class KeepingAlive(Protocol):
    """A source whose consumer must be polled now and then to keep its group membership."""

    def keep_alive(self) -> Sequence[Any]:
        """Poll without taking records of the partitions read so far; return records of partitions
        assigned during the poll, if any."""
        ...


@runtime_checkable
class Rebalancing(Protocol):
    """A source whose partitions are shared with other workers and can move at any poll."""

    def set_rebalance_listener(self, listener: RebalanceListener | None) -> None: ...


@runtime_checkable
class ReadingAlone(Protocol):
    """A :class:`Rebalancing` source that can tell whether it reads every partition of its topics
    now (no other worker of the pipeline reads any)."""

    def reads_alone(self) -> bool: ...


class DeadLetter(Protocol):
    """Where records that cannot be processed go, with the reason."""

    def send(
        self, *, reason: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None: ...

    def flush(self) -> None:
        """Wait until everything sent is stored (before offsets are committed)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class DeadLetterHistory(Protocol):
    """A dead-letter destination that can say which records it holds, so that a restart reading
    records again after its checkpoint sends none of them twice."""

    def stored_since(self, since_ms: int | None) -> set[tuple[str, int, int]]:
        """The (topic, partition, offset) of the records this pipeline stored at or after
        ``since_ms`` (None: all it holds)."""
        ...
