"""The pipeline resource's ``spec``, as the HTTP API and the CLI take it.

Shaped after the CMF Statements API: ``metadata`` (name; uid and timestamps are read-only),
``spec`` (what the user wants) and ``status`` (what ferry reports). ``spec.job`` is the job file's
YAML text; ``${ENV}`` references in it are resolved where the pipeline runs, so secrets are never
stored resolved.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ferry.config.job import SpecificOffsets
from ferry.options import parse_duration

#: The property naming the pipeline whose offsets a new pipeline inherits (SPEC §4).
INITIAL_OFFSET_FROM = "sql.tables.initial-offset-from"
#: How long that pipeline may wait for them; the server's setting when unset.
INITIAL_OFFSET_FROM_TIMEOUT = "sql.tables.initial-offset-from.timeout"
KNOWN_PROPERTIES = (INITIAL_OFFSET_FROM, INITIAL_OFFSET_FROM_TIMEOUT)
MAX_CARRY_OVER_TIMEOUT = timedelta(hours=6)


class SpecModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class StartFrom(SpecModel):
    """Where a replay starts: exactly one of a timestamp, specific offsets or a savepoint."""

    timestamp_millis: int | None = Field(default=None, ge=0, alias="timestampMillis")
    #: topic → ``partition:0,offset:42;partition:1,offset:300``.
    offsets: dict[str, SpecificOffsets] | None = None
    savepoint: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Self:
        given = [v for v in (self.timestamp_millis, self.offsets, self.savepoint) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of timestampMillis, offsets, savepoint")
        return self


class Bounded(SpecModel):
    """Where a replay ends (``scan.bounded.mode``)."""

    mode: Literal["latest-offset", "timestamp", "specific-offsets"]
    timestamp_millis: int | None = Field(default=None, ge=0, alias="timestampMillis")
    #: ``partition:0,offset:42;...``, for every topic read (as ``scan.bounded.specific-offsets``).
    offsets: SpecificOffsets | None = None

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
    savepoint_interval: str | None = Field(default=None, alias="savepointInterval")
    #: A replay: start here instead of the job's ``scan.startup.*``.
    start_from: StartFrom | None = Field(default=None, alias="startFrom")
    #: A replay: stop here (``scan.bounded.*``).
    bounded: Bounded | None = None
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
