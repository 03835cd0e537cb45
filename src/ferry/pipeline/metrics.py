"""What a running pipeline shows: its counters, its worker's name, and the collector's tuning."""

from __future__ import annotations

import gc
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import Source
from ferry.pipeline.state import encode_offsets, now_ms

if TYPE_CHECKING:
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator

log = logging.getLogger(__name__)


@dataclass
class Metrics:
    """What ``ferry status`` shows; updated by the runner, saved with the status row."""

    started_ms: int = field(default_factory=now_ms)
    records_read: int = 0
    rows_written: dict[str, int] = field(default_factory=dict)
    rows_skipped_committed: int = 0
    bad_records: int = 0
    #: Tombstones (a key without a value, after a delete) read and passed over.
    tombstones: int = 0
    columns_dropped: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0
    last_checkpoint_ms: int | None = None
    last_checkpoint_duration_ms: int | None = None
    schema_changes: int = 0
    schema_change_wait_ms: int = 0
    throughput_eps: float = 0.0
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    lag: dict[str, dict[str, int]] = field(default_factory=dict)
    #: This worker (``host:pid:random``) and the partitions assigned to it: ``{topic: [partition, ...]}``.
    worker: str = ""
    assigned: dict[str, list[int]] = field(default_factory=dict)
    #: Records deleted by retention before they were read: ``{topic, partition, wanted, earliest}``.
    lost_offsets: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def refresh(
        self,
        now: float,
        window: tuple[float, int],
        source: Source,
        partitions: PartitionOffsets,
        schemas: SchemaOperator,
    ) -> tuple[float, int]:
        """Bring the counters up to date before the status is saved; returns the throughput window."""
        since, count = window
        if now - since >= 1.0:
            self.throughput_eps = round((self.records_read - count) / (now - since), 1)
            window = (now, self.records_read)
        self.offsets = encode_offsets(partitions.offsets)
        self.assigned = partitions.assigned()
        self.rows_skipped_committed = partitions.rows_skipped
        self.schema_change_wait_ms = schemas.wait_ms
        self.schema_changes = schemas.changes_routed
        lost = getattr(source, "lost", ())
        if len(lost) != len(self.lost_offsets):
            self.lost_offsets = [
                {"topic": r.topic, "partition": r.partition, "wanted": r.wanted, "earliest": r.earliest}
                for r in lost
            ]
        try:
            self.lag = encode_offsets(source.lag())
        except Exception:
            log.debug("lag not available", exc_info=True)
        return window


def worker_name() -> str:
    """How a runner is known to the other workers of its pipeline: ``host:pid:random`` (a process
    may run more than one)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def tune_garbage_collector() -> None:
    """Buffered rows are many small containers that live until the next checkpoint; with
    CPython's default thresholds the collector walks them again and again (about a third of the
    decoding time in the benchmark). Objects alive at start are frozen out of collection, and a
    young-generation collection runs every 100k allocations instead of 700."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
