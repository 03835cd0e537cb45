"""The ``sink`` section of a job file: one config model per sink type, chosen by ``type``.

Each sink keeps its config model next to its code (``ferry.sinks.<kind>``) in a module that
imports no client library, so validating a job never needs a sink's pip extra.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, get_args

from pydantic import Field

from ferry.config.base import SinkConfigBase
from ferry.sinks.fluss.config import FlussSinkConfig
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.kafka.config import KafkaSinkConfig
from ferry.sinks.maxcompute.config import MaxComputeSinkConfig
from ferry.sinks.memory import MemorySinkConfig, NullSinkConfig
from ferry.sinks.paimon.config import PaimonSinkConfig
from ferry.sinks.selectdb.config import SelectDbSinkConfig
from ferry.sinks.starrocks.config import StarRocksSinkConfig

#: Every sink config, keyed on ``type`` (a ``Literal``) in the job file.
SinkConfig = Annotated[
    FlussSinkConfig
    | HologresSinkConfig
    | IcebergSinkConfig
    | KafkaSinkConfig
    | MaxComputeSinkConfig
    | MemorySinkConfig
    | NullSinkConfig
    | PaimonSinkConfig
    | SelectDbSinkConfig
    | StarRocksSinkConfig,
    Field(discriminator="type"),
]


@cache
def sink_config_classes() -> dict[str, type[SinkConfigBase]]:
    """Sink type → its config model."""
    members: tuple[type[SinkConfigBase], ...] = get_args(get_args(SinkConfig)[0])
    return {tag: cls for cls in members for tag in get_args(cls.model_fields["type"].annotation)}


__all__ = [
    "FlussSinkConfig",
    "HologresSinkConfig",
    "IcebergSinkConfig",
    "KafkaSinkConfig",
    "MaxComputeSinkConfig",
    "MemorySinkConfig",
    "NullSinkConfig",
    "PaimonSinkConfig",
    "SelectDbSinkConfig",
    "SinkConfig",
    "StarRocksSinkConfig",
    "sink_config_classes",
]
