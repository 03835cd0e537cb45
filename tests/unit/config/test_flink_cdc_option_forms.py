"""Option values in the forms Flink CDC's job files write them: time zones as Java's ZoneId reads
them, list options written as one string, Java FileIO classes; and a misspelt catalog property
named at its line with the key it was likely meant to be."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pytest
import yaml

from ferry.config import ConfigError
from ferry.config.loader import read_job_text

SOURCE = {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def job(sink: Mapping[str, object], pipeline: Mapping[str, object] | None = None) -> str:
    text: str = yaml.safe_dump(
        {"source": SOURCE, "sink": dict(sink), **({"pipeline": dict(pipeline)} if pipeline else {})},
        sort_keys=False,
    )
    return text


def refusal(text: str) -> tuple[int | None, str, str]:
    with pytest.raises(ConfigError) as e:
        read_job_text(text, file="job.yaml")
    [problem] = e.value.problems
    return problem.line, problem.key_path, problem.message


# Flink CDC's PipelineOptions: "a full name such as America/Los_Angeles, or a custom timezone id
# such as GMT-08:00"; Java's ZoneId forms besides
ZONES = [
    ("GMT-08:00", -8 * 60),
    ("GMT+08:00", 8 * 60),
    ("+08:00", 8 * 60),
    ("+8", 8 * 60),
    ("+0530", 5 * 60 + 30),
    ("UTC+8", 8 * 60),
    ("UT-05:30", -(5 * 60 + 30)),
    ("Z", 0),
]


@pytest.mark.parametrize(("zone", "minutes"), ZONES)
def test_local_time_zone_takes_javas_zone_id_forms(zone: str, minutes: int) -> None:
    config, _ = read_job_text(job({"type": "memory"}, {"local-time-zone": zone}), file="job.yaml")
    tz = config.pipeline.time_zone
    assert tz is not None
    instant = dt.datetime(2024, 1, 15, tzinfo=dt.UTC)
    assert instant.astimezone(tz).utcoffset() == dt.timedelta(minutes=minutes)
    # a region's offset follows its rules, as before
    config, _ = read_job_text(
        job({"type": "memory"}, {"local-time-zone": "America/Los_Angeles"}), file="job.yaml"
    )
    assert instant.astimezone(config.pipeline.time_zone).utcoffset() == dt.timedelta(hours=-8)


@pytest.mark.parametrize("zone", ["+19:00", "GMT+8:0", "Mars/Olympus", "+08:0000"])
def test_a_time_zone_java_would_not_read_is_refused_at_its_line(zone: str) -> None:
    line, key, message = refusal(job({"type": "memory"}, {"local-time-zone": zone}))
    assert (line, key) == (8, "pipeline.local-time-zone")
    assert (
        f"{zone!r} is not a time zone: give an IANA name (Asia/Shanghai), UTC, or a fixed offset" in message
    )


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("drop.column", ("drop.column",)),
        ("drop.column;add.column", ("drop.column", "add.column")),
    ],
)
def test_schema_change_lists_take_one_string(written: object, expected: tuple[str, ...]) -> None:
    sink = {"type": "memory", "exclude.schema.changes": written, "include.schema.changes": written}
    config, _ = read_job_text(job(sink), file="job.yaml")
    assert config.sink.exclude_schema_changes == expected
    assert config.sink.include_schema_changes == expected
    # a YAML list as before
    listed, _ = read_job_text(
        job({"type": "memory", "exclude.schema.changes": list(expected)}), file="job.yaml"
    )
    assert listed.sink.exclude_schema_changes == expected


def test_a_misspelt_item_of_a_one_string_list_is_named() -> None:
    line, key, message = refusal(job({"type": "memory", "exclude.schema.changes": "drop.column;add.colum"}))
    assert (line, key) == (7, "sink.exclude.schema.changes[1]")
    assert "unknown schema change 'add.colum' (did you mean 'add.column'?)" in message


@pytest.mark.parametrize(
    ("sink", "written", "meant"),
    [
        ("iceberg", "warehose", "warehouse"),
        ("paimon", "warehose", "warehouse"),
        ("iceberg", "url", "uri"),
        ("paimon", "metastor", "metastore"),
    ],
)
def test_a_misspelt_catalog_property_is_named_at_its_line_with_the_key_meant(
    sink: str, written: str, meant: str
) -> None:
    text = job({"type": sink, f"catalog.properties.{written}": "/tmp/warehouse"})
    line, key, message = refusal(text)
    assert (line, key) == (7, f"sink.catalog.properties.{written}")
    assert message == (
        f"catalog.properties.{written} is not a catalog property; did you mean catalog.properties.{meant}?"
    )


def test_an_iceberg_sink_without_a_warehouse_has_the_default_one() -> None:
    # the dotted properties of a client (Flink CDC's Glue example, with pyiceberg's S3 client
    # credentials) are not taken for misspellings of the missing warehouse
    sink = {"type": "iceberg", "catalog.properties.client.secret-access-key": "secret"}
    config, _ = read_job_text(job(sink), file="job.yaml")
    properties = config.sink.resolved_catalog_properties()  # type: ignore[attr-defined]
    assert properties["warehouse"].endswith("/var/warehouse")
    assert properties["client.secret-access-key"] == "secret"


@pytest.mark.parametrize(
    ("io_impl", "python_io"),
    [
        ("org.apache.iceberg.aws.s3.S3FileIO", "pyiceberg.io.pyarrow.PyArrowFileIO"),
        ("org.apache.iceberg.hadoop.HadoopFileIO", "pyiceberg.io.pyarrow.PyArrowFileIO"),
        ("org.apache.iceberg.gcp.gcs.GCSFileIO", "pyiceberg.io.pyarrow.PyArrowFileIO"),
        ("org.apache.iceberg.azure.adlsv2.ADLSFileIO", "pyiceberg.io.fsspec.FsspecFileIO"),
        ("pyiceberg.io.fsspec.FsspecFileIO", "pyiceberg.io.fsspec.FsspecFileIO"),
        ("org.apache.iceberg.io.ResolvingFileIO", None),
    ],
)
def test_io_impl_is_the_fileio_of_pyiceberg_for_the_same_storage(io_impl: str, python_io: str | None) -> None:
    sink = {
        "type": "iceberg",
        "catalog.properties.warehouse": "/tmp/w",
        "catalog.properties.io-impl": io_impl,
    }
    config, warnings = read_job_text(job(sink), file="job.yaml")
    assert warnings == []
    properties = config.sink.resolved_catalog_properties()  # type: ignore[attr-defined]
    assert properties.get("py-io-impl") == python_io
    assert "io-impl" not in properties


def test_an_io_impl_pyiceberg_has_not_is_refused_naming_the_key() -> None:
    sink = {
        "type": "iceberg",
        "catalog.properties.warehouse": "/tmp/w",
        "catalog.properties.io-impl": "org.apache.iceberg.dell.ecs.EcsFileIO",
    }
    line, key, message = refusal(job(sink))
    assert (line, key) == (8, "sink.catalog.properties.io-impl")
    assert message.startswith("org.apache.iceberg.dell.ecs.EcsFileIO is not a FileIO pyiceberg has")


@pytest.mark.parametrize(
    ("sink", "key", "value", "why"),
    [
        ("iceberg", "write.format.default", "orc", "pyiceberg writes Parquet data files only, not orc"),
        ("paimon", "primary-key", "id", "the table's primary key is the transform's primary-keys"),
    ],
)
def test_a_table_property_the_sink_cannot_apply_is_refused_at_its_line(
    sink: str, key: str, value: str, why: str
) -> None:
    line, key_path, message = refusal(job({"type": sink, f"table.properties.{key}": value}))
    assert (line, key_path) == (7, f"sink.table.properties.{key}")
    assert message.startswith(f"table.properties.{key}={value}: {why}")


def test_workers_of_a_remote_paimon_warehouse_are_refused_without_the_row_kind_column() -> None:
    sink = {"type": "paimon", "catalog.properties.warehouse": "s3://bucket/warehouse"}
    _, key, message = refusal(job(sink, {"parallelism": 2}))
    assert key == "sink.table.properties.rowkind.field"
    assert message.startswith("2 workers writing a remote Paimon warehouse need the row-kind column")
    # one worker, a local warehouse (the workers take turns by a file lock) or the column: accepted
    read_job_text(job(sink), file="job.yaml")
    read_job_text(
        job({**sink, "catalog.properties.warehouse": "/tmp/w"}, {"parallelism": 2}), file="job.yaml"
    )
    with_column = {**sink, "table.properties.rowkind.field": "_ferry_row_kind"}
    read_job_text(job(with_column, {"parallelism": 2}), file="job.yaml")
