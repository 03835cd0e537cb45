"""A source and a schema-change topic over Kafka partitions held in memory, read where a test
says: the deterministic simulations of the runner take records from the partition of their
choice, in the order they choose, and hand them to the runner themselves; the schema-change topic
is fetched ahead of the data or only when the runner asks for it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ferry.connectors.formats import decoder_for
from ferry.connectors.record import Record
from ferry.model.events import Event

if TYPE_CHECKING:
    from ferry.pipeline.runner import PipelineRunner


class PartitionLogSource:
    """The data partitions ``data`` of ``topics`` (records by partition, which may grow while it is
    read), read where the test says with :meth:`take`; a Source with watermarks for the runner,
    whose ``poll`` hands out nothing."""

    def __init__(
        self, topics: Mapping[tuple[str, int], list[Record]], data: Sequence[tuple[str, int]]
    ) -> None:
        self.topics = topics
        self.data = list(data)
        self.next: dict[tuple[str, int], int] = {}

    def open(self, start_offsets: Mapping[tuple[str, int], int]) -> None:
        self.next = {tp: start_offsets.get(tp, 0) for tp in self.data}

    def take(self, partition: tuple[str, int], count: int) -> list[Record]:
        """Up to ``count`` records of ``partition``, from where it was read to."""
        records = self.topics[partition][self.next[partition] : self.next[partition] + count]
        self.next[partition] += len(records)
        return records

    def left(self, partition: tuple[str, int]) -> int:
        return len(self.topics[partition]) - self.next[partition]

    def poll(self, max_records: int, timeout: float) -> Sequence[Record]:
        return []

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        pass

    def lag(self, since: Mapping[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
        return {}

    def finished(self) -> bool:
        return False

    def high_watermarks(self, topics: Collection[str]) -> dict[tuple[str, int], int]:
        return {tp: len(self.topics[tp]) for tp in self.data if tp[0] in topics}

    def read_from(self, partition: tuple[str, int], offset: int, count: int) -> list[Record]:
        return self.topics[partition][offset : offset + count]

    def close(self) -> None:
        pass


class PartitionLogHints:
    """The schema-change topic ``records`` (which may grow while it is read), fetched where the
    test says (:meth:`fetch`) or to its end when the runner asks for it (:meth:`sync`).

    ``late``: the topic's records become visible to its readers later than the data written after
    them (Kafka orders no two partitions: the producer's batch of a data partition may be appended
    before that of the schema-change topic). Only the first ``visible`` records can be read then;
    :meth:`publish` shows more, and so does every :meth:`sync` that finds nothing new (a reader
    asking again finds the topic's end moved on)."""

    def __init__(self, records: list[Record], *, late: bool = False) -> None:
        self.records = records
        self.decoder = decoder_for("debezium-schema-change")
        self.position = 0
        self.fetched = 0
        self.late = late
        #: with ``late``: how many of the records are visible
        self.visible = 0

    def open(self, start: Mapping[int, int]) -> None:
        self.position = self.fetched = start.get(0, 0)
        self.visible = max(self.visible, self.position)

    def publish(self, count: int) -> None:
        self.visible = min(len(self.records), self.visible + count)

    def end(self) -> int:
        return min(self.visible, len(self.records)) if self.late else len(self.records)

    def fetch(self, count: int) -> None:
        self.fetched = max(self.fetched, min(self.end(), self.fetched + count))

    def drain(self) -> list[Event]:
        records = self.records[self.position : self.fetched]
        self.position = max(self.position, self.fetched)
        return self.decoder.decode(records)

    def sync(self, timeout: float) -> list[Event]:
        if self.late and self.position >= self.end():
            self.publish(1)
        self.fetch(len(self.records))
        return self.drain()

    def close(self) -> None:
        pass


def hand_over(runner: PipelineRunner, records: Sequence[Record]) -> None:
    """Records taken from a partition, processed by ``runner`` as one batch after the DDL hints
    fetched so far (as its loop does)."""
    runner.read_hints()
    runner.process(runner.decode(records), records)
