"""Session fixtures of the real Debezium producers (a plugin registered by ``tests/conftest.py``).

``kafka_connect`` is one Kafka Connect worker for the whole session. ``debezium_capture`` runs
everything once: it starts MariaDB (binary log) and PostgreSQL (logical decoding), writes the rows
of the snapshot, starts every connector, waits until their snapshots are emitted, runs the
workloads, waits until every connector has emitted everything, and reads the sources' final state.
The connectors are then paused (a test that needs more changes can resume them) and the tests
only read the topics. All of it is started only when a test asks for it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ferry.local.kafka_broker import KafkaBroker
from tests.support.connect import KafkaConnect, KafkaConnectError
from tests.support.debezium import (
    MYSQL_MODES,
    POSTGRES_MODES,
    CaptureMode,
    binlog_offset_reached,
    data_topic_partitions,
    mysql_connector_config,
    postgres_connector_config,
    wait_emitted,
    wal_offset_reached,
)
from tests.support.mariadb import MariaDbServer
from tests.support.oracle import SourceTable, mariadb_state, postgres_state
from tests.support.postgres import PostgresServer
from tests.support.sources import (
    binlog_mariadb,
    logical_postgres,
    mariadb_connection,
    prepare_logical_capture,
)
from tests.support.workload import (
    CONTROL_DATABASE,
    POSTGRES_CONTROL_SCHEMA,
    POSTGRES_SCHEMA,
    SHOP_DATABASE,
    AccountsWorkload,
    ShopWorkload,
    WorkloadSummary,
    create_binlog_markers,
    create_wal_markers,
    mark_binlog,
    mark_wal,
)

#: MySQL connectors need a server id of their own on the binary log (the server's is 1).
FIRST_CONNECTOR_SERVER_ID = 5401


@dataclass
class CapturedSource:
    """What one source's connectors wrote: their modes, and the source's final state."""

    modes: tuple[CaptureMode, ...]
    #: The database (MariaDB) or schema (PostgreSQL) captured, as ferry names the tables' namespace.
    namespace: str
    #: The source's final tables, by name.
    tables: dict[str, SourceTable]
    #: Tables that existed once and were dropped.
    dropped: list[str]
    summary: WorkloadSummary


@dataclass
class DebeziumCapture:
    """Everything the real Debezium connectors emitted in this session."""

    bootstrap: str
    connect: KafkaConnect
    mysql: CapturedSource
    postgres: CapturedSource
    seconds: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="session")
def kafka_connect(kafka_broker: KafkaBroker) -> Iterator[KafkaConnect]:
    """One Kafka Connect worker (distributed mode) with the Debezium plugins, on the session's broker."""
    with KafkaConnect(kafka_broker.bootstrap_servers) as connect:
        yield connect


@pytest.fixture(scope="session")
def binlog_mariadb_server() -> Iterator[MariaDbServer]:
    """A MariaDB server writing a row-based binary log, as Debezium's MySQL connector needs."""
    with binlog_mariadb() as server:
        yield server


@pytest.fixture(scope="session")
def logical_postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server with ``wal_level=logical``, its user allowed to stream changes."""
    with logical_postgres() as server:
        prepare_logical_capture(server)
        yield server


@pytest.fixture(scope="session")
def debezium_capture(
    kafka_broker: KafkaBroker,
    kafka_connect: KafkaConnect,
    binlog_mariadb_server: MariaDbServer,
    logical_postgres_server: PostgresServer,
) -> Iterator[DebeziumCapture]:
    """Run both workloads once, captured by every connector; see the module's documentation."""
    with capture_workloads(
        kafka_broker.bootstrap_servers, kafka_connect, binlog_mariadb_server, logical_postgres_server
    ) as capture:
        yield capture


@contextlib.contextmanager
def capture_workloads(
    bootstrap: str, connect: KafkaConnect, mariadb: MariaDbServer, postgres: PostgresServer
) -> Iterator[DebeziumCapture]:
    """Snapshot rows, every connector started and its snapshot emitted, the workloads run and
    emitted, the sources' final state read; the connectors are deleted on leaving."""
    import psycopg

    seconds: dict[str, float] = {}
    began = time.monotonic()
    shop = ShopWorkload()
    accounts = AccountsWorkload()
    connectors = [m.connector_name for m in (*MYSQL_MODES, *POSTGRES_MODES)]
    with contextlib.ExitStack() as stack:
        mysql: Any = stack.enter_context(contextlib.closing(mariadb_connection(mariadb)))
        pg: Any = stack.enter_context(psycopg.connect(postgres.conninfo))
        stack.callback(_delete_connectors, connect, connectors)

        shop.create_snapshot(mysql)
        create_binlog_markers(mysql)
        accounts.create_snapshot(pg)
        toasted = accounts.toasted_bytes(pg)
        if not all(toasted.values()):
            raise AssertionError(f"the PostgreSQL workload stored no value out of line (TOAST): {toasted}")
        create_wal_markers(pg)
        for number, mode in enumerate(MYSQL_MODES):
            config = mysql_connector_config(
                mode,
                mariadb,
                [SHOP_DATABASE, CONTROL_DATABASE],
                bootstrap=bootstrap,
                server_id=FIRST_CONNECTOR_SERVER_ID + number,
            )
            connect.create_connector(mode.connector_name, config)
        for mode in POSTGRES_MODES:
            connect.create_connector(
                mode.connector_name,
                postgres_connector_config(
                    mode, postgres, [POSTGRES_SCHEMA, POSTGRES_CONTROL_SCHEMA], bootstrap=bootstrap
                ),
            )
        for name in connectors:
            connect.wait_running(name)
        seconds["connectors running"] = time.monotonic() - began

        # the snapshots are emitted before any change is made, so that the changes are streamed
        _wait_all_emitted(connect, mysql, pg, "the snapshot")
        seconds["snapshots emitted"] = time.monotonic() - began

        shop_summary = shop.run_changes(mysql)
        accounts_summary = accounts.run_changes(pg)
        seconds["workloads run"] = time.monotonic() - began
        _wait_all_emitted(connect, mysql, pg, "every change")
        seconds["changes emitted"] = time.monotonic() - began
        _check_partitions(bootstrap, POSTGRES_MODES, f"{POSTGRES_SCHEMA}.accounts")
        # everything is in the topics: the paused connectors cost the pipelines under test nothing
        for name in connectors:
            connect.pause_connector(name)

        capture = DebeziumCapture(
            bootstrap,
            connect,
            CapturedSource(MYSQL_MODES, SHOP_DATABASE, mariadb_state(mysql, SHOP_DATABASE), ["promotions"], shop_summary),
            CapturedSource(
                POSTGRES_MODES, POSTGRES_SCHEMA, postgres_state(pg, POSTGRES_SCHEMA), [], accounts_summary
            ),
            seconds,
        )  # fmt: skip
        print(
            f"\nDebezium capture: {shop_summary.row_changes} MariaDB row changes "
            f"({dict(shop_summary.operations)}), {len(shop_summary.schema_changes)} schema changes; "
            f"{accounts_summary.row_changes} PostgreSQL row changes, "
            f"({dict(accounts_summary.operations)}), {len(accounts_summary.schema_changes)} schema changes, "
            f"bytes stored out of line (TOAST) {toasted} before and {accounts.toasted_bytes(pg)} after; "
            + ", ".join(f"{what} at {s:.1f} s" for what, s in seconds.items())
        )
        yield capture


def _wait_all_emitted(connect: KafkaConnect, mysql: Any, pg: Any, what: str) -> None:
    position = mark_binlog(mysql, what.replace(" ", "-"))
    lsn = mark_wal(pg, what.replace(" ", "-"))
    for mode in MYSQL_MODES:
        wait_emitted(
            connect, mode.connector_name, binlog_offset_reached(position), f"{what} (binlog {position})"
        )
    for mode in POSTGRES_MODES:
        wait_emitted(connect, mode.connector_name, wal_offset_reached(lsn), f"{what} (LSN {lsn})")


def _check_partitions(bootstrap: str, modes: tuple[CaptureMode, ...], table: str) -> None:
    """Each mode's data topic of ``table`` has the partitions the mode asks for."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for mode in modes:
        topic = f"{mode.topic_prefix}.{table}"
        described = admin.list_topics(topic, timeout=30).topics[topic]
        if described.error is not None or len(described.partitions) != data_topic_partitions(mode):
            raise AssertionError(
                f"{topic} has {len(described.partitions)} partitions ({described.error}), "
                f"the mode asks for {data_topic_partitions(mode)}"
            )


def _delete_connectors(connect: KafkaConnect, names: list[str]) -> None:
    """Delete the connectors (their tasks stop before the source databases do)."""
    for name in names:
        with contextlib.suppress(KafkaConnectError):
            connect.delete_connector(name, timeout=20)
