"""Every operation on pipelines and savepoints; the HTTP API and the CLI are thin layers over it.

Errors are :class:`ControlError` with the HTTP status the API answers with, as the CMF Statements
API does (SPEC §4): 400 an unusable request or savepoint, 404 not found, 409 a conflict (a
savepoint still being recorded, savepoints attached), 422 an update that sets a read-only field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from ferry.config.checks import UnsupportedOptionError, check_supported
from ferry.config.exceptions import ConfigError
from ferry.config.job import BoundedMode, JobConfig, format_specific_offsets
from ferry.config.loader import load_job_text, problem_in
from ferry.control.exceptions import ControlError
from ferry.control.models import (
    INITIAL_OFFSET_FROM,
    INITIAL_OFFSET_FROM_TIMEOUT,
    MAX_CARRY_OVER_TIMEOUT,
    Pipeline,
    PipelineMetadata,
    PipelineSpec,
    PipelineStatus,
    PipelineTraits,
    Progress,
    Savepoint,
    SavepointMetadata,
    SavepointSource,
    SavepointSpec,
    SavepointState,
    SavepointStatus,
    job_label,
)
from ferry.control.names import name_error
from ferry.control.replay import check_rebuild, replay_progress
from ferry.control.store import ControlStore, PipelineRow, SavepointRow, runtime_name
from ferry.logs import register_secrets, secrets_of
from ferry.offsets import decode_offsets
from ferry.options import parse_duration
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.phase import Phase
from ferry.state import StateStore

_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,98}[a-z0-9])?")
_READ_ONLY_METADATA = ("uid", "creationTimestamp", "updateTimestamp", "environment")
_MAPS = ("labels", "annotations")
_LABEL_KEY_RE = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


@dataclass(frozen=True, slots=True)
class ControlSettings:
    """Server-wide settings of the control plane."""

    #: SQLAlchemy URL of the state store holding pipelines, savepoints and checkpoints.
    state_url: str = "sqlite:///var/ferry/state.db"
    #: Whether pipelines may inherit offsets (``sql.tables.initial-offset-from``).
    carry_over_enabled: bool = True
    #: How long a new pipeline waits for its reference's offsets (at most 6 hours).
    carry_over_timeout: timedelta = timedelta(minutes=15)

    def __post_init__(self) -> None:
        if not timedelta(0) < self.carry_over_timeout <= MAX_CARRY_OVER_TIMEOUT:
            raise ValueError("carry-over-offsets.timeout is more than 0 and at most 6h")


def iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def latest_offsets_format(offsets: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """``{topic: {"0": 42}}`` → ``{topic: "partition:0,offset:42"}`` (``scan.startup.specific-offsets``)."""
    return {
        topic: format_specific_offsets({int(p): int(o) for p, o in parts.items()})
        for topic, parts in sorted(offsets.items())
    }


def load_job(spec: PipelineSpec, name: str) -> JobConfig:
    """The pipeline's job file, validated; errors name the line and key (400)."""
    try:
        job = load_job_text(spec.job, file=job_label(name))
    except ConfigError as e:
        raise ControlError(400, str(e)) from None
    register_secrets(secrets_of(job))
    return job


def upsert_sink(job: JobConfig) -> bool:
    """Whether the job's sink writes in upsert mode (``sink.upsert: true``)."""
    return bool(getattr(job.sink, "upsert", False))


def bounded_job(job: JobConfig) -> bool:
    """Whether the job's source stops by itself (``scan.bounded.mode`` other than unbounded)."""
    return job.source.scan_bounded_mode != BoundedMode.UNBOUNDED


def append_only(job: JobConfig) -> bool:
    """Whether the sink only appends: a Kafka sink without ``sink.upsert`` writes each change as a
    new record; every table sink updates and deletes rows by key, and an upsert topic is compacted."""
    return job.sink.type == "kafka" and not upsert_sink(job)


def stateful_reason(job: JobConfig) -> str | None:
    from ferry.transform.blocks import stateful_reason as reason  # noqa: PLC0415

    return reason(job)


class ControlPlane:
    """Pipelines and savepoints of every environment, over one :class:`ControlStore`."""

    def __init__(self, settings: ControlSettings, store: ControlStore | None = None) -> None:
        self.settings = settings
        self.store = store or ControlStore(settings.state_url)
        self._state: StateStore | None = None

    @property
    def state(self) -> StateStore:
        """The runners' checkpoints and status, in the same database."""
        if self._state is None:
            self._state = StateStore(self.settings.state_url)
        return self._state

    def close(self) -> None:
        self.store.close()
        if self._state is not None:
            self._state.close()

    # ------------------------------------------------------------------------------ pipelines

    def create_pipeline(self, environment: str, body: Mapping[str, Any]) -> Pipeline:
        environment_error = name_error("environment", environment)
        if environment_error is not None:
            raise ControlError(400, environment_error)
        metadata = body.get("metadata") or {}
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ControlError(
                400,
                "metadata.name: a pipeline name is 1 to 100 lower-case letters, digits and '-', "
                "starting and ending with a letter or digit",
            )
        for key in _READ_ONLY_METADATA:
            if key in metadata:
                raise ControlError(422, f"metadata.{key} is read-only; remove it from the request")
        maps = _metadata_maps(metadata)
        if "status" in body:
            raise ControlError(422, "status is read-only; remove it from the request")
        spec = self._spec(body.get("spec"))
        job = load_job(spec, name)
        existing = self.store.pipeline(environment, name)
        if existing is not None and existing.phase != Phase.DELETED:
            raise ControlError(409, f"pipeline {name!r} already exists in environment {environment!r}")
        reference = spec.properties.get(INITIAL_OFFSET_FROM)
        if reference is not None:
            self._check_carry_over(environment, name, spec, job, reference)
        self._check_job(job, spec, name)
        check_rebuild(job, spec)
        if existing is not None:
            self.state.forget(existing.runtime_name)
        created = now_ms()
        deadline, detail = self._waiting(spec, since_ms=created)
        if spec.start_from is not None and spec.start_from.savepoint is not None:
            self.usable_savepoint(spec.start_from.savepoint, environment)
        if spec.stopped:
            detail = "created stopped"
        row = self.store.insert_pipeline(environment, name, spec.document(), detail, at_ms=created, **maps)
        if spec.stopped:
            self.store.update_pipeline(row, phase=Phase.STOPPED)
        elif deadline is not None:
            self.store.update_pipeline(row, deadline_ms=deadline)
        return self.get_pipeline(environment, name)

    def get_pipeline(self, environment: str, name: str) -> Pipeline:
        return self.resource(self._row(environment, name))

    def list_pipelines(self, environment: str) -> list[Pipeline]:
        return [self.resource(r) for r in self.store.pipelines(environment) if r.phase != Phase.DELETED]

    def update_pipeline(self, environment: str, name: str, body: Mapping[str, Any]) -> Pipeline:
        """PUT: the whole resource as returned by a GET, with its spec changed."""
        row = self._row(environment, name)
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ControlError(400, "metadata is an object")
        if metadata.get("name", name) != name:
            raise ControlError(422, "metadata.name is read-only: create a new pipeline instead")
        if "updateTimestamp" in metadata:
            raise ControlError(422, "metadata.updateTimestamp is read-only; remove it from the request")
        current_metadata = self.resource(row).metadata.document()
        for key in _READ_ONLY_METADATA:
            if key in metadata and metadata[key] != current_metadata[key]:
                raise ControlError(422, f"metadata.{key} is read-only: it cannot be changed")
        maps = _metadata_maps(metadata)
        changed_maps: dict[str, Any] = {
            k: maps[k] for k in _MAPS if k in metadata and maps[k] != getattr(row, k)
        }
        if changed_maps:
            self.store.update_pipeline(row, **changed_maps)
            row = self._row(environment, name)
        spec = self._spec(body.get("spec"))
        current = PipelineSpec.model_validate(row.spec)
        changed = {
            key
            for key in PipelineSpec.model_fields
            if getattr(spec, key) != getattr(current, key) and key != "stopped"
        }
        if changed and row.phase == Phase.PENDING and row.deadline_ms is not None:
            raise ControlError(
                422,
                "while the pipeline waits for inherited offsets only spec.stopped may change "
                f"(the request changes spec.{sorted(_alias(k) for k in changed)[0]})",
            )
        if changed and row.phase in (Phase.RUNNING, Phase.STOPPING):
            raise ControlError(
                422,
                "a running pipeline's spec is read-only except spec.stopped: stop it first "
                f"(the request changes spec.{sorted(_alias(k) for k in changed)[0]})",
            )
        if changed:
            self._check_job(load_job(spec, name), spec, name)
            self.store.update_pipeline(row, spec=spec.document())
            row = self._row(environment, name)
        if spec.stopped != current.stopped:
            self.store.update_pipeline(row, spec=spec.document())
            row = self._row(environment, name)
            if spec.stopped:
                self._stop(row)
            else:
                self._resume(row)
        return self.get_pipeline(environment, name)

    def set_stopped(self, environment: str, name: str, stopped: bool) -> Pipeline:
        """``ferry pipeline stop`` / ``resume``: a PUT that changes only ``spec.stopped``."""
        spec = self.get_pipeline(environment, name).spec.model_copy(update={"stopped": stopped})
        return self.update_pipeline(environment, name, {"metadata": {"name": name}, "spec": spec.document()})

    def delete_pipeline(self, environment: str, name: str) -> None:
        row = self._row(environment, name)
        attached = self.store.savepoints(environment, name)
        if attached:
            sources = sorted({s.source for s in attached})
            raise ControlError(
                409,
                f"pipeline {name!r} has {len(attached)} savepoint(s) attached (source "
                f"{', '.join(sources)}): delete them first, e.g. DELETE .../savepoints?source="
                f"{sources[0]}&force=true",
            )
        detail = (
            "deleted" if row.deadline_ms is None else "deleted; the wait for inherited offsets is cancelled"
        )
        self.store.update_pipeline(row, phase=Phase.DELETED, detail=detail, generation=row.generation + 1)

    # ------------------------------------------------------------------------------ savepoints

    def list_savepoints(self, environment: str, name: str, source: str | None = None) -> list[Savepoint]:
        self._row(environment, name)
        if source is not None:
            self._check_source(source)
        return [
            savepoint_resource(s)
            for s in self.store.savepoints(environment, name)
            if source is None or s.source == source
        ]

    def create_savepoint(self, environment: str, name: str, savepoint_name: str | None = None) -> Savepoint:
        """A ``MANUAL`` savepoint of a running pipeline: the next checkpoint after the request.
        ``savepoint_name`` names it (unique among the pipeline's savepoints)."""
        row = self._row(environment, name)
        if savepoint_name is not None:
            error = name_error("savepoint", savepoint_name)
            if error is not None:
                raise ControlError(400, f"metadata.name: {error}")
            if self._savepoint_by(environment, name, savepoint_name) is not None:
                raise ControlError(
                    409, f"pipeline {name!r} already has a savepoint named or with uid {savepoint_name!r}"
                )
        if row.phase != Phase.RUNNING:
            raise ControlError(
                400, f"pipeline {name!r} is {row.phase}: only a running pipeline takes a savepoint"
            )
        if PipelineSpec.model_validate(row.spec).upgrade_mode == "stateless":
            raise ControlError(
                400, f"pipeline {name!r} has spec.upgradeMode stateless: it takes no savepoints"
            )
        self.supersede_scheduled(row, "a MANUAL savepoint")
        self._no_savepoint_in_progress(row)
        return savepoint_resource(
            self.store.insert_savepoint(environment, name, SavepointSource.MANUAL, name=savepoint_name)
        )

    def get_savepoint(self, environment: str, name: str, savepoint: str) -> Savepoint:
        """The pipeline's savepoint of this uid or name."""
        return savepoint_resource(self._savepoint(environment, name, savepoint))

    def set_pinned(self, environment: str, name: str, savepoint: str, pinned: bool) -> Savepoint:
        uid = self._savepoint(environment, name, savepoint).uid
        self.store.set_pinned(uid, pinned)
        return self.get_savepoint(environment, name, uid)

    def delete_savepoint(self, environment: str, name: str, savepoint: str, force: bool = False) -> None:
        found = self._savepoint(environment, name, savepoint)
        row = self._row(environment, name)
        self._may_delete([found], row, force)
        self.store.delete_savepoints([found.uid])

    def delete_savepoints(self, environment: str, name: str, source: str, force: bool = False) -> list[str]:
        """Delete every unpinned savepoint of one source; pinned ones stay (unpin them first)."""
        self._check_source(source)
        row = self._row(environment, name)
        chosen = [s for s in self.store.savepoints(environment, name) if s.source == source and not s.pinned]
        self._may_delete(chosen, row, force)
        self.store.delete_savepoints([s.uid for s in chosen])
        return [s.uid for s in chosen]

    # ------------------------------------------------------------------------------ resources

    def resource(self, row: PipelineRow) -> Pipeline:
        status = PipelineStatus(
            phase=row.phase,
            detail=row.detail,
            traits=self._traits(row),
            latest_offsets=dict(row.latest_offsets),
            deadline=iso(row.deadline_ms) if row.phase == Phase.PENDING else None,
            reading_since=iso(reading_since(row)) if row.phase == Phase.RUNNING else None,
        )
        runner = self.state.get_status(row.runtime_name)
        if runner is not None and row.phase in (
            Phase.RUNNING,
            Phase.STOPPING,
            Phase.STOPPED,
            Phase.FAILED,
            Phase.COMPLETED,
        ):
            metrics = runner["metrics"]
            if row.phase == Phase.RUNNING and runner["phase"] == Phase.RUNNING:
                status.detail = runner["detail"]
                if not runner_reads(row, runner) and reading_since(row) is None:
                    status.detail = "starting: waiting for partitions to be assigned (not reading yet)"
            status.metrics = {
                key: metrics.get(key)
                for key in (
                    "records_read",
                    "rows_written",
                    "throughput_eps",
                    "offsets",
                    "lag",
                    "bad_records",
                    "records_behind",
                    "rate_eps",
                    "eta_s",
                    "retry",
                    "unmatched_rules",
                    "workers",
                    "recent_checkpoints",
                    "recent_errors",
                )
            }
            status.lost_offsets = metrics.get("lost_offsets") or row.traits.get("lostOffsets") or None
            status.progress = self._progress(row, metrics)
        return Pipeline(
            metadata=PipelineMetadata(
                name=row.name,
                labels=row.labels,
                annotations=row.annotations,
                environment=row.environment,
                uid=row.uid,
                creation_timestamp=iso(row.created_ms),
                update_timestamp=iso(row.updated_ms),
            ),
            spec=PipelineSpec.model_validate(row.spec),
            status=status,
        )

    def _traits(self, row: PipelineRow) -> PipelineTraits:
        spec = PipelineSpec.model_validate(row.spec)
        try:
            job: JobConfig | None = load_job(spec, row.name)
        except ControlError:  # a job stored before a check it now fails: no traits to tell
            job = None
        return PipelineTraits(
            is_bounded=spec.bounded is not None or (job is not None and bounded_job(job)),
            is_append_only=job is not None and append_only(job),
            inherited_offset_topics=list(row.traits.get("inheritedOffsetTopics", [])),
        )

    # ------------------------------------------------------------------------------ internals

    def _row(self, environment: str, name: str) -> PipelineRow:
        row = self.store.pipeline(environment, name)
        if row is None or row.phase == Phase.DELETED:
            raise ControlError(404, f"pipeline {name!r} not found in environment {environment!r}")
        return row

    def _savepoint(self, environment: str, name: str, savepoint: str) -> SavepointRow:
        """The pipeline's savepoint whose uid or name is ``savepoint`` (404 otherwise)."""
        self._row(environment, name)
        found = self._savepoint_by(environment, name, savepoint)
        if found is None:
            raise ControlError(404, f"savepoint {savepoint!r} of pipeline {name!r} not found")
        return found

    def _savepoint_by(self, environment: str, name: str, savepoint: str) -> SavepointRow | None:
        found = self.store.savepoint(savepoint)
        if found is not None and found.environment == environment and found.pipeline == name:
            return found
        return self.store.savepoint_named(environment, name, savepoint)

    @staticmethod
    def _spec(data: Any) -> PipelineSpec:
        if not isinstance(data, Mapping):
            raise ControlError(400, "spec is required: an object with at least spec.job")
        try:
            return PipelineSpec.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ControlError(400, f"spec.{where}: {first['msg']}") from None

    @staticmethod
    def _check_job(job: JobConfig, spec: PipelineSpec, name: str) -> None:
        """What the job asks for and ferry does not do (as ``ferry validate`` refuses it): at the
        key's line and column in ``spec.job`` when the refusal names one (400)."""
        try:
            check_supported(job)
        except UnsupportedOptionError as e:
            if e.key_path is None:
                raise ControlError(400, str(e)) from None
            raise ControlError(400, str(problem_in(spec.job, job_label(name), e.key_path, str(e)))) from None

    @staticmethod
    def _check_source(source: str) -> None:
        if source not in set(SavepointSource):
            raise ControlError(400, f"source: one of {', '.join(SavepointSource)}, not {source!r}")

    def _carry_over_timeout(self, spec: PipelineSpec) -> timedelta:
        text = spec.properties.get(INITIAL_OFFSET_FROM_TIMEOUT)
        if text is None:
            return self.settings.carry_over_timeout
        try:
            timeout = parse_duration(text)
        except ValueError as e:
            raise ControlError(400, f"spec.properties.{INITIAL_OFFSET_FROM_TIMEOUT}: {e}") from None
        if not timedelta(0) < timeout <= MAX_CARRY_OVER_TIMEOUT:
            raise ControlError(
                400,
                f"spec.properties.{INITIAL_OFFSET_FROM_TIMEOUT}: more than 0 and at most 6h, not {text!r}",
            )
        return timeout

    def _check_carry_over(
        self, environment: str, name: str, spec: PipelineSpec, job: JobConfig, reference: str
    ) -> None:
        """Refuse at once what can never inherit offsets (SPEC §4)."""
        if not self.settings.carry_over_enabled:
            raise ControlError(
                400,
                f"spec.properties.{INITIAL_OFFSET_FROM}: carry-over offsets are turned off on this server "
                "(carry-over-offsets.enabled)",
            )
        ref_env, _, ref_name = reference.rpartition("/")
        if ref_env and ref_env != environment:
            raise ControlError(
                404,
                f"reference pipeline {reference!r} not found: a reference must be in the same environment "
                f"({environment!r})",
            )
        if ref_name == name:
            raise ControlError(400, f"pipeline {name!r} cannot inherit offsets from itself")
        ref = self.store.pipeline(environment, ref_name)
        if ref is None or ref.phase == Phase.DELETED:
            raise ControlError(
                404, f"reference pipeline {ref_name!r} not found in environment {environment!r}"
            )
        if spec.start_from is not None:
            raise ControlError(
                400, f"spec.startFrom and spec.properties.{INITIAL_OFFSET_FROM} both set a start: give one"
            )
        reason = stateful_reason(job)
        if reason is not None:
            raise ControlError(
                400,
                f"pipeline {name!r} is stateful ({reason}): only offsets carry over, not state, so a "
                "stateful pipeline cannot inherit offsets",
            )
        if upsert_sink(job):
            raise ControlError(
                400,
                f"pipeline {name!r} writes to a {job.sink.type} sink with sink.upsert: an upsert sink is "
                "stateful (the rows it keeps by key are not in the offsets), so it cannot inherit offsets",
            )
        if PipelineSpec.model_validate(ref.spec).upgrade_mode == "stateless":
            raise ControlError(
                400,
                f"reference pipeline {ref_name!r} has spec.upgradeMode stateless: stopping it takes no "
                "savepoint, so there would be no offsets to inherit",
            )
        state, savepoint = self.reference_state(ref)
        if state == "recording":
            assert savepoint is not None
            raise ControlError(
                409,
                f"savepoint {savepoint.uid} of reference pipeline {ref_name!r} is still being recorded; "
                "try again in a few seconds",
            )
        if state == "failed":
            assert savepoint is not None
            raise ControlError(
                400,
                f"savepoint {savepoint.uid} of reference pipeline {ref_name!r} failed: {savepoint.reason}",
            )
        if state == "none":
            raise ControlError(
                400,
                f"reference pipeline {ref_name!r} is {ref.phase} without a savepoint (it was killed or "
                "failed): there are no offsets to inherit; resume it and stop it again",
            )
        if state == "ready":
            assert savepoint is not None
            problem = inheritance_problem(job, savepoint, ref_name)
            if problem is not None:
                raise ControlError(400, problem)

    def reference_state(self, ref: PipelineRow) -> tuple[str, SavepointRow | None]:
        """``ready`` (its stop savepoint), ``recording``, ``failed``, ``none`` (stopped without one),
        or ``running`` (wait for it to stop)."""
        upgrade = [
            s for s in self.store.savepoints(ref.environment, ref.name) if s.source == SavepointSource.UPGRADE
        ]
        last = upgrade[-1] if upgrade else None
        if ref.phase in (Phase.RUNNING, Phase.PENDING):
            return "running", None
        if last is not None and last.state == SavepointState.PENDING:
            return "recording", last
        if ref.phase == Phase.STOPPING:
            return "running", None
        if last is not None and last.state == SavepointState.FAILED:
            return "failed", last
        if (
            ref.phase in (Phase.STOPPED, Phase.COMPLETED)
            and last is not None
            and last.requested_ms >= ref.traits.get("startedMs", 0)
        ):
            return "ready", last
        return "none", last

    def usable_savepoint(self, uid: str, environment: str) -> SavepointRow:
        savepoint = self.store.savepoint(uid)
        if savepoint is None or savepoint.environment != environment:
            raise ControlError(404, f"savepoint {uid!r} not found in environment {environment!r}")
        if savepoint.state != SavepointState.COMPLETED:
            why = f": {savepoint.reason}" if savepoint.reason else ""
            raise ControlError(
                400, f"savepoint {uid} is {savepoint.state}{why}; only a completed one can be used"
            )
        return savepoint

    def _stop(self, row: PipelineRow) -> None:
        spec = PipelineSpec.model_validate(row.spec)
        if row.phase == Phase.PENDING:
            detail = (
                "stopped while waiting for inherited offsets"
                if row.deadline_ms is not None
                else "stopped before it started"
            )
            self.store.update_pipeline(row, phase=Phase.STOPPED, detail=detail, generation=row.generation + 1)
            return
        if row.phase != Phase.RUNNING:
            return
        if spec.upgrade_mode == "savepoint":
            self.supersede_scheduled(row, "the stop's savepoint")
            self._no_savepoint_in_progress(row)
            savepoint = self.store.insert_savepoint(row.environment, row.name, SavepointSource.UPGRADE)
            detail = f"stopping: taking savepoint {savepoint.uid}"
        else:
            detail = "stopping without a savepoint (spec.upgradeMode stateless)"
        self.store.update_pipeline(row, expect_phase=Phase.RUNNING, phase=Phase.STOPPING, detail=detail)

    def _resume(self, row: PipelineRow) -> None:
        if row.phase not in (Phase.STOPPED, Phase.FAILED):
            return
        deadline, detail = (None, "waiting for a worker to start it")
        if not row.traits.get("carriedOver"):
            deadline, detail = self._waiting(PipelineSpec.model_validate(row.spec), since_ms=row.created_ms)
        self.store.update_pipeline(
            row, phase=Phase.PENDING, detail=detail, deadline_ms=deadline, generation=row.generation + 1
        )

    def _waiting(self, spec: PipelineSpec, since_ms: int | None = None) -> tuple[int | None, str]:
        """A starting pipeline's deadline for inherited offsets (None without a reference) and detail.
        The wait counts from the pipeline's creation (``since_ms``), as in CMF: resuming a pipeline
        stopped while it waited does not move its deadline."""
        reference = spec.properties.get(INITIAL_OFFSET_FROM)
        if reference is None:
            return None, "waiting for a worker to start it"
        since = now_ms() if since_ms is None else since_ms
        deadline = since + int(self._carry_over_timeout(spec).total_seconds() * 1000)
        return deadline, f"waiting for the offsets of pipeline {reference!r}; fails at {iso(deadline)}"

    def supersede_scheduled(self, row: PipelineRow, by: str) -> None:
        """Fail the pipeline's ``SCHEDULE`` savepoints in flight: a stop or a user's savepoint wins."""
        for savepoint in self.store.savepoints(row.environment, row.name):
            if savepoint.state == SavepointState.PENDING and savepoint.source == SavepointSource.SCHEDULE:
                self.store.finish_savepoint(
                    savepoint.uid, SavepointState.FAILED, reason=f"superseded by {by}"
                )

    def _no_savepoint_in_progress(self, row: PipelineRow) -> None:
        for savepoint in self.store.savepoints(row.environment, row.name):
            if savepoint.state == SavepointState.PENDING:
                raise ControlError(
                    409,
                    f"savepoint {savepoint.uid} of pipeline {row.name!r} is still being recorded; "
                    "try again in a few seconds",
                )

    def _may_delete(self, chosen: list[SavepointRow], row: PipelineRow, force: bool) -> None:
        for savepoint in chosen:
            if savepoint.state == SavepointState.PENDING:
                raise ControlError(409, f"savepoint {savepoint.uid} is still being recorded; try again later")
            if savepoint.pinned:
                raise ControlError(409, f"savepoint {savepoint.uid} is pinned: unpin it first")
        if chosen and not force:
            raise ControlError(
                409,
                f"deleting savepoints of pipeline {row.name!r} needs force=true (it is {row.phase}; a "
                "deleted savepoint can no longer be resumed from or inherited)",
            )

    def _progress(self, row: PipelineRow, metrics: Mapping[str, Any]) -> Progress | None:
        return replay_progress(row.traits, row.phase, metrics)


def inheritance_problem(job: JobConfig, savepoint: SavepointRow, reference: str) -> str | None:
    """Why this job cannot take the savepoint's offsets (a pattern over an inherited topic), or None."""
    source = job.source
    if source.topic_pattern is not None:
        covered = sorted(t for t in savepoint.offsets if re.fullmatch(source.topic_pattern, t))
        if covered:
            return (
                f"source.topic-pattern {source.topic_pattern!r} reads topic {covered[0]!r}, whose offsets "
                f"are inherited from {reference!r}: only a source naming its topics (source.topic) "
                "inherits offsets; name the topics, or start without carry-over"
            )
    return None


def inherited_offsets(job: JobConfig, savepoint: SavepointRow) -> dict[tuple[str, int], int]:
    """The savepoint's offsets of the topics this job reads by name and starts without its own
    ``tables[].scan.startup.mode`` (a per-table start wins, like an OPTIONS hint)."""
    own_start = {t.topic for t in job.source.tables}
    topics = set(job.source.topic or ()) - own_start
    return {(t, p): o for (t, p), o in decode_offsets(savepoint.offsets).items() if t in topics}


def runner_reads(row: PipelineRow, status: Mapping[str, Any]) -> bool:
    """Whether the runner status of this start of the pipeline says it reads: it is running, and
    partitions are assigned to it."""
    metrics = status.get("metrics") or {}
    started = int(row.traits.get("startedMs", 0))
    return (
        status.get("phase") == Phase.RUNNING
        and int(metrics.get("started_ms") or 0) >= started
        and any(metrics.get("assigned", {}).values())
    )


def reading_since(row: PipelineRow) -> int | None:
    """When this start of the pipeline began reading, or None before it does."""
    since = row.traits.get("readingSinceMs")
    return since if since is not None and since >= row.traits.get("startedMs", 0) else None


def savepoint_resource(savepoint: SavepointRow) -> Savepoint:
    return Savepoint(
        metadata=SavepointMetadata(
            name=savepoint.name,
            uid=savepoint.uid,
            pipeline=savepoint.pipeline,
            environment=savepoint.environment,
            creation_timestamp=iso(savepoint.requested_ms),
        ),
        spec=SavepointSpec(source=savepoint.source, pinned=savepoint.pinned),
        status=SavepointStatus(
            state=savepoint.state,
            reason=savepoint.reason,
            completion_timestamp=iso(savepoint.completed_ms),
            offsets=latest_offsets_format(savepoint.offsets),
            sink_commit=savepoint.sink_commit,
        ),
    )


def _metadata_maps(metadata: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``metadata.labels`` and ``metadata.annotations`` of a request, checked: objects of string
    values whose keys are Kubernetes-style (an optional DNS prefix and '/', then up to 63 letters,
    digits, '-', '_' and '.')."""
    maps: dict[str, dict[str, str]] = {}
    for field_name in _MAPS:
        given = metadata.get(field_name) or {}
        if not isinstance(given, Mapping):
            raise ControlError(400, f"metadata.{field_name}: an object of string values")
        for key, value in given.items():
            if not isinstance(key, str) or not _LABEL_KEY_RE.fullmatch(key):
                raise ControlError(
                    400,
                    f"metadata.{field_name}: {key!r} is not a valid key (an optional DNS prefix and "
                    "'/', then 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a "
                    "letter or digit)",
                )
            if not isinstance(value, str):
                raise ControlError(400, f"metadata.{field_name}.{key}: a string, not {value!r}")
        maps[field_name] = dict(given)
    return maps


def _alias(field_name: str) -> str:
    info = PipelineSpec.model_fields[field_name]
    return info.alias or field_name


__all__ = [
    "ControlError",
    "ControlPlane",
    "ControlSettings",
    "inheritance_problem",
    "inherited_offsets",
    "runtime_name",
]
