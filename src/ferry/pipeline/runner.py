"""The pipeline runner: the batch hot path and checkpoints.

One loop takes whole batches from the source, decodes them in one call, and appends each row
change to its table's buffer: the per-event cost is a type check, a dict look-up and an append.
Everything else happens per batch or per checkpoint. Schema events go to the
:class:`~ferry.pipeline.schema_operator.SchemaOperator`, which raises a barrier (a checkpoint of
everything read before the event) only when the sink must change.

The checkpoint order is enforced here and nowhere else:

1. rows buffered since the last checkpoint are shaped to the sink tables and written;
2. the sink flushes (sinks with transactions record the offsets in their commit);
3. dead-letter records are flushed;
4. offsets, the tracked source schemas and the schema-change topic's position are saved in the
   state store;
5. the offsets are committed to the source (Kafka consumer group).

A restart at any point replays from the last checkpoint; rows a transactional sink already
committed are skipped by their offsets (:mod:`ferry.pipeline.partitions`), and a change the sink
already shows is not applied again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import (
    DeadLetter,
    KeepingAlive,
    Offsets,
    Rebalancing,
    RecordReading,
    Source,
    Watermarking,
)
from ferry.exceptions import FerryError
from ferry.pipeline.bad_records import BadRecords
from ferry.pipeline.events import (
    BadRecord,
    DataChange,
    Event,
    SchemaHint,
    SchemaObserved,
    Tombstone,
    TruncateTable,
)
from ferry.pipeline.exceptions import BadRecordError, CheckpointError, NothingWrittenError
from ferry.pipeline.metrics import Metrics, tune_garbage_collector, worker_name
from ferry.pipeline.partitions import (
    PartitionOffsets,
    describe,
    offsets_past,
    partition_of,
    records_before,
    without_partitions,
)
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.schema import TableId
from ferry.pipeline.schema_operator import (
    HintSource,
    SchemaChangeTimeoutError,
    SchemaDefinitions,
    SchemaOperator,
    SchemaSettings,
)
from ferry.pipeline.settings import RunnerSettings
from ferry.pipeline.shaping import RowShaper, in_table_names
from ferry.pipeline.state import StateStore, now_ms
from ferry.pipeline.tracker import Partition
from ferry.pipeline.truncates import OrderOf, TruncatePlan, plan_truncate
from ferry.sinks.base import Sink

if TYPE_CHECKING:
    from ferry.pipeline.transform import TableTransforms

__all__ = ["BadRecordError", "HintSource", "Metrics", "NothingWrittenError", "PipelineRunner"]
__all__ += ["RunnerSettings", "SchemaChangeTimeoutError"]

log = logging.getLogger(__name__)

Decode = Callable[[Sequence[Any]], list[Event]]


class PipelineRunner:
    """Runs one pipeline: source → decoder → schema operator → sink, with checkpoints."""

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
        definitions: SchemaDefinitions | None = None,
        transforms: TableTransforms | None = None,
        source_order: OrderOf | None = None,
    ) -> None:
        self.settings = settings
        #: The source position of a raw record (truncates put in order across partitions).
        self.source_order = source_order
        self.source = source
        self.decode = decode
        self.sink = sink
        self.state = state
        self.tables = tables
        self.dead_letter = dead_letter
        self.transforms = transforms
        self.worker = worker_name()
        self.metrics = Metrics(worker=self.worker)
        self.bad = BadRecords(dead_letter, source, self.metrics, fail=settings.fail_on_bad_record)
        self.phase = Phase.PENDING
        self.detail = "starting"
        self.schemas = SchemaOperator(
            settings=SchemaSettings(
                settings.name,
                settings.schema_change_timeout_s,
                settings.schema_change_poll_s,
                settings.retries,
            ),
            sink=sink,
            state=state,
            router=router,
            tables=tables,
            worker=self.worker,
            hints=hints,
            definitions=definitions,
            transforms=transforms,
            watermarks=source.high_watermarks if isinstance(source, Watermarking) else None,
        )
        self.schemas.on_detail = self._set_detail
        self.schemas.on_sink_changed = self._sink_changed
        self.schemas.on_applied = self._save_schemas
        self.partitions = PartitionOffsets(sink, tables)
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._buffered = 0
        self.shaper = RowShaper(
            schemas=self.schemas,
            tables=tables,
            sink=sink,
            transforms=transforms,
            metrics=self.metrics,
            bad_row=self.bad.row,
        )
        #: (table, partition) → renamed keys, while a partition's rows carry a rename not yet final
        self._aliases: dict[tuple[TableId, int], dict[str, str]] = {}
        #: The rest of a batch a part of which took the whole poll budget: (events, records)
        self._leftover: tuple[list[Event], list[Any]] | None = None
        self._last_checkpoint = time.monotonic()
        self._checkpointed: Offsets = {}
        self._detail_before_wait: str | None = None
        self._last_status = 0.0
        self._window: tuple[float, int] = (time.monotonic(), 0)

    # ------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        checkpoint = self.settings.retries.call(
            lambda: self.state.latest_checkpoint(self.settings.name),
            "reading the checkpoint",
            on_wait=self._waiting,
            transient=self.state.is_transient,
        )
        starts: dict[tuple[str, int], int] = {}
        self.schemas.restore(None if checkpoint is None else checkpoint.schemas)
        if checkpoint is not None:
            starts = dict(checkpoint.offsets)
        self._refresh_aliases()
        for table_id, marks in self.schemas.truncated.items():
            self.partitions.skip.setdefault(table_id, {}).update(marks)
        if isinstance(self.source, Rebalancing):
            # partitions shared with other workers: offsets are owned from their assignment on
            self.source.set_rebalance_listener(self)
        else:
            self.partitions.offsets = dict(starts)
        self.source.open(starts)
        self._set_phase(Phase.RUNNING, "reading")

    def run(self, stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set, a bounded read ends, or a terminal error."""
        stop = stop or threading.Event()
        try:
            self.open()
            if self.settings.tune_gc:
                tune_garbage_collector()
            while not stop.is_set():
                self.step()
                if self._leftover is None and self.source.finished():
                    self._set_phase(Phase.RUNNING, "bounded read reached its end")
                    self.bad.check_something_written(self._buffered)
                    break
            self.checkpoint()
            self._set_phase(Phase.STOPPED, "stopped after a final checkpoint")
        except FerryError as e:
            self._set_phase(Phase.FAILED, str(e))
            raise
        except Exception as e:
            self._set_phase(Phase.FAILED, f"{type(e).__name__}: {e}")
            raise
        finally:
            self.close()

    def close(self) -> None:
        self.schemas.close()
        if self.transforms is not None:
            self.transforms.close()  # the user-defined functions' close()
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
        if self.phase is Phase.RUNNING:
            self.detail = f"handing over {describe(partitions)}: checkpointing"
            self.checkpoint()
            self.detail = "reading"
        self.partitions.forget(partitions)
        self.schemas.forget_partitions(partitions)
        self.metrics.assigned = self.partitions.assigned()

    def partitions_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Partitions another worker already reads: their buffered rows are dropped unwritten (the
        other worker reads them again from the last checkpoint) and nothing of them is committed."""
        log.warning(
            "%s went to another worker before a checkpoint: dropping their rows", describe(partitions)
        )
        self._buffers = without_partitions(self._buffers, partitions)
        self._buffered = sum(len(changes) for changes in self._buffers.values())
        self.partitions.forget(partitions)
        self.schemas.forget_partitions(partitions)
        self.metrics.assigned = self.partitions.assigned()

    def partitions_assigned(self, starts: Offsets) -> None:
        """Partitions read here from now on, from these offsets."""
        # another worker may have changed the sink tables and committed rows of these partitions
        self.schemas.forget_sink_schemas(self.partitions.checked)
        self.shaper.forget()
        self.partitions.take(starts)
        self._update_status(time.monotonic())

    # ------------------------------------------------------------------------------ hot path

    def step(self) -> int:
        """One batch: poll, decode, process; checkpoint when due. Returns the records read."""
        self.read_hints()
        records: Sequence[Any]
        if self._leftover is not None:
            records = self._resume()
        else:
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

    def read_hints(self) -> None:
        """Take the DDL hints read since the last call (between batches: nothing is in flight)."""
        self.schemas.drain_hints(self._barrier_at(()))

    def sync_hints(self) -> None:
        """Read the schema-change topic to its end (a decoder met a record no definition describes)."""
        self.schemas.sync_hints(self._barrier_at(()))

    def process(self, events: list[Event], records: Sequence[Any]) -> None:
        """Route a decoded batch; ``records`` are the raw records it came from (for offsets)."""
        buffers = self._buffers
        skip = self.partitions.skip
        aliases = self._aliases
        buffered = 0
        started = time.monotonic()
        for index, event in enumerate(events):
            if type(event) is DataChange:
                table_id = event.table_id
                buffer = buffers.get(table_id)
                if buffer is None:
                    buffer = self._open_table(table_id, event)
                    if buffer is None:
                        continue
                if skip and self.partitions.committed(event):
                    continue
                if aliases and event.position is not None:
                    renamed = aliases.get((table_id, event.position.partition))
                    if renamed:
                        buffer.append(in_table_names(event, renamed))
                        buffered += 1
                        continue
                buffer.append(event)
                buffered += 1
            elif type(event) is Tombstone:
                self.metrics.tombstones += 1
            elif isinstance(event, BadRecord):
                self.bad.record(event.reason, event.position, event.key, event.value)
            elif isinstance(event, SchemaObserved | SchemaHint):
                self._buffered += buffered
                buffered = 0
                if index and time.monotonic() - started > self.settings.poll_budget_s:
                    done = records_before(records, event)
                    if done is not None:
                        self._leftover = (events[index:], list(records[done:]))
                        records = records[:done]
                        break
                self._schema_event(event, events[:index])
                buffers, skip, aliases = self._buffers, self.partitions.skip, self._aliases
        self._buffered += buffered
        self.partitions.advance(records)
        self.metrics.records_read += len(records)
        if self.schemas.read_again:
            self._passed_read_again()
        if self.schemas.tracker.has_pending():
            self.schemas.settle(self.partitions.offsets, self._barrier_at(()))
            self._refresh_aliases()

    def _resume(self) -> list[Any]:
        """The rest of the last batch, after the consumer was polled (paused) to stay in its group."""
        assert self._leftover is not None
        events, records = self._leftover
        self._leftover = None
        arrived = self.source.keep_alive() if isinstance(self.source, KeepingAlive) else []
        if isinstance(self.source, Rebalancing):  # partitions may have moved during that poll
            owned = set(self.partitions.offsets)
            records = [r for r in records if (r.topic(), r.partition()) in owned]
            events = [e for e in events if partition_of(e) in owned or partition_of(e) is None]
        self.process(events, records)
        if arrived:
            self.process(self.decode(arrived), arrived)
        return [*records, *arrived]

    def _open_table(self, table_id: TableId, event: DataChange) -> list[DataChange] | None:
        if self.schemas.tracker.schema(table_id) is None:
            assert event.position is not None
            self.bad.row(
                f"no schema known for table {table_id} (a record without a schema, and no DDL seen)", event
            )
            return None
        self.schemas.ensure_sink_table(table_id, event.position)
        self.partitions.first_seen(table_id)
        return self._buffers.setdefault(table_id, [])

    # ------------------------------------------------------------------------------ schema changes

    def _schema_event(self, event: SchemaObserved | SchemaHint, before: Sequence[Event]) -> None:
        plan = self._order_truncate(event, before) if isinstance(event, SchemaHint) else None
        read_again = plan.read_again if plan is not None else {}
        reason = self.schemas.handle(event, self._barrier_at(before, read_again))
        if reason is not None:
            if event.position is None:
                raise CheckpointError(reason)
            ddl = event.ddl
            self.bad.record(reason, event.position, None, ddl.encode() if ddl else None)
        self._refresh_aliases()
        for partition, (start, end) in read_again.items():
            self._read_again(partition, start, end)

    def _read_again(self, partition: Partition, start: int, end: int) -> None:
        """Rows written after a truncate but read before it: processed again once it is applied."""
        assert isinstance(self.source, RecordReading)
        offset = start
        while offset < end:
            records = [r for r in self.source.read_from(partition, offset, end - offset) if r.offset() < end]
            if not records:
                break
            self.process(self.decode(records), records)
            offset = records[-1].offset() + 1

    def _order_truncate(self, event: SchemaHint, before: Sequence[Event]) -> TruncatePlan | None:
        """Where the table's other partitions stand to a truncate read in one of them (see
        :mod:`ferry.pipeline.truncates`); rows they hold that it removed are skipped from now on."""
        order, position = event.source_order, event.position
        if (
            order is None
            or position is None
            or self.source_order is None
            or not isinstance(self.source, RecordReading)
            or not any(isinstance(c, TruncateTable) and self.schemas.applies(c) for c in event.changes)
        ):
            return None  # (a truncate the sink skips leaves every row: nothing to put in order)
        ends = self.source.high_watermarks([position.topic]) if isinstance(self.source, Watermarking) else {}
        # the other partitions of the table's topic read here, up to where they are read (or not yet)
        past = offsets_past(self.partitions.offsets, _read_before(before))
        here = (position.topic, position.partition)
        read_to = {tp: past.get(tp, 0) for tp in {*ends, *past} if tp[0] == position.topic and tp != here}
        if not read_to:
            return None
        plan = plan_truncate(self.source.read_from, self.source_order, order, read_to, ends)
        if plan is None:
            log.warning("%s: records without a source position: the truncate is applied where read", position)
            return None
        for partition, (_, end) in plan.read_again.items():
            self.schemas.read_again[partition] = end
        if plan.skip_before:
            self.schemas.truncated.setdefault(event.table_id, {}).update(plan.skip_before)
            self.partitions.skip.setdefault(event.table_id, {}).update(plan.skip_before)
        return plan

    def _barrier_at(
        self, before: Sequence[Event], read_again: Mapping[Partition, tuple[int, int]] | None = None
    ) -> Callable[[Mapping[str, Any]], None]:
        """A checkpoint of everything read before a schema event, with the schemas before it (and
        the partitions whose rows are read again from where they will be)."""

        def barrier(schemas: Mapping[str, Any]) -> None:
            # the bad records' dead letters are stored by this checkpoint too
            self.partitions.advance_to(_read_before(before))
            for partition, (start, _) in (read_again or {}).items():
                self.partitions.offsets[partition] = start
            self.checkpoint(schemas)

        return barrier

    def _save_schemas(self, schemas: Mapping[str, Any]) -> None:
        self.settings.retries.call(
            lambda: self.state.save_checkpoint(self.settings.name, self._checkpointed, schemas),
            "saving the schemas",
            on_wait=self._waiting,
            transient=self.state.is_transient,
        )

    def _sink_changed(self, source_tables: Collection[TableId]) -> None:
        self.shaper.forget(source_tables)
        for source in source_tables:
            if self.schemas.tracker.schema(source) is None:
                self._buffers.pop(source, None)
        self.metrics.schema_changes = self.schemas.changes_routed

    def _passed_read_again(self) -> None:
        offsets, read_again = self.partitions.offsets, self.schemas.read_again
        passed = [tp for tp, until in read_again.items() if offsets.get(tp, 0) >= until]
        if passed:
            for tp in passed:
                del read_again[tp]
            self._refresh_aliases()

    def _refresh_aliases(self) -> None:
        self._aliases = aliases = self.schemas.tracker.all_aliases()
        for (topic, partition), until in self.schemas.read_again.items():
            if self.partitions.offsets.get((topic, partition), 0) >= until:
                continue
            # rows read again after a truncate may be older than a rename that is final since
            tracker = self.schemas.tracker
            for table_id, tracked in tracker.tables.items():
                older = tracker.older_names(table_id) if topic in tracked.topics else None
                if older:
                    key = (table_id, partition)
                    aliases[key] = {**older, **aliases.get(key, {})}

    # ------------------------------------------------------------------------------ checkpoints

    def checkpoint(self, schemas: Mapping[str, Any] | None = None) -> None:
        """Write and flush buffered rows, then save offsets and schemas, then commit offsets."""
        started = time.monotonic()
        offsets = dict(self.partitions.offsets)
        try:
            written = self._write_buffers()
            retries, waiting = self.settings.retries, self._waiting
            retries.call(lambda: self.sink.flush(offsets), "flushing the sink", on_wait=waiting)
            retries.call(self.dead_letter.flush, "storing the dead letters", on_wait=waiting)
            saved = schemas if schemas is not None else self.schemas.snapshot()
            retries.call(
                lambda: self.state.save_checkpoint(self.settings.name, offsets, saved),
                "saving the checkpoint",
                on_wait=waiting,
                transient=self.state.is_transient,
            )
            self.source.commit(offsets)
            self._checkpointed = offsets
            self._waited()
        except FerryError:
            raise
        except Exception as e:
            raise CheckpointError(f"checkpoint failed: {type(e).__name__}: {e}") from e
        for table, count in written.items():
            self.metrics.rows_written[table] = self.metrics.rows_written.get(table, 0) + count
        self.metrics.checkpoints += 1
        self.metrics.rows_skipped_committed = self.partitions.rows_skipped
        self.metrics.last_checkpoint_ms = now_ms()
        self.metrics.last_checkpoint_duration_ms = int((time.monotonic() - started) * 1000)
        self._last_checkpoint = time.monotonic()

    def _write_buffers(self) -> dict[str, int]:
        written = self.shaper.write(self._buffers)
        tracker = self.schemas.tracker
        self._buffers = {t: [] for t in self._buffers if tracker.schema(t) is not None}
        self._buffered = 0
        return written

    # ------------------------------------------------------------------------------ status

    def _set_detail(self, detail: str) -> None:
        self.detail = detail

    def _waiting(self, detail: str) -> None:
        """A transient error is being retried: the status says so while it waits."""
        if self._detail_before_wait is None:
            self._detail_before_wait = self.detail
        self.detail = detail
        self._update_status(time.monotonic())

    def _waited(self) -> None:
        """What was retried succeeded: the detail is what it was before."""
        if self._detail_before_wait is not None:
            self.detail, self._detail_before_wait = self._detail_before_wait, None

    def _set_phase(self, phase: Phase, detail: str) -> None:
        self.phase, self.detail = phase, detail
        self._update_status(time.monotonic())

    def _update_status(self, now: float) -> None:
        self._window = self.metrics.refresh(now, self._window, self.source, self.partitions, self.schemas)
        try:
            self.state.set_status(
                self.settings.name, self.phase, self.detail, self.metrics.as_dict(), worker=self.worker
            )
        except Exception as e:
            if not self.state.is_transient(e):
                raise
            log.warning("status not recorded (the state store is unavailable): %s", e)
        self._last_status = now


def _read_before(events: Sequence[Event]) -> list[DataChange | BadRecord]:
    """The events of a batch whose records count as read once a barrier before them is taken."""
    return [e for e in events if type(e) is DataChange or type(e) is BadRecord]
