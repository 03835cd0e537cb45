"""Each option of Flink CDC's pipeline sink connectors that ferry has a sink for
(``docs/content/docs/connectors/pipeline-connectors/{starrocks,kafka,iceberg,paimon,doris,maxcompute,
fluss}.md`` of apache/flink-cdc at commit 23fb108e9bea7f689230fa188e5f80c6eef0dbc3) does in ferry
what the table of docs/flink-cdc.md says: the same (validated into the sink's options), accepted and ignored
with a warning at its line, or refused at its line."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry.config import ConfigError
from ferry.config.loader import read_job_text
from ferry.model.schema import TableId

PAGE = Path(__file__).resolve().parents[3] / "docs" / "flink-cdc.md"
SOURCE = {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
BASES: dict[str, dict[str, Any]] = {
    "starrocks": {"jdbc-url": "jdbc:mysql://fe:9030", "load-url": "fe:8030", "username": "root"},
    "kafka": {"properties.bootstrap.servers": "broker:9092"},
    "iceberg": {"catalog.properties.warehouse": "/tmp/warehouse"},
    "paimon": {"catalog.properties.warehouse": "/tmp/paimon"},
    "doris": {"fenodes": "fe:8030", "username": "root"},
    "maxcompute": {"access-id": "id", "access-key": "key", "endpoint": "http://mc:80", "project": "p"},
    "fluss": {"bootstrap.servers": "fluss:9123"},
}

#: (sink, key as Flink CDC documents it, a value from its documentation, same / ignored / refused)
KEYS: list[tuple[str, str, Any, str]] = [
    *[("starrocks", k, v, "same") for k, v in [
        ("type", "starrocks"), ("name", "StarRocks Sink"), ("jdbc-url", "jdbc:mysql://127.0.0.1:9030"),
        ("load-url", "127.0.0.1:8030"), ("username", "root"), ("password", "pass"),
        ("sink.label-prefix", "cdc"), ("sink.connect.timeout-ms", 30000),
        ("sink.properties.*", "max_filter_ratio=0.1"), ("table.create.num-buckets", 8),
        ("table.create.properties.*", "replication_num=1"), ("table.schema-change.timeout", "30min"),
    ]],
    *[("starrocks", k, v, "ignored") for k, v in [
        ("sink.wait-for-continue.timeout-ms", 30000), ("sink.buffer-flush.max-bytes", 157286400),
        ("sink.buffer-flush.interval-ms", 300000), ("sink.scan-frequency.ms", 50),
        ("sink.io.thread-count", 2), ("sink.at-least-once.use-transaction-stream-load", True),
        ("sink.metric.histogram-window-size", 100), ("unicode-char.max-bytes", 3),
        ("sink.socket.timeout-ms", -1),
    ]],
    *[("kafka", k, v, "same") for k, v in [
        ("type", "kafka"), ("name", "Kafka Sink"), ("partition.strategy", "all-to-zero"),
        ("key.format", "csv"), ("value.format", "canal-json"),
        ("properties.bootstrap.servers", "localhost:9092"), ("topic", "yaml-mysql-kafka"),
        ("sink.add-tableId-to-header-enabled", True), ("properties.*", "compression.type=zstd"),
        ("sink.custom-header", "key1:value1,key2:value2"),
        ("sink.tableId-to-topic.mapping", "mydb.mytable1:topic1;mydb.mytable2:topic2"),
        ("debezium-json.include-schema.enabled", False),
    ]],
    *[("iceberg", k, v, "same") for k, v in [
        ("type", "iceberg"), ("name", "Iceberg Sink"), ("catalog.properties.type", "rest"),
        ("catalog.properties.warehouse", "/path/warehouse"), ("catalog.properties.uri", "http://rest:8181"),
        ("catalog.properties.client.region", "us-east-1"), ("catalog.properties.glue.id", "123"),
        ("catalog.properties.glue.skip-archive", True), ("partition.key", "testdb.table1:id1,day(ts)"),
        ("catalog.properties.*", "token=t"), ("table.properties.*", "write.format.default=parquet"),
    ]],
    ("iceberg", "catalog.properties.io-impl", "org.apache.iceberg.aws.s3.S3FileIO", "same"),
    ("iceberg", "catalog.properties.glue.skip-name-validation", False, "ignored"),
    ("iceberg", "catalog.properties.catalog-impl", "org.apache.iceberg.hive.HiveCatalog", "refused"),
    ("iceberg", "hadoop.conf.*", "fs.s3a.endpoint=http://minio:9000", "refused"),
    *[("paimon", k, v, "same") for k, v in [
        ("type", "paimon"), ("name", "Paimon Sink"), ("catalog.properties.metastore", "filesystem"),
        ("catalog.properties.warehouse", "/path/warehouse"), ("catalog.properties.uri", "http://rest:8080"),
        ("commit.user-prefix", "admin"), ("partition.key", "testdb.table1:id1,id2;testdb.table2:name"),
        ("catalog.properties.*", "token=t"), ("table.properties.*", "bucket=4"),
    ]],
    *[("doris", k, v, "same") for k, v in [
        ("type", "doris"), ("name", "Doris Sink"), ("fenodes", "127.0.0.1:8030"),
        ("jdbc-url", "jdbc:mysql://127.0.0.1:9030"), ("username", "root"), ("password", ""),
        ("sink.enable.batch-mode", True), ("sink.properties.", "timeout=600"),
        ("table.create.properties.*", "replication_num=1"),
    ]],
    *[("doris", k, v, "ignored") for k, v in [
        ("benodes", "127.0.0.1:8040"), ("auto-redirect", False), ("charset-encoding", False),
        ("sink.enable-delete", True), ("sink.max-retries", 3), ("sink.flush.queue-size", 2),
        ("sink.buffer-flush.max-rows", 50000), ("sink.buffer-flush.max-bytes", 10485760),
        ("sink.buffer-flush.interval", "10s"), ("sink.ignore.update-before", True),
    ]],
    ("doris", "table.create.auto-partition.properties.*", "default-partition-key=create_time", "same"),
    *[("maxcompute", k, v, "same") for k, v in [
        ("type", "maxcompute"), ("name", "MaxCompute Sink"), ("access-id", "ak"), ("access-key", "sk"),
        ("endpoint", "http://service.cn-hangzhou.maxcompute.aliyun.com/api"), ("project", "flink_cdc"),
        ("tunnel.endpoint", "http://dt.cn-hangzhou.maxcompute.aliyun.com"), ("quota.name", "q"),
        ("sts-token", "token"), ("buckets-num", 8), ("compress.algorithm", "raw"),
    ]],
    *[("maxcompute", k, v, "ignored") for k, v in [
        ("total.buffer-size", "64MB"), ("bucket.buffer-size", "4MB"), ("commit.thread-num", 16),
        ("flush.concurrent-num", 4),
    ]],
    *[("fluss", k, v, "same") for k, v in [
        ("type", "fluss"), ("name", "Fluss Sink"), ("bootstrap.servers", "localhost:9123"),
        ("bucket.key", "db.t1:a;db.t2:b"), ("bucket.num", "db.t1:4;db.t2:8"),
        ("properties.table.*", "table.datalake.enabled=true"),
        ("properties.client.*", "client.security.protocol=sasl"),
    ]],
]  # fmt: skip

#: What a key's value does, where the sink's options show it.
EFFECTS: dict[tuple[str, str], Callable[[Any], bool]] = {
    ("starrocks", "sink.properties.*"): lambda s: s.load_properties == {"max_filter_ratio": "0.1"},
    ("starrocks", "table.create.num-buckets"): lambda s: s.create_buckets() == "8",
    ("doris", "sink.properties."): lambda s: s.load_properties == {"timeout": "600"},
    ("kafka", "partition.strategy"): lambda s: s.partition_strategy == "all-to-zero",
    ("kafka", "key.format"): lambda s: s.key_format == "csv",
    ("kafka", "sink.custom-header"): lambda s: s.custom_headers == (("key1", "value1"), ("key2", "value2")),
    ("kafka", "sink.tableId-to-topic.mapping"): lambda s: (
        s.mapped_topic(TableId.parse("mydb.mytable2")) == "topic2"
    ),
    ("iceberg", "catalog.properties.io-impl"): lambda s: (
        s.resolved_catalog_properties()["py-io-impl"] == "pyiceberg.io.pyarrow.PyArrowFileIO"
    ),
    ("iceberg", "partition.key"): lambda s: s.partition_keys == {"testdb.table1": ("id1", "day(ts)")},
    ("paimon", "partition.key"): lambda s: s.partition_keys["testdb.table1"] == ("id1", "id2"),
    ("paimon", "commit.user-prefix"): lambda s: s.resolved_commit_user("p") == "admin_p",
}

#: Flink CDC's documented option rows per sink (its option tables at that commit).
DOCUMENTED = {
    "starrocks": 21,
    "kafka": 12,
    "iceberg": 15,
    "paimon": 9,
    "doris": 20,
    "maxcompute": 15,
    "fluss": 7,
}


def sink_with(sink: str, key: str, value: Any) -> tuple[str, str]:
    """The job text, and the key as written in it (a ``prefix.*`` key gets one of its options)."""
    written = key
    if key.endswith((".*", ".")):
        option, _, value = str(value).partition("=")
        written = key.rstrip("*").rstrip(".") + "." + option
    options = {"type": sink, **BASES[sink], written: value}
    return yaml.safe_dump({"source": SOURCE, "sink": options}, sort_keys=False), written


def test_every_documented_option_is_listed() -> None:
    assert Counter(sink for sink, *_ in KEYS) == DOCUMENTED


@pytest.mark.parametrize(("sink", "key", "value", "status"), KEYS, ids=lambda v: str(v)[:40])
def test_a_flink_cdc_sink_option_does_what_the_readme_says(
    sink: str, key: str, value: Any, status: str
) -> None:
    text, written = sink_with(sink, key, value)
    if status == "refused":
        with pytest.raises(ConfigError) as e:
            read_job_text(text, file="job.yaml")
        [problem] = e.value.problems
        assert problem.key_path == f"sink.{written}" and problem.line is not None
        return
    job, warnings = read_job_text(text, file="job.yaml")
    assert [w.key_path for w in warnings] == ([f"sink.{written}"] if status == "ignored" else [])
    effect = EFFECTS.get((sink, key))
    if effect is not None:
        assert effect(job.sink)


def test_the_docs_table_names_every_option_with_its_status() -> None:
    text = PAGE.read_text()
    block = text[text.index("## Flink CDC's sink options") :]
    block = block.split("\n## ")[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    for sink, key, _, status in KEYS:
        [row] = [
            r
            for r in rows
            if r.startswith(f"| `{sink}` |") and re.search(rf"`{re.escape(key)}`", r.split("|")[2])
        ]
        cell = row.split("|")[3]
        assert ("ignored" in cell) == (status == "ignored"), row
        assert ("refused" in cell) == (status == "refused"), row


def test_a_number_where_text_is_wanted_is_its_text() -> None:
    # Flink CDC reads every option as a string: its SQL Server page writes ``password: 123456``
    text = yaml.safe_dump({"source": SOURCE, "sink": {"type": "doris", **BASES["doris"], "password": 123456}})
    job, _ = read_job_text(text, file="job.yaml")
    assert job.sink.password.get_secret_value() == "123456"  # type: ignore[attr-defined]
