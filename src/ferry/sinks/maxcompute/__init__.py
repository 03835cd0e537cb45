"""MaxCompute: the sink over pyodps (SQL instances for DDL, the Tunnel for rows), its dialect and types."""

from __future__ import annotations

from ferry.sinks.base import COMMENTS_NOT_SYNCED, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.maxcompute.config import MaxComputeSinkConfig

MAXCOMPUTE = SinkDeclaration(
    type="maxcompute",
    config=MaxComputeSinkConfig,
    capabilities=SinkCapabilities(
        changes={
            K.CREATE_TABLE: S.APPLY,
            K.ADD_COLUMN_LAST: S.APPLY,
            K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
            K.ADD_COLUMN_DEFAULT: S.NOT_SYNCED,
            K.DROP_COLUMN: S.APPLY,
            K.RENAME_COLUMN: S.APPLY,
            K.ALTER_COLUMN_TYPE: S.APPLY,
            K.RELAX_NULLABILITY: S.APPLY,
            K.DROP_TABLE: S.APPLY,
            K.TRUNCATE_TABLE: S.APPLY,
            **COMMENTS_NOT_SYNCED,
        },
        nullable_added_columns=True,
        notes={
            K.ADD_COLUMN_LAST: "a NOT NULL column is added as nullable (MaxCompute adds nullable columns)",
            K.ALTER_COLUMN_TYPE: "MaxCompute's compatible changes (int → bigint, float → double, decimal "
            "precision, ...); others are refused when applied",
        },
    ),
    sink_class="ferry.sinks.maxcompute.sink:MaxComputeSink",
    extra="maxcompute",
)

__all__ = ["MAXCOMPUTE", "MaxComputeSinkConfig"]
