"""The Iceberg sink (pyiceberg). Importing this package does not import pyiceberg.

The sink itself is :class:`ferry.sinks.iceberg.sink.IcebergSink` (loaded through
:func:`ferry.sinks.sink_class`, which names the ``iceberg`` extra when pyiceberg is missing); its
options are :class:`ferry.sinks.iceberg.config.IcebergSinkConfig`.
"""

from __future__ import annotations

from ferry.sinks.iceberg.config import IcebergSinkConfig

__all__ = ["IcebergSinkConfig"]
