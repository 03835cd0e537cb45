"""What a running pipeline says of itself: its phase and a detail line, saved with its counters in
the status row that ``ferry status`` shows (once a second, and at each change of phase)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import OutageReporting, Source, TopicWaiting
from ferry.offsets import describe_offsets
from ferry.pipeline.checkpoints import Checkpoint, CheckpointStore
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.phase import Phase
from ferry.retry import RetryWait

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
    #: The retry the pipeline waits on now, if any (shown in the detail and as metrics).
    retry: RetryWait | None = field(default=None, kw_only=True)
    #: The offsets a restart would read from, once the run ended: the lag is counted from them.
    restart_offsets: Mapping[tuple[str, int], int] | None = field(default=None, kw_only=True)
    _detail_before_wait: str | None = field(default=None, init=False)
    _outage: RetryWait | None = field(default=None, init=False)
    _window: tuple[float, int] = field(default_factory=lambda: (time.monotonic(), 0), init=False)

    def __post_init__(self) -> None:
        if isinstance(self.source, OutageReporting):  # its requests' retries shown as the runner's
            self.source.on_wait, self.source.on_waited = self.waiting, self.waited
        # the schema operator's detail (a barrier, a lease) and its retries are the runner's
        schemas = self.schemas
        schemas.on_detail, schemas.on_wait, schemas.on_waited = self.set_detail, self.waiting, self.waited

    def set(self, phase: Phase, detail: str) -> None:
        self.phase, self.detail = phase, detail
        self.update(time.monotonic())

    def set_detail(self, detail: str) -> None:
        self.detail = detail

    def waiting(self, detail: RetryWait | str) -> None:
        """A transient error is being retried: the status (its detail, and its ``retry`` metrics
        for a :class:`RetryWait`) says so while it waits."""
        if self._detail_before_wait is None:
            self._detail_before_wait = self.detail
        self.detail = str(detail)
        self.retry = detail if isinstance(detail, RetryWait) else None
        if self.retry is not None:
            operation = self.retry.operation.value
            self.metrics.retries[operation] = self.metrics.retries.get(operation, 0) + 1
            at_ms = self.retry.next_attempt_ms - int(self.retry.wait_s * 1000)
            self.metrics.failed(self.retry.error, self.retry.what, at_ms)
        self.update(time.monotonic())

    def waited(self) -> None:
        """What was retried succeeded: the detail is what it was before (or the source's outage,
        while it lasts)."""
        if self._detail_before_wait is None:
            return
        if self._outage is not None:
            if self.retry is not self._outage:
                self.detail, self.retry = str(self._outage), self._outage
                self.update(time.monotonic())
            return
        self.detail, self._detail_before_wait = self._detail_before_wait, None
        self.retry = None
        self.update(time.monotonic())

    def checkpoint_read(self, checkpoint: Checkpoint | None, stop: threading.Event) -> None:
        """The checkpoint was read (its retries over), and the log says where the run resumes;
        then, until the topics the source names exist: PENDING (not ready), saying which is missing."""
        self.waited()
        if checkpoint is None:
            log.info(
                "pipeline '%s': no checkpoint yet: each partition starts where scan.startup.mode says",
                self.pipeline,
            )
        else:
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(checkpoint.created_ms / 1000))
            where = describe_offsets(checkpoint.offsets)
            log.info(
                "pipeline '%s': resuming from checkpoint %d of %s at %s",
                self.pipeline,
                checkpoint.id,
                at,
                where,
            )
        if isinstance(self.source, TopicWaiting):
            self.source.wait_for_topics(self.pending, stop)

    def pending(self, detail: str) -> None:
        """The pipeline cannot read yet (a topic it names does not exist): PENDING, not ready."""
        if (self.phase, detail) != (Phase.PENDING, self.detail):
            self.set(Phase.PENDING, detail)

    def outage(self) -> None:
        """The source's brokers are unreachable (a new attempt at each probe): the status says so
        until they answer again."""
        if not isinstance(self.source, OutageReporting):
            return
        outage = self.source.outage
        if outage is not self._outage:
            self._outage = outage
            if outage is not None:
                self.waiting(outage)
            else:
                self.waited()

    def failed(self, detail: str, checkpointed: Mapping[tuple[str, int], int]) -> None:
        """The run failed: FAILED with why, and the lag a restart has to read (from the last
        checkpoint, ``checkpointed``, not from where this run's reading stopped)."""
        self.retry = None
        self.metrics.failed(detail)
        self.restart_offsets = dict(checkpointed)
        self.set(Phase.FAILED, detail)

    def update(self, now: float) -> None:
        """The counters brought up to date and written with the phase and detail (a state store
        that is unavailable now is tried again at the next update)."""
        self.metrics.retry = None if self.retry is None else retry_metrics(self.retry)
        self._window = self.metrics.refresh(
            now, self._window, self.source, self.partitions, self.schemas, restart_from=self.restart_offsets
        )
        try:
            self.store.set_status(
                self.pipeline, self.phase, self.detail, self.metrics.as_dict(), worker=self.worker
            )
        except Exception as e:
            if not self.store.is_transient(e):
                raise
            log.warning("status not recorded (the state store is unavailable): %s", e)
        self.updated = now


def retry_metrics(wait: RetryWait) -> dict[str, Any]:
    """A retry as the status row keeps it (``metrics.retry``), for ``ferry status``, the control
    plane and ``/metrics``."""
    return {
        "what": wait.what,
        "operation": wait.operation.value,
        "attempt": wait.attempt,
        "attempts": wait.attempts,
        "error": wait.error,
        "next_attempt_ms": wait.next_attempt_ms,
        "gives_up_ms": wait.gives_up_ms,
    }
