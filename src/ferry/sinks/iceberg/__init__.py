"""The Iceberg sink (pyiceberg). Importing this package does not import pyiceberg.

The sink itself is :class:`ferry.sinks.iceberg.sink.IcebergSink`, loaded through its declaration
(which names the ``iceberg`` extra when pyiceberg is missing); its options are
:class:`ferry.sinks.iceberg.config.IcebergSinkConfig`.
"""

from __future__ import annotations

from ferry.sinks.base import TABLE_FORMAT_CHANGES, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.iceberg.config import IcebergSinkConfig

ICEBERG = SinkDeclaration(
    type="iceberg",
    config=IcebergSinkConfig,
    capabilities=SinkCapabilities(
        changes=TABLE_FORMAT_CHANGES,
        nullable_added_columns=True,
        notes={
            K.ALTER_COLUMN_TYPE: "Iceberg's promotions (int → long, float → double, decimal precision); "
            "other type changes are refused when applied",
            K.CREATE_TABLE: "primary key → identifier fields; an existing table is checked for compatibility",
        },
    ),
    sink_class="ferry.sinks.iceberg.sink:IcebergSink",
    extra="iceberg",
)

__all__ = ["ICEBERG", "IcebergSinkConfig"]
