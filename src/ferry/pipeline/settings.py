"""How a pipeline runner and its schema operator are tuned (from the job's ``pipeline`` and
``schema`` options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ferry.retry import RetryPolicy


@dataclass(frozen=True, slots=True)
class SchemaSettings:
    pipeline: str
    #: Bounds each apply and a background ALTER (``schema.operator.rpc-timeout``); the barrier before
    #: a change is a checkpoint, waited for under ``retries``.
    timeout_s: float = 180.0
    #: How often a background schema change at the sink is polled.
    poll_s: float = 0.2
    #: How a transient error of an apply is retried (``pipeline.restart-strategy``).
    retries: RetryPolicy = field(default_factory=RetryPolicy)
    #: How long a record with a column the DDL read so far does not name waits for the
    #: schema-change topic to show its statement (written before the record, but to another topic,
    #: which Kafka does not order with it); it waits on while statements keep coming.
    ddl_wait_s: float = 5.0


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    name: str
    batch_size: int = 10_000
    poll_timeout_s: float = 0.2
    checkpoint_interval_s: float = 5.0
    flush_rows: int = 200_000
    schema_change_timeout_s: float = 180.0
    fail_on_bad_record: bool = False
    status_interval_s: float = 1.0
    #: How often a background schema change at the sink is polled.
    schema_change_poll_s: float = 0.2
    #: Collect garbage at checkpoints instead of every so many allocations (see
    #: :class:`~ferry.pipeline.collector.GarbageCollection`).
    tune_gc: bool = True
    #: A batch dense in schema changes is processed in parts of about this long, the consumer polled
    #: in between, so that it keeps its group membership (well below ``max.poll.interval.ms``).
    poll_budget_s: float = 30.0
    #: How transient errors of the sink, the state store and the dead-letter producer are retried
    #: (``pipeline.restart-strategy``).
    retries: RetryPolicy = field(default_factory=RetryPolicy)
    #: A checkpoint's commit (the sink's flush, dead letters, the state store's save) runs on a
    #: thread of its own while the next batches are read (``checkpoint.concurrent``).
    concurrent_checkpoints: bool = False
    #: See :attr:`SchemaSettings.ddl_wait_s`.
    ddl_wait_s: float = 5.0

    @property
    def schema(self) -> SchemaSettings:
        """How its schema operator is tuned."""
        timeout_s, poll_s = self.schema_change_timeout_s, self.schema_change_poll_s
        return SchemaSettings(self.name, timeout_s, poll_s, self.retries, self.ddl_wait_s)
