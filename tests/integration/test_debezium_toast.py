"""Unchanged TOASTed values through the real PostgreSQL connector (Kafka Connect 4.1, Debezium 3.6.1,
``pgoutput``, the JSON converter with schemas, Debezium's defaults) into Iceberg, Paimon and
Hologres (on PostgreSQL).

Under ``REPLICA IDENTITY DEFAULT`` an UPDATE that leaves a TOASTed value (text, bytea, jsonb,
text[], int[] of 4 kB, random so that it does not compress below the threshold) unchanged carries Debezium's
``__debezium_unavailable_value`` in that column; under ``FULL`` the connector has the value. The
workload runs in two phases, each read by the pipelines to the end: the second phase's updates
that leave values out concern rows the first wrote (read back from the sink table) and rows
changed earlier in the same checkpoint. Each sink, read with its own client, must equal the
source database's final tables cell by cell, and hold no placeholder.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.local.kafka_broker import KafkaBroker
from tests.integration.helpers import start_run
from tests.support.connect import KafkaConnect, KafkaConnectError
from tests.support.debezium import CaptureMode, postgres_connector_config, wait_emitted, wal_offset_reached
from tests.support.postgres import PostgresServer
from tests.support.sinks import SinkTables, iceberg_tables, postgres_tables
from tests.support.sources import wal_end
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

SCHEMA = "toast"
CONTROL = "toast_control"
MODE = CaptureMode("toast", "PostgreSQL connector, pgoutput, JSON converter with schemas")
PLACEHOLDER = "__debezium_unavailable_value"
TABLES = {"docs_default": "DEFAULT", "docs_full": "FULL"}
ROWS = 12
SINKS = ("iceberg", "paimon", "hologres")


def _text(rng: random.Random, size: int = 3000) -> str:
    """Random text of 4 kB: incompressible, so stored out of line (TOASTed)."""
    return base64.b64encode(rng.randbytes(size)).decode()


def _values(rng: random.Random) -> tuple[str, bytes, str, list[str], list[int]]:
    """A row's TOASTed values: text, bytea, jsonb, text[] and int[] of 4 kB each."""
    return (
        _text(rng),
        rng.randbytes(3000),
        json.dumps({"text": _text(rng), "n": rng.randint(0, 9)}),
        [_text(rng, 30) for _ in range(100)],
        [rng.randint(-(2**31), 2**31 - 1) for _ in range(1000)],
    )


INSERT = "INSERT INTO {}.{} (id, n, body, blob, doc, tags, counts) VALUES (%s, 0, %s, %s, %s, %s, %s)"


def create_tables(pg: Any, rng: random.Random) -> None:
    pg.execute(f"CREATE SCHEMA {SCHEMA}")
    pg.execute(f"CREATE SCHEMA {CONTROL}")
    pg.execute(f"CREATE TABLE {CONTROL}.markers (id serial PRIMARY KEY, label text)")
    for table, identity in TABLES.items():
        pg.execute(
            f"CREATE TABLE {SCHEMA}.{table} (id int PRIMARY KEY, n int NOT NULL, "
            "body text, blob bytea, doc jsonb, tags text[], counts int[])"
        )
        pg.execute(f"ALTER TABLE {SCHEMA}.{table} REPLICA IDENTITY {identity}")
        for key in range(1, ROWS + 1):
            pg.execute(INSERT.format(SCHEMA, table), (key, *_values(rng)))
    pg.commit()


def first_changes(pg: Any, rng: random.Random) -> None:
    """Streamed: inserts, updates that leave the TOASTed values alone and updates that set them."""
    for table in TABLES:
        for key in range(ROWS + 1, ROWS + 5):
            pg.execute(INSERT.format(SCHEMA, table), (key, *_values(rng)))
        pg.commit()
        for key in range(1, ROWS + 5):
            pg.execute(f"UPDATE {SCHEMA}.{table} SET n = n + 1 WHERE id = %s", (key,))
            pg.commit()
        body, blob, doc, tags, counts = _values(rng)
        pg.execute(f"UPDATE {SCHEMA}.{table} SET body = %s WHERE id = 2", (body,))
        pg.execute(f"UPDATE {SCHEMA}.{table} SET blob = %s, n = 7 WHERE id = 3", (blob,))
        pg.execute(f"UPDATE {SCHEMA}.{table} SET doc = %s WHERE id = 4", (doc,))
        pg.execute(f"UPDATE {SCHEMA}.{table} SET tags = %s, counts = %s WHERE id = 9", (tags, counts))
        pg.execute(f"UPDATE {SCHEMA}.{table} SET n = n + 1 WHERE id IN (2, 3, 4)")
        pg.execute(f"DELETE FROM {SCHEMA}.{table} WHERE id = 5")
        pg.commit()


def second_changes(pg: Any, rng: random.Random) -> None:
    """Streamed after the pipelines read the first phase: the rows left out are in the sinks."""
    for table in TABLES:
        for key in range(1, ROWS + 5):
            if key == 5:
                continue
            pg.execute(f"UPDATE {SCHEMA}.{table} SET n = n + 10 WHERE id = %s", (key,))
            pg.commit()
        body, blob, doc, tags, counts = _values(rng)
        pg.execute(
            f"UPDATE {SCHEMA}.{table} SET body = %s, blob = %s, doc = %s, tags = %s, counts = %s WHERE id = 6",
            (body, blob, doc, tags, counts),
        )
        pg.commit()
        pg.execute(f"UPDATE {SCHEMA}.{table} SET n = 100 WHERE id = 6")
        pg.execute(f"UPDATE {SCHEMA}.{table} SET body = NULL WHERE id = 7")
        pg.execute(f"UPDATE {SCHEMA}.{table} SET n = 101 WHERE id = 7")
        pg.execute(INSERT.format(SCHEMA, table), (ROWS + 10, *_values(rng)))
        pg.commit()
        pg.execute(f"UPDATE {SCHEMA}.{table} SET n = 102 WHERE id = %s", (ROWS + 10,))
        pg.execute(f"DELETE FROM {SCHEMA}.{table} WHERE id = 8")
        pg.commit()


def mark(pg: Any, connect: KafkaConnect, label: str) -> None:
    """Wait until the connector emitted every change made so far (a marker row after them)."""
    pg.execute(f"INSERT INTO {CONTROL}.markers (label) VALUES (%s)", (f"{label}-1",))
    pg.commit()
    lsn = wal_end(pg)
    pg.execute(f"INSERT INTO {CONTROL}.markers (label) VALUES (%s)", (f"{label}-2",))
    pg.commit()
    wait_emitted(connect, MODE.connector_name, wal_offset_reached(lsn), f"{label} (LSN {lsn})")


# --------------------------------------------------------------------------------------------------
# Source and sinks, as rows by key
# --------------------------------------------------------------------------------------------------

Rows = dict[int, dict[str, Any]]


def source_rows(pg: Any) -> dict[str, Rows]:
    tables: dict[str, Rows] = {}
    for table in TABLES:
        rows = pg.execute(
            f"SELECT id, n, body, blob, doc::text, tags, counts FROM {SCHEMA}.{table}"
        ).fetchall()
        tables[table] = {
            r[0]: {
                "n": r[1],
                "body": r[2],
                "blob": None if r[3] is None else bytes(r[3]),
                "doc": None if r[4] is None else json.loads(r[4]),
                "tags": r[5],
                "counts": r[6],
            }
            for r in rows
        }
    pg.commit()
    return tables


def _json(text: str | None) -> Any:
    """A JSON column's value, parsed; text that is not JSON (a placeholder) as it is."""
    try:
        return None if text is None else json.loads(text)
    except json.JSONDecodeError:
        return text


def as_rows(tables: SinkTables) -> dict[str, Rows]:
    result: dict[str, Rows] = {}
    for name, (_columns, rows) in tables.items():
        result[name] = {
            int(r["id"]): {
                "n": r["n"],
                "body": r["body"],
                "blob": None if r["blob"] is None else bytes(r["blob"]),
                "doc": _json(r["doc"]),
                "tags": _json(r["tags"]) if isinstance(r["tags"], str) else r["tags"],
                "counts": _json(r["counts"]) if isinstance(r["counts"], str) else r["counts"],
            }
            for r in rows
        }
    return result


def paimon_tables(warehouse: Path) -> SinkTables:
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": warehouse.as_uri()})
    tables: SinkTables = {}
    for name in TABLES:
        table = catalog.get_table(f"{SCHEMA}.{name}")
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        rows = [] if data is None else data.to_pylist()
        tables[name] = (list(data.column_names) if data is not None else [], rows)
    return tables


def compare(source: dict[str, Rows], sink: dict[str, Rows], target: str) -> tuple[int, list[str]]:
    """Cells compared, and the differences."""
    cells, differences = 0, []
    for table, rows in source.items():
        held = sink.get(table, {})
        if set(held) != set(rows):
            differences.append(f"{target} {table}: keys {sorted(held)}, the source has {sorted(rows)}")
        for key, row in rows.items():
            got = held.get(key)
            if got is None:
                continue
            for column, want in row.items():
                cells += 1
                value = got[column]
                if value != want:
                    shown = (
                        value if not isinstance(value, str | bytes) else f"{value[:40]!r}... ({len(value)})"
                    )
                    differences.append(f"{target} {table} id={key} {column}: the sink has {shown}")
    return cells, differences


def dead_letters(bootstrap: str, topic: str) -> int:
    """The records of a dead-letter topic (none when there is no topic)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader"})
    try:
        described = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if described is None or described.error is not None:
            return 0
        count = 0
        for partition in described.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            count += high - low
        return count
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------------
# Pipelines
# --------------------------------------------------------------------------------------------------


def job(bootstrap: str, sink: str, directory: Path, name: str) -> Path:
    pattern = rf"{MODE.topic_prefix}\.{SCHEMA}\..*"
    path = directory / f"{name}.yaml"
    path.write_text(
        "source:\n"
        "  type: kafka\n"
        f"  properties.bootstrap.servers: {bootstrap}\n"
        f"  topic-pattern: '{pattern}'\n"
        "  value.format: debezium-json\n"
        "  scan.startup.mode: earliest-offset\n"
        "  scan.bounded.mode: latest-offset\n"
        f"sink:\n{sink}"
        "pipeline:\n"
        f"  name: {name}\n"
        f"  state.url: sqlite:///{directory}/{name}-state.db\n"
        f"  dead-letter.topic: {name}-dead-letters\n"
        "  checkpoint.interval: 1s\n"
    )
    return path


def run(path: Path, directory: Path) -> None:
    log = directory / f"{path.stem}.log"
    process = start_run(path, directory, log)
    try:
        code = process.wait(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, f"ferry run {path.name} exited with {code}:\n{log.read_text()[-4000:]}"


@pytest.fixture
def hologres_conninfo(logical_postgres_server: PostgresServer) -> Iterator[str]:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    server = logical_postgres_server
    name = "toast_sink"
    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(server.user))
        )
    yield make_conninfo(server.conninfo, dbname=name)
    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def source(
    kafka_broker: KafkaBroker, kafka_connect: KafkaConnect, logical_postgres_server: PostgresServer
) -> Iterator[Any]:
    """The source database with its tables and the connector capturing them (deleted after, with
    its replication slot and the schemas)."""
    import psycopg

    server = logical_postgres_server
    slot = MODE.topic_prefix.replace("-", "_")
    with psycopg.connect(server.conninfo) as pg:
        try:
            yield pg
        finally:
            with contextlib.suppress(KafkaConnectError):
                kafka_connect.delete_connector(MODE.connector_name, timeout=20)
            pg.rollback()

            def slot_released() -> bool:
                row = pg.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                ).fetchone()
                pg.commit()
                return row is None or not row[0]

            wait_for(slot_released, 60, lambda: f"the connector to release replication slot {slot}")
            pg.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
            )
            pg.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            pg.execute(f"DROP SCHEMA IF EXISTS {CONTROL} CASCADE")
            pg.commit()


def test_unchanged_toasted_values_keep_the_sinks_values(
    source: Any,
    kafka_broker: KafkaBroker,
    kafka_connect: KafkaConnect,
    logical_postgres_server: PostgresServer,
    hologres_conninfo: str,
    tmp_path: Path,
) -> None:
    pg = source
    server = logical_postgres_server
    bootstrap = kafka_broker.bootstrap_servers
    rng = random.Random(20261207)
    create_tables(pg, rng)
    config = postgres_connector_config(MODE, server, [SCHEMA, CONTROL], bootstrap=bootstrap)
    kafka_connect.create_connector(MODE.connector_name, config)
    kafka_connect.wait_running(MODE.connector_name)
    mark(pg, kafka_connect, "snapshot")
    first_changes(pg, rng)
    mark(pg, kafka_connect, "first")

    holo = server
    sinks = {
        "iceberg": f"  type: iceberg\n  catalog.properties.warehouse: {tmp_path / 'iceberg'}\n",
        "paimon": f"  type: paimon\n  catalog.properties.warehouse: {(tmp_path / 'paimon').as_uri()}\n",
        "hologres": (
            "  type: hologres\n"
            f"  endpoint: {holo.host}:{holo.port}\n"
            "  dbname: toast_sink\n"
            f"  username: {holo.user}\n"
            f"  password: '{holo.password}'\n"
        ),
    }
    jobs = {name: job(bootstrap, text, tmp_path, f"toast-{name}") for name, text in sinks.items()}
    for path in jobs.values():
        run(path, tmp_path)
    second_changes(pg, rng)
    mark(pg, kafka_connect, "second")
    for path in jobs.values():
        run(path, tmp_path)

    expected = source_rows(pg)
    held = {
        "iceberg": as_rows(iceberg_tables(tmp_path / "iceberg", SCHEMA)),
        "paimon": as_rows(paimon_tables(tmp_path / "paimon")),
        "hologres": as_rows(postgres_tables(hologres_conninfo, SCHEMA)),
    }
    report, failures, total = [], [], 0
    for target, rows in held.items():
        cells, differences = compare(expected, rows, target)
        total += cells
        report.append(f"{target}: {cells} cells compared, {len(differences)} differences")
        failures += differences
        placeholders = [
            (t, k, c)
            for t, table in rows.items()
            for k, row in table.items()
            for c, v in row.items()
            if (isinstance(v, str) and PLACEHOLDER in v)
            or (isinstance(v, bytes) and PLACEHOLDER.encode() in v)
            or (isinstance(v, dict | list) and PLACEHOLDER in json.dumps(v))
        ]
        assert not placeholders, f"{target} holds the placeholder at {placeholders[:5]}"
    for name in jobs:
        letters = dead_letters(bootstrap, f"toast-{name}-dead-letters")
        report.append(f"{name}: {letters} dead letters")
        if letters:
            failures.append(f"{name} sent {letters} records to its dead-letter topic")
    print("\n" + "\n".join(report))
    assert not failures, "\n".join(report + failures[:40])
    assert total >= 2 * (ROWS + 3) * 6 * len(SINKS)
    assert os.path.exists(tmp_path / "iceberg")
