"""The StarRocks sink: DDL over the MySQL protocol, rows through Stream Load."""

from __future__ import annotations

from ferry.sinks.base import COMMENTS_NOT_SYNCED, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.starrocks.config import StarRocksSinkConfig

#: What a MySQL-protocol warehouse does (StarRocks; SelectDB also renames and alters types).
MYSQL_PROTOCOL_CHANGES = {
    K.CREATE_TABLE: S.APPLY,
    K.ADD_COLUMN_LAST: S.APPLY,
    K.ADD_COLUMN_POSITIONED: S.APPLY,
    K.ADD_COLUMN_DEFAULT: S.APPLY,
    K.DROP_COLUMN: S.APPLY,
    K.RENAME_COLUMN: S.UNSUPPORTED,
    K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
    K.RELAX_NULLABILITY: S.NOT_SYNCED,
    K.DROP_TABLE: S.APPLY,
    K.TRUNCATE_TABLE: S.APPLY,
    **COMMENTS_NOT_SYNCED,
}

STARROCKS = SinkDeclaration(
    type="starrocks",
    config=StarRocksSinkConfig,
    capabilities=SinkCapabilities(changes=MYSQL_PROTOCOL_CHANGES),
    sink_class="ferry.sinks.starrocks.sink:StarRocksSink",
    extra="starrocks",
)

__all__ = ["MYSQL_PROTOCOL_CHANGES", "STARROCKS", "StarRocksSinkConfig"]
