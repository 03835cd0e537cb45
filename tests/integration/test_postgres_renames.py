"""Renames on PostgreSQL through the real Debezium PostgreSQL connector (pgoutput), which sends no
DDL: a column renamed in its place stays one column with every value; a column dropped and one
added, and a rename of the table's last column, are a drop and an add.

A schema of its own (``renames``) in the session's PostgreSQL server, a connector of its own
writing one partition per topic (so that each schema step is seen in the order it was made), ferry
reading the topic to its end into the memory sink. The oracle is PostgreSQL's own final table.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.config.loader import load_job_text
from ferry.model.schema import TableId
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.support.connect import KafkaConnect
from tests.support.debezium import CaptureMode, postgres_connector_config, wait_emitted, wal_offset_reached
from tests.support.oracle import postgres_state
from tests.support.postgres import PostgresServer
from tests.support.sources import wal_end

pytestmark = pytest.mark.integration

SCHEMA = "renames"
MODE = CaptureMode("pg-renames", "PostgreSQL connector, pgoutput, JSON converter with schemas")
#: The statements, in order; ``%s`` rows are parameters.
STATEMENTS: list[tuple[str, tuple[Any, ...]]] = [
    *(
        (f"INSERT INTO {SCHEMA}.customers VALUES (%s, %s, %s, %s)", (i, f"c{i}@example.com", f"name {i}", i * 10))
        for i in range(1, 10)
    ),
    # a column renamed in its place: a rename
    (f"ALTER TABLE {SCHEMA}.customers RENAME COLUMN email TO email_address", ()),
    (f"UPDATE {SCHEMA}.customers SET visits = visits + 1 WHERE id = 1", ()),
    # a column dropped and another added (last): a drop and an add
    (f"ALTER TABLE {SCHEMA}.customers DROP COLUMN name", ()),
    (f"ALTER TABLE {SCHEMA}.customers ADD COLUMN nickname text", ()),
    (f"UPDATE {SCHEMA}.customers SET nickname = 'n' || id WHERE id IN (2, 3)", ()),
    # renamed in its place (nickname follows it) together with an add, in one step
    (f"ALTER TABLE {SCHEMA}.customers RENAME COLUMN visits TO visit_count", ()),
    (f"ALTER TABLE {SCHEMA}.customers ADD COLUMN tier text", ()),
    (f"UPDATE {SCHEMA}.customers SET tier = 'gold' WHERE id = 4", ()),
    # the last column renamed: told from nothing else, a drop and an add
    (f"ALTER TABLE {SCHEMA}.customers RENAME COLUMN tier TO level", ()),
    (f"UPDATE {SCHEMA}.customers SET visit_count = 0 WHERE id = 5", ()),
    (f"INSERT INTO {SCHEMA}.customers (id, email_address, visit_count, nickname, level) VALUES (10, 'x', 1, 'y', 'z')", ()),
]  # fmt: skip


@pytest.fixture
def captured(
    kafka_bootstrap: str, kafka_connect: KafkaConnect, logical_postgres_server: PostgresServer
) -> Iterator[dict[str, Any]]:
    """The statements run and emitted; PostgreSQL's final table (the oracle)."""
    import psycopg

    server = logical_postgres_server
    config = {
        **postgres_connector_config(MODE, server, [SCHEMA], bootstrap=kafka_bootstrap),
        "topic.creation.default.partitions": "1",
    }
    with contextlib.ExitStack() as stack:
        pg: Any = stack.enter_context(psycopg.connect(server.conninfo))
        pg.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        pg.execute(f"CREATE SCHEMA {SCHEMA}")
        pg.execute(f"CREATE TABLE {SCHEMA}.customers (id int PRIMARY KEY, email text, name text, visits int)")
        pg.execute(f"CREATE TABLE {SCHEMA}.markers (id int PRIMARY KEY)")
        pg.commit()
        kafka_connect.create_connector(MODE.connector_name, config)
        stack.callback(kafka_connect.delete_connector, MODE.connector_name)
        kafka_connect.wait_running(MODE.connector_name)
        # streaming from here: the statements' changes are decoded from the log, not snapshotted
        mark(kafka_connect, pg, 1, "its snapshot")
        for statement, params in STATEMENTS:
            pg.execute(statement, params)
            pg.commit()
        mark(kafka_connect, pg, 2, "every change")
        yield {"customers": postgres_state(pg, SCHEMA)["customers"]}


def mark(connect: KafkaConnect, pg: Any, number: int, what: str) -> None:
    """Wait until the connector has streamed (not snapshotted) everything written so far: a marker
    row after it, and the connector's committed offset past the position before the marker."""
    lsn = wal_end(pg)
    pg.execute(f"INSERT INTO {SCHEMA}.markers VALUES (%s)", (number,))
    pg.commit()
    wait_emitted(connect, MODE.connector_name, wal_offset_reached(lsn), what)


def test_renames_on_postgresql_keep_their_values_and_drop_and_add_stays_so(
    captured: dict[str, Any], kafka_bootstrap: str, tmp_path: Path, group_id: str
) -> None:
    job = load_job_text(f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {MODE.topic_prefix}.{SCHEMA}.customers
  value.format: debezium-json
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: memory
pipeline:
  name: {group_id}
  state.url: sqlite:///{tmp_path}/state.db
""")
    sink = MemorySink()
    build_runner(job, sink=sink).run(threading.Event())

    source = captured["customers"]
    stored = sink.tables[TableId(None, SCHEMA, "customers")]
    names = [c.name for c in source.columns]
    assert list(stored.schema.names) == names
    got = {row["id"]: row for row in stored.all_rows()}
    expected = {row["id"]: dict(row) for row in source.rows.values()}
    # ``level`` (``tier`` renamed as the last column) held 'gold' in row 4, not updated since: a drop
    # and an add leave it NULL there; every other value is PostgreSQL's
    assert expected[4]["level"] == "gold"
    expected[4]["level"] = None
    assert got == expected, [str(c) for c in sink.applied]

    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        history = {e.change: e.reason for e in state.schema_history(group_id)}
    finally:
        state.close()
    table = f"{SCHEMA}.customers"
    proved = "a rename proved by the column positions"
    unproved = "no column position proves a rename"
    assert proved in history[f"rename.column {table} email -> email_address"]
    assert proved in history[f"rename.column {table} visits -> visit_count"]
    assert unproved in history[f"drop.column {table} name"]
    assert unproved in next(r for c, r in history.items() if c.startswith(f"add.column {table} `nickname`"))
    assert unproved in history[f"drop.column {table} tier"]
