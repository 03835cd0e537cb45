"""The Paimon sink (pypaimon). Importing this package does not import pypaimon.

The sink itself is :class:`ferry.sinks.paimon.sink.PaimonSink`, loaded through its declaration
(which names the ``paimon`` extra when pypaimon is missing); its options are
:class:`ferry.sinks.paimon.config.PaimonSinkConfig`.
"""

from __future__ import annotations

from ferry.sinks.base import TABLE_FORMAT_CHANGES, SinkCapabilities
from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.paimon.config import PaimonSinkConfig

PAIMON = SinkDeclaration(
    type="paimon",
    config=PaimonSinkConfig,
    capabilities=SinkCapabilities(
        changes=TABLE_FORMAT_CHANGES,
        case_insensitive_columns=True,
        notes={
            K.ADD_COLUMN_POSITIONED: "position honoured (FIRST/AFTER)",
            K.CREATE_TABLE: "an existing table is checked for compatibility",
        },
    ),
    sink_class="ferry.sinks.paimon.sink:PaimonSink",
    extra="paimon",
)

__all__ = ["PAIMON", "PaimonSinkConfig"]
