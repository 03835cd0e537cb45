"""Sinks: the interface (:mod:`ferry.sinks.base`), one subpackage per sink, each declaring itself
(:mod:`ferry.sinks.declaration`), and the registry built from those (:mod:`ferry.sinks.registry`).

Importing this package loads no sink client library: each is a pip extra, loaded lazily.
"""

from __future__ import annotations

from ferry.sinks.base import ChangeKind, OffsetCommitting, Sink, SinkCapabilities, Support
from ferry.sinks.exceptions import MissingExtraError, SinkError

__all__ = [
    "ChangeKind",
    "MissingExtraError",
    "OffsetCommitting",
    "Sink",
    "SinkCapabilities",
    "SinkError",
    "Support",
]
