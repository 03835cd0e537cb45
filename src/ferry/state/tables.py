"""The tables of ferry's state store, in one database (SQLite by default, PostgreSQL for
deployments: any SQLAlchemy URL).

The runners' tables: checkpoints (offsets and tracked source schemas), status, schema-change
history, leases and the rows writers of one pipeline's state lock. The control plane's tables
beside them: pipelines, savepoints, pipeline instances and samples of a running pipeline's figures.
"""

from __future__ import annotations

import logging

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from ferry.retry import Operation, RetryPolicy
from ferry.state.database import add_missing_columns

metadata = MetaData()


def _pipeline_journal() -> tuple[Column[int], Column[str]]:
    """The key of a table that keeps a pipeline's records in order: a serial id, and the pipeline."""
    return (
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("pipeline", String(200), nullable=False, index=True),
    )


def _environment_pipeline() -> tuple[Column[str], Column[str]]:
    """The first part of the key of a table about a pipeline resource: its environment and name."""
    return (
        Column("environment", String(200), primary_key=True),
        Column("pipeline", String(200), primary_key=True),
    )


checkpoints = Table(
    "ferry_checkpoints",
    metadata,
    *_pipeline_journal(),
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
    *_pipeline_journal(),
    Column("source_table", String(500), nullable=False),
    Column("sink_table", String(500), nullable=False),
    Column("change", Text, nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("reason", Text, nullable=False),
    Column("position", String(500)),
    Column("at_ms", BigInteger, nullable=False),
    Column("barrier_ms", BigInteger),
)

leases = Table(
    "ferry_leases",
    metadata,
    Column("pipeline", String(200), primary_key=True),
    Column("name", String(500), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
)

#: One row per pipeline, locked by the transactions that read and then write its state.
locks = Table("ferry_locks", metadata, Column("pipeline", String(200), primary_key=True))

# ------------------------------------------------------------------------------ the control plane's

pipelines = Table(
    "ferry_pipelines",
    metadata,
    Column("environment", String(200), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("uid", String(40), nullable=False),
    Column("spec", JSON, nullable=False),
    Column("phase", String(20), nullable=False),
    Column("detail", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
    #: Bumped whenever the pipeline is (re)started: instances of an older generation stop.
    Column("generation", Integer, nullable=False, default=0),
    #: The generation whose one-off preparation (seeded offsets, rebuilt tables) is done.
    Column("prepared", Integer, nullable=False, default=-1),
    #: When a pending pipeline gives up waiting for its reference's offsets.
    Column("deadline_ms", BigInteger),
    Column("traits", JSON, nullable=False),
    Column("latest_offsets", JSON, nullable=False),
    Column("last_scheduled_ms", BigInteger),
    #: ``metadata.labels`` and ``metadata.annotations`` (None: none, in rows older than them).
    Column("labels", JSON),
    Column("annotations", JSON),
)

savepoints = Table(
    "ferry_savepoints",
    metadata,
    Column("uid", String(40), primary_key=True),
    Column("environment", String(200), nullable=False, index=True),
    Column("pipeline", String(200), nullable=False, index=True),
    Column("source", String(20), nullable=False),
    Column("state", String(20), nullable=False),
    Column("reason", Text, nullable=False, default=""),
    Column("pinned", Boolean, nullable=False, default=False),
    Column("requested_ms", BigInteger, nullable=False),
    Column("completed_ms", BigInteger),
    Column("offsets", JSON, nullable=False),
    Column("schemas", JSON, nullable=False),
    Column("sink_commit", JSON, nullable=False),
    #: ``metadata.name``: unique among the pipeline's savepoints (None in rows older than it).
    Column("name", String(200)),
)

instances = Table(
    "ferry_pipeline_instances",
    metadata,
    *_environment_pipeline(),
    Column("worker", String(100), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("state", String(20), nullable=False),
    Column("exit_code", Integer),
    Column("heartbeat_ms", BigInteger, nullable=False),
)

#: A running pipeline's figures over time (the web page's lag chart and barrier times): one row per
#: pipeline and instant, written by whichever worker samples it first.
samples = Table(
    "ferry_pipeline_samples",
    metadata,
    *_environment_pipeline(),
    Column("at_ms", BigInteger, primary_key=True),
    Column("lag_records", BigInteger, nullable=False),
    Column("throughput_eps", Float, nullable=False),
    Column("rows_written", BigInteger, nullable=False),
    Column("schema_changes", Integer, nullable=False),
    Column("barrier_ms", BigInteger, nullable=False),
)

#: Execution option asking for a transaction that writes (SQLite: ``BEGIN IMMEDIATE``).
WRITER = "ferry_writer"

#: Workers starting together race to create the tables; the losers try again.
_CREATE_RACE = RetryPolicy(attempts=3, timeout_s=10.0, initial_s=0.2, max_s=0.2, log_level=logging.INFO)


def create_tables(engine: Engine) -> None:
    """Create what is missing (tables, and columns added since a table was created); workers
    starting together may race to it, and the loser retries."""

    def create() -> None:
        with engine.connect() as conn:
            conn.execution_options(**{WRITER: True})
            with conn.begin():
                metadata.create_all(conn)
        add_missing_columns(engine, metadata)  # a database written by an earlier version

    _CREATE_RACE.call(
        create,
        "creating the state tables",
        operation=Operation.STATE_STORE,
        transient=lambda e: isinstance(e, DBAPIError),
    )
