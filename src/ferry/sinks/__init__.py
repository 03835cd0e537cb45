"""Sinks. Importing this package loads no sink client library: each is a pip extra, loaded lazily."""

from __future__ import annotations

import importlib
from typing import Any

from ferry.sinks.base import ChangeKind, OffsetCommitting, Offsets, Sink, SinkCapabilities, Support
from ferry.sinks.exceptions import MissingExtraError, SinkError

#: sink type (as written in the job file) → (module, class, pip extra that brings its client library)
SINK_CLASSES: dict[str, tuple[str, str, str | None]] = {
    "fluss": ("ferry.sinks.fluss.sink", "FlussSink", "fluss"),
    "hologres": ("ferry.sinks.hologres.sink", "HologresSink", "hologres"),
    "iceberg": ("ferry.sinks.iceberg.sink", "IcebergSink", "iceberg"),
    "kafka": ("ferry.sinks.kafka.sink", "KafkaSink", None),
    "maxcompute": ("ferry.sinks.maxcompute.sink", "MaxComputeSink", "maxcompute"),
    "memory": ("ferry.sinks.memory", "MemorySink", None),
    "null": ("ferry.sinks.memory", "NullSink", None),
    "paimon": ("ferry.sinks.paimon.sink", "PaimonSink", "paimon"),
    "selectdb": ("ferry.sinks.selectdb.sink", "SelectDbSink", "selectdb"),
    "starrocks": ("ferry.sinks.starrocks.sink", "StarRocksSink", "starrocks"),
}


def sink_class(kind: str) -> type[Sink]:
    """The class of a sink type, importing its client library only now."""
    try:
        module_name, class_name, extra = SINK_CLASSES[kind]
    except KeyError:
        raise SinkError(f"unknown sink type; known: {', '.join(sorted(SINK_CLASSES))}", sink=kind) from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if extra is None:
            raise
        raise MissingExtraError(kind, extra, e) from e
    cls: Any = getattr(module, class_name)
    return cls  # type: ignore[no-any-return]


__all__ = [
    "SINK_CLASSES",
    "ChangeKind",
    "MissingExtraError",
    "OffsetCommitting",
    "Offsets",
    "Sink",
    "SinkCapabilities",
    "SinkError",
    "Support",
    "sink_class",
]
