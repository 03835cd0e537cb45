"""A source and a dead-letter destination in memory: test doubles that ship with the package.

:class:`MemorySource` serves records from a list, partition by partition, honours start offsets and
records what was committed; :class:`MemoryDeadLetter` keeps what it is sent. They let the runner be
tested without a broker; integration tests use the real Kafka source.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ferry.connectors.base import KeyValue, Position
from ferry.connectors.record import Record


class MemorySource:
    """Records in memory; bounded: finished once every record has been polled."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.records: list[Record] = list(records)
        self.position = 0
        self.committed: dict[tuple[str, int], int] = {}
        self.start_offsets: dict[tuple[str, int], int] = {}
        self.closed = False
        #: How many times records were read again (:meth:`fetch_many`).
        self.fetches = 0

    def add(self, records: Iterable[Record]) -> None:
        self.records.extend(records)

    def open(self, start_offsets: Mapping[tuple[str, int], int]) -> None:
        self.start_offsets = dict(start_offsets)

    def poll(self, max_records: int, timeout: float) -> Sequence[Record]:
        out: list[Record] = []
        while self.position < len(self.records) and len(out) < max_records:
            record = self.records[self.position]
            self.position += 1
            if record.offset() >= self.start_offsets.get((record.topic(), record.partition()), 0):
                out.append(record)
        return out

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self.committed.update(offsets)

    def lag(self, since: Mapping[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
        lag: dict[tuple[str, int], int] = {}
        for record in self.records if since is not None else self.records[self.position :]:
            key = (record.topic(), record.partition())
            if since is None or record.offset() >= since.get(key, 0):
                lag[key] = lag.get(key, 0) + 1
        return lag

    def finished(self) -> bool:
        return self.position >= len(self.records)

    def read_from(self, partition: tuple[str, int], offset: int, count: int) -> list[Record]:
        out = [r for r in self.records if (r.topic(), r.partition()) == partition and r.offset() >= offset]
        return out[:count]

    def high_watermarks(self, topics: Collection[str]) -> dict[tuple[str, int], int]:
        ends: dict[tuple[str, int], int] = {}
        for record in self.records:
            key = (record.topic(), record.partition())
            if key[0] in topics:
                ends[key] = max(ends.get(key, 0), record.offset() + 1)
        return ends

    def fetch_many(self, positions: Collection[Position]) -> dict[Position, KeyValue]:
        self.fetches += 1
        wanted = set(positions)
        return {
            (r.topic(), r.partition(), r.offset()): (r.key(), r.value())
            for r in self.records
            if (r.topic(), r.partition(), r.offset()) in wanted
        }

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    reason: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    at_ms: int = 0


class MemoryDeadLetter:
    """Keeps the records it is sent, with their reasons (one instance handed to a runner and to the
    runner after it stands for a dead-letter topic across a restart)."""

    def __init__(self) -> None:
        self.records: list[DeadLetterRecord] = []
        self.flushes = 0

    def send(
        self, *, reason: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        at_ms = time.time_ns() // 1_000_000
        self.records.append(DeadLetterRecord(reason, topic, partition, offset, key, value, at_ms))

    def stored_since(self, since_ms: int | None) -> set[tuple[str, int, int]]:
        return {
            (r.topic, r.partition, r.offset) for r in self.records if since_ms is None or r.at_ms >= since_ms
        }

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        return None
