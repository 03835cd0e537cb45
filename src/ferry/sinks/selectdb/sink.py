"""The SelectDB (Apache Doris) sink: the StarRocks sink's machinery with Doris's dialect.

A deleted key is a Stream Load row with ``__DORIS_DELETE_SIGN__ = 1`` on the unique key table.
With ``sink.enable-batch-mode`` off every :meth:`SelectDbSink.write` is loaded at once, labelled by
the offsets its changes end at; else rows wait for the checkpoint's flush.

A table that ``table.create.auto-partition.properties.*`` partitions is created with
``AUTO PARTITION BY RANGE (date_trunc(column, unit))``, its partition column NOT NULL (Doris takes
no NULL there); a row loaded without a value in it gets Flink CDC's stand-in, ``1970-01-01`` or
``1970-01-01 00:00:00``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ferry.model.events import DataChange
from ferry.model.schema import Schema, TableId
from ferry.model.types import TypeRoot
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base.sql.dialect import SqlTable
from ferry.sinks.selectdb import SELECTDB
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.selectdb.dialect import SelectDbDialect
from ferry.sinks.starrocks.dialect import MySqlProtocolDialect
from ferry.sinks.starrocks.sink import MySqlProtocolSink

#: What a row without a value in its partition column gets (Flink CDC's Doris connector's).
_DEFAULT_DATE = "1970-01-01"
_DEFAULT_DATETIME = "1970-01-01 00:00:00"


class SelectDbSink(MySqlProtocolSink):
    """Writes change events into SelectDB (or, without the vendor clauses, a MySQL-compatible server)."""

    type: str = SELECTDB.type
    capabilities: SinkCapabilities = SELECTDB.capabilities
    dialect: MySqlProtocolDialect = SelectDbDialect()
    dialect_class = SelectDbDialect
    delete_column = "__DORIS_DELETE_SIGN__"
    partial_update_header = "partial_columns"

    def __init__(
        self, config: SelectDbSinkConfig, *, pipeline: str, vendor_only_statements: bool = True
    ) -> None:
        super().__init__(config, pipeline=pipeline, vendor_only_statements=vendor_only_statements)
        self.batch_mode = config.enable_batch_mode
        self.selectdb_config = config

    def create_table_statements(self, table: SqlTable, schema: Schema) -> list[str]:
        partition = self.selectdb_config.auto_partition_of(TableId(None, table.schema, table.name), schema)
        if partition is None:
            return super().create_table_statements(table, schema)
        column = partition[0]
        stored = self.sink_schema(schema)
        stored = stored.with_columns(
            replace(c, type=c.type.not_null()) if c.name == column else c for c in stored.columns
        )
        return [
            self.dialect.create_table(table, stored, schema.primary_keys, self.table_properties, partition)
        ]

    def load_rows(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        rows, columns = super().load_rows(table_id, schema, changes)
        table = self.sql_table(table_id)
        partition = self.selectdb_config.auto_partition_of(TableId(None, table.schema, table.name), schema)
        if partition is not None:
            column = partition[0]
            stand_in = (
                _DEFAULT_DATE if schema.column(column).type.root is TypeRoot.DATE else _DEFAULT_DATETIME
            )
            for row in rows:
                if row.get(column) is None:
                    row[column] = stand_in
        return rows, columns

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
