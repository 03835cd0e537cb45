"""The worker loop of the control plane: runs, stops and savepoints the pipelines it finds.

Every ``ferry worker`` (and ``ferry serve``) runs a :class:`Supervisor`. Each tick it reads the
pipelines of its environments from the state store and moves them along their phases
(SPEC §3): ``PENDING`` → ``RUNNING`` → ``STOPPING`` → ``STOPPED``, or ``FAILED``/``DELETED``;
a bounded run that read to its end is ``COMPLETED``.

A running pipeline is a ``ferry run`` child process per worker (a plain process around the batch
hot path), all in the pipeline's consumer group: several workers share its partitions. A child dies
with its worker (``PR_SET_PDEATHSIG``), which is what a killed machine looks like; the others
take its partitions over. Stopping sends the children SIGTERM (each takes a final checkpoint);
once no instance of the pipeline is alive, the savepoint is completed from the pipeline's
checkpoint, which holds the offsets of every partition and the source schemas. Decisions that
must be taken once (start, finish, savepoints) are compare-and-set updates in the store.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any, TextIO

from ruamel.yaml import YAML

from ferry.config.job import JobConfig, format_specific_offsets
from ferry.control.exceptions import ControlError
from ferry.control.models import (
    INITIAL_OFFSET_FROM,
    InstanceState,
    PipelineSpec,
    SavepointSource,
    SavepointState,
)
from ferry.control.names import within
from ferry.control.replay import drop_tables, offset_range
from ferry.control.secrets import write_private
from ferry.control.service import (
    ControlPlane,
    inheritance_problem,
    inherited_offsets,
    iso,
    latest_offsets_format,
    load_job,
    reading_since,
    runner_reads,
)
from ferry.control.store import PipelineRow, Sample, SavepointRow
from ferry.offsets import encode_offsets
from ferry.pipeline.checkpoints import now_ms
from ferry.pipeline.phase import Phase
from ferry.process import STOP_GRACE_S, parent_death_hook

log = logging.getLogger(__name__)

#: A MANUAL or SCHEDULE savepoint fails when no checkpoint follows its request within this time.
SAVEPOINT_TIMEOUT_MS = 120_000
#: How often a running pipeline's lag and throughput are sampled.
SAMPLE_INTERVAL_MS = 10_000
#: How long a stop waits for a just started process to start reading before it signals it anyway.
START_GRACE_S = 60.0
#: A child that keeps dying is restarted at most this often.
RESTART_BACKOFF_S = 5.0


@dataclass
class Child:
    """One ``ferry run`` process of a pipeline generation on this worker."""

    process: subprocess.Popen[bytes]
    generation: int
    log_file: Path
    log_handle: TextIO
    signalled: bool = False
    started: float = field(default_factory=time.monotonic)
    #: When the process is killed if it has not stopped by then (``time.monotonic()``), once signalled.
    kill_at: float | None = None

    def exit_code(self) -> int | None:
        return self.process.poll()


class Supervisor:
    """Moves the pipelines of some environments through their phases; one per worker process."""

    def __init__(
        self,
        plane: ControlPlane,
        *,
        environments: frozenset[str] | None = None,
        worker: str | None = None,
        data_dir: str | Path = "var/ferry/pipelines",
        interval_s: float = 0.5,
    ) -> None:
        self.plane = plane
        self.store = plane.store
        self.environments = environments
        self.worker = worker or f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.data_dir = Path(data_dir).absolute()
        self.interval_s = interval_s
        self.children: dict[tuple[str, str], Child] = {}
        self._restart_at: dict[tuple[str, str], float] = {}
        self._sampled: dict[tuple[str, str], Sample] = {}

    # ------------------------------------------------------------------------------ loop

    def run(self, stop: threading.Event) -> None:
        log.info("worker %s supervising %s", self.worker, sorted(self.environments or ["every environment"]))
        try:
            while not stop.is_set():
                try:
                    self.tick()
                except Exception:
                    log.exception("supervisor tick failed")
                stop.wait(self.interval_s)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop this worker's children gracefully (each takes a final checkpoint)."""
        for child in self.children.values():
            if child.exit_code() is None:
                child.process.send_signal(signal.SIGTERM)
        for key, child in list(self.children.items()):
            self._wait(child, 60)
            self._reap(key)

    def tick(self) -> None:
        rows = self.store.pipelines()
        for row in rows:
            if self.environments is not None and row.environment not in self.environments:
                continue
            match row.phase:
                case Phase.PENDING:
                    self._pending(row)
                case Phase.RUNNING:
                    self._running(row)
                case Phase.STOPPING:
                    self._stopping(row)
                case _:
                    self._not_running(row)
        live = {(r.environment, r.name) for r in rows}
        for key in [k for k in self.children if k not in live]:
            self._kill(key)

    # ------------------------------------------------------------------------------ phases

    def _pending(self, row: PipelineRow) -> None:
        self._kill((row.environment, row.name))
        spec = PipelineSpec.model_validate(row.spec)
        reference = spec.properties.get(INITIAL_OFFSET_FROM)
        if reference is not None and not row.traits.get("carriedOver"):
            self._carry_over(row, spec, reference.rpartition("/")[2])
            return
        if not self.store.update_pipeline(
            row, expect_phase=Phase.PENDING, phase=Phase.RUNNING, detail="preparing"
        ):
            return
        row = self._fresh(row)
        try:
            traits = self._prepare(row, spec)
        except Exception as e:
            message = e.message if isinstance(e, ControlError) else f"{type(e).__name__}: {e}"
            self.store.update_pipeline(row, phase=Phase.FAILED, detail=f"could not start: {message}")
            return
        self.store.update_pipeline(
            row, prepared=row.generation, detail="starting", traits={**row.traits, **traits}
        )

    def _carry_over(self, row: PipelineRow, spec: PipelineSpec, reference: str) -> None:
        if not self.plane.settings.carry_over_enabled:
            self._fail(row, "carry-over offsets were turned off while the pipeline waited for them")
            return
        ref = self.store.pipeline(row.environment, reference)
        if ref is None or ref.phase == Phase.DELETED:
            self._fail(row, f"reference pipeline {reference!r} was deleted while this pipeline waited for it")
            return
        state, savepoint = self.plane.reference_state(ref)
        if state == "ready":
            assert savepoint is not None
            self._inherit(row, spec, ref, savepoint)
            return
        if state == "failed":
            assert savepoint is not None
            self._fail(
                row,
                f"savepoint {savepoint.uid} of reference pipeline {reference!r} failed: {savepoint.reason}",
            )
            return
        if state == "none":
            self._fail(
                row,
                f"reference pipeline {reference!r} is {ref.phase} without a savepoint (killed or failed): "
                "no offsets to inherit",
            )
            return
        assert row.deadline_ms is not None
        if now_ms() >= row.deadline_ms:
            self._fail(
                row,
                f"timed out at {iso(row.deadline_ms)} waiting for reference pipeline {reference!r} to stop "
                f"with a savepoint (it is {ref.phase}); the wait is set by "
                "sql.tables.initial-offset-from.timeout or the server's carry-over-offsets.timeout",
            )
            return
        what = "its savepoint to be recorded" if state == "recording" else f"it to stop (it is {ref.phase})"
        detail = (
            f"waiting for the offsets of pipeline {reference!r}: waiting for {what}; "
            f"fails at {iso(row.deadline_ms)}"
        )
        if detail != row.detail:
            self.store.update_pipeline(row, expect_phase=Phase.PENDING, detail=detail)

    def _inherit(
        self, row: PipelineRow, spec: PipelineSpec, ref: PipelineRow, savepoint: SavepointRow
    ) -> None:
        job = load_job(spec, row.name)
        problem = inheritance_problem(job, savepoint, ref.name)
        if problem is not None:
            self._fail(row, problem)
            return
        if not self.store.update_pipeline(
            row, expect_phase=Phase.PENDING, phase=Phase.RUNNING, detail="preparing"
        ):
            return
        row = self._fresh(row)
        offsets = inherited_offsets(job, savepoint)
        self.plane.state.forget(row.runtime_name)
        self.plane.state.save_checkpoint(row.runtime_name, offsets, savepoint.schemas)
        topics = sorted({t for t, _ in offsets})
        traits = {
            **row.traits,
            "carriedOver": True,
            "inheritedOffsetTopics": topics,
            "inheritedFrom": {"pipeline": ref.name, "savepoint": savepoint.uid},
            "startedMs": now_ms(),
        }
        self.store.update_pipeline(
            ref, latest_offsets=latest_offsets_format(savepoint.offsets), updated_ms=ref.updated_ms
        )
        self.store.update_pipeline(
            row,
            prepared=row.generation,
            deadline_ms=None,
            traits=traits,
            detail=f"starting from the offsets of pipeline {ref.name!r} (savepoint {savepoint.uid}); "
            f"inherited topics: {', '.join(topics) or 'none'}",
        )

    def _prepare(self, row: PipelineRow, spec: PipelineSpec) -> dict[str, Any]:
        """One-off work before a generation starts: a replay's seeded offsets, rebuilt tables and
        the start/end offsets its progress is measured against."""
        traits: dict[str, Any] = {"startedMs": now_ms()}
        if row.generation > 0 or row.traits.get("prepared"):
            return traits
        job = load_job(spec, row.name)
        start = spec.start_from
        if start is not None and start.savepoint is not None:
            savepoint = self.plane.usable_savepoint(start.savepoint, row.environment)
            self.plane.state.forget(row.runtime_name)
            self.plane.state.save_checkpoint(
                row.runtime_name, inherited_offsets(job, savepoint), savepoint.schemas
            )
        if spec.rebuild_tables:
            drop_tables(job, spec.rebuild_tables, row.runtime_name)
        if spec.bounded is not None:
            starts, ends = offset_range(job, spec, self.plane.state.latest_checkpoint(row.runtime_name))
            traits["startOffsets"] = encode_offsets(starts)
            traits["endOffsets"] = encode_offsets(ends)
        traits["prepared"] = True
        return traits

    def _running(self, row: PipelineRow) -> None:
        key = (row.environment, row.name)
        if row.prepared != row.generation:
            return
        child = self.children.get(key)
        if child is not None and child.generation != row.generation:
            self._kill(key)
            child = None
        if child is None:
            if time.monotonic() >= self._restart_at.get(key, 0.0):
                self._spawn(row)
            return
        code = child.exit_code()
        if code is None:
            self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.RUNNING)
            self._note_reading(row)
            self._savepoints(row)
            self._sample(row)
            return
        self._reap(key)
        self._sample(row, final=True)  # the lag the run ended with, as its status last said it
        if code == 0:
            self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.FINISHED, code)
            self._finish_if_done(row)
        elif code < 0:
            log.warning("pipeline %s: its process was killed (signal %d); restarting it", row.name, -code)
            self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.KILLED, code)
            self._restart_at[key] = time.monotonic() + RESTART_BACKOFF_S
        else:
            self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.FAILED, code)
            log.error(
                "pipeline %s/%s: its process failed; its log is %s", row.environment, row.name, child.log_file
            )
            self._fail(row, f"worker {self.worker}: {self._runner_detail(row, child, code)}")

    def _stopping(self, row: PipelineRow) -> None:
        key = (row.environment, row.name)
        spec = PipelineSpec.model_validate(row.spec)
        child = self.children.get(key)
        if child is not None:
            if child.exit_code() is None:
                graceful = spec.upgrade_mode == "savepoint"
                if graceful and not child.signalled and not self._may_stop_gracefully(row, child):
                    self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.RUNNING)
                    detail = "stopping: waiting for the process to start reading before stopping it"
                    if row.detail != detail:
                        self.store.update_pipeline(row, expect_phase=Phase.STOPPING, detail=detail)
                    return
                if not child.signalled:
                    child.process.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
                    child.signalled = True
                    # its final checkpoint may wait under the retry policy; then it is killed
                    final_s = job_of(row).pipeline.restart_strategy.timeout.total_seconds()
                    child.kill_at = time.monotonic() + final_s + STOP_GRACE_S
                elif child.kill_at is not None and time.monotonic() >= child.kill_at:
                    log.error("pipeline %s: its process did not stop in time: killing it", row.name)
                    child.process.kill()
                    child.kill_at = None
                self.store.heartbeat(row, self.worker, child.process.pid, InstanceState.RUNNING)
                return
            code = child.exit_code()
            self._reap(key)
            state = InstanceState.STOPPED if code == 0 else InstanceState.FAILED
            self.store.heartbeat(row, self.worker, child.process.pid, state, code)
            if code != 0 and spec.upgrade_mode == "savepoint":
                log.error(
                    "pipeline %s/%s: its process failed while stopping; its log is %s",
                    row.environment,
                    row.name,
                    child.log_file,
                )
                self._fail_savepoint(
                    row, f"worker {self.worker}: {self._runner_detail(row, child, code or 0)}"
                )
        at = now_ms()
        instances = [
            i for i in self.store.instances(row.environment, row.name) if i.generation == row.generation
        ]
        if any(i.alive(at) for i in instances):
            return
        self.plane.supersede_scheduled(row, "the stop's savepoint")
        pending = [
            s for s in self.store.savepoints(row.environment, row.name) if s.state == SavepointState.PENDING
        ]
        upgrade = next((s for s in pending if s.source == SavepointSource.UPGRADE), None)
        if upgrade is None:
            detail = (
                "stopped without a savepoint (spec.upgradeMode stateless)"
                if spec.upgrade_mode == "stateless"
                else self._last_failure(row)
            )
            phase = Phase.STOPPED if spec.upgrade_mode == "stateless" else Phase.FAILED
            self.store.update_pipeline(row, expect_phase=Phase.STOPPING, phase=phase, detail=detail)
            return
        if self._complete(row, upgrade):
            self.store.update_pipeline(
                row,
                expect_phase=Phase.STOPPING,
                phase=Phase.STOPPED,
                detail=f"stopped with savepoint {upgrade.uid}",
            )

    def _not_running(self, row: PipelineRow) -> None:
        key = (row.environment, row.name)
        if key in self.children:
            self._kill(key)
        if row.phase == Phase.DELETED:
            self.store.forget_instances(row.environment, row.name)

    # ------------------------------------------------------------------------------ reading

    def _note_reading(self, row: PipelineRow) -> None:
        """Record when this start's runner first reported partitions assigned to it: from then on
        it reads (``status.readingSince``)."""
        if reading_since(row) is not None:
            return
        status = self.plane.state.get_status(row.runtime_name)
        if status is not None and runner_reads(row, status):
            self.store.update_pipeline(
                row, traits={**row.traits, "readingSinceMs": int(status["updated_ms"])}
            )

    def _may_stop_gracefully(self, row: PipelineRow, child: Child) -> bool:
        """Whether SIGTERM now ends the process with a final checkpoint: once its runner reads (it
        handles the signal by then), or when it does not start reading within :data:`START_GRACE_S`.
        Before that, the signal would kill it (exit by signal 15) and the stop would fail."""
        if time.monotonic() - child.started >= START_GRACE_S:
            return True
        status = self.plane.state.get_status(row.runtime_name)
        return status is not None and runner_reads(row, status)

    # ------------------------------------------------------------------------------ samples

    def _sample(self, row: PipelineRow, *, final: bool = False) -> None:
        """Record the pipeline's lag, throughput and barrier time every :data:`SAMPLE_INTERVAL_MS`,
        as soon as its schema changes grew (so each barrier's time is told apart), and when its
        process ended (``final``: the lag it failed or stopped with ends the chart)."""
        key = (row.environment, row.name)
        status = self.plane.state.get_status(row.runtime_name)
        if status is None:
            return
        sample = sample_of(status["metrics"], int(status["updated_ms"]))
        last = self._sampled.get(key)
        if last is not None:
            recent = sample.at_ms - last.at_ms < SAMPLE_INTERVAL_MS and not final
            if sample.at_ms <= last.at_ms or (recent and sample.schema_changes == last.schema_changes):
                return
        self._sampled[key] = sample
        self.store.add_sample(row.environment, row.name, sample)

    # ------------------------------------------------------------------------------ savepoints

    def _savepoints(self, row: PipelineRow) -> None:
        """Complete MANUAL/SCHEDULE savepoints and request scheduled ones (one worker wins each)."""
        spec = PipelineSpec.model_validate(row.spec)
        interval = spec.interval()
        at = now_ms()
        in_flight = any(
            s.state == SavepointState.PENDING for s in self.store.savepoints(row.environment, row.name)
        )
        if interval is not None and spec.upgrade_mode == "savepoint" and not in_flight:
            # at most one savepoint in flight: the next one is due an interval after the claim
            last = row.last_scheduled_ms or row.traits.get("startedMs", row.updated_ms)
            if at - last >= interval.total_seconds() * 1000 and self.store.claim_schedule(
                row, row.last_scheduled_ms, at
            ):
                self.store.insert_savepoint(row.environment, row.name, SavepointSource.SCHEDULE)
        for savepoint in self.store.savepoints(row.environment, row.name):
            if savepoint.state != SavepointState.PENDING or savepoint.source == SavepointSource.UPGRADE:
                continue
            checkpoint = self.plane.state.latest_checkpoint(row.runtime_name)
            if checkpoint is not None and checkpoint.created_ms > savepoint.requested_ms:
                self._complete(row, savepoint)
            elif at - savepoint.requested_ms > SAVEPOINT_TIMEOUT_MS:
                self.store.finish_savepoint(
                    savepoint.uid,
                    SavepointState.FAILED,
                    reason=f"no checkpoint within {SAVEPOINT_TIMEOUT_MS // 1000} s of the request",
                )

    def _complete(self, row: PipelineRow, savepoint: SavepointRow) -> bool:
        """Complete a savepoint from the pipeline's checkpoint; False when it failed or another
        worker finished it first."""
        checkpoint = self.plane.state.latest_checkpoint(row.runtime_name)
        if checkpoint is None:
            self.store.finish_savepoint(
                savepoint.uid,
                SavepointState.FAILED,
                reason="the pipeline has no checkpoint yet: nothing to record",
            )
            return False
        sink_type = job_of(row).sink.type
        return self.store.finish_savepoint(
            savepoint.uid,
            SavepointState.COMPLETED,
            offsets=encode_offsets(checkpoint.offsets),
            schemas=checkpoint.schemas,
            sink_commit={
                "sink": sink_type,
                "checkpointId": checkpoint.id,
                "checkpointTimestamp": iso(checkpoint.created_ms),
            },
        )

    def _fail_savepoint(self, row: PipelineRow, reason: str) -> None:
        for savepoint in self.store.savepoints(row.environment, row.name):
            if savepoint.state == SavepointState.PENDING and savepoint.source == SavepointSource.UPGRADE:
                self.store.finish_savepoint(savepoint.uid, SavepointState.FAILED, reason=reason)
                self.store.update_pipeline(
                    row, traits={**row.traits, "lastFailure": f"savepoint {savepoint.uid} failed: {reason}"}
                )

    def _last_failure(self, row: PipelineRow) -> str:
        fresh = self.store.pipeline(row.environment, row.name)
        failure = (fresh or row).traits.get("lastFailure", "the stop savepoint failed")
        return f"stopped without a completed savepoint: {failure}"

    def _finish_if_done(self, row: PipelineRow) -> None:
        """A bounded read ended on this worker; the pipeline stops when it ended everywhere."""
        at = now_ms()
        instances = [
            i for i in self.store.instances(row.environment, row.name) if i.generation == row.generation
        ]
        if any(i.alive(at) for i in instances):
            return
        savepoint = None
        if PipelineSpec.model_validate(row.spec).upgrade_mode == "savepoint":
            # recorded before the phase changes, so that nobody sees it COMPLETED without one
            savepoint = self.store.insert_savepoint(row.environment, row.name, SavepointSource.UPGRADE)
        if not self.store.update_pipeline(
            row,
            expect_phase=Phase.RUNNING,
            phase=Phase.COMPLETED,
            detail="finished: the bounded read reached its end",
        ):
            if savepoint is not None:  # another worker finished it
                self.store.delete_savepoints([savepoint.uid])
            return
        if savepoint is not None:
            self._complete(row, savepoint)

    # ------------------------------------------------------------------------------ processes

    def _spawn(self, row: PipelineRow) -> None:
        key = (row.environment, row.name)
        try:
            folder = within(self.data_dir, row.environment, row.name)
        except ValueError as e:  # a name the API would refuse, written to the store some other way
            self._fail(row, f"cannot start: {e}")
            return
        folder.mkdir(parents=True, exist_ok=True)
        job_file = folder / f"job-{row.generation}.yaml"
        write_private(job_file, child_job_text(row, self.plane.settings.state_url))
        log_file = folder / f"{self.worker}-{row.generation}.log"
        handle = log_file.open("a", encoding="utf-8")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ferry.cli.main",
                "--log-level",
                "INFO",
                "run",
                "--worker-id",
                self.worker,
                str(job_file),
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=parent_death_hook(signal.SIGKILL),  # noqa: PLW1509 - set before exec, nothing else
        )
        self.children[key] = Child(process, row.generation, log_file, handle)
        self.store.heartbeat(row, self.worker, process.pid, InstanceState.RUNNING)
        log.info(
            "pipeline %s/%s generation %d: started pid %d",
            row.environment,
            row.name,
            row.generation,
            process.pid,
        )

    def _kill(self, key: tuple[str, str]) -> None:
        child = self.children.get(key)
        if child is None:
            return
        if child.exit_code() is None:
            child.process.kill()
            self._wait(child, 10)
        self._reap(key)

    def _reap(self, key: tuple[str, str]) -> None:
        child = self.children.pop(key, None)
        if child is not None:
            child.log_handle.close()

    @staticmethod
    def _wait(child: Child, timeout: float) -> None:
        try:
            child.process.wait(timeout)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait(10)

    def _runner_detail(self, row: PipelineRow, child: Child, code: int) -> str:
        status = self.plane.state.get_status(row.runtime_name)
        what = f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"
        detail = (
            status["detail"]
            if status is not None and status["phase"] == Phase.FAILED
            else _tail(child.log_file)
        )
        return f"the pipeline process {what}: {detail}"

    def _fail(self, row: PipelineRow, reason: str) -> None:
        log.error("pipeline %s/%s failed: %s", row.environment, row.name, reason)
        self.store.update_pipeline(row, phase=Phase.FAILED, detail=reason, deadline_ms=None)

    def _fresh(self, row: PipelineRow) -> PipelineRow:
        fresh = self.store.pipeline(row.environment, row.name)
        assert fresh is not None
        return fresh


def child_job_text(row: PipelineRow, state_url: str) -> str:
    """The job file a pipeline's process runs: the user's job with the pipeline's runtime name, the
    shared state store, and a replay's start and end."""
    spec = PipelineSpec.model_validate(row.spec)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    data = yaml.load(spec.job)
    pipeline = data.setdefault("pipeline", {}) or {}
    data["pipeline"] = pipeline
    pipeline["name"] = row.runtime_name
    pipeline["state.url"] = absolute_state_url(state_url)
    pipeline.pop("status.port", None)
    source = data["source"]
    start = spec.start_from
    if start is not None and start.savepoint is None:
        for key in ("scan.startup.timestamp-millis", "scan.startup.specific-offsets"):
            source.pop(key, None)
        source.pop("tables", None)
        if start.timestamp_millis is not None:
            source["scan.startup.mode"] = "timestamp"
            source["scan.startup.timestamp-millis"] = start.timestamp_millis
        else:
            assert start.offsets is not None
            source["tables"] = [
                {
                    "topic": topic,
                    "scan.startup.mode": "specific-offsets",
                    "scan.startup.specific-offsets": format_specific_offsets(offsets),
                }
                for topic, offsets in start.offsets.items()
            ]
    if spec.bounded is not None:
        source["scan.bounded.mode"] = spec.bounded.mode
        if spec.bounded.timestamp_millis is not None:
            source["scan.bounded.timestamp-millis"] = spec.bounded.timestamp_millis
        if spec.bounded.offsets is not None:
            source["scan.bounded.specific-offsets"] = format_specific_offsets(spec.bounded.offsets)
    out = StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def absolute_state_url(url: str) -> str:
    """A relative SQLite path made absolute, so every process means the same file."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and ":memory:" not in url:
        return prefix + str(Path(url.removeprefix(prefix)).absolute())
    return url


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "no log"


def job_of(row: PipelineRow) -> JobConfig:
    return load_job(PipelineSpec.model_validate(row.spec), row.name)


def sample_of(metrics: Mapping[str, Any], at_ms: int) -> Sample:
    """A sample of a runner's status metrics."""
    lag = metrics.get("lag") or {}
    return Sample(
        at_ms=at_ms,
        lag_records=sum(int(n) for parts in lag.values() for n in parts.values()),
        throughput_eps=float(metrics.get("throughput_eps") or 0.0),
        rows_written=sum(int(n) for n in (metrics.get("rows_written") or {}).values()),
        schema_changes=int(metrics.get("schema_changes") or 0),
        barrier_ms=int(metrics.get("schema_change_wait_ms") or 0),
    )
