"""Columns added with a default between row changes, captured by the real Debezium connectors
(MySQL connector on MariaDB, PostgreSQL connector with pgoutput; Debezium's defaults, JSON converter
with schemas): Iceberg, Paimon and Hologres (on PostgreSQL) end equal to the source database's
final tables cell by cell, the rows the source filled with each default included.

The source fills every existing row of a column added with ``DEFAULT <literal>`` without a row
event; only the envelope's field schema (``"default"``) and, for MySQL, the DDL on the
schema-change topic say so. Each source has a database (schema) and connector of its own here:
its own ``topic.prefix``, server id and replication slot.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ferry.config.loader import load_job_text
from ferry.sinks.paimon.config import DEFAULT_ROWKIND_COLUMN
from ferry.worker import build_runner
from tests.support.connect import KafkaConnect, KafkaConnectError
from tests.support.debezium import (
    CaptureMode,
    binlog_offset_reached,
    mysql_connector_config,
    postgres_connector_config,
    wait_emitted,
    wal_offset_reached,
)
from tests.support.mariadb import MariaDbServer
from tests.support.oracle import SourceTable, compare_table, mariadb_state, postgres_state
from tests.support.postgres import PostgresServer
from tests.support.sinks import SinkTables, iceberg_tables, postgres_tables
from tests.support.sources import binlog_end, mariadb_connection, wal_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

MYSQL_MODE = CaptureMode("defaults-mysql", "MySQL connector, JSON converter with schemas")
POSTGRES_MODE = CaptureMode(
    "defaults-postgres", "PostgreSQL connector, pgoutput, JSON converter with schemas"
)
#: A server id on the binary log that no other connector of the session takes.
SERVER_ID = 5491
SINKS = ("iceberg", "paimon", "hologres")
TABLE = "customers"
#: The columns added, in order, each with a default the rows existing then take at the source:
#: NOT NULL and nullable, text, integer, numeric, boolean and a date.
ADDED = (
    ("region", "VARCHAR(10) NOT NULL DEFAULT 'eu'"),
    ("score", "INT DEFAULT 7"),
    ("credit", "DECIMAL(10, 2) NOT NULL DEFAULT 12.50"),
    ("active", "BOOLEAN DEFAULT TRUE"),
    ("since", "DATE DEFAULT '2024-02-29'"),
    ("note", "VARCHAR(20) DEFAULT {note}"),
)
#: The text default with a quote in it on MariaDB (the MySQL connector gives the literal's body,
#: read as MySQL reads it); the PostgreSQL connector (3.6.1) cuts ``'it''s new'`` at the doubled
#: quote, giving ``it`` (docs/schema-changes.md says so), so its default has none.
NOTE_DEFAULT = {"mysql": "'it''s new'", "postgres": "'n/a'"}


@dataclass
class Source:
    """One captured source: how to run a statement and where its log has reached."""

    name: str
    namespace: str
    mode: CaptureMode
    execute: Callable[[str], None]
    mark: Callable[[], Callable[[Mapping[str, Any]], bool]]
    state: Callable[[], dict[str, SourceTable]]
    #: A sink row as the source's columns read (see :func:`booleans_as_tinyint`)
    sink_row: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda row: row


def booleans_as_tinyint(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """MariaDB keeps a BOOLEAN as TINYINT(1) (its final state reads 1 and 0), while the MySQL
    connector, which parses the DDL as written, gives the column Connect's boolean type."""
    return {k: int(v) if isinstance(v, bool) else v for k, v in row.items()}


def workload(source: Source) -> None:
    """Rows, then each column added between row changes: updates of rows that existed before it
    (one leaves the new column as the source filled it, one sets it), inserts with values of
    their own and with an explicit NULL in the nullable columns, deletes."""
    table = f"{source.namespace}.{TABLE}"
    for i in range(1, 41):
        source.execute(f"INSERT INTO {table} (id, name) VALUES ({i}, 'name-{i}')")
    source.execute(f"UPDATE {table} SET name = 'renamed-1' WHERE id = 1")
    source.execute(f"DELETE FROM {table} WHERE id = 2")
    next_id = 100
    for number, (column, definition) in enumerate(ADDED):
        spelled = definition.format(note=NOTE_DEFAULT[source.name])
        source.execute(f"ALTER TABLE {table} ADD COLUMN {column} {spelled}")
        source.execute(f"UPDATE {table} SET name = 'touched-{number}' WHERE id = {3 + number}")
        next_id += 1
        source.execute(f"INSERT INTO {table} (id, name) VALUES ({next_id}, 'inserted-{number}')")
        source.execute(f"DELETE FROM {table} WHERE id = {20 + number}")
    source.execute(
        f"INSERT INTO {table} (id, name, region, score, credit, active, since, note) "
        "VALUES (200, 'explicit', 'us', NULL, 3.25, NULL, NULL, NULL)"
    )
    source.execute(
        f"UPDATE {table} SET region = 'apac', score = NULL, credit = 0.50, active = FALSE, "
        "since = '2020-01-01', note = NULL WHERE id = 10"
    )


#: The JSON converter writes NULLs as NULLs (see the module's documentation).
KEEP_NULLS = {"value.converter.replace.null.with.default": "false"}


def job_text(source: Source, bootstrap: str, sink: str, directory: Path, name: str) -> str:
    topic = f"{source.mode.topic_prefix}.{source.namespace}.{TABLE}"
    ddl = f"  schema-change.topic: {source.mode.topic_prefix}\n" if source.name == "mysql" else ""
    return (
        "source:\n"
        "  type: kafka\n"
        f"  properties.bootstrap.servers: {bootstrap}\n"
        f"  topic: {topic}\n"
        "  value.format: debezium-json\n"
        f"{ddl}"
        "  scan.startup.mode: earliest-offset\n"
        "  scan.bounded.mode: latest-offset\n"
        f"sink:\n{sink}"
        "pipeline:\n"
        f"  name: {name}\n"
        "  schema.change.behavior: EVOLVE\n"
        f"  state.url: sqlite:///{directory}/state.db\n"
        "  checkpoint.interval: 200ms\n"
    )


def paimon_tables(warehouse: Path, database: str) -> SinkTables:
    """The tables of ``database`` in the Paimon warehouse, read with pypaimon."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    tables: SinkTables = {}
    for name in catalog.list_tables(database):
        table = catalog.get_table(f"{database}.{name}")
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        columns = [f.name for f in table.table_schema.fields if f.name != DEFAULT_ROWKIND_COLUMN]
        rows = [] if data is None else data.select(columns).to_pylist()
        tables[name] = (columns, rows)
    return tables


@pytest.fixture
def mysql_source(
    binlog_mariadb_server: MariaDbServer, kafka_connect: KafkaConnect, kafka_broker: Any
) -> Iterator[Source]:
    database = f"defaults_{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        connection: Any = stack.enter_context(contextlib.closing(mariadb_connection(binlog_mariadb_server)))

        def execute(statement: str) -> None:
            with connection.cursor() as cursor:
                cursor.execute(statement)
            connection.commit()

        execute(f"CREATE DATABASE `{database}`")
        stack.callback(execute, f"DROP DATABASE IF EXISTS `{database}`")
        execute(f"CREATE TABLE {database}.{TABLE} (id INT PRIMARY KEY, name VARCHAR(40))")
        execute(f"CREATE TABLE {database}.markers (id INT AUTO_INCREMENT PRIMARY KEY, label VARCHAR(20))")

        def mark() -> Callable[[Mapping[str, Any]], bool]:
            execute(f"INSERT INTO {database}.markers (label) VALUES ('before')")
            position = binlog_end(connection)
            execute(f"INSERT INTO {database}.markers (label) VALUES ('after')")
            return binlog_offset_reached(position)

        config = mysql_connector_config(
            MYSQL_MODE,
            binlog_mariadb_server,
            [database],
            bootstrap=kafka_broker.bootstrap_servers,
            server_id=SERVER_ID,
        )
        config["schema.history.internal.kafka.topic"] = f"{MYSQL_MODE.topic_prefix}-{database}.schema-history"
        config.update(KEEP_NULLS)
        kafka_connect.create_connector(MYSQL_MODE.connector_name, config)
        stack.callback(_delete, kafka_connect, MYSQL_MODE.connector_name)
        kafka_connect.wait_running(MYSQL_MODE.connector_name)
        yield Source(
            "mysql",
            database,
            MYSQL_MODE,
            execute,
            mark,
            lambda: mariadb_state(connection, database, [TABLE]),
            booleans_as_tinyint,
        )


@pytest.fixture
def postgres_source(
    logical_postgres_server: PostgresServer, kafka_connect: KafkaConnect, kafka_broker: Any
) -> Iterator[Source]:
    schema = f"defaults_{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        connection = stack.enter_context(psycopg.connect(logical_postgres_server.conninfo, autocommit=True))

        def execute(statement: str) -> None:
            connection.execute(statement)  # type: ignore[arg-type]

        execute(f"CREATE SCHEMA {schema}")
        stack.callback(execute, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        execute(f"CREATE TABLE {schema}.{TABLE} (id INT PRIMARY KEY, name VARCHAR(40))")
        execute(f"CREATE TABLE {schema}.markers (id SERIAL PRIMARY KEY, label VARCHAR(20))")

        def mark() -> Callable[[Mapping[str, Any]], bool]:
            execute(f"INSERT INTO {schema}.markers (label) VALUES ('before')")
            lsn = wal_end(connection)
            execute(f"INSERT INTO {schema}.markers (label) VALUES ('after')")
            return wal_offset_reached(lsn)

        config = postgres_connector_config(
            POSTGRES_MODE, logical_postgres_server, [schema], bootstrap=kafka_broker.bootstrap_servers
        )
        config.update(KEEP_NULLS)
        kafka_connect.create_connector(POSTGRES_MODE.connector_name, config)
        stack.callback(_drop_slot, logical_postgres_server, config["slot.name"])
        stack.callback(_delete, kafka_connect, POSTGRES_MODE.connector_name)
        kafka_connect.wait_running(POSTGRES_MODE.connector_name)
        yield Source(
            "postgres", schema, POSTGRES_MODE, execute, mark, lambda: postgres_state(connection, schema)
        )


def hologres_database(server: PostgresServer, name: str) -> str:
    """A fresh database of the Hologres sink's server, owned by its user; returns its conninfo."""
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(server.user))
        )
    return make_conninfo(server.conninfo, dbname=name)


def drop_database(server: PostgresServer, name: str) -> None:
    from psycopg import sql

    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _delete(connect: KafkaConnect, name: str) -> None:
    with contextlib.suppress(KafkaConnectError):
        connect.delete_connector(name, timeout=20)


def _drop_slot(server: PostgresServer, slot: str) -> None:
    from tests.support.sources import superuser_conninfo

    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(superuser_conninfo(server), autocommit=True) as conn,
    ):
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


@pytest.mark.parametrize("which", ["mysql", "postgres"])
def test_columns_added_with_defaults_read_the_source_values_in_every_sink(
    which: str,
    request: pytest.FixtureRequest,
    kafka_connect: KafkaConnect,
    kafka_broker: Any,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    source: Source = request.getfixturevalue(f"{which}_source")
    wait_emitted(kafka_connect, source.mode.connector_name, source.mark(), "the snapshot")
    workload(source)
    wait_emitted(kafka_connect, source.mode.connector_name, source.mark(), "every change")
    expected = source.state()[TABLE]
    assert len(expected.rows) == 40 and [c.name for c in expected.columns][-len(ADDED) :] == [
        c for c, _ in ADDED
    ]

    reports = []
    failed = 0
    for sink in SINKS:
        name = f"{source.mode.name}-{sink}-{uuid.uuid4().hex[:6]}"
        directory = tmp_path / sink
        directory.mkdir()
        read: Callable[[], SinkTables]
        if sink == "iceberg":
            sink_yaml = f"  type: iceberg\n  catalog.properties.warehouse: {directory / 'warehouse'}\n"

            def read(directory: Path = directory) -> SinkTables:
                return iceberg_tables(directory / "warehouse", source.namespace)
        elif sink == "paimon":
            sink_yaml = f"  type: paimon\n  catalog.properties.warehouse: {directory / 'paimon'}\n"

            def read(directory: Path = directory) -> SinkTables:
                return paimon_tables(directory / "paimon", source.namespace)
        else:
            database = name.replace("-", "_")
            conninfo = hologres_database(postgres_server, database)
            request.addfinalizer(lambda database=database: drop_database(postgres_server, database))
            sink_yaml = (
                "  type: hologres\n"
                f"  endpoint: {postgres_server.host}:{postgres_server.port}\n"
                f"  dbname: {database}\n"
                f"  username: {postgres_server.user}\n"
                f"  password: '{postgres_server.password}'\n"
            )

            def read(conninfo: str = conninfo) -> SinkTables:
                return postgres_tables(conninfo, source.namespace)

        job = load_job_text(job_text(source, kafka_broker.bootstrap_servers, sink_yaml, directory, name))
        runner = build_runner(job)
        try:
            runner.run()
        finally:
            runner.close()
        assert runner.status.phase == "STOPPED", f"{name}: {runner.status}"
        assert runner.metrics.bad_records == 0, f"{name}: {runner.metrics.bad_records} bad records"
        comparison = compare_table(expected, read().get(TABLE), read=source.sink_row)
        reports.append(
            f"{name}: {comparison.rows_compared} rows, {comparison.differences} differences\n"
            + "\n".join(f"  - {d}" for d in comparison.listed)
        )
        failed += comparison.differences
        assert comparison.rows_compared == len(expected.rows), reports[-1]
    print("\n" + "\n".join(reports))
    assert failed == 0, "\n".join(reports)
