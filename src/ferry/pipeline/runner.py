"""The pipeline runner: the batch hot path and checkpoints.

One loop takes whole batches from the source, decodes them in one call, and appends each row
change to its table's buffer: the per-event cost is a type check, a dict look-up and an append.
Everything else happens per batch or per checkpoint. Schema events go to the
:class:`~ferry.pipeline.schema_operator.SchemaOperator`, which raises a barrier only when the sink
must change and the rows read before the change must reach the sink first
(:mod:`ferry.pipeline.barriers`: the changed tables' commit on a sink recording offsets per table,
else a checkpoint of everything read before the event); a column added or a type widened only
adapts the buffered rows.

The checkpoint order (rows written, the sink flushed, the dead letters stored, offsets and schemas
saved, offsets committed to the source) is enforced in one place,
:class:`~ferry.pipeline.commits.Checkpoints`; :mod:`ferry.pipeline.commits` says which thread does
what while a commit runs beside the reading of the next batches.

A restart at any point replays from the last checkpoint; rows a transactional sink already
committed are skipped by their offsets (:mod:`ferry.pipeline.partitions`), and a change the sink
already shows is not applied again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ferry.connectors.base import DeadLetter, KeepingAlive, Rebalancing, Source, Watermarking
from ferry.exceptions import FerryError
from ferry.model.events import BadRecord, DataChange, Event, SchemaHint, SchemaObserved, Tombstone
from ferry.model.raw_values import RawValues
from ferry.model.schema import TableId
from ferry.offsets import Partition
from ferry.pipeline.bad_records import BadRecords, DeadLetterKind
from ferry.pipeline.barriers import Barrier
from ferry.pipeline.buffers import RowBuffers
from ferry.pipeline.checkpoints import CheckpointStore
from ferry.pipeline.collector import GarbageCollection
from ferry.pipeline.commits import CHECKPOINT_READ, Background, Checkpoints, SerialDeadLetter
from ferry.pipeline.exceptions import CheckpointError
from ferry.pipeline.metrics import Decode, Metrics, worker_name
from ferry.pipeline.partitions import PartitionHandOver, PartitionOffsets, partition_of, records_before
from ferry.pipeline.phase import Phase
from ferry.pipeline.route import TableRouter, TableSelection
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.schema_operator import HintSource, SchemaDefinitions, SchemaOperator
from ferry.pipeline.settings import RunnerSettings
from ferry.pipeline.shaping import RowShaper, in_table_names, without_values
from ferry.pipeline.status import RunnerStatus
from ferry.pipeline.truncates import OrderOf, TruncateOrder
from ferry.sinks.base import Sink

if TYPE_CHECKING:
    from ferry.transform.blocks import TableTransforms

log = logging.getLogger(__name__)


class PipelineRunner:
    """Runs one pipeline: source → decoder → schema operator → sink, with checkpoints."""

    def __init__(
        self,
        *,
        settings: RunnerSettings,
        source: Source,
        decode: Decode,
        sink: Sink,
        state: CheckpointStore,
        router: SchemaChangeRouter,
        tables: TableRouter,
        dead_letter: DeadLetter,
        hints: HintSource | None = None,
        definitions: SchemaDefinitions | None = None,
        transforms: TableTransforms | None = None,
        source_order: OrderOf | None = None,
        background: Background | None = None,
        selection: TableSelection | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.decode = decode
        self.sink = sink
        self.state = state
        self.tables = tables
        self.dead_letter = dead_letter
        self.transforms = transforms
        self.worker = worker_name()
        self.metrics = Metrics(worker=self.worker)
        letters = SerialDeadLetter(dead_letter)  # sent here, flushed by a checkpoint's commit
        self.bad = BadRecords(letters, source, self.metrics, fail=settings.fail_on_bad_record)
        self.bad.selection = selection
        self.schemas = SchemaOperator(
            settings=settings.schema,
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
        self.schemas.on_sink_changed = self._sink_changed
        self.schemas.on_adapt = lambda table_id, old, new: self.rows.adapt(table_id, old, new, self.bad.row)
        self.partitions = PartitionOffsets(sink, tables)
        self.truncates = TruncateOrder(source, source_order, self.schemas, self.partitions)
        self.schemas.on_readded = self.truncates.cut_column
        self.status = RunnerStatus(
            settings.name,
            self.worker,
            state,
            self.metrics,
            source=source,
            partitions=self.partitions,
            schemas=self.schemas,
        )
        self.checkpoints = Checkpoints(
            settings=settings,
            source=source,
            sink=sink,
            dead_letter=letters,
            state=state,
            schemas=self.schemas,
            partitions=self.partitions,
            metrics=self.metrics,
            status=self.status,
            background=background,
            settle=self.bad.settle,
        )
        self.bad.take_refused_rows(sink)
        self.schemas.on_applied = self.checkpoints.save_schemas
        self.schemas.before_sink = self.checkpoints.wait
        self.rows = RowBuffers()
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
        self.garbage = GarbageCollection()

    # ------------------------------------------------------------------------------ lifecycle

    def open(self, stop: threading.Event | None = None) -> None:
        checkpoint = self.settings.retries.call(
            lambda: self.state.latest_checkpoint(self.settings.name),
            "reading the checkpoint",
            operation=CHECKPOINT_READ,
            on_wait=self.status.waiting,
            transient=self.state.is_transient,
        )
        self.status.checkpoint_read(checkpoint, stop or threading.Event())  # PENDING while a topic is missing
        self.schemas.restore(None if checkpoint is None else checkpoint.schemas)
        starts = {} if checkpoint is None else dict(checkpoint.offsets)
        self.bad.resume(self.dead_letter, checkpoint, starts, self.settings.retries, self.status.waiting)
        self._refresh_aliases()
        self.truncates.restored()
        if isinstance(self.source, Rebalancing):
            # partitions shared with other workers: offsets are owned from their assignment on
            self.source.set_rebalance_listener(PartitionHandOver(self))
        else:
            self.partitions.offsets = dict(starts)
        self.source.open(starts)
        self.status.set(Phase.RUNNING, "reading")

    def run(self, stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set, a bounded read ends, or a terminal error."""
        stop = stop or threading.Event()
        try:
            self.open(stop)
            with self.garbage.running() if self.settings.tune_gc else contextlib.nullcontext():
                while not stop.is_set():
                    self.step()
                    if self._leftover is None and self.source.finished():
                        self.status.set(Phase.RUNNING, "bounded read reached its end")
                        self.checkpoints.wait()  # its rows counted as written
                        self.bad.check_something_written(self.rows.count)
                        break
                self.checkpoint()
            self.status.set(Phase.STOPPED, "stopped after a final checkpoint")
        except FerryError as e:
            self.status.failed(str(e), self.checkpoints.checkpointed)
            raise
        except Exception as e:
            self.status.failed(f"{type(e).__name__}: {e}", self.checkpoints.checkpointed)
            raise
        finally:
            self.close()

    def close(self) -> None:
        self.checkpoints.commits.close()  # nothing is closed under a commit in flight
        self.schemas.close()
        if self.transforms is not None:
            self.transforms.close()  # the user-defined functions' close()
        for closable in (self.source, self.dead_letter, self.sink, self.state):
            try:
                closable.close()
            except Exception:
                log.exception("closing %s failed", closable)

    def drop_rows(self, partitions: Collection[Partition]) -> None:
        """Forget the buffered rows of ``partitions`` unwritten (they went to another worker)."""
        self.checkpoints.wait()
        self.rows.drop_partitions(partitions)

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
            self.status.outage()  # the source's brokers unreachable, or back
        self.checkpoints.commits.poll()
        now = time.monotonic()
        if due := self.checkpoints.due(now, self.rows.count):
            self.begin_checkpoint()
        self.garbage.collect(now, checkpoint=due)  # after a checkpoint: its rows are gone
        if now - self.status.updated >= self.settings.status_interval_s:
            self.status.update(now)
        return len(records)

    def read_hints(self) -> None:
        """Take the DDL hints read since the last call (between batches: nothing is in flight)."""
        self.schemas.drain_hints(Barrier(self, ()))
        self._read_again_after_columns()

    def sync_hints(self) -> None:
        """Read the schema-change topic to its end (a decoder met a record no definition describes;
        rows to read again after it are read before the batch being decoded is processed)."""
        self.schemas.sync_hints(Barrier(self, ()))

    def process(self, events: list[Event], records: Sequence[Any]) -> None:
        """Route a decoded batch; ``records`` are the raw records it came from (for offsets)."""
        with self.rows.raw.batch():
            self._process(events, records)

    def _process(self, events: list[Event], records: Sequence[Any]) -> None:
        if self.truncates.column_plans:  # planned while the batch was decoded: the older rows first
            self._read_again_after_columns()
        events = self.bad.routed(events, self.rows.raw.materialize)  # records of tables not routed out
        buffers = self.rows.tables
        skip = self.partitions.skip
        aliases = self._aliases
        cleared = self.schemas.cleared
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
                change = event
                if cleared and event.position is not None:
                    columns = self.schemas.cleared_columns(table_id, event.position)
                    if columns:  # written before the column was dropped and added again
                        self.rows.raw.materialize(table_id)
                        change = without_values(event, columns)
                if aliases and change.position is not None:
                    renamed = aliases.get((table_id, change.position.partition))
                    if renamed:
                        self.rows.raw.materialize(table_id)  # the row is copied under other names
                        buffer.append(in_table_names(change, renamed))
                        buffered += 1
                        continue
                buffer.append(change)
                buffered += 1
            elif type(event) is Tombstone:
                self.metrics.tombstones += 1
            elif type(event) is RawValues:
                self.rows.raw.add(event)
            elif isinstance(event, BadRecord):
                self.bad.record(event.reason, event.position, event.key, event.value)
            elif isinstance(event, SchemaObserved | SchemaHint):
                self.rows.count += buffered
                buffered = 0
                if index and time.monotonic() - started > self.settings.poll_budget_s:
                    done = records_before(records, event)
                    if done is not None:
                        self._leftover = (events[index:], list(records[done:]))
                        records = records[:done]
                        break
                self._schema_event(event, events[:index])
                buffers, skip, aliases = self.rows.tables, self.partitions.skip, self._aliases
        self.rows.count += buffered
        self.partitions.advance(records)
        self.metrics.records_read += len(records)
        if self.schemas.cleared:
            self.schemas.passed_cleared(self.partitions.offsets)
        if self.schemas.reading_again and self.schemas.passed_read_again(self.partitions.offsets):
            self._refresh_aliases()
        if self.schemas.tracker.has_pending():
            self.schemas.settle(self.partitions.offsets, Barrier(self, ()))
            self._refresh_aliases()
            self._read_again_after_columns()

    def _resume(self) -> list[Any]:
        """The rest of the last batch, after the consumer was polled (paused) to stay in its group."""
        assert self._leftover is not None
        events, records = self._leftover
        self._leftover = None
        with self.rows.raw.batch():  # the rest of a batch: its rows' raw values came with its first part
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
            self.rows.raw.materialize(table_id)
            reason = f"no schema known for table {table_id} (a record without a schema, and no DDL seen)"
            self.bad.row(reason, event, DeadLetterKind.NO_SCHEMA)
            return None
        self.checkpoints.wait()  # the sink's tables are read
        self.schemas.ensure_sink_table(table_id, event.position)
        self.partitions.first_seen(table_id)
        return self.rows.tables.setdefault(table_id, [])

    # ------------------------------------------------------------------------------ schema changes

    def _schema_event(self, event: SchemaObserved | SchemaHint, before: Sequence[Event]) -> None:
        plan = self.truncates.plan(event, before) if isinstance(event, SchemaHint) else None
        reason = self.schemas.handle(
            event, Barrier(self, before, plan.starts if plan is not None else {}, event)
        )
        if reason is not None:
            if event.position is None:
                raise CheckpointError(reason)
            ddl = event.ddl.encode() if event.ddl else None
            self.bad.record(reason, event.position, None, ddl, DeadLetterKind.SCHEMA_CHANGE)
        self._refresh_aliases()
        if plan is not None:
            self.truncates.read_again(plan, self._process_records)
        self._read_again_after_columns()

    def _read_again_after_columns(self) -> None:
        """The rows read before a column was dropped and added again, but written after it."""
        self.truncates.read_again_after_columns(self._process_records, self._refresh_aliases)

    def _process_records(self, records: Sequence[Any]) -> None:
        self.process(self.decode(records), records)

    def _sink_changed(self, source_tables: Collection[TableId]) -> None:
        self.shaper.forget(source_tables)
        for source in source_tables:
            if self.schemas.tracker.schema(source) is None:
                self.rows.forget(source)
        self.metrics.schema_changes = self.schemas.changes_routed

    def _refresh_aliases(self) -> None:
        self._aliases = self.schemas.aliases(self.partitions.offsets)

    # ------------------------------------------------------------------------------ checkpoints

    def checkpoint(self, schemas: Mapping[str, Any] | None = None) -> None:
        """A whole checkpoint, waited for: after the commit in flight, the buffered rows written, the
        sink flushed, offsets and schemas (``schemas`` when given) saved, offsets committed."""
        self.begin_checkpoint(schemas)
        self.checkpoints.wait()

    def begin_checkpoint(self, schemas: Mapping[str, Any] | None = None) -> None:
        """After the commit in flight, the buffered rows written; their commit is left running."""
        self.checkpoints.take(self.write_buffers, schemas)

    def write_buffers(self, source_tables: Collection[TableId] | None = None) -> dict[str, int]:
        """The rows buffered (of ``source_tables`` only, when given) shaped and handed to the sink;
        returns the rows per sink table."""
        schemas, within = self.schemas, self._leftover is not None  # within a batch: see RowBuffers
        keep = lambda t: schemas.tracker.schema(t) is not None  # noqa: E731
        written = self.rows.write(self.shaper.write, keep, within, source_tables)
        self.bad.send_pending()  # before the commit that stores the dead letters and passes their rows
        return written
