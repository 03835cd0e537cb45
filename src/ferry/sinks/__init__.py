"""Sinks: one subpackage per sink, each declaring itself (:mod:`ferry.sinks.base.declaration`), and
:mod:`ferry.sinks.base`, which is no sink: the interface, the registry built from the declarations
(:mod:`ferry.sinks.base.registry`) and what the sinks share. :mod:`ferry.sinks.memory` is a sink
too (types ``memory`` and ``null``), kept in memory.

Importing this package loads no sink client library: each is a pip extra, loaded lazily.
"""

from __future__ import annotations

from ferry.sinks.base import ChangeKind, OffsetCommitting, Sink, SinkCapabilities, Support
from ferry.sinks.base.exceptions import MissingExtraError, SinkError

__all__ = [
    "ChangeKind",
    "MissingExtraError",
    "OffsetCommitting",
    "Sink",
    "SinkCapabilities",
    "SinkError",
    "Support",
]
