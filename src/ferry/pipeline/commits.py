"""Checkpoints, and their commits beside the reading of the next batches.

A checkpoint has two parts, always in this order:

1. on the thread that polls and decodes (the *consume thread*): the commit in flight, if any, is
   waited for; the offsets read so far and the schemas to save are copied; the rows buffered
   since the last checkpoint are shaped and handed to the sink (:meth:`Sink.write`);
2. its *commit* (:class:`CheckpointCommit`), three steps: the sink flushes (Iceberg, Paimon: data
   files and one snapshot per table, the offsets in it), the dead-letter records are flushed, the
   offsets and schemas are saved in the state store. Then, on the consume thread again, the
   offsets are committed to the source (Kafka consumer group) and the counters updated.

With ``checkpoint.concurrent`` (the default) a commit runs on a thread of its own
(:class:`CommitThread`) while the consume thread reads and decodes the next batches: one commit in
flight at most; the next checkpoint, when due, starts once it is done, and rows reaching
``flush_rows`` wait for it. Otherwise the commit runs where the checkpoint starts
(:class:`InlineCommits`), as one call.

Threading: nothing is shared between the two threads but what is handed over.

- A commit's thread touches only the sink's :meth:`~Sink.flush`, the dead-letter destination
  (through :class:`SerialDeadLetter`: its sends and flushes take one lock), the state store (an
  SQLAlchemy engine: each call checks out a connection of its own from the pool, so SQLite's
  connections never cross threads) and the copies made for it. It never touches the runner's
  buffers, the schema tracker, the status or the metrics: what its retries would show in the
  status is queued (:attr:`CheckpointCommit.details`) and shown by the consume thread.
- The consume thread touches the sink only once no commit is in flight: at a checkpoint's start,
  and in whatever reads or changes the sink's tables — the schema operator's reads of a sink
  schema and every change it applies (so a barrier, a change applied in place, ``ensure_sink_table``
  and a truncate's planning), the offsets committed to a table first seen, a partition hand-over
  (assigned, revoked, lost: ``drop_rows``), the schemas saved after a change, the end of a run and
  ``close``. Each waits for the commit in flight first (:meth:`Commits.wait`).
- A commit's error is raised on the consume thread, by the next step or wait, as the checkpoint
  would have raised it (a :class:`~ferry.exceptions.FerryError` as it is, any other error as a
  :class:`~ferry.pipeline.exceptions.CheckpointError`): the run fails with it.

The offsets a commit saves are those read before its checkpoint started; rows read after it are in
the next one. So a kill at any point leaves the state store's offsets at or behind what the sink
committed, as when a checkpoint ran in one call.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

from ferry.connectors.base import DeadLetter, Source
from ferry.exceptions import FerryError
from ferry.model.schema import TableId
from ferry.offsets import Offsets
from ferry.pipeline.checkpoints import CheckpointStore, now_ms
from ferry.pipeline.exceptions import CheckpointError
from ferry.pipeline.metrics import Metrics
from ferry.pipeline.settings import RunnerSettings
from ferry.pipeline.status import RunnerStatus
from ferry.retry import Operation, RetryWait
from ferry.sinks.base import Sink, TableFlushing

#: The kinds of the calls checkpoints retry (the label of the retry metrics).
SINK_FLUSH, DEAD_LETTER_WRITE = Operation.SINK_FLUSH, Operation.DEAD_LETTER_WRITE
CHECKPOINT_SAVE, CHECKPOINT_READ = Operation.CHECKPOINT_SAVE, Operation.CHECKPOINT_READ

if TYPE_CHECKING:
    from ferry.pipeline.partitions import PartitionOffsets
    from ferry.pipeline.schema_operator import SchemaOperator

log = logging.getLogger(__name__)

#: One step of a commit: a call that may fail.
Step = Callable[[], object]


def checkpoint_error(error: Exception) -> FerryError:
    """A checkpoint's error as the run fails with it: ferry's own as it is, any other wrapped."""
    if isinstance(error, FerryError):
        return error
    wrapped = CheckpointError(f"checkpoint failed: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


class CheckpointCommit:
    """One checkpoint's commit: its steps, in order, and what they leave for the consume thread."""

    def __init__(
        self, offsets: Offsets, schemas: Mapping[str, Any], written: dict[str, int], started: float
    ) -> None:
        self.offsets = offsets
        self.schemas = schemas
        #: Rows handed to the sink, per sink table.
        self.written = written
        #: When the checkpoint started, and when its commit ended (``time.monotonic()``).
        self.started = started
        self.ended: float | None = None
        #: The event time of the newest change read before the checkpoint started.
        self.newest_event_ms: int | None = None
        #: Whether a schema change's barrier took it (with the schemas from before the change).
        self.barrier = False
        self.error: FerryError | None = None
        #: What the steps' retries say while they wait (``on_wait``); ``None`` once the commit ended.
        self.details: SimpleQueue[RetryWait | None] = SimpleQueue()
        #: Told what a retry waits for: the status itself when the steps run on the consume thread.
        self.on_wait: Callable[[RetryWait], None] = self.details.put
        #: How long each step took, by name, as they ran (seconds).
        self.took: dict[str, float] = {}
        self._steps: deque[tuple[str, Step]] = deque()
        self._lock = threading.Lock()

    def add(self, name: str, step: Step) -> None:
        self._steps.append((name, step))

    @property
    def done(self) -> bool:
        return self.ended is not None

    def run_step(self) -> bool:
        """Take the next step; False once there is none left (every step ran, or one failed)."""
        with self._lock:
            if self.ended is not None:
                return False
            if not self._steps:
                self._end()
                return False
            name, step = self._steps.popleft()
            began = time.monotonic()
            try:
                step()
                self.took[name] = time.monotonic() - began
            except Exception as e:
                self.error = checkpoint_error(e)
                self._steps.clear()
            except BaseException as e:  # the thread is going away: the consume thread must not wait on
                self.error = CheckpointError(f"checkpoint failed: {type(e).__name__}: {e}")
                self._steps.clear()
                self._end()
                raise
            if self._steps:
                return True
            self._end()
            return False

    def run(self) -> None:
        """Every step left."""
        while self.run_step():
            pass

    def _end(self) -> None:
        self.ended = time.monotonic()
        self.details.put(None)


class Background(Protocol):
    """Where commits run."""

    #: Whether a commit runs beside the consume thread (its status details are then queued).
    concurrent: bool

    def start(self, commit: CheckpointCommit) -> None:
        """Start running ``commit``."""
        ...

    def help(self, commit: CheckpointCommit) -> None:
        """The consume thread waits for ``commit``: run what is left of it here, if anything."""
        ...


class CommitThread:
    """Each commit on a thread of its own, beside the consume thread (``checkpoint.concurrent``)."""

    concurrent = True

    def start(self, commit: CheckpointCommit) -> None:
        # a daemon: a process that ends without closing its runner ends as a kill would
        threading.Thread(target=commit.run, name="ferry-checkpoint-commit", daemon=True).start()

    def help(self, commit: CheckpointCommit) -> None:
        return None


class InlineCommits:
    """Each commit where its checkpoint starts, in the same call."""

    concurrent = False

    def start(self, commit: CheckpointCommit) -> None:
        commit.run()

    def help(self, commit: CheckpointCommit) -> None:
        commit.run()


class SteppedCommits:
    """A commit runs only as far as the caller takes its steps (:meth:`step`); a wait for it takes
    the rest. For deterministic tests of what happens while a commit is in flight."""

    concurrent = False

    def __init__(self) -> None:
        self.commit: CheckpointCommit | None = None

    def start(self, commit: CheckpointCommit) -> None:
        self.commit = commit

    def help(self, commit: CheckpointCommit) -> None:
        commit.run()

    def step(self) -> bool:
        """The next step of the commit in flight; False when there was none."""
        commit = self.commit
        if commit is None or commit.done:
            return False
        commit.run_step()
        return True

    @property
    def in_flight(self) -> bool:
        """A commit started and not ended."""
        return self.commit is not None and not self.commit.done


class Commits:
    """The commit in flight, seen from the consume thread: at most one at a time."""

    def __init__(self, background: Background, on_wait: Callable[[RetryWait], None]) -> None:
        self.background = background
        self.on_wait = on_wait
        self.in_flight: CheckpointCommit | None = None
        self._finish: Callable[[CheckpointCommit], None] = lambda commit: None

    def start(self, commit: CheckpointCommit, finish: Callable[[CheckpointCommit], None]) -> None:
        """Run ``commit``; ``finish(commit)`` on the consume thread once it succeeded."""
        assert self.in_flight is None, "one commit in flight at most"
        if not self.background.concurrent:
            commit.on_wait = self.on_wait
        self.in_flight, self._finish = commit, finish
        self.background.start(commit)
        self.poll()

    def poll(self) -> bool:
        """Show what the commit in flight waits for; finish it when it is done (raising its error).
        True when no commit is in flight now."""
        commit = self.in_flight
        if commit is None:
            return True
        while True:
            try:
                detail = commit.details.get_nowait()
            except Empty:
                return False
            if detail is None:
                self._finished(commit)
                return True
            self.on_wait(detail)

    def wait(self) -> None:
        """Until no commit is in flight (showing what it waits for meanwhile); its error raised."""
        commit = self.in_flight
        if commit is None:
            return
        self.background.help(commit)
        while (detail := commit.details.get()) is not None:
            self.on_wait(detail)
        self._finished(commit)

    def close(self) -> None:
        """The commit in flight waited for, its error logged (the run is ending with its own)."""
        try:
            self.wait()
        except Exception:
            log.exception("the checkpoint in flight failed while the pipeline stopped")

    def _finished(self, commit: CheckpointCommit) -> None:
        self.in_flight = None
        if commit.error is not None:
            raise commit.error
        self._finish(commit)


class SerialDeadLetter:
    """A dead-letter destination whose sends (consume thread) and flushes (a commit) take turns: a
    flush stores every record sent before it, and none is sent while it runs."""

    def __init__(self, dead_letter: DeadLetter) -> None:
        self.dead_letter = dead_letter
        self._lock = threading.Lock()

    def send(
        self, *, reason: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> None:
        with self._lock:
            self.dead_letter.send(
                reason=reason, topic=topic, partition=partition, offset=offset, key=key, value=value
            )

    def flush(self) -> None:
        with self._lock:
            self.dead_letter.flush()

    def close(self) -> None:
        with self._lock:
            self.dead_letter.close()


class Checkpoints:
    """A runner's checkpoints, in the order of the module documentation."""

    def __init__(
        self,
        *,
        settings: RunnerSettings,
        source: Source,
        sink: Sink,
        dead_letter: SerialDeadLetter,
        state: CheckpointStore,
        schemas: SchemaOperator,
        partitions: PartitionOffsets,
        metrics: Metrics,
        status: RunnerStatus,
        background: Background | None = None,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        #: Counts on the consume thread what a commit did beside (rows the sink refused).
        self.settle = settle
        self.sink = sink
        self.dead_letter = dead_letter
        self.state = state
        self.schemas = schemas
        self.partitions = partitions
        self.metrics = metrics
        self.status = status
        if background is None:
            background = CommitThread() if settings.concurrent_checkpoints else InlineCommits()
        self.commits = Commits(background, status.waiting)
        #: The offsets of the last checkpoint saved.
        self.checkpointed: Offsets = {}
        #: When the last checkpoint started (commits beside the reading) or ended (``time.monotonic()``).
        self.last = time.monotonic()

    def due(self, now: float, buffered: int) -> bool:
        """Whether a checkpoint starts now: rows up to ``flush_rows`` (after the commit in flight),
        or ``checkpoint.interval`` since the last one once no commit is in flight."""
        if buffered >= self.settings.flush_rows:
            return True
        return now - self.last >= self.settings.checkpoint_interval_s and self.commits.poll()

    def wait(self) -> None:
        """Until no commit is in flight; its error raised (see the module documentation)."""
        self.commits.wait()

    def take(self, write: Callable[[], dict[str, int]], schemas: Mapping[str, Any] | None = None) -> None:
        """Start a checkpoint: ``write()`` hands the buffered rows to the sink (rows per sink table);
        ``schemas`` are saved instead of the tracker's (a barrier's, from before its change)."""
        self.commits.wait()
        started = time.monotonic()
        offsets = dict(self.partitions.offsets)
        try:
            written = write()
            # a copy: the commit's thread serialises it while the tracker moves on
            saved = copy.deepcopy(dict(schemas) if schemas is not None else self.schemas.snapshot())
        except FerryError:
            raise
        except Exception as e:
            raise checkpoint_error(e) from e
        commit = CheckpointCommit(offsets, saved, written, started)
        commit.barrier = schemas is not None
        commit.newest_event_ms = self.metrics.timings.newest_event_ms
        retries, name, state = self.settings.retries, self.settings.name, self.state

        def on_wait(detail: RetryWait) -> None:
            commit.on_wait(detail)

        def flush_sink() -> None:
            retries.call(
                lambda: self.sink.flush(offsets), "flushing the sink", operation=SINK_FLUSH, on_wait=on_wait
            )

        def flush_dead_letters() -> None:
            retries.call(
                self.dead_letter.flush,
                "storing the dead letters",
                operation=DEAD_LETTER_WRITE,
                on_wait=on_wait,
            )

        def save() -> None:
            retries.call(
                lambda: state.save_checkpoint(name, offsets, saved),
                "saving the checkpoint",
                operation=CHECKPOINT_SAVE,
                on_wait=on_wait,
                transient=state.is_transient,
            )

        commit.add("sink flush", flush_sink)  # the order of the module documentation
        commit.add("dead letters", flush_dead_letters)
        commit.add("state store", save)
        if self.commits.background.concurrent:
            self.last = started
        self.commits.start(commit, self._finish)

    def _finish(self, commit: CheckpointCommit) -> None:
        """On the consume thread, once the commit saved the checkpoint."""
        try:
            self.source.commit(commit.offsets)
        except FerryError:
            raise
        except Exception as e:
            raise checkpoint_error(e) from e
        self.checkpointed = commit.offsets
        self.schemas.saved = commit.schemas
        if self.settle is not None:
            self.settle()
        self.status.waited()
        metrics = self.metrics
        for table, count in commit.written.items():
            metrics.rows_written[table] = metrics.rows_written.get(table, 0) + count
        metrics.checkpoints += 1
        metrics.rows_skipped_committed = self.partitions.rows_skipped
        metrics.last_checkpoint_ms = now_ms()
        metrics.timings.committing_event_ms = commit.newest_event_ms
        ended = commit.ended if commit.ended is not None else time.monotonic()
        metrics.last_checkpoint_duration_ms = int((ended - commit.started) * 1000)
        metrics.checkpointed(
            metrics.last_checkpoint_ms,
            metrics.last_checkpoint_duration_ms,
            sum(commit.written.values()),
            barrier=commit.barrier,
        )
        log.debug(
            "checkpoint %d: %.3f s (%s)",
            metrics.checkpoints,
            ended - commit.started,
            ", ".join(f"{name} {took:.3f} s" for name, took in commit.took.items()),
        )
        if not self.commits.background.concurrent:
            self.last = time.monotonic()

    def commit_tables(
        self, sink_tables: Collection[TableId], offsets: Offsets, written: dict[str, int]
    ) -> None:
        """A barrier's commit of some sink tables alone, on the consume thread (no commit in flight):
        the dead letters sent so far stored, then the tables' rows (``written`` per table) committed
        with ``offsets``. Nothing is saved in the state store: a restart skips these rows by offset."""
        sink = self.sink
        assert isinstance(sink, TableFlushing)
        self.commits.wait()
        retries, on_wait = self.settings.retries, self.status.waiting
        # first: a row of these tables sent to the dead letter is not read again after a restart
        retries.call(
            self.dead_letter.flush, "storing the dead letters", operation=DEAD_LETTER_WRITE, on_wait=on_wait
        )
        retries.call(
            lambda: sink.flush_tables(sink_tables, offsets),
            "flushing the sink",
            operation=SINK_FLUSH,
            on_wait=on_wait,
        )
        if self.settle is not None:
            self.settle()
        self.status.waited()
        for table, count in written.items():
            self.metrics.rows_written[table] = self.metrics.rows_written.get(table, 0) + count

    def save_schemas(self, schemas: Mapping[str, Any]) -> None:
        """Save ``schemas`` beside the last checkpoint's offsets (after the commit in flight). The
        schemas of the partitions this worker reads are its own, checkpointed in this run yet or not
        (not those another run saved: a rename it applied would come back with them)."""
        self.commits.wait()
        partitions = {p for _, p in self.checkpointed} | {p for _, p in self.partitions.offsets}
        self.settings.retries.call(
            lambda: self.state.save_checkpoint(
                self.settings.name, self.checkpointed, schemas, partitions=partitions
            ),
            "saving the schemas",
            operation=CHECKPOINT_SAVE,
            on_wait=self.status.waiting,
            transient=self.state.is_transient,
        )
        self.schemas.saved = schemas
