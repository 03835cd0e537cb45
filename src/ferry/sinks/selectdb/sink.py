"""The SelectDB (Apache Doris) sink: the StarRocks sink's machinery with Doris's dialect.

A deleted key is a Stream Load row with ``__DORIS_DELETE_SIGN__ = 1`` on the unique key table.
With ``sink.enable-batch-mode`` off every :meth:`SelectDbSink.write` is loaded at once, labelled by
the offsets its changes end at; else rows wait for the checkpoint's flush.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferry.pipeline.events import DataChange
from ferry.pipeline.schema import Schema, TableId
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.selectdb import SELECTDB
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.dialect import SelectDbDialect
from ferry.sinks.starrocks.dialect import MySqlProtocolDialect
from ferry.sinks.starrocks.sink import MySqlProtocolSink


class SelectDbSink(MySqlProtocolSink):
    """Writes change events into SelectDB (or, without the vendor clauses, a MySQL-compatible server)."""

    type: str = SELECTDB.type
    capabilities: SinkCapabilities = SELECTDB.capabilities
    dialect: MySqlProtocolDialect = SelectDbDialect()
    dialect_class = SelectDbDialect
    delete_column = "__DORIS_DELETE_SIGN__"

    def __init__(
        self, config: SelectDbSinkConfig, *, pipeline: str, vendor_only_statements: bool = True
    ) -> None:
        super().__init__(config, pipeline=pipeline, vendor_only_statements=vendor_only_statements)
        self.batch_mode = config.enable_batch_mode

    def write(self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]) -> None:
        super().write(table_id, schema, changes)
        if not self.batch_mode and changes:
            # labelled by where these changes end, so a replayed write is not loaded twice
            ends: dict[tuple[str, int], int] = {}
            for change in changes:
                p = change.position
                if p is not None:
                    ends[p.topic, p.partition] = max(ends.get((p.topic, p.partition), 0), p.offset + 1)
            self.flush(ends)
