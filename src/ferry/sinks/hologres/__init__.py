"""Hologres: the sink over the PostgreSQL protocol (psycopg 3), its dialect and type strategies."""

from __future__ import annotations

from ferry.sinks.base import COMMENTS_NOT_SYNCED, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.hologres.config import HologresSinkConfig

HOLOGRES = SinkDeclaration(
    type="hologres",
    config=HologresSinkConfig,
    capabilities=SinkCapabilities(
        changes={
            K.CREATE_TABLE: S.APPLY,
            K.ADD_COLUMN_LAST: S.APPLY,
            K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
            K.ADD_COLUMN_DEFAULT: S.APPLY,
            K.DROP_COLUMN: S.UNSUPPORTED,
            K.RENAME_COLUMN: S.APPLY,
            K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
            K.RELAX_NULLABILITY: S.NOT_SYNCED,
            K.DROP_TABLE: S.APPLY,
            K.TRUNCATE_TABLE: S.APPLY,
            **COMMENTS_NOT_SYNCED,
        },
        lenient_rename_as_new_column=True,
        try_evolve=False,
        nullable_added_columns=True,
        notes={
            K.RENAME_COLUMN: "LENIENT adds the new name as a column and keeps the old one "
            "(NULL from then on)",
            K.ADD_COLUMN_LAST: "a NOT NULL column is added as nullable",
        },
    ),
    sink_class="ferry.sinks.hologres.sink:HologresSink",
    extra="postgres",
)

__all__ = ["HOLOGRES", "HologresSinkConfig"]
