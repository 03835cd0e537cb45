"""A source over Kafka partitions held in memory, read where a test says: the deterministic
simulations of the runner take records from the partition of their choice, in the order they
choose, and hand them to the runner themselves."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ferry.connectors.record import Record


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

    def lag(self) -> dict[tuple[str, int], int]:
        return {}

    def finished(self) -> bool:
        return False

    def high_watermarks(self, topics: Collection[str]) -> dict[tuple[str, int], int]:
        return {tp: len(self.topics[tp]) for tp in self.data if tp[0] in topics}

    def read_from(self, partition: tuple[str, int], offset: int, count: int) -> list[Record]:
        return self.topics[partition][offset : offset + count]

    def close(self) -> None:
        pass
