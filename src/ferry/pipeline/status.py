"""What a running pipeline says of itself: its phase and a detail line, saved with its counters in
the status row that ``ferry status`` shows (once a second, and at each change of phase)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ferry.connectors.base import Source
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.phase import Phase
from ferry.pipeline.state import StateStore

if TYPE_CHECKING:
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator

log = logging.getLogger(__name__)


class RunnerStatus:
    """A runner's phase and detail; while a transient error is retried, the detail says what it
    waits for, and then what it said before."""

    def __init__(
        self,
        pipeline: str,
        worker: str,
        store: StateStore,
        metrics: Metrics,
        *,
        source: Source,
        partitions: PartitionOffsets,
        schemas: SchemaOperator,
    ) -> None:
        self.pipeline = pipeline
        self.worker = worker
        self.store = store
        self.metrics = metrics
        self.source = source
        self.partitions = partitions
        self.schemas = schemas
        self.phase = Phase.PENDING
        self.detail = "starting"
        #: When the status row was last written (``time.monotonic()``).
        self.updated = 0.0
        self._detail_before_wait: str | None = None
        self._window: tuple[float, int] = (time.monotonic(), 0)

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
