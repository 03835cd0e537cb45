"""The Paimon sink (pypaimon). Importing this package does not import pypaimon.

The sink itself is :class:`ferry.sinks.paimon.sink.PaimonSink` (loaded through
:func:`ferry.sinks.sink_class`, which names the ``paimon`` extra when pypaimon is missing); its
options are :class:`ferry.sinks.paimon.config.PaimonSinkConfig`.
"""

from __future__ import annotations

from ferry.sinks.paimon.config import PaimonSinkConfig

__all__ = ["PaimonSinkConfig"]
