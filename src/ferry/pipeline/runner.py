"""The pipeline runner: the batch hot path, schema-change barriers and checkpoints.

One loop takes whole batches from the source, decodes them in one call, and appends each row
change to its table's buffer: the per-event cost is a type check, a dict look-up and an append.
Everything else happens per batch or per checkpoint.

The checkpoint order is enforced here and nowhere else:

1. rows buffered since the last checkpoint are shaped to the sink tables and written;
2. the sink flushes (sinks with transactions record the offsets in their commit);
3. dead-letter records are flushed;
4. offsets and the tracked source schemas are saved in the state store;
5. the offsets are committed to the source (Kafka consumer group).

A schema change is a barrier: everything read before it is checkpointed first (with the schemas
as they were before it), then the router decides and the sink applies. A restart at any point
replays from the last checkpoint; rows a transactional sink already committed are skipped by
their offsets, and a change the sink already shows is not applied again.

Several workers run one pipeline by sharing its partitions (a Kafka consumer group). The runner
owns the offsets of the partitions assigned to it, and only those: before partitions are revoked
it checkpoints what it read from them, then forgets them; a checkpoint names only its own
partitions and the state store merges it into the pipeline's latest. A newly assigned partition
may hold rows another worker committed to a transactional sink after its last checkpoint: they
are skipped by the sink's offsets, read again at each assignment. A schema change is applied
under a lease of its sink table in the state store: the worker that takes it re-reads the sink's
schema, so the second worker to see a change finds it applied and records it as such.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ferry.connectors.base import DeadLetter, Offsets, Rebalancing, Source
from ferry.exceptions import FerryError, TerminalError, TransientError
from ferry.pipeline.adapt import CastError, RowAdapter
from ferry.pipeline.apply import apply_schema_change
from ferry.pipeline.events import (
    BadRecord,
    CreateTable,
    DataChange,
    Event,
    SchemaChange,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    is_schema_change,
)
from ferry.pipeline.exceptions import CheckpointError, SchemaChangeRefusedError
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import Action, Decision, SchemaChangeRouter
from ferry.pipeline.schema import Schema, TableId, widen_schemas
from ferry.pipeline.state import SchemaHistoryEntry, StateStore, encode_offsets, now_ms
from ferry.pipeline.tracker import SchemaTracker, diff_schemas
from ferry.sinks.base import AsyncSchemaChanges, OffsetCommitting, SchemaCaching, Sink
from ferry.sinks.exceptions import SinkTerminalError

if TYPE_CHECKING:
    from ferry.pipeline.transform import TableTransforms

log = logging.getLogger(__name__)

Decode = Callable[[Sequence[Any]], list[Event]]

#: How long a schema-change lease lasts unless renewed (its holder renews it while it works).
SCHEMA_LEASE_TTL_S = 10.0


class HintSource(Protocol):
    """DDL hints read beside the data (Debezium's schema-change topic)."""

    def drain(self) -> list[Event]:
        """The hints that arrived since the last call, without waiting."""
        ...

    def sync(self, timeout: float) -> list[Event]:
        """Wait (at most ``timeout``) until every hint already written is read; return them."""
        ...


class BadRecordError(TerminalError):
    """A record could not be processed and ``on-bad-record`` is ``fail``."""

    def __init__(self, reason: str, position: SourcePosition) -> None:
        super().__init__(f"bad record at {position}: {reason}")
        self.topic, self.partition, self.offset = position


class SchemaChangeTimeoutError(TerminalError):
    """The flush before a schema change, or its application, took longer than allowed."""


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
    #: Raise the garbage collector's thresholds while running (see :func:`tune_garbage_collector`).
    tune_gc: bool = True


@dataclass
class Metrics:
    """What ``ferry status`` shows; updated by the runner, saved with the status row."""

    started_ms: int = field(default_factory=now_ms)
    records_read: int = 0
    rows_written: dict[str, int] = field(default_factory=dict)
    rows_skipped_committed: int = 0
    bad_records: int = 0
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


class PipelineRunner:
    """Runs one pipeline: source → decoder → schema tracking and routing → sink, with checkpoints."""

    def __init__(
        self,
        *,
        settings: RunnerSettings,
        source: Source,
        decode: Decode,
        sink: Sink,
        state: StateStore,
        router: SchemaChangeRouter,
        tables: TableRouter,
        dead_letter: DeadLetter,
        hints: HintSource | None = None,
        transforms: TableTransforms | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.decode = decode
        self.sink = sink
        self.state = state
        self.router = router
        self.tables = tables
        self.dead_letter = dead_letter
        self.hints = hints
        self.transforms = transforms
        self.tracker = SchemaTracker()
        self.worker = worker_name()
        self.metrics = Metrics(worker=self.worker)
        self.phase = "PENDING"
        self.detail = "starting"
        self._offsets: dict[tuple[str, int], int] = {}
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._buffered = 0
        self._adapters: dict[TableId, RowAdapter] = {}
        self._sink_schemas: dict[TableId, Schema | None] = {}
        self._skip: dict[TableId, dict[tuple[str, int], int]] = {}
        self._skip_checked: set[TableId] = set()
        self._sink_marks: dict[TableId, dict[tuple[str, int], int]] = {}
        self._last_checkpoint = time.monotonic()
        self._last_status = 0.0
        self._window: tuple[float, int] = (time.monotonic(), 0)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferry-sink")

    # ------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        checkpoint = self.state.latest_checkpoint(self.settings.name)
        starts: dict[tuple[str, int], int] = {}
        if checkpoint is not None:
            self.tracker = SchemaTracker.restore(checkpoint.schemas)
            starts = dict(checkpoint.offsets)
        if isinstance(self.source, Rebalancing):
            # partitions shared with other workers: offsets are owned from their assignment on
            self.source.set_rebalance_listener(self)
        else:
            self._offsets = dict(starts)
        self.source.open(starts)
        self._set_phase("RUNNING", "reading")

    def run(self, stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set, a bounded read ends, or a terminal error."""
        stop = stop or threading.Event()
        try:
            self.open()
            if self.settings.tune_gc:
                tune_garbage_collector()
            while not stop.is_set():
                self.step()
                if self.source.finished():
                    self._set_phase("RUNNING", "bounded read reached its end")
                    break
            self.checkpoint()
            self._set_phase("STOPPED", "stopped after a final checkpoint")
        except FerryError as e:
            self._set_phase("FAILED", str(e))
            raise
        except Exception as e:
            self._set_phase("FAILED", f"{type(e).__name__}: {e}")
            raise
        finally:
            self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        for closable in (self.source, self.dead_letter, self.sink, self.state):
            try:
                closable.close()
            except Exception:
                log.exception("closing %s failed", closable)

    # ------------------------------------------------------------------------------ rebalances

    def checkpointed_offsets(self) -> Offsets:
        checkpoint = self.state.latest_checkpoint(self.settings.name)
        return {} if checkpoint is None else checkpoint.offsets

    def partitions_revoked(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Checkpoint what was read from partitions that go to another worker, then forget them."""
        if self.phase == "RUNNING":
            self.detail = f"handing over {_partitions(partitions)}: checkpointing"
            self.checkpoint()
            self.detail = "reading"
        self._forget(partitions)

    def partitions_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Partitions another worker already reads: their buffered rows are dropped unwritten (the
        other worker reads them again from the last checkpoint) and nothing of them is committed."""
        log.warning(
            "%s went to another worker before a checkpoint: dropping their rows", _partitions(partitions)
        )
        lost = set(partitions)
        for table_id, changes in self._buffers.items():
            self._buffers[table_id] = [
                c
                for c in changes
                if c.position is None or (c.position.topic, c.position.partition) not in lost
            ]
        self._buffered = sum(len(changes) for changes in self._buffers.values())
        self._forget(partitions)

    def partitions_assigned(self, starts: Offsets) -> None:
        """Partitions read here from now on, from these offsets."""
        self._offsets.update(starts)
        self.metrics.assigned = _assigned(self._offsets)
        # another worker may have changed the sink tables and committed rows of these partitions
        self._sink_schemas.clear()
        self._adapters.clear()
        if isinstance(self.sink, SchemaCaching):
            for sink_table in {self.tables.sink_table(t) for t in self._skip_checked}:
                self.sink.forget_schema(sink_table)
        self._skip_committed(starts)
        self._update_status(time.monotonic())

    def _forget(self, partitions: Sequence[tuple[str, int]]) -> None:
        for tp in partitions:
            self._offsets.pop(tp, None)
            for marks in self._skip.values():
                marks.pop(tp, None)
        self._skip = {t: m for t, m in self._skip.items() if m}
        self.metrics.assigned = _assigned(self._offsets)

    def _skip_committed(self, starts: Offsets) -> None:
        """Mark, in the tables already read, the rows of newly assigned partitions that the sink has
        committed beyond where they start (tables read later are checked when first seen)."""
        self._sink_marks.clear()
        if not isinstance(self.sink, OffsetCommitting):
            return
        committed: dict[TableId, dict[tuple[str, int], int]] = {}
        for table_id in self._skip_checked:
            sink_table = self.tables.sink_table(table_id)
            if sink_table not in committed:
                committed[sink_table] = self.sink.committed_offsets(sink_table)
            marks = {tp: o for tp, o in committed[sink_table].items() if tp in starts and o > starts[tp]}
            if marks:
                self._skip[table_id] = {**self._skip.get(table_id, {}), **marks}

    # ------------------------------------------------------------------------------ hot path

    def step(self) -> int:
        """One batch: poll, decode, process; checkpoint when due. Returns the records read."""
        if self.hints is not None:
            hints = self.hints.drain()
            if hints:
                self.process(hints, ())
        records = self.source.poll(self.settings.batch_size, self.settings.poll_timeout_s)
        if records:
            self.process(self.decode(records), records)
        now = time.monotonic()
        if self._buffered >= self.settings.flush_rows or (
            now - self._last_checkpoint >= self.settings.checkpoint_interval_s
        ):
            self.checkpoint()
        if now - self._last_status >= self.settings.status_interval_s:
            self._update_status(now)
        return len(records)

    def process(self, events: list[Event], records: Sequence[Any]) -> None:
        """Route a decoded batch; ``records`` are the raw records it came from (for offsets)."""
        buffers = self._buffers
        skip = self._skip
        buffered = 0
        for index, event in enumerate(events):
            if type(event) is DataChange:
                table_id = event.table_id
                buffer = buffers.get(table_id)
                if buffer is None:
                    buffer = self._open_table(table_id, event)
                    if buffer is None:
                        continue
                if skip and self._already_committed(event):
                    continue
                buffer.append(event)
                buffered += 1
            elif isinstance(event, BadRecord):
                self._bad(event.reason, event.position, event.key, event.value)
            elif isinstance(event, SchemaObserved | SchemaHint) or is_schema_change(event):
                self._buffered += buffered
                buffered = 0
                self._schema_event(event, events[:index])
                buffers = self._buffers
        self._buffered += buffered
        offsets = self._offsets
        for record in records:
            offsets[(record.topic(), record.partition())] = record.offset() + 1
        self.metrics.records_read += len(records)

    def _open_table(self, table_id: TableId, event: DataChange) -> list[DataChange] | None:
        if self.tracker.schema(table_id) is None:
            assert event.position is not None
            self._bad(
                f"no schema known for table {table_id} (a record without a schema, and no DDL seen)",
                event.position,
                None,
                _change_bytes(event),
            )
            return None
        sink_table = self.tables.sink_table(table_id)
        if self._sink_schema(sink_table) is None:
            # the source's schema is known (from a checkpoint, a savepoint or another table routed
            # here) but its sink table is not there: it is created as a create.table would create it
            schema = self._source_schema(table_id)
            assert schema is not None
            self._route_change(table_id, CreateTable(table_id, schema), event.position)
        if isinstance(self.sink, OffsetCommitting) and table_id not in self._skip_checked:
            self._skip_checked.add(table_id)
            sink_table = self.tables.sink_table(table_id)
            marks = self._sink_marks.get(sink_table)
            if marks is None:
                committed = self.sink.committed_offsets(sink_table)
                marks = {tp: o for tp, o in committed.items() if o > self._offsets.get(tp, 0)}
                self._sink_marks[sink_table] = marks
            if marks:
                self._skip[table_id] = dict(marks)
        return self._buffers.setdefault(table_id, [])

    def _already_committed(self, event: DataChange) -> bool:
        marks = self._skip.get(event.table_id)
        if not marks or event.position is None:
            return False
        topic, partition, offset = event.position
        mark = marks.get((topic, partition))
        if mark is None:
            return False
        if offset < mark:
            self.metrics.rows_skipped_committed += 1
            return True
        del marks[(topic, partition)]
        if not marks:
            self._skip = {t: m for t, m in self._skip.items() if m}
        return False

    def _bad(self, reason: str, position: SourcePosition, key: bytes | None, value: bytes | None) -> None:
        self.metrics.bad_records += 1
        if self.settings.fail_on_bad_record:
            raise BadRecordError(reason, position)
        log.warning("bad record at %s: %s (sent to the dead-letter topic)", position, reason)
        self.dead_letter.send(
            reason=reason,
            topic=position.topic,
            partition=position.partition,
            offset=position.offset,
            key=key,
            value=value,
        )

    # ------------------------------------------------------------------------------ schema changes

    def _schema_event(self, event: Event, before: Sequence[Event]) -> None:
        table_id: TableId = event.table_id  # type: ignore[union-attr]
        position = getattr(event, "position", None)
        if not self._may_change_schema(event):
            return
        # barrier: everything read before this event is made durable with the schemas it was read with
        waited = time.monotonic()
        self._advance(before)
        self.detail = f"schema change on {table_id}: flushing rows read before it"
        self._bounded(self.checkpoint, f"flush before a schema change on {table_id}")
        sources = self.transforms.sources(self.tracker) if self.transforms is not None else {}
        try:
            if isinstance(event, SchemaObserved):
                changes = self._hints_for(event) + self.tracker.observe(event)
            elif isinstance(event, SchemaHint):
                changes = self.tracker.hint(event)
            else:
                self.tracker.apply(event, position)  # type: ignore[arg-type]
                changes = [event]  # type: ignore[list-item]
        except FerryError as e:
            if position is None:
                raise
            ddl = getattr(event, "ddl", None)
            self._bad(
                f"schema change cannot be applied to {table_id}: {e}",
                position,
                None,
                ddl.encode() if ddl else None,
            )
            return
        if self.transforms is not None:  # the router and the sink see the projected schemas
            changes = self.transforms.schema_changes(changes, sources)
        for change in changes:
            self._route_change(change.table_id, change, position)
        self.metrics.schema_change_wait_ms += int((time.monotonic() - waited) * 1000)
        self.detail = "reading"

    def _may_change_schema(self, event: Event) -> bool:
        """False for a record schema the tracker already has for that partition (after a restart)."""
        if not isinstance(event, SchemaObserved):
            return True
        if event.ddl is not None:
            return False
        tracked = self.tracker.tables.get(event.table_id)
        partition = event.position.partition if event.position is not None else -1
        return tracked is None or tracked.partitions.get(partition) != event.schema

    def _hints_for(self, event: SchemaObserved) -> list[SchemaChange]:
        """A column gone from a record's schema may be a rename: read every DDL hint written so far
        (Debezium writes the DDL before the rows that follow it) before diffing."""
        known = self.tracker.schema(event.table_id)
        if (
            self.hints is None
            or known is None
            or event.ddl is not None
            or all(name in event.schema for name in known.names)
        ):
            return []
        changes: list[SchemaChange] = []
        for hint in self.hints.sync(self.settings.schema_change_timeout_s):
            if isinstance(hint, SchemaHint):
                changes += self.tracker.hint(hint)
            elif isinstance(hint, SchemaObserved):
                changes += self.tracker.observe(hint)
        return changes

    def _route_change(
        self, source_table: TableId, change: SchemaChange, position: SourcePosition | None
    ) -> None:
        sink_table = self.tables.sink_table(source_table)
        with self._schema_lease(sink_table):
            # another worker may have applied the change already: decide on the sink's schema as is
            self._refresh_sink_schema(sink_table)
            sink_schema = self._sink_schema(sink_table)
            for sink_change in self._sink_changes(source_table, sink_table, change, sink_schema):
                decision = self.router.decide(sink_change, sink_schema)
                if decision.action in (Action.APPLY, Action.IGNORED):
                    after = apply_schema_change(sink_schema, decision.change)
                    try:
                        self._retry(
                            partial(
                                self._bounded,
                                partial(self.sink.apply_schema_change, decision.change, after),
                                f"applying {decision.change}",
                            ),
                            f"applying {decision.change}",
                        )
                        self._await_schema_change(sink_table, decision.change)
                    except SinkTerminalError as e:
                        decision = self.router.on_refused(decision, e)
                    self._refresh_sink_schema(sink_table)
                    sink_schema = self._sink_schema(sink_table)
                self._history(source_table, sink_table, decision, position)
                if decision.action is Action.FAIL:
                    raise SchemaChangeRefusedError(
                        decision.reason,
                        sink=self.sink.kind,
                        table=str(sink_table),
                        change=str(decision.change),
                    )
        self.metrics.schema_changes += 1
        for source in [source_table, *self.tables.sources_of(sink_table)]:
            self._adapters.pop(source, None)
        if self.tracker.schema(source_table) is None:
            self._buffers.pop(source_table, None)

    @contextmanager
    def _schema_lease(self, sink_table: TableId) -> Iterator[None]:
        """Hold the pipeline's lease on a sink table's schema: one worker at a time changes it.

        The lease is short and renewed by a thread while it is held (an ALTER may take minutes), so
        that a worker that died holding it blocks the others for :data:`SCHEMA_LEASE_TTL_S` at most.
        """

        def waiting(holder: str) -> None:
            self.detail = f"waiting for worker {holder} to finish a schema change on {sink_table}"

        name, ttl = f"schema {sink_table}", SCHEMA_LEASE_TTL_S
        held = threading.Event()

        def renew() -> None:
            while not held.wait(ttl / 3):
                try:
                    self.state.take_lease(self.settings.name, name, self.worker, ttl)
                except Exception as e:  # the next renewal tries again; the lease lasts ttl
                    log.warning("renewing the lease %r failed: %s", name, e)

        with self.state.lease(self.settings.name, name, self.worker, ttl_s=ttl, waiting=waiting):
            renewer = threading.Thread(target=renew, name="ferry-schema-lease", daemon=True)
            renewer.start()
            try:
                yield
            finally:
                held.set()
                renewer.join()

    def _refresh_sink_schema(self, sink_table: TableId) -> None:
        self._sink_schemas.pop(sink_table, None)
        if isinstance(self.sink, SchemaCaching):
            self.sink.forget_schema(sink_table)

    def _await_schema_change(self, sink_table: TableId, change: SchemaChange) -> None:
        """Wait until a sink whose ALTERs run in the background has finished this one."""
        if not isinstance(self.sink, AsyncSchemaChanges):
            return
        timeout = self.settings.schema_change_timeout_s
        started = time.monotonic()
        self.detail = f"waiting for {self.sink.kind} to finish {change} (since {now_ms()} ms)"
        while self.sink.schema_change_pending(sink_table):
            if time.monotonic() - started > timeout:
                raise SchemaChangeTimeoutError(
                    f"{self.sink.kind} did not finish {change} on {sink_table} within {timeout:g} s "
                    "(schema.operator.rpc-timeout)"
                )
            time.sleep(self.settings.schema_change_poll_s)

    def _sink_changes(
        self, source_table: TableId, sink_table: TableId, change: SchemaChange, sink_schema: Schema | None
    ) -> list[SchemaChange]:
        """The change as the sink table sees it. A table fed by several sources gets their widest
        common schema: only additions and widenings, never a drop."""
        retargeted = replace(change, table_id=sink_table)
        others = [s for s in self.tables.sources_of(sink_table) if s != source_table]
        if not others or sink_schema is None:
            return [retargeted]
        source_schema = self._source_schema(source_table)
        if source_schema is None:
            return []
        wider = widen_schemas(sink_schema, source_schema)
        return [c for c in diff_schemas(sink_table, sink_schema, wider) if c.tag != "drop.column"]

    def _sink_schema(self, sink_table: TableId) -> Schema | None:
        if sink_table not in self._sink_schemas:
            self._sink_schemas[sink_table] = self.sink.table_schema(sink_table)
        return self._sink_schemas[sink_table]

    def _history(
        self, source_table: TableId, sink_table: TableId, decision: Decision, position: SourcePosition | None
    ) -> None:
        log.info(
            "schema change %s on %s: %s (%s)",
            decision.change,
            sink_table,
            decision.action.value,
            decision.reason,
        )
        entry = SchemaHistoryEntry(
            str(source_table),
            str(sink_table),
            str(decision.change),
            decision.action.value,
            decision.reason,
            None if position is None else str(position),
            now_ms(),
        )
        self.state.add_schema_history(self.settings.name, [entry])

    def _bounded(self, work: Callable[[], None], what: str) -> None:
        timeout = self.settings.schema_change_timeout_s
        future = self._executor.submit(work)
        try:
            future.result(timeout=timeout)
        except FutureTimeout:
            raise SchemaChangeTimeoutError(
                f"{what} did not finish within {timeout:g} s (schema.operator.rpc-timeout)"
            ) from None

    def _advance(self, events: Sequence[Event]) -> None:
        offsets = self._offsets
        for event in events:
            position = getattr(event, "position", None)
            if position is not None:
                key = (position.topic, position.partition)
                offsets[key] = max(offsets.get(key, 0), position.offset + 1)

    # ------------------------------------------------------------------------------ checkpoints

    def checkpoint(self, schemas: Mapping[str, Any] | None = None) -> None:
        """Write and flush buffered rows, then save offsets and schemas, then commit offsets."""
        started = time.monotonic()
        offsets = dict(self._offsets)
        try:
            written = self._write_buffers()
            self._retry(lambda: self.sink.flush(offsets), "sink flush")
            self.dead_letter.flush()
            self.state.save_checkpoint(
                self.settings.name, offsets, schemas if schemas is not None else self.tracker.snapshot()
            )
            self.source.commit(offsets)
        except FerryError:
            raise
        except Exception as e:
            raise CheckpointError(f"checkpoint failed: {type(e).__name__}: {e}") from e
        for table, count in written.items():
            self.metrics.rows_written[table] = self.metrics.rows_written.get(table, 0) + count
        self.metrics.checkpoints += 1
        self.metrics.last_checkpoint_ms = now_ms()
        self.metrics.last_checkpoint_duration_ms = int((time.monotonic() - started) * 1000)
        self._last_checkpoint = time.monotonic()

    def _write_buffers(self) -> dict[str, int]:
        written: dict[str, int] = {}
        per_sink: dict[TableId, list[DataChange]] = {}
        for source_table, changes in self._buffers.items():
            if not changes:
                continue
            sink_table = self.tables.sink_table(source_table)
            sink_schema = self._sink_schema(sink_table)
            if sink_schema is None:
                for change in changes:
                    assert change.position is not None
                    self._bad(
                        f"sink table {sink_table} does not exist",
                        change.position,
                        None,
                        _change_bytes(change),
                    )
                continue
            rows = self._transform(source_table, changes)
            per_sink.setdefault(sink_table, []).extend(self._adapt(source_table, sink_schema, rows))
        for sink_table, changes in per_sink.items():
            sink_schema = self._sink_schema(sink_table)
            assert sink_schema is not None
            if changes:
                self.sink.write(sink_table, sink_schema, changes)
                written[str(sink_table)] = len(changes)
        self._buffers = {t: [] for t in self._buffers if self.tracker.schema(t) is not None}
        self._buffered = 0
        return written

    def _source_schema(self, source_table: TableId) -> Schema | None:
        """The schema a source table's rows have when they reach the sink: after its transform."""
        schema = self.tracker.schema(source_table)
        if self.transforms is None or schema is None:
            return schema
        return self.transforms.schema(source_table, schema)

    def _transform(self, source_table: TableId, changes: list[DataChange]) -> list[DataChange]:
        """A table's rows filtered and projected by its transform (none: the rows as they are); a
        row an expression fails on goes to the dead-letter destination with the reason."""
        schema = self.tracker.schema(source_table)
        if self.transforms is None or schema is None:
            return changes
        return self.transforms.rows(source_table, schema, changes, self._transform_failed)

    def _transform_failed(self, change: DataChange, reason: str) -> None:
        assert change.position is not None
        self._bad(reason, change.position, None, _change_bytes(change))

    def _adapt(
        self, source_table: TableId, sink_schema: Schema, changes: list[DataChange]
    ) -> list[DataChange]:
        adapter = self._adapters.get(source_table)
        if adapter is None:
            source_schema = self._source_schema(source_table) or sink_schema
            adapter = self._adapters[source_table] = RowAdapter(
                source_schema, sink_schema, self.sink.sink_type
            )
        if adapter.identity:
            return changes
        if adapter.dropped:
            key = str(source_table)
            self.metrics.columns_dropped[key] = self.metrics.columns_dropped.get(key, 0) + len(changes)
        adapted = []
        for change in changes:
            try:
                adapted.append(adapter.adapt(change))
            except CastError as e:
                assert change.position is not None
                self._bad(str(e), change.position, None, _change_bytes(change))
        return adapted

    def _retry(self, work: Callable[[], None], what: str, attempts: int = 5) -> None:
        delay = 0.2
        for attempt in range(1, attempts + 1):
            try:
                work()
                return
            except TransientError as e:
                if attempt == attempts:
                    raise
                log.warning("%s failed (attempt %d of %d), retrying: %s", what, attempt, attempts, e)
                self.detail = f"retrying {what}: {e}"
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    # ------------------------------------------------------------------------------ status

    def _set_phase(self, phase: str, detail: str) -> None:
        self.phase, self.detail = phase, detail
        self._update_status(time.monotonic())

    def _update_status(self, now: float) -> None:
        since, count = self._window
        if now - since >= 1.0:
            self.metrics.throughput_eps = round((self.metrics.records_read - count) / (now - since), 1)
            self._window = (now, self.metrics.records_read)
        self.metrics.offsets = encode_offsets(self._offsets)
        self.metrics.assigned = _assigned(self._offsets)
        lost = getattr(self.source, "lost", ())
        if len(lost) != len(self.metrics.lost_offsets):
            self.metrics.lost_offsets = [
                {"topic": r.topic, "partition": r.partition, "wanted": r.wanted, "earliest": r.earliest}
                for r in lost
            ]
        try:
            self.metrics.lag = encode_offsets(self.source.lag())
        except Exception:
            log.debug("lag not available", exc_info=True)
        self.state.set_status(
            self.settings.name, self.phase, self.detail, self.metrics.as_dict(), worker=self.worker
        )
        self._last_status = now


def _assigned(offsets: Offsets) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, []).append(partition)
    return out


def _partitions(partitions: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{topic}[{partition}]" for topic, partition in partitions)


def _change_bytes(change: DataChange) -> bytes:
    return orjson.dumps(
        {
            "table": str(change.table_id),
            "op": change.op.value,
            "before": change.before,
            "after": change.after,
        },
        default=str,
    )
