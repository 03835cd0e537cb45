"""The sinks the conformance suite runs against, each with a way to read its rows back.

A sink with a real backend here is built on it; a sink whose backend cannot run yet is the
in-package memory sink enforcing that sink's declared capabilities. Adding a backend is adding
an entry to :data:`BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.pipeline.schema import TableId
from ferry.sinks.base import Sink
from ferry.sinks.capabilities import CAPABILITIES
from ferry.sinks.memory import MemorySink


@dataclass
class Backend:
    name: str
    sink: Sink
    read_rows: Callable[[TableId], list[dict[str, Any]]]
    real: bool


def memory_backend(kind: str) -> Callable[[Path, str], Backend]:
    def make(tmp_path: Path, pipeline: str) -> Backend:
        sink = MemorySink(pipeline=pipeline, capabilities=CAPABILITIES[kind], kind=kind)
        return Backend(kind, sink, sink.rows, real=False)

    return make


def iceberg_backend(tmp_path: Path, pipeline: str) -> Backend:
    from ferry.sinks.iceberg.config import IcebergSinkConfig
    from ferry.sinks.iceberg.sink import IcebergSink

    config = IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(tmp_path / "wh")}
    )
    sink = IcebergSink(config, pipeline=pipeline)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        table = sink.load_table(table_id)
        return [] if table is None else table.scan().to_arrow().to_pylist()

    return Backend("iceberg", sink, rows, real=True)


def paimon_backend(tmp_path: Path, pipeline: str) -> Backend:
    from ferry.sinks.paimon.config import PaimonSinkConfig
    from ferry.sinks.paimon.sink import PaimonSink

    config = PaimonSinkConfig.model_validate(
        {"type": "paimon", "catalog.properties.warehouse": str(tmp_path / "pm")}
    )
    sink = PaimonSink(config, pipeline=pipeline)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        table = sink.load_table(table_id)
        if table is None:
            return []
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        if data is None:
            return []
        visible = [name for name in data.column_names if not name.startswith("_ferry")]
        return [{k: r[k] for k in visible} for r in data.to_pylist()]

    return Backend("paimon", sink, rows, real=True)


#: Sink type → how to build it for one test.
BACKENDS: dict[str, Callable[[Path, str], Backend]] = {
    kind: memory_backend(kind) for kind in CAPABILITIES
} | {"iceberg": iceberg_backend, "paimon": paimon_backend}
