"""What the pipeline needs of the store that keeps its checkpoints.

The runner and its schema operator depend on :class:`CheckpointStore` only; the store ferry runs
with is :class:`ferry.state.StateStore` (SQLAlchemy: SQLite or PostgreSQL), which merges the
checkpoints of a pipeline's workers, and keeps their status, schema-change history and leases.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ferry.offsets import Offsets, Partition


def now_ms() -> int:
    """Milliseconds since the epoch: the time checkpoints, status and history are stamped with."""
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: int
    pipeline: str
    created_ms: int
    offsets: dict[Partition, int]
    schemas: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SchemaHistoryEntry:
    source_table: str
    sink_table: str
    change: str
    outcome: str
    reason: str
    position: str | None
    at_ms: int
    #: From the start of the barrier before the change (of its application when it needs none) to
    #: the change applied.
    barrier_ms: int | None = None


class CheckpointStore(Protocol):
    """Checkpoints, status, schema-change history and leases of pipelines."""

    def latest_checkpoint(self, pipeline: str) -> Checkpoint | None:
        """The pipeline's latest checkpoint: every partition's offset, whichever worker read it."""
        ...

    def save_checkpoint(
        self,
        pipeline: str,
        offsets: Offsets,
        schemas: Mapping[str, Any],
        *,
        merge: bool = True,
        partitions: Collection[int] | None = None,
    ) -> int:
        """Record a checkpoint (with ``merge``, over the latest one: other workers' partitions
        kept; ``partitions``: those whose schemas ``schemas`` has the last word on, by default
        those of ``offsets``); returns its id."""
        ...

    def set_status(
        self, pipeline: str, phase: str, detail: str, metrics: Mapping[str, Any], *, worker: str
    ) -> None:
        """Record what ``ferry status`` shows, and what this worker of the pipeline last said."""
        ...

    def add_schema_history(self, pipeline: str, entries: Iterable[SchemaHistoryEntry]) -> None: ...

    def schema_history(self, pipeline: str, sink_table: str | None = None) -> list[SchemaHistoryEntry]:
        """The pipeline's schema-change history, oldest first (of one sink table when given)."""
        ...

    def take_lease(self, pipeline: str, name: str, holder: str, ttl_s: float) -> str | None:
        """Take or renew a lease: None when ``holder`` has it now, else who has it."""
        ...

    def lease(
        self, pipeline: str, name: str, holder: str, *, ttl_s: float, waiting: Callable[[str], None]
    ) -> AbstractContextManager[None]:
        """Hold a lease for a block, waiting while another holder has it (``waiting`` is told who)."""
        ...

    def is_transient(self, error: BaseException) -> bool:
        """Whether an error of the store may pass on a later attempt."""
        ...

    def close(self) -> None: ...
