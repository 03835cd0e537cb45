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

import gc
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ferry.connectors.base import (
    DeadLetter,
    KeepingAlive,
    Offsets,
    Rebalancing,
    RecordFetching,
    Source,
    Watermarking,
)
from ferry.exceptions import FerryError, TerminalError
from ferry.pipeline.adapt import CastError, RowAdapter
from ferry.pipeline.events import (
    BadRecord,
    DataChange,
    Event,
    SchemaHint,
    SchemaObserved,
    SourcePosition,
    Tombstone,
    is_schema_change,
)
from ferry.pipeline.exceptions import CheckpointError
from ferry.pipeline.partitions import PartitionOffsets
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.schema import Schema, TableId
from ferry.pipeline.schema_operator import (
    HintSource,
    SchemaChangeTimeoutError,
    SchemaDefinitions,
    SchemaOperator,
    SchemaSettings,
    retry,
)
from ferry.pipeline.state import StateStore, encode_offsets, now_ms
from ferry.pipeline.tracker import SchemaTracker
from ferry.sinks.base import Sink

if TYPE_CHECKING:
    from ferry.pipeline.transform import TableTransforms

__all__ = [
    "BadRecordError",
    "HintSource",
    "PipelineRunner",
    "RunnerSettings",
    "SchemaChangeTimeoutError",
]

log = logging.getLogger(__name__)

Decode = Callable[[Sequence[Any]], list[Event]]


class BadRecordError(TerminalError):
    """A record could not be processed and ``on-bad-record`` is ``fail``."""

    def __init__(self, reason: str, position: SourcePosition) -> None:
        super().__init__(f"bad record at {position}: {reason}")
        self.topic, self.partition, self.offset = position


class NothingWrittenError(TerminalError):
    """A bounded read ended with every record it read in the dead-letter topic."""


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
    #: A batch dense in schema changes is processed in parts of about this long, the consumer polled
    #: in between, so that it keeps its group membership (well below ``max.poll.interval.ms``).
    poll_budget_s: float = 30.0


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
        self.phase = "PENDING"
        self.detail = "starting"
        self.schemas = SchemaOperator(
            settings=SchemaSettings(
                settings.name, settings.schema_change_timeout_s, settings.schema_change_poll_s
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
        self.partitions = PartitionOffsets(sink, tables)
        self._buffers: dict[TableId, list[DataChange]] = {}
        self._buffered = 0
        self._adapters: dict[TableId, RowAdapter] = {}
        #: (table, partition) → renamed keys, while a partition's rows carry a rename not yet final
        self._aliases: dict[tuple[TableId, int], dict[str, str]] = {}
        self._bad_reasons: Counter[str] = Counter()
        #: The rest of a batch a part of which took the whole poll budget: (events, records)
        self._leftover: tuple[list[Event], list[Any]] | None = None
        self._last_checkpoint = time.monotonic()
        self._last_status = 0.0
        self._window: tuple[float, int] = (time.monotonic(), 0)

    @property
    def tracker(self) -> SchemaTracker:
        return self.schemas.tracker

    # ------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        checkpoint = self.state.latest_checkpoint(self.settings.name)
        starts: dict[tuple[str, int], int] = {}
        self.schemas.restore(None if checkpoint is None else checkpoint.schemas)
        if checkpoint is not None:
            starts = dict(checkpoint.offsets)
        self._refresh_aliases()
        if isinstance(self.source, Rebalancing):
            # partitions shared with other workers: offsets are owned from their assignment on
            self.source.set_rebalance_listener(self)
        else:
            self.partitions.offsets = dict(starts)
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
                if self._leftover is None and self.source.finished():
                    self._set_phase("RUNNING", "bounded read reached its end")
                    self._check_something_written()
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
        self.schemas.close()
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
        self.partitions.forget(partitions)
        self.schemas.forget_partitions(partitions)
        self.metrics.assigned = self.partitions.assigned()

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
        self.partitions.forget(partitions)
        self.schemas.forget_partitions(partitions)
        self.metrics.assigned = self.partitions.assigned()

    def partitions_assigned(self, starts: Offsets) -> None:
        """Partitions read here from now on, from these offsets."""
        # another worker may have changed the sink tables and committed rows of these partitions
        self.schemas.forget_sink_schemas(self.partitions.checked)
        self._adapters.clear()
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
                        buffer.append(_renamed(event, renamed))
                        buffered += 1
                        continue
                buffer.append(event)
                buffered += 1
            elif type(event) is Tombstone:
                self.metrics.tombstones += 1
            elif isinstance(event, BadRecord):
                self._bad(event.reason, event.position, event.key, event.value)
            elif isinstance(event, SchemaObserved | SchemaHint) or is_schema_change(event):
                self._buffered += buffered
                buffered = 0
                if index and time.monotonic() - started > self.settings.poll_budget_s:
                    done = _records_before(records, event)
                    if done is not None:
                        self._leftover = (events[index:], list(records[done:]))
                        records = records[:done]
                        break
                self._schema_event(event, events[:index])
                buffers, skip, aliases = self._buffers, self.partitions.skip, self._aliases
        self._buffered += buffered
        self.partitions.advance(records)
        self.metrics.records_read += len(records)
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
            events = [e for e in events if _partition_of(e) in owned or _partition_of(e) is None]
        self.process(events, records)
        if arrived:
            self.process(self.decode(arrived), arrived)
        return [*records, *arrived]

    def _open_table(self, table_id: TableId, event: DataChange) -> list[DataChange] | None:
        if self.schemas.tracker.schema(table_id) is None:
            assert event.position is not None
            self._bad_row(
                f"no schema known for table {table_id} (a record without a schema, and no DDL seen)", event
            )
            return None
        self.schemas.ensure_sink_table(table_id, event.position)
        self.partitions.first_seen(table_id)
        return self._buffers.setdefault(table_id, [])

    def _bad(self, reason: str, position: SourcePosition, key: bytes | None, value: bytes | None) -> None:
        """A record that cannot be processed goes to the dead-letter topic, as it was read."""
        self.metrics.bad_records += 1
        self._bad_reasons[reason.split(":", maxsplit=1)[0]] += 1
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

    def _bad_row(self, reason: str, change: DataChange) -> None:
        """A row that cannot be written: its record goes to the dead-letter topic as it was read
        (read again from the source; ferry's rendering of the row when the source cannot)."""
        assert change.position is not None
        found = self.source.fetch(change.position) if isinstance(self.source, RecordFetching) else None
        key, value = found if found is not None else (None, change_bytes(change))
        self._bad(reason, change.position, key, value)

    def _check_something_written(self) -> None:
        read, bad = self.metrics.records_read, self.metrics.bad_records
        if (
            read
            and bad >= read - self.metrics.tombstones
            and not self.metrics.rows_written
            and not self._buffered
        ):
            reason, count = self._bad_reasons.most_common(1)[0]
            raise NothingWrittenError(
                f"every one of the {read} records read went to the dead-letter topic "
                f"({count} of them: {reason!r}); check source.value.format against what the "
                "topic holds (for example flattened or Avro records read as debezium-json)"
            )

    # ------------------------------------------------------------------------------ schema changes

    def _schema_event(self, event: Event, before: Sequence[Event]) -> None:
        if is_schema_change(event):  # a change that came as an event of its own (a truncate)
            change: Any = event
            event = SchemaHint(change.table_id, (change,), change.tag, True, None)
        assert isinstance(event, SchemaObserved | SchemaHint)
        reason = self.schemas.handle(event, self._barrier_at(before))
        if reason is not None:
            if event.position is None:
                raise CheckpointError(reason)
            ddl = event.ddl
            self._bad(reason, event.position, None, ddl.encode() if ddl else None)
        self._refresh_aliases()

    def _barrier_at(self, before: Sequence[Event]) -> Callable[[Mapping[str, Any]], None]:
        """A checkpoint of everything read before a schema event, with the schemas before it."""

        def barrier(schemas: Mapping[str, Any]) -> None:
            self.partitions.advance_to([e for e in before if type(e) is DataChange])
            self.checkpoint(schemas)

        return barrier

    def _sink_changed(self, source_tables: Collection[TableId]) -> None:
        for source in source_tables:
            self._adapters.pop(source, None)
            if self.schemas.tracker.schema(source) is None:
                self._buffers.pop(source, None)
        self.metrics.schema_changes = self.schemas.changes_routed

    def _refresh_aliases(self) -> None:
        tracker = self.schemas.tracker
        self._aliases = {
            (table_id, p): a for table_id, t in tracker.tables.items() for p, a in t.aliases.items() if a
        }

    # ------------------------------------------------------------------------------ checkpoints

    def checkpoint(self, schemas: Mapping[str, Any] | None = None) -> None:
        """Write and flush buffered rows, then save offsets and schemas, then commit offsets."""
        started = time.monotonic()
        offsets = dict(self.partitions.offsets)
        try:
            written = self._write_buffers()
            retry(lambda: self.sink.flush(offsets), "sink flush", self._set_detail)
            self.dead_letter.flush()
            self.state.save_checkpoint(
                self.settings.name, offsets, schemas if schemas is not None else self.schemas.snapshot()
            )
            self.source.commit(offsets)
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
        written: dict[str, int] = {}
        per_sink: dict[TableId, list[DataChange]] = {}
        for source_table, changes in self._buffers.items():
            if not changes:
                continue
            sink_table = self.tables.sink_table(source_table)
            sink_schema = self.schemas.sink_schema(sink_table)
            if sink_schema is None:
                for change in changes:
                    self._bad_row(f"sink table {sink_table} does not exist", change)
                continue
            rows = self._transform(source_table, changes)
            per_sink.setdefault(sink_table, []).extend(self._adapt(source_table, sink_schema, rows))
        for sink_table, changes in per_sink.items():
            sink_schema = self.schemas.sink_schema(sink_table)
            assert sink_schema is not None
            if changes:
                self.sink.write(sink_table, sink_schema, changes)
                written[str(sink_table)] = len(changes)
        tracker = self.schemas.tracker
        self._buffers = {t: [] for t in self._buffers if tracker.schema(t) is not None}
        self._buffered = 0
        return written

    def _transform(self, source_table: TableId, changes: list[DataChange]) -> list[DataChange]:
        """A table's rows filtered and projected by its transform (none: the rows as they are); a
        row an expression fails on goes to the dead-letter destination with the reason."""
        schema = self.schemas.tracker.schema(source_table)
        if self.transforms is None or schema is None:
            return changes
        return self.transforms.rows(source_table, schema, changes, self._transform_failed)

    def _transform_failed(self, change: DataChange, reason: str) -> None:
        self._bad_row(reason, change)

    def _adapt(
        self, source_table: TableId, sink_schema: Schema, changes: list[DataChange]
    ) -> list[DataChange]:
        adapter = self._adapters.get(source_table)
        if adapter is None:
            source_schema = self.schemas.source_schema(source_table) or sink_schema
            adapter = self._adapters[source_table] = RowAdapter(
                source_schema, sink_schema, self.sink.sink_type, self.schemas.tracker.renames(source_table)
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
                self._bad_row(str(e), change)
        return adapted

    # ------------------------------------------------------------------------------ status

    def _set_detail(self, detail: str) -> None:
        self.detail = detail

    def _set_phase(self, phase: str, detail: str) -> None:
        self.phase, self.detail = phase, detail
        self._update_status(time.monotonic())

    def _update_status(self, now: float) -> None:
        since, count = self._window
        metrics = self.metrics
        if now - since >= 1.0:
            metrics.throughput_eps = round((metrics.records_read - count) / (now - since), 1)
            self._window = (now, metrics.records_read)
        metrics.offsets = encode_offsets(self.partitions.offsets)
        metrics.assigned = self.partitions.assigned()
        metrics.rows_skipped_committed = self.partitions.rows_skipped
        metrics.schema_change_wait_ms = self.schemas.wait_ms
        lost = getattr(self.source, "lost", ())
        if len(lost) != len(metrics.lost_offsets):
            metrics.lost_offsets = [
                {"topic": r.topic, "partition": r.partition, "wanted": r.wanted, "earliest": r.earliest}
                for r in lost
            ]
        try:
            metrics.lag = encode_offsets(self.source.lag())
        except Exception:
            log.debug("lag not available", exc_info=True)
        self.state.set_status(
            self.settings.name, self.phase, self.detail, metrics.as_dict(), worker=self.worker
        )
        self._last_status = now


def _partition_of(event: Event) -> tuple[str, int] | None:
    position = getattr(event, "position", None)
    return None if position is None else (position.topic, position.partition)


def _records_before(records: Sequence[Any], event: Event) -> int | None:
    """How many of a batch's records come before the one ``event`` was decoded from."""
    position = getattr(event, "position", None)
    if position is None:
        return None
    for index, record in enumerate(records):
        if (record.topic(), record.partition(), record.offset()) == tuple(position):
            return index or None
    return None


def _partitions(partitions: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{topic}[{partition}]" for topic, partition in partitions)


def _renamed(change: DataChange, names: Mapping[str, str]) -> DataChange:
    """A row read with a schema whose renames the table does not show yet, in the table's names."""
    before, after = change.before, change.after
    return change._replace(
        before=None if before is None else {names.get(k, k): v for k, v in before.items()},
        after=None if after is None else {names.get(k, k): v for k, v in after.items()},
    )


def change_bytes(change: DataChange) -> bytes:
    """ferry's rendering of a row change (for a dead letter whose record cannot be read again)."""
    return orjson.dumps(
        {
            "table": str(change.table_id),
            "op": change.op.value,
            "before": change.before,
            "after": change.after,
        },
        default=str,
    )
