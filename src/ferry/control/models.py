"""The resources of the control plane: pipelines and savepoints, with their phases and states.

Shaped after the CMF Statements API: ``metadata`` (name; uid and timestamps are read-only),
``spec`` (what the user wants) and ``status`` (what ferry reports). :class:`ControlPlane
<ferry.control.service.ControlPlane>` returns these models; the HTTP API serialises them
(:meth:`Resource.document`) and documents them. ``spec.job`` is the job file's YAML text;
``${ENV}`` references in it are resolved where the pipeline runs, so secrets are never stored
resolved.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ferry.config.job import SpecificOffsets
from ferry.options import parse_duration
from ferry.pipeline.phase import Phase

API_VERSION = "ferry/v1"

#: The property naming the pipeline whose offsets a new pipeline inherits (SPEC §4).
INITIAL_OFFSET_FROM = "sql.tables.initial-offset-from"
#: How long that pipeline may wait for them; the server's setting when unset.
INITIAL_OFFSET_FROM_TIMEOUT = "sql.tables.initial-offset-from.timeout"
KNOWN_PROPERTIES = (INITIAL_OFFSET_FROM, INITIAL_OFFSET_FROM_TIMEOUT)
MAX_CARRY_OVER_TIMEOUT = timedelta(hours=6)


class SavepointState(StrEnum):
    """A savepoint is recorded (``PENDING``) until the checkpoint it waits for is taken."""

    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class SavepointSource(StrEnum):
    """Who asked for a savepoint: a stop (``UPGRADE``), a user (``MANUAL``), ``spec.savepointInterval``."""

    UPGRADE = "UPGRADE"
    MANUAL = "MANUAL"
    SCHEDULE = "SCHEDULE"


class InstanceState(StrEnum):
    """What a worker's ``ferry run`` process of a pipeline (an instance) is doing or how it ended."""

    RUNNING = "RUNNING"
    #: Exited with 0: a bounded read reached its end.
    FINISHED = "FINISHED"
    #: Killed by a signal nobody sent: restarted.
    KILLED = "KILLED"
    #: Ended by the worker after a stop.
    STOPPED = "STOPPED"
    FAILED = "FAILED"


def job_label(name: str) -> str:
    """What errors call a pipeline's job (its ``spec.job``): ``pipeline NAME spec.job``."""
    return f"pipeline {name} spec.job"


def _absent(value: object) -> bool:
    """An optional field left out of a document when it has no value."""
    return value is None


class Document(BaseModel):
    """A resource or a part of one, written with its camelCase aliases."""

    def document(self) -> dict[str, Any]:
        """As JSON, the way the API answers and the state store keeps it (optional fields without a
        value left out)."""
        return self.model_dump(mode="json", by_alias=True)


class SpecModel(Document):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class StartFrom(SpecModel):
    """Where a replay starts: exactly one of a timestamp, specific offsets or a savepoint."""

    timestamp_millis: int | None = Field(default=None, ge=0, alias="timestampMillis", exclude_if=_absent)
    #: topic → ``partition:0,offset:42;partition:1,offset:300``.
    offsets: dict[str, SpecificOffsets] | None = Field(default=None, exclude_if=_absent)
    savepoint: str | None = Field(default=None, exclude_if=_absent)

    @model_validator(mode="after")
    def _one(self) -> Self:
        given = [v for v in (self.timestamp_millis, self.offsets, self.savepoint) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of timestampMillis, offsets, savepoint")
        return self


class Bounded(SpecModel):
    """Where a replay ends (``scan.bounded.mode``)."""

    mode: Literal["latest-offset", "timestamp", "specific-offsets"]
    timestamp_millis: int | None = Field(default=None, ge=0, alias="timestampMillis", exclude_if=_absent)
    #: ``partition:0,offset:42;...``, for every topic read (as ``scan.bounded.specific-offsets``).
    offsets: SpecificOffsets | None = Field(default=None, exclude_if=_absent)

    @model_validator(mode="after")
    def _matching(self) -> Self:
        if (self.mode == "timestamp") != (self.timestamp_millis is not None):
            raise ValueError("timestampMillis is given with mode timestamp, and only then")
        if (self.mode == "specific-offsets") != (self.offsets is not None):
            raise ValueError("offsets are given with mode specific-offsets, and only then")
        return self


class PipelineSpec(SpecModel):
    """What the user wants of a pipeline."""

    #: The job file (YAML text), as ``ferry run`` takes it.
    job: str = Field(min_length=1)
    #: ``sql.tables.initial-offset-from`` and its timeout.
    properties: dict[str, str] = Field(default_factory=dict)
    stopped: bool = False
    #: ``savepoint``: stopping takes a savepoint; ``stateless``: stopping kills, no savepoint.
    upgrade_mode: Literal["savepoint", "stateless"] = Field(default="savepoint", alias="upgradeMode")
    #: Take a ``SCHEDULE`` savepoint this often while running (a duration: ``10 min``, ``1h``).
    savepoint_interval: str | None = Field(default=None, alias="savepointInterval", exclude_if=_absent)
    #: A replay: start here instead of the job's ``scan.startup.*``.
    start_from: StartFrom | None = Field(default=None, alias="startFrom", exclude_if=_absent)
    #: A replay: stop here (``scan.bounded.*``).
    bounded: Bounded | None = Field(default=None, exclude_if=_absent)
    #: A replay: drop these sink tables (``namespace.schema.table`` or ``db.table``) before starting,
    #: so they are rebuilt from the replayed events.
    rebuild_tables: tuple[str, ...] = Field(default=(), alias="rebuildTables")

    @field_validator("properties")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key not in KNOWN_PROPERTIES:
                raise ValueError(f"unknown property {key!r}; known: {', '.join(KNOWN_PROPERTIES)}")
        return value

    @field_validator("savepoint_interval")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) < timedelta(seconds=1):
            raise ValueError("a savepoint interval is at least 1 s")
        return value

    def interval(self) -> timedelta | None:
        return None if self.savepoint_interval is None else parse_duration(self.savepoint_interval)


# --------------------------------------------------------------------------------------------------
# The resources, as ControlPlane returns them


class Resource(Document):
    """What ferry reports: a resource or a part of it."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


#: ``metadata.labels`` and ``metadata.annotations``: Kubernetes-style string maps, as in CMF.
Labels = dict[str, str]


class PipelineMetadata(Resource):
    name: str = Field(description="1 to 100 lower-case letters, digits and '-'.")
    labels: Labels = Field(
        default_factory=dict, description="Key-value pairs to select and group pipelines by."
    )
    annotations: Labels = Field(
        default_factory=dict, description="Key-value pairs for tools and people; ferry keeps them."
    )
    environment: str | None = Field(default=None, json_schema_extra={"readOnly": True})
    uid: str | None = Field(default=None, json_schema_extra={"readOnly": True})
    creation_timestamp: str | None = Field(
        default=None, alias="creationTimestamp", json_schema_extra={"readOnly": True}
    )
    update_timestamp: str | None = Field(
        default=None,
        alias="updateTimestamp",
        description="Read-only: an update that sets it is refused with 422.",
        json_schema_extra={"readOnly": True},
    )


class PipelineTraits(Resource):
    is_bounded: bool = Field(
        default=False,
        alias="isBounded",
        description="The pipeline stops by itself: spec.bounded or the job's scan.bounded.mode.",
    )
    is_append_only: bool = Field(
        default=False,
        alias="isAppendOnly",
        description="The sink only appends (each change a new record: a Kafka sink without "
        "sink.upsert); false when rows are updated or deleted by key.",
    )
    inherited_offset_topics: list[str] = Field(
        default_factory=list,
        alias="inheritedOffsetTopics",
        description="The topics that started from offsets inherited from the reference pipeline.",
    )


class PartitionProgress(Resource):
    topic: str
    partition: int
    records_done: int = Field(alias="recordsDone", description="Records read of recordsTotal.")
    records_total: int = Field(
        alias="recordsTotal", description="Records between the replay's start and end offsets."
    )
    percent: float


class ProgressState(StrEnum):
    """Where a bounded replay is: reading, or done (COMPLETED: it reached its end offsets)."""

    READING = "READING"
    COMPLETED = "COMPLETED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


class Progress(Resource):
    state: ProgressState = ProgressState.READING
    records_done: int = Field(alias="recordsDone")
    records_total: int = Field(alias="recordsTotal")
    percent: float
    records_read: int = Field(
        default=0,
        alias="recordsRead",
        description="Records the replay's runner read (recordsDone counts offsets passed, this the "
        "records themselves: the two differ by the transaction markers of transactional producers).",
    )
    rows_written: int = Field(default=0, alias="rowsWritten", description="Rows written to the sink.")
    partitions: list[PartitionProgress] = Field(
        default_factory=list, description="Records read of records to read, per partition."
    )
    rate_per_second: float | None = Field(
        default=None,
        alias="ratePerSecond",
        description="Records read per second over the last 30 s (None before a rate is known).",
    )
    eta_seconds: float | None = Field(
        default=None,
        alias="etaSeconds",
        description="The records left divided by ratePerSecond (None without a rate).",
    )


class PipelineStatus(Resource):
    phase: Phase
    detail: str = Field(description="What the pipeline does or waits for, or why it failed.")
    deadline: str | None = Field(
        default=None,
        description="When a pipeline waiting for inherited offsets gives up.",
        exclude_if=_absent,
    )
    reading_since: str | None = Field(
        default=None,
        alias="readingSince",
        description="When the running pipeline began reading: partitions were assigned to its "
        "process. RUNNING without it means started, not reading yet.",
        exclude_if=_absent,
    )
    traits: PipelineTraits
    latest_offsets: dict[str, str] = Field(
        alias="latestOffsets",
        description="topic → offsets in the scan.startup.specific-offsets format, once another "
        "pipeline inherited them.",
    )
    metrics: dict[str, Any] | None = Field(default=None, exclude_if=_absent)
    lost_offsets: Any = Field(default=None, alias="lostOffsets", exclude_if=_absent)
    progress: Progress | None = Field(
        default=None, description="A bounded replay's progress.", exclude_if=_absent
    )


class Pipeline(Resource):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["Pipeline"] = "Pipeline"
    metadata: PipelineMetadata
    spec: PipelineSpec
    status: PipelineStatus


class SavepointMetadata(Resource):
    name: str = Field(
        description="Unique among the pipeline's savepoints; given on POST, else "
        "<source>-<first 8 characters of the uid> (lower case)."
    )
    uid: str
    pipeline: str
    environment: str
    creation_timestamp: str | None = Field(alias="creationTimestamp")


class SavepointSpec(Resource):
    source: SavepointSource
    pinned: bool


class SavepointStatus(Resource):
    state: SavepointState
    reason: str
    completion_timestamp: str | None = Field(alias="completionTimestamp")
    offsets: dict[str, str] = Field(description="topic → offsets (scan.startup.specific-offsets format).")
    sink_commit: dict[str, Any] = Field(alias="sinkCommit")


class Savepoint(Resource):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["Savepoint"] = "Savepoint"
    metadata: SavepointMetadata
    spec: SavepointSpec
    status: SavepointStatus
