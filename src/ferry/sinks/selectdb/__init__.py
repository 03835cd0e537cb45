"""The SelectDB (Apache Doris) sink: DDL over the MySQL protocol, rows through Stream Load."""

from __future__ import annotations

from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.starrocks import MYSQL_PROTOCOL_CHANGES

SELECTDB = SinkDeclaration(
    type="selectdb",
    config=SelectDbSinkConfig,
    capabilities=SinkCapabilities(
        changes={**MYSQL_PROTOCOL_CHANGES, K.RENAME_COLUMN: S.APPLY, K.ALTER_COLUMN_TYPE: S.APPLY},
    ),
    sink_class="ferry.sinks.selectdb.sink:SelectDbSink",
    extra="selectdb",
)

__all__ = ["SELECTDB", "SelectDbSinkConfig"]
