"""The Apache Fluss sink (``pip install 'ferry-cdc[fluss]'``): its options model imports no client library."""

from __future__ import annotations

from ferry.sinks.base import COMMENTS_NOT_SYNCED, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.fluss.config import FlussSinkConfig

FLUSS = SinkDeclaration(
    type="fluss",
    config=FlussSinkConfig,
    capabilities=SinkCapabilities(
        changes={
            K.CREATE_TABLE: S.APPLY,
            K.ADD_COLUMN_LAST: S.APPLY,
            K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
            K.ADD_COLUMN_DEFAULT: S.NOT_SYNCED,
            K.DROP_COLUMN: S.UNSUPPORTED,
            K.RENAME_COLUMN: S.UNSUPPORTED,
            K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
            K.RELAX_NULLABILITY: S.NOT_SYNCED,
            K.DROP_TABLE: S.APPLY,
            K.TRUNCATE_TABLE: S.UNSUPPORTED,
            **COMMENTS_NOT_SYNCED,
        },
        notes={K.ADD_COLUMN_POSITIONED: "only LAST is supported: the column is appended at the end"},
    ),
    sink_class="ferry.sinks.fluss.sink:FlussSink",
    extra="fluss",
)

__all__ = ["FLUSS", "FlussSinkConfig"]
