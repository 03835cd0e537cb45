"""The sinks the conformance suite runs against, each with a way to read its rows back.

A sink with a real backend here is built on it; a sink whose backend cannot run yet is the
in-package memory sink enforcing that sink's declared capabilities. Adding a backend is adding
an entry to :data:`BACKENDS`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.model.schema import TableId
from ferry.retry import RetryPolicy
from ferry.sinks.base import Sink
from ferry.sinks.base.registry import DESTINATIONS
from ferry.sinks.memory import MemorySink


@dataclass
class Context:
    tmp_path: Path
    pipeline: str
    #: The session's Kafka broker, started only when a backend asks for it.
    kafka_bootstrap: Callable[[], str]
    #: The session's PostgreSQL server (``tests.support.postgres.PostgresServer``), likewise.
    postgres: Callable[[], Any]
    #: The session's MariaDB server (``tests.support.mariadb.MariaDbServer``), likewise.
    mariadb: Callable[[], Any]
    #: Registers a clean-up to run after the test.
    cleanup: Callable[[Callable[[], None]], None]


@dataclass
class Backend:
    name: str
    sink: Sink
    read_rows: Callable[[TableId], list[dict[str, Any]]]
    real: bool
    retries: RetryPolicy = field(default_factory=RetryPolicy)
    """The runner's retry policy against this sink."""


def memory_backend(sink_type: str) -> Callable[[Context], Backend]:
    def make(context: Context) -> Backend:
        capabilities = DESTINATIONS[sink_type].capabilities
        sink = MemorySink(pipeline=context.pipeline, capabilities=capabilities, type=sink_type)
        return Backend(sink_type, sink, sink.rows, real=False)

    return make


def iceberg_backend(context: Context) -> Backend:
    from ferry.sinks.iceberg.config import IcebergSinkConfig
    from ferry.sinks.iceberg.sink import IcebergSink

    config = IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(context.tmp_path / "wh")}
    )
    sink = IcebergSink(config, pipeline=context.pipeline)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        table = sink.load_table(table_id)
        return [] if table is None else table.scan().to_arrow().to_pylist()

    return Backend("iceberg", sink, rows, real=True)


def paimon_backend(context: Context) -> Backend:
    from ferry.sinks.paimon.config import PaimonSinkConfig
    from ferry.sinks.paimon.sink import PaimonSink

    config = PaimonSinkConfig.model_validate(
        {"type": "paimon", "catalog.properties.warehouse": str(context.tmp_path / "pm")}
    )
    sink = PaimonSink(config, pipeline=context.pipeline)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        table = sink.load_table(table_id)
        if table is None:
            return []
        builder = table.new_read_builder()
        data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        if data is None:
            return []
        visible = [name for name in data.column_names if not name.startswith("_ferry")]
        return [{k: r[k] for k in visible} for r in data.to_pylist()]

    return Backend("paimon", sink, rows, real=True)


def kafka_backend(context: Context) -> Backend:
    """A real broker: every table's records go to one topic of this test, read back and decoded."""
    from ferry.connectors.formats import decoder_for
    from ferry.model.events import DataChange, Op
    from ferry.sinks.kafka.config import KafkaSinkConfig
    from ferry.sinks.kafka.sink import KafkaSink
    from tests.integration.helpers import read_all

    bootstrap = context.kafka_bootstrap()
    topic = f"conformance-{uuid.uuid4().hex}"
    config = KafkaSinkConfig.model_validate(
        {"type": "kafka", "properties.bootstrap.servers": bootstrap, "topic": topic}
    )
    sink = KafkaSink(config, pipeline=context.pipeline)
    context.cleanup(sink.close)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        records = read_all(bootstrap, topic, expected=sink.delivered, timeout=10)
        state: dict[Any, dict[str, Any] | None] = {}
        # the sink's payload-only records, typed from their values (debezium-json.infer-types)
        for event in decoder_for("debezium-json", infer_types=True).decode(records):
            if isinstance(event, DataChange) and event.table_id == table_id:
                row = event.row
                state[row["id"]] = None if event.op is Op.DELETE else row
        return [r for r in state.values() if r is not None]

    return Backend("kafka", sink, rows, real=True)


def hologres_backend(context: Context) -> Backend:
    """Hologres's PostgreSQL protocol on a real PostgreSQL server (Hologres-only statements off)."""
    import psycopg

    from ferry.sinks.hologres.config import HologresSinkConfig
    from ferry.sinks.hologres.sink import HologresSink

    server = context.postgres()
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS db CASCADE")
    config = HologresSinkConfig.model_validate(
        {
            "type": "hologres",
            "endpoint": f"{server.host}:{server.port}",
            "dbname": server.database,
            "username": server.user,
            "password": server.password,
        }
    )
    sink = HologresSink(config, pipeline=context.pipeline, hologres_only_statements=False)
    context.cleanup(sink.close)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        with psycopg.connect(server.conninfo) as conn, conn.cursor() as cursor:
            cursor.execute(f'SELECT * FROM "{table_id.schema_name}"."{table_id.table_name}"')
            names = [d.name for d in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    return Backend("hologres", sink, rows, real=True)


def mysql_protocol_backend(kind: str) -> Callable[[Context], Backend]:
    """StarRocks or SelectDB: DDL over the MySQL protocol on a real MariaDB server, rows through the
    local Stream Load endpoint (``tests.support.stream_load``) into the same server."""

    def make(context: Context) -> Backend:
        import pymysql

        from ferry.sinks.selectdb.config import SelectDbSinkConfig
        from ferry.sinks.selectdb.sink import SelectDbSink
        from ferry.sinks.starrocks.config import StarRocksSinkConfig
        from ferry.sinks.starrocks.sink import StarRocksSink
        from tests.support.stream_load import StreamLoadServer

        server = context.mariadb()
        server.admin_sql("DROP DATABASE IF EXISTS `db`", "CREATE DATABASE `db`")
        load = StreamLoadServer(mysql_host=server.host, mysql_port=server.port).__enter__()
        context.cleanup(lambda: load.__exit__(None, None, None))
        options = {
            "type": kind,
            "jdbc-url": f"jdbc:mysql://{server.host}:{server.port}/db",
            "username": server.user,
            "password": server.password,
            "load-url" if kind == "starrocks" else "fenodes": load.url,
        }
        sink: Sink
        if kind == "starrocks":
            sink = StarRocksSink(
                StarRocksSinkConfig.model_validate(options),
                pipeline=context.pipeline,
                vendor_only_statements=False,
            )
        else:
            sink = SelectDbSink(
                SelectDbSinkConfig.model_validate(options),
                pipeline=context.pipeline,
                vendor_only_statements=False,
            )

        context.cleanup(sink.close)

        def rows(table_id: TableId) -> list[dict[str, Any]]:
            connection = pymysql.connect(
                host=server.host,
                port=server.port,
                user=server.user,
                password=server.password,
                cursorclass=pymysql.cursors.DictCursor,
            )
            try:
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT * FROM `{table_id.schema_name}`.`{table_id.table_name}`")
                    return list(cursor.fetchall())
            finally:
                connection.close()

        return Backend(kind, sink, rows, real=True)

    return make


def fluss_backend(context: Context) -> Backend:
    """A real Fluss cluster (the session's, started on first use). Each case writes its table
    ``db.t`` into a database of its own (dropped afterwards): in full suites, a write to a ``db.t``
    just dropped and created again sometimes got no answer for minutes, whatever the connection,
    while cases with databases of their own never did. Columns are added through the Java client
    the cluster's jars include."""
    from ferry.sinks.fluss.config import FlussSinkConfig
    from ferry.sinks.fluss.sink import FlussSink
    from tests.support.fluss import client_classpath, drop_database, read_rows, shared_cluster

    cluster = shared_cluster()
    database = f"case_{uuid.uuid4().hex[:12]}"

    class CaseFlussSink(FlussSink):
        """The real sink, with the case's database in place of ``db`` in every table path."""

        def table_path(self, table_id: TableId) -> Any:
            path = super().table_path(table_id)
            return type(path)(database if path.database_name == "db" else path.database_name, path.table_name)

    config = FlussSinkConfig.model_validate(
        {
            "type": "fluss",
            "bootstrap.servers": cluster.bootstrap_servers,
            "alter-table.classpath": [str(jar) for jar in client_classpath()],
            # a call left without an answer is given up (the connection made again) and retried
            # after 20 s rather than the default 60 s
            "request.timeout": 20,
        }
    )
    sink = CaseFlussSink(config, pipeline=context.pipeline)
    context.cleanup(lambda: drop_database(cluster.bootstrap_servers, database))
    context.cleanup(sink.close)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        path = sink.table_path(table_id)
        return read_rows(cluster.bootstrap_servers, path.database_name, path.table_name)

    return Backend("fluss", sink, rows, real=True, retries=RetryPolicy(timeout_s=600.0))


def maxcompute_backend(context: Context) -> Backend:
    """MaxCompute through pyodps (its REST and Tunnel clients, unmodified) against the local endpoint
    speaking both protocols (``tests.support.maxcompute``); rows are read back through pyodps too."""
    from odps import ODPS

    from ferry.sinks.maxcompute.config import MaxComputeSinkConfig
    from ferry.sinks.maxcompute.sink import MaxComputeSink
    from tests.support.maxcompute import MaxComputeServer

    server = MaxComputeServer().__enter__()
    context.cleanup(lambda: server.__exit__(None, None, None))
    config = MaxComputeSinkConfig.model_validate(
        {
            "type": "maxcompute",
            "endpoint": server.endpoint,
            "project": server.project,
            "access-id": server.access_id,
            "access-key": server.access_key,
        }
    )
    sink = MaxComputeSink(config, pipeline=context.pipeline)
    context.cleanup(sink.close)
    reader = ODPS(server.access_id, server.access_key, server.project, endpoint=server.endpoint)

    def rows(table_id: TableId) -> list[dict[str, Any]]:
        if not reader.exist_table(table_id.table_name):
            return []
        table = reader.get_table(table_id.table_name)
        names = [c.name for c in table.table_schema.simple_columns]
        with table.open_reader() as records:
            return [{name: record[name] for name in names} for record in records]

    return Backend("maxcompute", sink, rows, real=True)


#: Sink type → how to build it for one test.
BACKENDS: dict[str, Callable[[Context], Backend]] = {t: memory_backend(t) for t in DESTINATIONS} | {
    "iceberg": iceberg_backend,
    "paimon": paimon_backend,
    "kafka": kafka_backend,
    "hologres": hologres_backend,
    "starrocks": mysql_protocol_backend("starrocks"),
    "selectdb": mysql_protocol_backend("selectdb"),
    "fluss": fluss_backend,
    "maxcompute": maxcompute_backend,
}
