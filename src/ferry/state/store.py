"""The state store: checkpoints, source schemas and pipeline status, kept with SQLAlchemy (the
:class:`~ferry.pipeline.checkpoints.CheckpointStore` the runners write to).

SQLite by default (one file), PostgreSQL for deployments: any SQLAlchemy URL. A checkpoint row
holds the offsets (per topic and partition, the next offset to read) and the tracked source
schemas; the status row holds what ``ferry status`` shows (phase, detail, counters, lag) and the
schema-change history has one row per change seen.

Several workers run one pipeline, each reading some of its partitions. A worker's checkpoint
names only the partitions it reads; it is merged into the pipeline's latest one (offsets replaced
per partition, schemas merged per table by :func:`merge_schemas`), so that the latest checkpoint
always holds every partition's offset. Writers of one pipeline's state are serialised: SQLite
transactions that write start with ``BEGIN IMMEDIATE``, other databases lock the pipeline's row
of ``ferry_locks`` (``SELECT ... FOR UPDATE``). Leases (:meth:`StateStore.lease`) let one worker
at a time do what must happen once, such as applying a schema change at the sink.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import create_engine, delete, event, insert, inspect, make_url, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, InterfaceError, OperationalError

from ferry.exceptions import TransientError
from ferry.model.schema import TableId
from ferry.offsets import decode_offsets, encode_offsets
from ferry.pipeline.checkpoints import Checkpoint, SchemaHistoryEntry, now_ms
from ferry.pipeline.tracker import SchemaTracker, TrackedTable
from ferry.state.exceptions import StateStoreError
from ferry.state.tables import WRITER, checkpoints, create_tables, leases, locks, schema_history, status

KEEP_CHECKPOINTS = 10
#: A worker not heard from for this long leaves the status's list of workers.
WORKER_FORGOTTEN_AFTER_MS = 10 * 60 * 1000


def merge_schemas(
    stored: Mapping[str, Any], written: Mapping[str, Any], partitions: Collection[int]
) -> dict[str, Any]:
    """The tracked schemas once a worker reading ``partitions`` saved ``written`` over ``stored``.

    Per table, each partition's last schema comes from the worker that reads it: ``written`` for
    ``partitions`` and for partitions ``stored`` does not know, ``stored`` for the others. The
    table's schema is the merge of its partitions' (the columns any of them has, types widened, as
    :class:`~ferry.pipeline.tracker.SchemaTracker` merges them), ordered as on the side that
    changed the table last, whose version and history are kept. A table only one side tracks is
    kept as it is. Schemas not in the tracker's form are not merged: ``written`` replaces them.

    Only the tables both sides hold, differently, are read and merged: a worker's save over its
    own last one costs what changed since, not what every table holds.
    """
    stored_tables, written_tables = stored.get("tables"), written.get("tables") or {}
    if not stored_tables or stored_tables == written_tables:
        return dict(written)
    try:
        differing = {n for n, t in written_tables.items() if stored_tables.get(n, t) != t}
        merged = SchemaTracker.restore({**stored, "tables": {n: stored_tables[n] for n in differing}})
        mine = SchemaTracker.restore({**written, "tables": {n: written_tables[n] for n in differing}})
        tracked_by_writer = [TableId.parse(n) for n in written_tables]
    except (KeyError, TypeError, ValueError, AttributeError):
        return dict(written)
    for table_id, renames in mine.pending_renames.items():
        merged.pending_renames[table_id] = renames  # the writer's, for tables it does not track yet too
    for table_id in tracked_by_writer:
        merged.pending_renames[table_id] = mine.pending_renames.get(table_id, [])
    for table_id, ours in mine.tables.items():
        theirs = merged.tables[table_id]
        # the stored schemas of partitions another worker reads (or this one has not seen yet)
        kept = {
            p: s
            for p, s in theirs.partitions.items()
            if (p not in partitions or p not in ours.partitions) and ours.partitions.get(p) != s
        }
        if not kept:  # nothing the writer does not know already (one worker reads everything)
            merged.tables[table_id] = ours
            continue
        parts = {**ours.partitions, **kept}
        newer = ours if _changed_ms(ours) >= _changed_ms(theirs) else theirs
        schema = SchemaTracker._merge(newer.schema, parts.values(), newer.schema) if parts else newer.schema
        merged.tables[table_id] = TrackedTable(
            schema,
            newer.version,
            parts,
            newer.history,
            ours.aliases,
            ours.pending,
            ours.topics | theirs.topics,
            {**theirs.renamed, **ours.renamed},
            {**theirs.by_position, **ours.by_position},
            theirs.unproved | ours.unproved,
        )
    out = merged.snapshot()
    # a table one side holds alone, or both alike, is kept as it was written
    out["tables"] = {**stored_tables, **written_tables, **out["tables"]}
    for key in set(written) - {"tables", "pending_renames"}:
        out[key] = written[key]  # the writer's position in the schema-change topic, with its hints
    return out


def _changed_ms(table: TrackedTable) -> int:
    return table.history[-1].at_ms if table.history else 0


def _serialise_sqlite_writers(engine: Engine) -> None:
    """SQLAlchemy, not the driver, begins SQLite transactions, and those that write begin with
    ``BEGIN IMMEDIATE``: two workers that read the latest checkpoint and then write the merged one
    never interleave, and a writer waits (``timeout``) instead of failing on a lock upgrade."""

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITER) else "BEGIN")


#: What a database error says when retrying cannot help, although the driver calls it operational.
_PERMANENT_MARKERS = (
    "authentication failed",
    "permission denied",
    "readonly database",
    "read-only",
    "does not exist",
    "no such table",
)


def masked_url(url: str) -> str:
    """``url`` with its password hidden (``postgresql://ferry:***@db/ferry``)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "an URL that is not one" if "@" in url else url


def open_error(url: str, error: BaseException, key: str = "pipeline.state.url") -> StateStoreError:
    """Why the state store at ``url`` cannot be opened, in one line that names ``key`` (masked) and
    what to change."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    reason = " ".join(str(cause).split()) or type(cause).__name__
    lower = reason.lower()
    if "authentication failed" in lower or "password" in lower or "access denied" in lower:
        advice = f"correct the user name and password in {key}"
    elif "does not exist" in lower or "unknown database" in lower:
        advice = f"create that database, or correct {key}"
    elif "permission denied" in lower or "readonly" in lower or "read-only" in lower:
        advice = f"give the user of {key} the right to create and write tables, or use another database"
    elif isinstance(error, DBAPIError):
        advice = f"check that the database of {key} runs and can be reached from here"
    else:
        advice = (
            f"write an SQLAlchemy URL in {key} (sqlite:///path/state.db, postgresql://user:password@host/db)"
        )
    return StateStoreError(f"cannot open the state store {masked_url(url)} ({key}): {reason}; {advice}")


def _create_private(database: Path) -> None:
    """An SQLite database file made, empty, readable by its owner only (mode 0600; SQLite gives its
    journal and WAL files the database's mode): it holds the jobs of the control plane, and with
    them any secret written inline."""
    database.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class StateStore:
    """Checkpoints, status and schema history of pipelines, in one SQL database.

    ``create`` (a pipeline, the control plane): the tables are created when missing. Without it (a
    command that only reads, ``ferry status``) nothing is created: a store that is not there is a
    :class:`StateStoreError`, as is a URL that cannot be one, a refused login or a database that
    cannot be reached; ``key`` names where the URL came from in its message."""

    def __init__(self, url: str, *, create: bool = True, key: str = "pipeline.state.url") -> None:
        sqlite_file = url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:")
        path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
        if sqlite_file and create:
            _create_private(path)
        elif sqlite_file and not path.is_file():
            raise StateStoreError(
                f"no state store at {url} ({key}): the file {path} does not exist; correct the path "
                "(this command only reads a state store, it creates none)"
            )
        self.url = url
        self._sqlite = url.startswith("sqlite")
        try:
            self.engine: Engine = create_engine(
                url,
                json_serializer=lambda o: orjson.dumps(o).decode(),
                # a server restarted since a pooled connection was opened: that connection is
                # replaced rather than failing its next statement
                **({"connect_args": {"timeout": 30}} if self._sqlite else {"pool_pre_ping": True}),
            )
        except (ArgumentError, ImportError) as e:
            raise open_error(url, e, key) from None
        if self._sqlite:
            _serialise_sqlite_writers(self.engine)
        try:
            if create:
                create_tables(self.engine)
            elif not inspect(self.engine).has_table(status.name):
                raise StateStoreError(
                    f"no state store at {masked_url(url)} ({key}): the database holds no table "
                    f"{status.name}; correct {key} (this command only reads a state store, it creates none)"
                )
        except DBAPIError as e:
            if create and self.is_transient(e):
                raise  # waited for under the retry policy (see ferry.worker.build_runner)
            self.engine.dispose()
            raise open_error(url, e, key) from None

    @staticmethod
    def is_transient(error: BaseException) -> bool:
        """Whether a state-store error may pass on a later attempt: the database unreachable,
        restarting or busy; not a refused login, a missing permission or a read-only file."""
        if isinstance(error, TransientError):
            return True
        if not isinstance(error, DBAPIError):
            return False
        message = str(error.orig).lower()
        if any(marker in message for marker in _PERMANENT_MARKERS):
            return False
        return error.connection_invalidated or isinstance(error, OperationalError | InterfaceError)

    @contextmanager
    def _serialised(self, pipeline: str) -> Iterator[Connection]:
        """A transaction that no other writer of the pipeline's state runs beside."""
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITER: True})
            with conn.begin():
                if not self._sqlite:
                    self._lock(conn, pipeline)
                yield conn

    @staticmethod
    def _lock(conn: Connection, pipeline: str) -> None:
        query = select(locks.c.pipeline).where(locks.c.pipeline == pipeline).with_for_update()
        if conn.execute(query).first() is not None:
            return
        try:
            with conn.begin_nested():
                conn.execute(insert(locks).values(pipeline=pipeline))
        except IntegrityError:
            conn.execute(query)  # another writer created it first: wait for it

    # -------------------------------------------------------------------------- checkpoints

    def save_checkpoint(
        self,
        pipeline: str,
        offsets: Mapping[tuple[str, int], int],
        schemas: Mapping[str, Any],
        *,
        merge: bool = True,
        partitions: Collection[int] | None = None,
    ) -> int:
        """Record a checkpoint; returns its id.

        With ``merge`` (a worker's checkpoint), the new checkpoint is the latest one with the offsets
        of these partitions replaced and the schemas merged (:func:`merge_schemas`): the offsets of
        partitions another worker reads are kept. Without, it is exactly what is given (a restore).
        ``partitions``: those whose schemas are taken from ``schemas`` (:func:`merge_schemas`), by
        default those of ``offsets``.
        """
        with self._serialised(pipeline) as conn:
            latest = self._latest(conn, pipeline) if merge else None
            if latest is not None:
                if partitions is None:
                    partitions = {p for _, p in offsets}
                schemas = merge_schemas(latest.schemas, schemas, partitions)
                offsets = {**latest.offsets, **offsets}
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
        """The pipeline's latest checkpoint: every partition's offset, whichever worker read it."""
        with self.engine.connect() as conn:
            return self._latest(conn, pipeline)

    @staticmethod
    def _latest(conn: Connection, pipeline: str) -> Checkpoint | None:
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

    def set_status(
        self,
        pipeline: str,
        phase: str,
        detail: str,
        metrics: Mapping[str, Any],
        *,
        worker: str | None = None,
    ) -> None:
        """Record what ``ferry status`` shows. With ``worker``, the status also keeps, under
        ``metrics["workers"]``, what each worker of the pipeline last said: its phase, assigned
        partitions and records read (a worker gone for 10 minutes is dropped)."""
        now = now_ms()
        values: dict[str, Any] = {
            "phase": phase,
            "detail": detail,
            "updated_ms": now,
            "metrics": dict(metrics),
        }
        if worker is None:
            with self.engine.begin() as conn:
                self._write_status(conn, pipeline, values)
            return
        with self._serialised(pipeline) as conn:
            row = conn.execute(select(status.c.metrics).where(status.c.pipeline == pipeline)).first()
            workers = dict((row.metrics or {}).get("workers", {})) if row is not None else {}
            workers = {
                w: s for w, s in workers.items() if now - s.get("updated_ms", 0) < WORKER_FORGOTTEN_AFTER_MS
            }
            workers[worker] = {
                "phase": phase,
                "updated_ms": now,
                "assigned": metrics.get("assigned", {}),
                "records_read": metrics.get("records_read", 0),
                "throughput_eps": metrics.get("throughput_eps", 0.0),
            }
            values["metrics"] = {**values["metrics"], "workers": workers}
            self._write_status(conn, pipeline, values)

    @staticmethod
    def _write_status(conn: Connection, pipeline: str, values: Mapping[str, Any]) -> None:
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
                "barrier_ms": e.barrier_ms,
            }
            for e in entries
        ]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(schema_history), rows)

    def schema_history(self, pipeline: str, sink_table: str | None = None) -> list[SchemaHistoryEntry]:
        query = select(schema_history).where(schema_history.c.pipeline == pipeline)
        if sink_table is not None:
            query = query.where(schema_history.c.sink_table == sink_table)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(schema_history.c.id)).all()
        return [
            SchemaHistoryEntry(
                r.source_table, r.sink_table, r.change, r.outcome, r.reason, r.position, r.at_ms, r.barrier_ms
            )
            for r in rows
        ]

    # -------------------------------------------------------------------------- leases

    def take_lease(self, pipeline: str, name: str, holder: str, ttl_s: float) -> str | None:
        """Take (or renew) lease ``name`` of a pipeline for ``ttl_s`` seconds.

        Returns ``None`` when ``holder`` has it now, else the holder that has it (until it releases
        it or it expires: a worker that died holding a lease holds it for ``ttl_s`` at most).
        """
        now = now_ms()
        key = (leases.c.pipeline == pipeline) & (leases.c.name == name)
        with self._serialised(pipeline) as conn:
            row = conn.execute(select(leases.c.holder, leases.c.expires_ms).where(key)).first()
            if row is not None and row.holder != holder and row.expires_ms > now:
                return str(row.holder)
            values = {"holder": holder, "expires_ms": now + int(ttl_s * 1000)}
            if row is None:
                conn.execute(insert(leases).values(pipeline=pipeline, name=name, **values))
            else:
                conn.execute(update(leases).where(key).values(**values))
        return None

    def release_lease(self, pipeline: str, name: str, holder: str) -> None:
        """Give a lease up (nothing happens when ``holder`` does not have it)."""
        with self.engine.begin() as conn:
            conn.execute(
                delete(leases).where(
                    leases.c.pipeline == pipeline, leases.c.name == name, leases.c.holder == holder
                )
            )

    @contextmanager
    def lease(
        self,
        pipeline: str,
        name: str,
        holder: str,
        *,
        ttl_s: float,
        poll_s: float = 0.1,
        waiting: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        """Hold lease ``name`` for the block, waiting while another holder has it (``waiting`` is
        told who, at each look)."""
        while (other := self.take_lease(pipeline, name, holder, ttl_s)) is not None:
            if waiting is not None:
                waiting(other)
            # waiting for another holder, not a retry of an error: its lease ends by its ttl at the latest
            time.sleep(poll_s)
        try:
            yield
        finally:
            self.release_lease(pipeline, name, holder)

    def forget(self, pipeline: str) -> None:
        """Remove a pipeline's checkpoints, status and schema history (its name is reused)."""
        with self.engine.begin() as conn:
            for table in (checkpoints, status, schema_history):
                conn.execute(delete(table).where(table.c.pipeline == pipeline))

    def close(self) -> None:
        self.engine.dispose()
