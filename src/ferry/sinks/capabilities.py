"""What each sink does with each kind of schema change: one declaration per sink, as data.

The router reads these; no sink decides a behaviour itself. Importing this module imports no
sink client library, so the README's table and the conformance suite can read every sink's
declaration on any machine.
"""

from __future__ import annotations

from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base import Support as S

_COMMENTS_NOT_SYNCED = {K.ALTER_COLUMN_COMMENT: S.NOT_SYNCED, K.ALTER_TABLE_COMMENT: S.NOT_SYNCED}

_LAKE = {
    K.CREATE_TABLE: S.APPLY,
    K.ADD_COLUMN_LAST: S.APPLY,
    K.ADD_COLUMN_POSITIONED: S.APPLY,
    K.DROP_COLUMN: S.APPLY,
    K.RENAME_COLUMN: S.APPLY,
    K.ALTER_COLUMN_TYPE: S.APPLY,
    K.RELAX_NULLABILITY: S.APPLY,
    K.DROP_TABLE: S.UNSUPPORTED,
    K.TRUNCATE_TABLE: S.UNSUPPORTED,
    **_COMMENTS_NOT_SYNCED,
}

ICEBERG = SinkCapabilities(
    changes=_LAKE,
    nullable_added_columns=True,
    notes={
        K.ALTER_COLUMN_TYPE: "Iceberg's promotions (int → long, float → double, decimal precision); "
        "other type changes are refused when applied",
        K.CREATE_TABLE: "primary key → identifier fields; an existing table is checked for compatibility",
    },
)

PAIMON = SinkCapabilities(
    changes=_LAKE,
    case_insensitive_columns=True,
    notes={
        K.ADD_COLUMN_POSITIONED: "position honoured (FIRST/AFTER)",
        K.CREATE_TABLE: "an existing table is checked for compatibility",
    },
)

FLUSS = SinkCapabilities(
    changes={
        K.CREATE_TABLE: S.APPLY,
        K.ADD_COLUMN_LAST: S.APPLY,
        K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
        K.DROP_COLUMN: S.UNSUPPORTED,
        K.RENAME_COLUMN: S.UNSUPPORTED,
        K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
        K.RELAX_NULLABILITY: S.NOT_SYNCED,
        K.DROP_TABLE: S.APPLY,
        K.TRUNCATE_TABLE: S.UNSUPPORTED,
        **_COMMENTS_NOT_SYNCED,
    },
    notes={K.ADD_COLUMN_POSITIONED: "only LAST is supported: the column is appended at the end"},
)

STARROCKS = SinkCapabilities(
    changes={
        K.CREATE_TABLE: S.APPLY,
        K.ADD_COLUMN_LAST: S.APPLY,
        K.ADD_COLUMN_POSITIONED: S.APPLY,
        K.DROP_COLUMN: S.APPLY,
        K.RENAME_COLUMN: S.UNSUPPORTED,
        K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
        K.RELAX_NULLABILITY: S.NOT_SYNCED,
        K.DROP_TABLE: S.APPLY,
        K.TRUNCATE_TABLE: S.APPLY,
        **_COMMENTS_NOT_SYNCED,
    },
)

HOLOGRES = SinkCapabilities(
    changes={
        K.CREATE_TABLE: S.APPLY,
        K.ADD_COLUMN_LAST: S.APPLY,
        K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
        K.DROP_COLUMN: S.UNSUPPORTED,
        K.RENAME_COLUMN: S.APPLY,
        K.ALTER_COLUMN_TYPE: S.UNSUPPORTED,
        K.RELAX_NULLABILITY: S.NOT_SYNCED,
        K.DROP_TABLE: S.APPLY,
        K.TRUNCATE_TABLE: S.APPLY,
        **_COMMENTS_NOT_SYNCED,
    },
    lenient_rename_as_new_column=True,
    try_evolve=False,
    nullable_added_columns=True,
    notes={
        K.RENAME_COLUMN: "LENIENT adds the new name as a column and keeps the old one (NULL from then on)",
        K.ADD_COLUMN_LAST: "a NOT NULL column is added as nullable",
    },
)

SELECTDB = SinkCapabilities(
    changes={
        K.CREATE_TABLE: S.APPLY,
        K.ADD_COLUMN_LAST: S.APPLY,
        K.ADD_COLUMN_POSITIONED: S.APPLY,
        K.DROP_COLUMN: S.APPLY,
        K.RENAME_COLUMN: S.APPLY,
        K.ALTER_COLUMN_TYPE: S.APPLY,
        K.RELAX_NULLABILITY: S.NOT_SYNCED,
        K.DROP_TABLE: S.APPLY,
        K.TRUNCATE_TABLE: S.APPLY,
        **_COMMENTS_NOT_SYNCED,
    },
)

MAXCOMPUTE = SinkCapabilities(
    changes={
        K.CREATE_TABLE: S.APPLY,
        K.ADD_COLUMN_LAST: S.APPLY,
        K.ADD_COLUMN_POSITIONED: S.APPLY_AT_END,
        K.DROP_COLUMN: S.APPLY,
        K.RENAME_COLUMN: S.APPLY,
        K.ALTER_COLUMN_TYPE: S.APPLY,
        K.RELAX_NULLABILITY: S.APPLY,
        K.DROP_TABLE: S.APPLY,
        K.TRUNCATE_TABLE: S.APPLY,
        **_COMMENTS_NOT_SYNCED,
    },
    nullable_added_columns=True,
    notes={
        K.ADD_COLUMN_LAST: "a NOT NULL column is added as nullable (MaxCompute adds nullable columns)",
        K.ALTER_COLUMN_TYPE: "MaxCompute's compatible changes (int → bigint, float → double, decimal "
        "precision, ...); others are refused when applied",
    },
)

KAFKA = SinkCapabilities(
    changes={K.CREATE_TABLE: S.APPLY, **{kind: S.IGNORED for kind in K if kind is not K.CREATE_TABLE}},
    notes={K.CREATE_TABLE: "creates the topic (compacted in upsert mode)"},
)

#: Every sink's declaration, by sink type.
CAPABILITIES: dict[str, SinkCapabilities] = {
    "paimon": PAIMON,
    "fluss": FLUSS,
    "starrocks": STARROCKS,
    "iceberg": ICEBERG,
    "hologres": HOLOGRES,
    "selectdb": SELECTDB,
    "maxcompute": MAXCOMPUTE,
    "kafka": KAFKA,
}
