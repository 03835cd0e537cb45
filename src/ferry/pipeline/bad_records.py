"""Records that cannot be processed: to the dead-letter destination with the reason, as read.

A record the decoder could not read goes as it is; a row that fails later (a transform, a cast to
the sink's types) goes as its record was read, fetched again from the source (ferry's rendering
of the row when the source cannot). With ``on-bad-record: fail`` the first one stops the pipeline.
"""

from __future__ import annotations

import logging
from collections import Counter

from ferry.connectors.base import DeadLetter, RecordFetching, Source
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.events import DataChange, SourcePosition
from ferry.pipeline.exceptions import BadRecordError, NothingWrittenError
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.shaping import change_bytes

log = logging.getLogger(__name__)

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

    def resume(self, stored: set[tuple[str, int, int]]) -> None:
        """After a restart: ``stored`` are the records past the checkpoint's offsets that an earlier
        run already sent; read again, they are counted but not sent a second time."""
        self.stored = stored

    def checkpointed(self) -> None:
        """The rows read so far are shaped: a record met again is read again (after a truncate)."""
        self.sent.clear()

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
