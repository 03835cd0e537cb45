"""Records that cannot be processed: to the dead-letter destination with the reason, as read.

A record the decoder could not read goes as it is; a row that fails later (a transform, a cast to
the sink's types) goes as its record was read, fetched again from the source (ferry's rendering
of the row when the source cannot). With ``on-bad-record: fail`` the first one stops the pipeline.

A record goes once: a record of several rows, or of a table routed to several sink tables, is sent
once per checkpoint; after a restart, a record a run before stored (it failed before its
checkpoint) is not sent again (:meth:`BadRecords.resume`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping

from ferry.connectors.base import DeadLetter, DeadLetterHistory, RecordFetching, Source
from ferry.offsets import Partition
from ferry.pipeline.checkpoints import Checkpoint, now_ms
from ferry.pipeline.events import DataChange, Event, SchemaHint, SchemaObserved, SourcePosition
from ferry.pipeline.exceptions import BadRecordError, NothingWrittenError
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.route import TableSelection
from ferry.pipeline.schema import TableId
from ferry.pipeline.shaping import change_bytes
from ferry.retry import OnWait, RetryPolicy

log = logging.getLogger(__name__)

#: How long before its checkpoint was saved a dead letter of a record past the checkpoint may have
#: been stored: the longest a checkpoint's commit takes (under ``restart-strategy``'s default
#: timeout, each of its three steps retried for up to 2 minutes), with room to spare.
DEAD_LETTER_LOOKBACK_MS = 10 * 60_000

#: How many of the latest bad records the status keeps, and how much of each reason.
LATEST_KEPT = 5
REASON_CHARS = 500


class BadRecords:
    """Sends bad records to the dead-letter destination and counts them by reason."""

    def __init__(self, dead_letter: DeadLetter, source: Source, metrics: Metrics, *, fail: bool) -> None:
        self.dead_letter = dead_letter
        self.source = source
        self.metrics = metrics
        self.fail = fail
        self.reasons: Counter[str] = Counter()
        #: Records sent since the last checkpoint (a record of several rows, or of a table routed to
        #: several sink tables, goes once).
        self.sent: set[tuple[str, int, int]] = set()
        #: Records the dead-letter destination holds that a restart reads again (see :meth:`resume`).
        self.stored: set[tuple[str, int, int]] = set()

    def resume(
        self,
        dead_letter: DeadLetter,
        checkpoint: Checkpoint | None,
        starts: Mapping[Partition, int],
        retries: RetryPolicy,
        on_wait: OnWait,
    ) -> None:
        """After a restart: the records past the checkpoint's offsets (``starts``) that a run before
        this one already stored in ``dead_letter`` are, read again, counted but not sent a second
        time. Such a dead letter was stored after the checkpoint started, at most a checkpoint's
        commit before it was saved (:data:`DEAD_LETTER_LOOKBACK_MS`)."""
        if self.fail or not isinstance(dead_letter, DeadLetterHistory):
            return
        since = None if checkpoint is None else checkpoint.created_ms - DEAD_LETTER_LOOKBACK_MS
        stored = retries.call(
            lambda: dead_letter.stored_since(since), "reading the dead-letter topic", on_wait=on_wait
        )
        self.stored = {s for s in stored if s[2] >= starts.get((s[0], s[1]), 0)}

    def checkpointed(self) -> None:
        """The rows read so far are shaped: a record met again is read again (after a truncate)."""
        self.sent.clear()

    def routed(
        self, selection: TableSelection, events: list[Event], materialize: Callable[[TableId], None]
    ) -> list[Event]:
        """``events`` without those of tables the job does not route (see :meth:`unrouted`)."""
        kept: list[Event] | None = None
        table: TableId | None = None  # the last table and topic the selection took
        topic = ""
        for index, event in enumerate(events):
            if type(event) is DataChange:
                position = event.position
                if position is None or (event.table_id is table and position.topic == topic):
                    if kept is not None:
                        kept.append(event)
                    continue
            elif not isinstance(event, SchemaObserved | SchemaHint) or event.position is None:
                if kept is not None:
                    kept.append(event)
                continue
            if self.unrouted(selection, event, materialize):
                if kept is None:
                    kept = list(events[:index])
                continue
            table, topic = event.table_id, event.position.topic  # type: ignore[union-attr]
            if kept is not None:
                kept.append(event)
        return events if kept is None else kept

    def unrouted(
        self,
        selection: TableSelection,
        event: DataChange | SchemaObserved | SchemaHint,
        materialize: Callable[[TableId], None],
    ) -> bool:
        """Whether ``event`` names a table the job does not route: its record then goes to the
        dead-letter destination (a row with its record, its raw values made values first by
        ``materialize``; a DDL statement as it was read; a schema observed has its row refused)."""
        position = event.position
        refusal = None if position is None else selection.refusal(position.topic, event.table_id)
        if refusal is None or position is None:
            return False
        if type(event) is DataChange:
            materialize(event.table_id)
            self.row(refusal, event)
        elif isinstance(event, SchemaHint):
            self.record(refusal, position, None, event.ddl.encode() if event.ddl else None)
        return True

    def record(self, reason: str, position: SourcePosition, key: bytes | None, value: bytes | None) -> None:
        where = (position.topic, position.partition, position.offset)
        if where in self.sent:
            return
        self.sent.add(where)
        self.metrics.bad_records += 1
        kind = reason.split(":", maxsplit=1)[0]
        self.reasons[kind] += 1
        self.metrics.bad_record_reasons[kind] = self.reasons[kind]
        latest = self.metrics.latest_bad_records
        latest.append(
            {
                "reason": reason[:REASON_CHARS],
                "topic": position.topic,
                "partition": position.partition,
                "offset": position.offset,
                "at_ms": now_ms(),
            }
        )
        del latest[:-LATEST_KEPT]
        if self.fail:
            raise BadRecordError(reason, position)
        if where in self.stored:
            log.info("bad record at %s: %s (in the dead-letter topic already)", position, reason)
            return
        log.warning("bad record at %s: %s (sent to the dead-letter topic)", position, reason)
        self.dead_letter.send(
            reason=reason,
            topic=position.topic,
            partition=position.partition,
            offset=position.offset,
            key=key,
            value=value,
        )

    def row(self, reason: str, change: DataChange) -> None:
        assert change.position is not None
        found = self.source.fetch(change.position) if isinstance(self.source, RecordFetching) else None
        key, value = found if found is not None else (None, change_bytes(change))
        self.record(reason, change.position, key, value)

    def check_something_written(self, buffered: int) -> None:
        """A bounded read that ends with every record it read in the dead-letter topic fails."""
        metrics = self.metrics
        read, bad = metrics.records_read, metrics.bad_records
        if read and bad >= read - metrics.tombstones and not metrics.rows_written and not buffered:
            reason, count = self.reasons.most_common(1)[0]
            raise NothingWrittenError(
                f"every one of the {read} records read went to the dead-letter topic "
                f"({count} of them: {reason!r}); check source.value.format against what the "
                "topic holds (for example flattened or Avro records read as debezium-json)"
            )
