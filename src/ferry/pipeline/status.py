"""What a running pipeline says of itself: its phase and a detail line, saved with its counters in
the status row that ``ferry status`` shows (once a second, and at each change of phase)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ferry.connectors.base import Source
from ferry.pipeline.checkpoints import CheckpointStore
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.phase import Phase

if TYPE_CHECKING:
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator

log = logging.getLogger(__name__)


@dataclass
class RunnerStatus:
    """A runner's phase and detail; while a transient error is retried, the detail says what it
    waits for, and then what it said before."""

    pipeline: str
    worker: str
    store: CheckpointStore
    metrics: Metrics
    #: What the counters are read from at each update.
    source: Source = field(kw_only=True)
    partitions: PartitionOffsets = field(kw_only=True)
    schemas: SchemaOperator = field(kw_only=True)
    phase: Phase = field(default=Phase.PENDING, kw_only=True)
    detail: str = field(default="starting", kw_only=True)
    #: When the status row was last written (``time.monotonic()``).
    updated: float = field(default=0.0, kw_only=True)
    _detail_before_wait: str | None = field(default=None, init=False)
    _window: tuple[float, int] = field(default_factory=lambda: (time.monotonic(), 0), init=False)

    def set(self, phase: Phase, detail: str) -> None:
        self.phase, self.detail = phase, detail
        self.update(time.monotonic())

    def set_detail(self, detail: str) -> None:
        self.detail = detail

    def waiting(self, detail: str) -> None:
        """A transient error is being retried: the status says so while it waits."""
        if self._detail_before_wait is None:
            self._detail_before_wait = self.detail
        self.detail = detail
        self.update(time.monotonic())

    def waited(self) -> None:
        """What was retried succeeded: the detail is what it was before."""
        if self._detail_before_wait is not None:
            self.detail, self._detail_before_wait = self._detail_before_wait, None

    def update(self, now: float) -> None:
        """The counters brought up to date and written with the phase and detail (a state store
        that is unavailable now is tried again at the next update)."""
        self._window = self.metrics.refresh(now, self._window, self.source, self.partitions, self.schemas)
        try:
            self.store.set_status(
                self.pipeline, self.phase, self.detail, self.metrics.as_dict(), worker=self.worker
            )
        except Exception as e:
            if not self.store.is_transient(e):
                raise
            log.warning("status not recorded (the state store is unavailable): %s", e)
        self.updated = now
