"""Records that cannot be processed: to the dead-letter destination with the reason, as read.

A record the decoder could not read goes as it is; a row that fails later (a transform, a cast to
the sink's types, a value its sink column cannot hold) goes as its record was read, fetched again
from the source (ferry's rendering of the row when the source cannot). Such rows are counted at
once and sent together (:meth:`BadRecords.send_pending`) before the checkpoint that passes them:
the source reads them again in one pass per partition, not one round trip per row, so a dead
letter costs about what a row written costs. With ``on-bad-record: fail`` the first one stops the
pipeline.

A row the sink's destination refused during a write (:class:`~ferry.sinks.base.RowRefusing`) is
sent by :meth:`BadRecords.refused` on the thread that flushes the sink, and stored before it
returns, as ferry's rendering of the row (the source is not read from that thread); it is counted
by the next :meth:`BadRecords.settle` on the consume thread.

A record goes once: a record of several rows, or of a table routed to several sink tables, is one
dead letter per checkpoint; after a restart, a record a run before stored (it failed before its
checkpoint) is counted and not sent again (:meth:`BadRecords.resume`). Records naming a table the
job does not route are dead letters too (:meth:`BadRecords.routed`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from queue import Empty, SimpleQueue

from ferry.connectors.base import DeadLetter, DeadLetterHistory, KeyValue, Position, RecordFetching, Source
from ferry.model.events import DataChange, Event, SchemaHint, SchemaObserved, SourcePosition
from ferry.model.schema import TableId
from ferry.offsets import Partition
from ferry.pipeline.checkpoints import Checkpoint, now_ms
from ferry.pipeline.exceptions import BadRecordError, NothingWrittenError
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.route import TableSelection
from ferry.pipeline.shaping import change_bytes
from ferry.retry import OnWait, Operation, RetryPolicy
from ferry.sinks.base import RefusedRow, RowRefusing

log = logging.getLogger(__name__)

#: How many of the latest bad records the status keeps, and how much of each reason.
LATEST_KEPT = 5
REASON_CHARS = 500
#: How many bad records are logged one by one between two checkpoints; the others are counted in
#: one line (the status keeps the latest, the dead-letter topic every one).
LOGGED_PER_CHECKPOINT = 10
#: How long before its checkpoint was saved a dead letter of a record past the checkpoint may have
#: been stored: the longest a checkpoint's commit takes (under ``restart-strategy``'s default
#: timeout, each of its three steps retried for up to 2 minutes), with room to spare.
DEAD_LETTER_LOOKBACK_MS = 10 * 60_000


class DeadLetterKind(StrEnum):
    """Why a record went to the dead-letter destination, as a kind from a small fixed set: the
    ``kind`` label of ``ferry_dead_letters_total`` (the reason's text, with its table, column or
    value, is in the dead letter's headers and the status)."""

    #: The format could not decode the record (not JSON, no envelope, a value of the wrong type).
    UNDECODABLE = "undecodable"
    #: The record names a table the job does not route (``source.tables`` selects the others).
    TABLE_NOT_SELECTED = "table-not-selected"
    #: The record has no schema and none was seen for its table (no DDL, no envelope).
    NO_SCHEMA = "no-schema"
    #: A schema change the record carries cannot be followed (a DDL statement that cannot apply).
    SCHEMA_CHANGE = "schema-change"
    #: A row that cannot be shaped to its sink table (a key column missing, a value out of range).
    ROW_NOT_WRITABLE = "row-not-writable"
    #: The sink's destination refused the row when it was written.
    SINK_REFUSED = "sink-refused"


class BadRecords:
    """Sends bad records to the dead-letter destination and counts them by reason."""

    def __init__(
        self,
        dead_letter: DeadLetter,
        source: Source,
        metrics: Metrics,
        *,
        fail: bool,
        selection: TableSelection | None = None,
    ) -> None:
        self.dead_letter = dead_letter
        self.source = source
        self.metrics = metrics
        self.fail = fail
        #: Which tables records may name (None: every table, as the tests' doubles take them).
        self.selection = selection
        self.reasons: Counter[str] = Counter()
        #: Rows counted but not sent yet: their records are read again together.
        self._pending: list[tuple[str, DataChange]] = []
        #: Bad records since the last :meth:`send_pending`, logged or not.
        self._since_logged = 0
        #: Rows the sink refused, sent already, to be counted on the consume thread.
        self._refused: SimpleQueue[tuple[str, SourcePosition]] = SimpleQueue()
        #: Records counted since the last checkpoint (a record of several rows, or of a table routed
        #: to several sink tables, goes once).
        self.sent: set[Position] = set()
        #: Records the dead-letter destination holds that a restart reads again (see :meth:`resume`).
        self.stored: set[Position] = set()

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
            lambda: dead_letter.stored_since(since),
            "reading the dead-letter topic",
            operation=Operation.DEAD_LETTER_READ,
            on_wait=on_wait,
        )
        self.stored = {s for s in stored if s[2] >= starts.get((s[0], s[1]), 0)}

    def routed(self, events: list[Event], materialize: Callable[[TableId], None]) -> list[Event]:
        """``events`` without those of tables the job does not route (see :meth:`unrouted`)."""
        selection = self.selection
        if selection is None:
            return events
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
            self.row(refusal, event, DeadLetterKind.TABLE_NOT_SELECTED)
        elif isinstance(event, SchemaHint):
            ddl = event.ddl.encode() if event.ddl else None
            self.record(refusal, position, None, ddl, DeadLetterKind.TABLE_NOT_SELECTED)
        return True

    def _first(self, position: SourcePosition) -> bool:
        """Whether ``position``'s record is met for the first time since the last checkpoint."""
        where = (position.topic, position.partition, position.offset)
        if where in self.sent:
            return False
        self.sent.add(where)
        return True

    def record(
        self,
        reason: str,
        position: SourcePosition,
        key: bytes | None,
        value: bytes | None,
        kind: DeadLetterKind = DeadLetterKind.UNDECODABLE,
    ) -> None:
        if self._first(position):
            self._count(reason, position, kind)
            self._send(reason, position, key, value)

    def _count(self, reason: str, position: SourcePosition, kind: DeadLetterKind) -> None:
        self._tally(reason, position, kind)
        if self.fail:
            raise BadRecordError(reason, position)
        self._since_logged += 1
        if self._since_logged <= LOGGED_PER_CHECKPOINT:
            log.warning("bad record at %s: %s (sent to the dead-letter topic)", position, reason)

    def _tally(self, reason: str, position: SourcePosition, kind: DeadLetterKind) -> None:
        """The metrics of one bad record: its count, its reason's and its kind's, the latest kept."""
        self.metrics.bad_records += 1
        self.metrics.dead_letters[kind.value] = self.metrics.dead_letters.get(kind.value, 0) + 1
        head = reason.split(":", maxsplit=1)[0]
        self.reasons[head] += 1
        self.metrics.bad_record_reasons[head] = self.reasons[head]
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

    def _send(self, reason: str, position: SourcePosition, key: bytes | None, value: bytes | None) -> None:
        if (position.topic, position.partition, position.offset) in self.stored:
            log.info("bad record at %s: in the dead-letter topic already", position)
            return
        self.dead_letter.send(
            reason=reason,
            topic=position.topic,
            partition=position.partition,
            offset=position.offset,
            key=key,
            value=value,
        )

    def row(
        self, reason: str, change: DataChange, kind: DeadLetterKind = DeadLetterKind.ROW_NOT_WRITABLE
    ) -> None:
        """A row that cannot be written: counted now, sent by the next :meth:`send_pending`."""
        assert change.position is not None
        if self._first(change.position):
            self._count(reason, change.position, kind)
            self._pending.append((reason, change))

    def send_pending(self) -> None:
        """Send the rows :meth:`row` was given, their records read again together (at a
        checkpoint: a record met again after it is read again, after a truncate)."""
        self.sent.clear()
        unlogged, self._since_logged = self._since_logged - LOGGED_PER_CHECKPOINT, 0
        if unlogged > 0:
            log.warning("%d more bad records sent to the dead-letter topic (not logged one by one)", unlogged)
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        found: Mapping[Position, KeyValue] = {}
        if isinstance(self.source, RecordFetching):
            found = self.source.fetch_many({c.position for _, c in pending if c.position is not None})
        for reason, change in pending:
            position = change.position
            assert position is not None
            record = found.get(position)
            key, value = record if record is not None else (None, change_bytes(change))
            self._send(reason, position, key, value)

    def take_refused_rows(self, sink: object) -> None:
        """Have the rows ``sink``'s destination refuses, if it can say so, go to the dead-letter
        topic (:meth:`refused`)."""
        if isinstance(sink, RowRefusing):
            sink.on_refused(self.refused)

    def refused(self, rows: Sequence[RefusedRow]) -> None:
        """Rows the sink's destination refused in a write: sent and stored now (any thread)."""
        for row in rows:
            position = row.change.position
            assert position is not None
            if self.fail:
                raise BadRecordError(row.reason, position)
            log.warning(
                "row at %s refused by the sink: %s (sent to the dead-letter topic)", position, row.reason
            )
            self._send(row.reason, position, None, change_bytes(row.change))
            self._refused.put((row.reason, position))
        self.dead_letter.flush()

    def settle(self) -> None:
        """Count the rows :meth:`refused` sent (consume thread)."""
        while True:
            try:
                reason, position = self._refused.get_nowait()
            except Empty:
                return
            self._tally(reason, position, DeadLetterKind.SINK_REFUSED)

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
