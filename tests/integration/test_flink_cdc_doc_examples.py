"""The complete pipeline examples of Flink CDC's documentation, as written, with only their
``source`` replaced by a Kafka source: each validates and runs (a bounded read of Debezium records
on the session's real broker, into the named sink: the real one where it runs here, its stand-in
where it is a cloud service, AWS Glue and S3 moto's server), or is refused at validation naming
the one key ferry lacks.

The examples are ``tests/fixtures/flink-cdc-docs/*.yaml`` (their README names each one's page). To
run, the sink's addresses and credentials are those of the servers here; every other key stays as
written. What a run wrote is read back with the sink's own client and compared, table by table,
with what the pipeline says it wrote and with what the source held.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from ferry.config import ConfigError
from ferry.config.checks import check_supported
from ferry.config.loader import read_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import KafkaBrokerError, TopicFactory, delete_topic, produce
from ferry.model.schema import TableId
from ferry.pipeline.phase import Phase
from ferry.sinks.base import Sink
from ferry.worker import build_runner
from tests.integration.helpers import read_to_end

#: The Fluss examples get the session's Fluss cluster by name (only when one runs).
pytestmark = [pytest.mark.integration, pytest.mark.services("fluss_cluster")]

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "flink-cdc-docs"
EXAMPLES = sorted(DOCS.glob("*.yaml"))

#: Example → the key ferry refuses in it: sinks out of ferry's scope, Iceberg's Java hadoop
#: catalog, and functions that are Java classes (ferry's are Python callables).
REFUSED = {
    "connector-elasticsearch-0": "sink.type",
    "connector-hudi-0": "sink.type",
    "connector-oceanbase-0": "sink.type",
    "connector-iceberg-0": "sink.catalog.properties.type",
    "core-concept-data-pipeline-1": "pipeline.user-defined-function[0].classpath",
}
#: Example → the key whose value in it is a placeholder ferry refuses (``endpoint: endpoint``, not
#: a URL); it runs with the address of the server here.
PLACEHOLDERS = {"connector-maxcompute-0": "sink.endpoint"}


def source_tables() -> list[tuple[dbz.DebeziumTable, list[dict[str, Any]]]]:
    """The quickstarts' MySQL tables (``app_db``) and the transform page's ``testdb.customer``."""
    key = dbz.ConnectColumn("id", dbz.INT32, optional=False)
    orders = dbz.DebeziumTable(
        "mysql", "app_db", "orders", [key, dbz.ConnectColumn("price", dbz.DECIMAL(10, 2))]
    )
    shipments = dbz.DebeziumTable(
        "mysql", "app_db", "shipments", [key, dbz.ConnectColumn("city", dbz.STRING)]
    )
    products = dbz.DebeziumTable(
        "mysql", "app_db", "products", [key, dbz.ConnectColumn("product", dbz.STRING)]
    )
    customer = dbz.DebeziumTable("mysql", "testdb", "customer", [key, dbz.ConnectColumn("name", dbz.STRING)])
    return [
        (orders, [{"id": i, "price": Decimal(f"{i}.50")} for i in range(1, 4)]),
        (shipments, [{"id": 1, "city": "Beijing"}, {"id": 2, "city": "Hangzhou"}]),
        (products, [{"id": 1, "product": "Beer"}, {"id": 2, "product": "Cap"}]),
        (customer, [{"id": 1, "name": "ada"}, {"id": 2, "name": "bob"}]),
    ]


def with_kafka_source(path: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    job["source"] = {
        "type": "kafka",
        "properties.bootstrap.servers": bootstrap,
        "topic": topic,
        "value.format": "debezium-json",
        "scan.startup.mode": "earliest-offset",
        "scan.bounded.mode": "latest-offset",
    }
    return job


def dump(job: dict[str, Any]) -> str:
    return yaml.safe_dump(job, sort_keys=False, allow_unicode=True)


def test_the_examples_are_there() -> None:
    assert len(EXAMPLES) == 36
    stems = {p.stem for p in EXAMPLES}
    assert set(REFUSED) <= stems and set(PLACEHOLDERS) <= stems
    listed = (DOCS / "README.md").read_text(encoding="utf-8")
    assert all(f"| `{p.name}` |" in listed for p in EXAMPLES)


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.stem in REFUSED], ids=lambda p: p.stem)
def test_an_example_ferry_cannot_run_is_refused_naming_the_key(path: Path) -> None:
    job = with_kafka_source(path, "127.0.0.1:9092", "app_db")
    with pytest.raises(ConfigError) as e:
        read_job_text(dump(job), file=path.name)
    assert [p.key_path for p in e.value.problems] == [REFUSED[path.stem]]
    assert all(p.line is not None for p in e.value.problems)


#: What a run reads back: sink table → rows, through the sink's own client.
ReadBack = Callable[[list[TableId]], dict[TableId, int]]


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_an_example_validates_and_runs_into_its_sink(
    path: Path,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    topic = topic_factory()
    written = dump(with_kafka_source(path, kafka_bootstrap, topic))
    if path.stem in PLACEHOLDERS:
        with pytest.raises(ConfigError) as e:
            read_job_text(written, file=path.name)
        assert [p.key_path for p in e.value.problems] == [PLACEHOLDERS[path.stem]]
    else:
        job, _ = read_job_text(written, file=path.name)
        check_supported(job)
        name = (yaml.safe_load(path.read_text()).get("pipeline") or {}).get("name", "ferry")
        assert job.pipeline.name == name

    tables = source_tables()
    records = [t.insert(row) for t, rows in tables for row in rows]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    monkeypatch.chdir(tmp_path)  # the pipeline's state and data in its default places, here
    run = with_kafka_source(path, kafka_bootstrap, topic)
    with sink_here(run["sink"], request, tmp_path) as (sink_options, make_sink, read_back):
        run["sink"] = sink_options
        job, _ = read_job_text(dump(run), file=path.name)
        sink = make_sink(job)
        runner = build_runner(job, sink=sink)
        runner.run()  # closes the sink when it stops
        assert runner.status.phase is Phase.STOPPED, runner.status.detail
        assert runner.metrics.bad_records == 0
        reported = {TableId.parse(t): n for t, n in runner.metrics.rows_written.items()}
        assert sum(reported.values()) == len(records)
        assert read_back(list(reported)) == reported


# ------------------------------------------------------------------------------------- sinks here


@contextlib.contextmanager
def sink_here(
    options: dict[str, Any], request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    """The example's sink options pointed at the servers here, how to make the sink, and how to
    read back what it wrote."""
    sink_type = options["type"]
    if sink_type in ("doris", "starrocks"):
        with mysql_protocol_sink(options, request) as here:
            yield here
    elif sink_type == "kafka":
        with kafka_sink(options, request) as here:
            yield here
    elif sink_type == "paimon":
        yield paimon_sink(options, tmp_path)
    elif sink_type == "maxcompute":
        with maxcompute_sink(options) as here:
            yield here
    elif sink_type == "fluss":
        with fluss_sink(options, request) as here:
            yield here
    elif sink_type == "values":
        yield values_sink(options)
    elif sink_type == "iceberg" and options.get("catalog.properties.type") == "glue":
        with glue_iceberg_sink(options) as here:
            yield here
    else:
        raise AssertionError(f"no sink here for {sink_type}")


def registered_sink(**kwargs: Any) -> Callable[[Any], Sink]:
    from ferry.sinks.base.registry import sink_class

    def make(job: Any) -> Sink:
        sink: Sink = sink_class(job.sink.type)(job.sink, pipeline=job.pipeline.kafka_name, **kwargs)
        return sink

    return make


@contextlib.contextmanager
def mysql_protocol_sink(
    options: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    from tests.support.mariadb import MariaDbServer
    from tests.support.stream_load import StreamLoadServer

    server: MariaDbServer = request.getfixturevalue("mariadb_server")
    address = {
        "jdbc-url": f"jdbc:mysql://{server.host}:{server.port}",
        "username": server.user,
        "password": server.password,
    }

    def connect() -> Any:
        return pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password)

    def read_back(tables: list[TableId]) -> dict[TableId, int]:
        connection = connect()
        try:
            with connection.cursor() as cursor:
                counts = {}
                for t in tables:
                    cursor.execute(f"SELECT COUNT(*) FROM `{t.schema_name}`.`{t.table_name}`")
                    counts[t] = cursor.fetchone()[0]
                return counts
        finally:
            connection.close()

    with StreamLoadServer(mysql_host=server.host, mysql_port=server.port) as load:
        url_key = "load-url" if options["type"] == "starrocks" else "fenodes"
        try:
            # the tables of a MariaDB standing in for StarRocks or Doris: its own statements
            yield (
                {**options, **address, url_key: load.url},
                registered_sink(vendor_only_statements=False),
                read_back,
            )
        finally:
            connection = connect()
            try:
                with connection.cursor() as cursor:
                    for database in ("app_db", "testdb", "ods_db"):
                        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
            finally:
                connection.close()
        assert load.requests and all(status == "Success" for _, status in load.requests), load.requests


@contextlib.contextmanager
def kafka_sink(
    options: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    from ferry.sinks.kafka.config import KafkaSinkConfig
    from ferry.sinks.kafka.sink import topic_name

    bootstrap: str = request.getfixturevalue("kafka_bootstrap")
    here = {**options, "properties.bootstrap.servers": bootstrap}
    config = KafkaSinkConfig.model_validate(here)
    topics: set[str] = set()

    def topic_of(table: TableId) -> str:
        return config.topic or config.mapped_topic(table) or topic_name(table)

    def read_back(tables: list[TableId]) -> dict[TableId, int]:
        topics.update(topic_of(t) for t in tables)
        counts = dict.fromkeys(tables, 0)
        for topic in sorted(topics):
            of_topic = [t for t in tables if topic_of(t) == topic]
            for record in read_to_end(bootstrap, topic):
                source = json.loads(record.value())["source"]
                [table] = [t for t in of_topic if t.table_name == source["table"]]
                counts[table] += 1
        return counts

    try:
        yield here, registered_sink(), read_back
    finally:
        for topic in topics:
            with contextlib.suppress(KafkaBrokerError):
                delete_topic(bootstrap, topic, timeout=30.0)


def paimon_sink(
    options: dict[str, Any], tmp_path: Path
) -> tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]:
    from pypaimon import CatalogFactory

    warehouse = tmp_path / "paimon"
    here = {**options, "catalog.properties.warehouse": str(warehouse)}

    def read_back(tables: list[TableId]) -> dict[TableId, int]:
        catalog = CatalogFactory.create({"metastore": "filesystem", "warehouse": str(warehouse)})
        counts = {}
        for t in tables:
            builder = catalog.get_table(f"{t.schema_name}.{t.table_name}").new_read_builder()
            data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
            counts[t] = 0 if data is None else data.num_rows
        return counts

    return here, registered_sink(), read_back


@contextlib.contextmanager
def maxcompute_sink(
    options: dict[str, Any],
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    from odps import ODPS

    from tests.support.maxcompute import MaxComputeServer

    with MaxComputeServer(project=options["project"], access_key=uuid.uuid4().hex) as server:
        here = {
            **options,
            "endpoint": server.endpoint,
            "access-id": server.access_id,
            "access-key": server.access_key,
        }

        def read_back(tables: list[TableId]) -> dict[TableId, int]:
            odps = ODPS(server.access_id, server.access_key, server.project, endpoint=server.endpoint)
            counts = {}
            for t in tables:
                with odps.get_table(t.table_name).open_reader() as records:
                    counts[t] = sum(1 for _ in records)
            return counts

        yield here, registered_sink(), read_back


@contextlib.contextmanager
def fluss_sink(
    options: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    from tests.support.fluss import FlussCluster, drop_database, read_rows

    cluster: FlussCluster = request.getfixturevalue("fluss_cluster")
    [(user, password)] = cluster.sasl_users.items()
    # the example's SASL/PLAIN client properties as written, with the credentials of the cluster here
    here = {
        **options,
        "bootstrap.servers": cluster.sasl_bootstrap_servers,
        "properties.client.security.sasl.username": user,
        "properties.client.security.sasl.password": password,
    }
    databases: set[str] = set()

    def read_back(tables: list[TableId]) -> dict[TableId, int]:
        counts = {}
        for t in tables:
            assert t.schema_name is not None
            databases.add(t.schema_name)
            counts[t] = len(read_rows(cluster.bootstrap_servers, t.schema_name, t.table_name))
        return counts

    try:
        yield here, registered_sink(), read_back
    finally:
        for database in databases:
            drop_database(cluster.bootstrap_servers, database)


@contextlib.contextmanager
def glue_iceberg_sink(
    options: dict[str, Any],
) -> Iterator[tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]]:
    """AWS Glue and S3 stood in for by moto's server: the example's bucket, region and every key
    as written, with the stand-in's endpoint and credentials added."""
    from pyiceberg.catalog import load_catalog

    from tests.support.aws import AwsStandIn

    warehouse = options["catalog.properties.warehouse"]
    bucket = warehouse.removeprefix("s3://").split("/", 1)[0]
    region = options.get("catalog.properties.client.region", "us-east-1")
    with AwsStandIn(bucket=bucket, region=region) as aws:
        added = {f"catalog.properties.{k}": v for k, v in aws.catalog_properties().items()}
        here = {**options, **added}

        def read_back(tables: list[TableId]) -> dict[TableId, int]:
            props = {
                k.removeprefix("catalog.properties."): str(v)
                for k, v in here.items()
                if k.startswith("catalog.")
            }
            props.pop("io-impl", None)
            catalog = load_catalog("reader", **props)
            glue = aws.client("glue")
            counts = {}
            for t in tables:
                # the table is Glue's, its metadata in the bucket
                stored = glue.get_table(DatabaseName=t.schema_name, Name=t.table_name)["Table"]
                location = stored["Parameters"]["metadata_location"]
                assert location.startswith(f"{warehouse}/"), location
                counts[t] = catalog.load_table(f"{t.schema_name}.{t.table_name}").scan().to_arrow().num_rows
            return counts

        yield here, registered_sink(), read_back


def values_sink(options: dict[str, Any]) -> tuple[dict[str, Any], Callable[[Any], Sink], ReadBack]:
    from ferry.sinks.memory import MemorySink

    made: list[MemorySink] = []

    def make(job: Any) -> Sink:
        made.append(MemorySink(job.sink, pipeline=job.pipeline.kafka_name))
        return made[0]

    def read_back(tables: list[TableId]) -> dict[TableId, int]:
        [sink] = made
        return {t: len(sink.tables[t].all_rows()) for t in tables}

    return options, make, read_back
