"""Pipelines, savepoints and pipeline instances, kept in the state store's database.

The tables (:mod:`ferry.state.tables`) live beside the runners' checkpoints, in the same
SQLAlchemy database: SQLite by default, PostgreSQL for deployments. Phase transitions are
compare-and-set updates, so several workers (and the API) may act on one pipeline safely.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import and_, create_engine, delete, insert, select, update
from sqlalchemy.engine import Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from ferry.control.models import InstanceState, SavepointSource, SavepointState
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.phase import Phase
from ferry.state.tables import create_tables, instances, pipelines, samples, savepoints

#: Samples older than this are deleted.
SAMPLES_KEPT_MS = 3_600_000

#: An instance whose worker has not been heard of for this long is gone (killed).
INSTANCE_TIMEOUT_MS = 6_000


@dataclass(frozen=True, slots=True)
class PipelineRow:
    environment: str
    name: str
    uid: str
    spec: dict[str, Any]
    phase: Phase
    detail: str
    created_ms: int
    updated_ms: int
    generation: int
    prepared: int
    deadline_ms: int | None
    traits: dict[str, Any]
    latest_offsets: dict[str, str]
    last_scheduled_ms: int | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def runtime_name(self) -> str:
        """The name the runner, its checkpoints, consumer group and sink commits use."""
        return runtime_name(self.environment, self.name)


@dataclass(frozen=True, slots=True)
class SavepointRow:
    uid: str
    environment: str
    pipeline: str
    source: SavepointSource
    state: SavepointState
    reason: str
    pinned: bool
    requested_ms: int
    completed_ms: int | None
    offsets: dict[str, dict[str, int]]
    schemas: dict[str, Any]
    sink_commit: dict[str, Any] = field(default_factory=dict)
    name: str = ""


@dataclass(frozen=True, slots=True)
class InstanceRow:
    worker: str
    generation: int
    pid: int
    state: InstanceState
    exit_code: int | None
    heartbeat_ms: int

    def alive(self, at_ms: int) -> bool:
        return self.state == InstanceState.RUNNING and at_ms - self.heartbeat_ms < INSTANCE_TIMEOUT_MS


def runtime_name(environment: str, name: str) -> str:
    return f"{environment}.{name}"


def _pipeline(row: RowMapping) -> PipelineRow:
    values = {c.name: row[c.name] for c in pipelines.columns}
    return PipelineRow(
        **{
            **values,
            "phase": Phase(values["phase"]),
            "labels": values["labels"] or {},
            "annotations": values["annotations"] or {},
        }
    )


def savepoint_name(source: SavepointSource, uid: str) -> str:
    """The name of a savepoint not given one: its source and the start of its uid."""
    return f"{source.lower()}-{uid[:8]}"


def _savepoint(row: RowMapping) -> SavepointRow:
    values = {c.name: row[c.name] for c in savepoints.columns}
    source = SavepointSource(values["source"])
    return SavepointRow(
        **{
            **values,
            "source": source,
            "state": SavepointState(values["state"]),
            "name": values["name"] or savepoint_name(source, values["uid"]),
        }
    )


@dataclass(frozen=True, slots=True)
class Sample:
    """A running pipeline's figures at one instant, from its runners' status."""

    at_ms: int
    lag_records: int
    throughput_eps: float
    rows_written: int
    schema_changes: int
    barrier_ms: int


class ControlStore:
    """Reads and compare-and-set writes of pipelines, savepoints and instances."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.url = url
        self.engine: Engine = create_engine(url, json_serializer=lambda o: orjson.dumps(o).decode())
        create_tables(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------------------ pipelines

    def insert_pipeline(
        self,
        environment: str,
        name: str,
        spec: Mapping[str, Any],
        detail: str,
        *,
        at_ms: int | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> PipelineRow:
        at = now_ms() if at_ms is None else at_ms
        values = {
            "environment": environment,
            "name": name,
            "uid": str(uuid.uuid4()),
            "spec": dict(spec),
            "phase": Phase.PENDING,
            "detail": detail,
            "created_ms": at,
            "updated_ms": at,
            "generation": 0,
            "prepared": -1,
            "deadline_ms": None,
            "traits": {},
            "latest_offsets": {},
            "last_scheduled_ms": None,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        }
        with self.engine.begin() as conn:
            conn.execute(
                delete(pipelines).where(
                    pipelines.c.environment == environment,
                    pipelines.c.name == name,
                    pipelines.c.phase == Phase.DELETED,
                )
            )
            conn.execute(insert(pipelines).values(**values))
        return PipelineRow(**values)  # type: ignore[arg-type]

    def pipeline(self, environment: str, name: str) -> PipelineRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(pipelines).where(pipelines.c.environment == environment, pipelines.c.name == name)
            ).first()
        return None if row is None else _pipeline(row._mapping)

    def pipelines(self, environment: str | None = None) -> list[PipelineRow]:
        query = select(pipelines).order_by(pipelines.c.environment, pipelines.c.name)
        if environment is not None:
            query = query.where(pipelines.c.environment == environment)
        with self.engine.connect() as conn:
            return [_pipeline(r._mapping) for r in conn.execute(query)]

    def update_pipeline(self, row: PipelineRow, *, expect_phase: Phase | None = None, **values: Any) -> bool:
        """Update a pipeline if it is still in ``expect_phase`` (and generation): False when another
        worker or a request changed it first."""
        condition = and_(
            pipelines.c.environment == row.environment,
            pipelines.c.name == row.name,
            pipelines.c.uid == row.uid,
            pipelines.c.generation == row.generation,
        )
        if expect_phase is not None:
            condition = and_(condition, pipelines.c.phase == expect_phase)
        values.setdefault("updated_ms", now_ms())
        with self.engine.begin() as conn:
            return bool(conn.execute(update(pipelines).where(condition).values(**values)).rowcount)

    def claim_schedule(self, row: PipelineRow, last: int | None, at: int) -> bool:
        """Take the turn to request a scheduled savepoint: one worker wins."""
        condition = and_(pipelines.c.environment == row.environment, pipelines.c.name == row.name)
        condition = and_(
            condition,
            pipelines.c.last_scheduled_ms.is_(None)
            if last is None
            else pipelines.c.last_scheduled_ms == last,
        )
        with self.engine.begin() as conn:
            return bool(
                conn.execute(update(pipelines).where(condition).values(last_scheduled_ms=at)).rowcount
            )

    # ------------------------------------------------------------------------------ savepoints

    def insert_savepoint(
        self,
        environment: str,
        pipeline: str,
        source: SavepointSource,
        state: SavepointState = SavepointState.PENDING,
        name: str | None = None,
    ) -> SavepointRow:
        """Record a savepoint; ``name`` (else :func:`savepoint_name`) must be free among the
        pipeline's savepoints (:meth:`savepoint_named`)."""
        uid = str(uuid.uuid4())
        values: dict[str, Any] = {
            "uid": uid,
            "name": name or savepoint_name(SavepointSource(source), uid),
            "environment": environment,
            "pipeline": pipeline,
            "source": SavepointSource(source),
            "state": SavepointState(state),
            "reason": "",
            "pinned": False,
            "requested_ms": now_ms(),
            "completed_ms": None,
            "offsets": {},
            "schemas": {},
            "sink_commit": {},
        }
        with self.engine.begin() as conn:
            conn.execute(insert(savepoints).values(**values))
        return SavepointRow(**values)

    def savepoints(self, environment: str, pipeline: str) -> list[SavepointRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(savepoints)
                .where(savepoints.c.environment == environment, savepoints.c.pipeline == pipeline)
                .order_by(savepoints.c.requested_ms, savepoints.c.uid)
            )
            return [_savepoint(r._mapping) for r in rows]

    def savepoint(self, uid: str) -> SavepointRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(savepoints).where(savepoints.c.uid == uid)).first()
        return None if row is None else _savepoint(row._mapping)

    def savepoint_named(self, environment: str, pipeline: str, name: str) -> SavepointRow | None:
        """The pipeline's savepoint of this name (a row older than names has its derived one)."""
        return next((s for s in self.savepoints(environment, pipeline) if s.name == name), None)

    def finish_savepoint(self, uid: str, state: SavepointState, **values: Any) -> bool:
        """Complete or fail a pending savepoint; False if it was not pending any more."""
        with self.engine.begin() as conn:
            return bool(
                conn.execute(
                    update(savepoints)
                    .where(savepoints.c.uid == uid, savepoints.c.state == SavepointState.PENDING)
                    .values(state=state, completed_ms=now_ms(), **values)
                ).rowcount
            )

    def set_pinned(self, uid: str, pinned: bool) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(savepoints).where(savepoints.c.uid == uid).values(pinned=pinned))

    def delete_savepoints(self, uids: list[str]) -> None:
        if uids:
            with self.engine.begin() as conn:
                conn.execute(delete(savepoints).where(savepoints.c.uid.in_(uids)))

    # ------------------------------------------------------------------------------ instances

    def heartbeat(
        self, row: PipelineRow, worker: str, pid: int, state: InstanceState, exit_code: int | None = None
    ) -> None:
        values = {
            "generation": row.generation,
            "pid": pid,
            "state": state,
            "exit_code": exit_code,
            "heartbeat_ms": now_ms(),
        }
        key = and_(
            instances.c.environment == row.environment,
            instances.c.pipeline == row.name,
            instances.c.worker == worker,
        )
        with self.engine.begin() as conn:
            if not conn.execute(update(instances).where(key).values(**values)).rowcount:
                conn.execute(
                    insert(instances).values(
                        environment=row.environment, pipeline=row.name, worker=worker, **values
                    )
                )

    def instances(self, environment: str, pipeline: str) -> list[InstanceRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(instances).where(
                    instances.c.environment == environment, instances.c.pipeline == pipeline
                )
            )
            return [
                InstanceRow(
                    r.worker, r.generation, r.pid, InstanceState(r.state), r.exit_code, r.heartbeat_ms
                )
                for r in rows
            ]

    def forget_instances(self, environment: str, pipeline: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                delete(instances).where(
                    instances.c.environment == environment, instances.c.pipeline == pipeline
                )
            )

    # ------------------------------------------------------------------------------ samples

    def add_sample(self, environment: str, pipeline: str, sample: Sample) -> bool:
        """Record a sample (False when another worker recorded one at that instant) and delete
        the pipeline's samples older than :data:`SAMPLES_KEPT_MS`."""
        values = {"environment": environment, "pipeline": pipeline, **asdict(sample)}
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(samples).values(**values))
                conn.execute(
                    delete(samples).where(
                        samples.c.environment == environment,
                        samples.c.pipeline == pipeline,
                        samples.c.at_ms < sample.at_ms - SAMPLES_KEPT_MS,
                    )
                )
        except IntegrityError:
            return False
        return True

    def samples(self, environment: str, pipeline: str, since_ms: int = 0) -> list[Sample]:
        query = (
            select(samples)
            .where(
                samples.c.environment == environment,
                samples.c.pipeline == pipeline,
                samples.c.at_ms >= since_ms,
            )
            .order_by(samples.c.at_ms)
        )
        with self.engine.connect() as conn:
            return [
                Sample(**{k: r._mapping[k] for k in Sample.__dataclass_fields__}) for r in conn.execute(query)
            ]

    def forget_samples(self, environment: str, pipeline: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                delete(samples).where(samples.c.environment == environment, samples.c.pipeline == pipeline)
            )
