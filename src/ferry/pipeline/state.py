"""The state store: checkpoints, source schemas and pipeline status, kept with SQLAlchemy.

SQLite by default (one file), PostgreSQL for deployments: any SQLAlchemy URL. A checkpoint row
holds the offsets (per topic and partition, the next offset to read) and the tracked source
schemas; the status row holds what ``ferry status`` shows (phase, detail, counters, lag) and the
schema-change history has one row per change seen.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine

metadata = MetaData()

checkpoints = Table(
    "ferry_checkpoints",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(200), nullable=False, index=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("offsets", JSON, nullable=False),
    Column("schemas", JSON, nullable=False),
)

status = Table(
    "ferry_status",
    metadata,
    Column("pipeline", String(200), primary_key=True),
    Column("phase", String(20), nullable=False),
    Column("detail", Text, nullable=False, default=""),
    Column("updated_ms", BigInteger, nullable=False),
    Column("metrics", JSON, nullable=False),
)

schema_history = Table(
    "ferry_schema_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(200), nullable=False, index=True),
    Column("source_table", String(500), nullable=False),
    Column("sink_table", String(500), nullable=False),
    Column("change", Text, nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("position", String(500)),
    Column("at_ms", BigInteger, nullable=False),
)

KEEP_CHECKPOINTS = 10


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: int
    pipeline: str
    created_ms: int
    offsets: dict[tuple[str, int], int]
    schemas: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SchemaHistoryEntry:
    source_table: str
    sink_table: str
    change: str
    outcome: str
    reason: str
    position: str | None
    at_ms: int


def encode_offsets(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def decode_offsets(data: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def now_ms() -> int:
    return int(time.time() * 1000)


class StateStore:
    """Checkpoints, status and schema history of pipelines, in one SQL database."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.url = url
        self.engine: Engine = create_engine(url, json_serializer=lambda o: orjson.dumps(o).decode())
        metadata.create_all(self.engine)

    # -------------------------------------------------------------------------- checkpoints

    def save_checkpoint(
        self, pipeline: str, offsets: Mapping[tuple[str, int], int], schemas: Mapping[str, Any]
    ) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(
                insert(checkpoints).values(
                    pipeline=pipeline,
                    created_ms=now_ms(),
                    offsets=encode_offsets(offsets),
                    schemas=dict(schemas),
                )
            )
            new_id = int(result.inserted_primary_key[0])  # type: ignore[index]
            conn.execute(
                delete(checkpoints).where(
                    checkpoints.c.pipeline == pipeline, checkpoints.c.id <= new_id - KEEP_CHECKPOINTS
                )
            )
        return new_id

    def latest_checkpoint(self, pipeline: str) -> Checkpoint | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(checkpoints)
                .where(checkpoints.c.pipeline == pipeline)
                .order_by(checkpoints.c.id.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        return Checkpoint(row.id, row.pipeline, row.created_ms, decode_offsets(row.offsets), row.schemas)

    # -------------------------------------------------------------------------- status

    def set_status(self, pipeline: str, phase: str, detail: str, metrics: Mapping[str, Any]) -> None:
        values = {"phase": phase, "detail": detail, "updated_ms": now_ms(), "metrics": dict(metrics)}
        with self.engine.begin() as conn:
            done = conn.execute(update(status).where(status.c.pipeline == pipeline).values(**values)).rowcount
            if not done:
                conn.execute(insert(status).values(pipeline=pipeline, **values))

    def get_status(self, pipeline: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(status).where(status.c.pipeline == pipeline)).first()
        return None if row is None else dict(row._mapping)

    def pipelines(self) -> list[str]:
        with self.engine.connect() as conn:
            return [r.pipeline for r in conn.execute(select(status.c.pipeline).order_by(status.c.pipeline))]

    # -------------------------------------------------------------------------- schema history

    def add_schema_history(self, pipeline: str, entries: Iterable[SchemaHistoryEntry]) -> None:
        rows = [
            {
                "pipeline": pipeline,
                "source_table": e.source_table,
                "sink_table": e.sink_table,
                "change": e.change,
                "outcome": e.outcome,
                "reason": e.reason,
                "position": e.position,
                "at_ms": e.at_ms,
            }
            for e in entries
        ]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(schema_history), rows)

    def schema_history(self, pipeline: str) -> list[SchemaHistoryEntry]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(schema_history)
                .where(schema_history.c.pipeline == pipeline)
                .order_by(schema_history.c.id)
            ).all()
        return [
            SchemaHistoryEntry(
                r.source_table, r.sink_table, r.change, r.outcome, r.reason, r.position, r.at_ms
            )
            for r in rows
        ]

    def close(self) -> None:
        self.engine.dispose()
