"""Flink CDC's spellings of job-file keys beside ferry's, the keys ferry accepts and ignores (each
named in a warning at its line), and the refusals that name the alternative."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ferry.cli.main import main
from ferry.config import ConfigError, load_job_text
from ferry.config.job import BoundedMode, RuntimeMode
from ferry.config.loader import read_job_text

SOURCE = "source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:9092, topic: orders}\n"
DORIS = """\
sink:
  type: doris
  fenodes: 127.0.0.1:8030
  username: root
  password: ""
"""


def sink(*lines: str, head: str = DORIS) -> str:
    return SOURCE + head + "".join(f"  {line}\n" for line in lines)


def pipeline(*lines: str) -> str:
    return SOURCE + "sink: {type: memory}\npipeline:\n" + "".join(f"  {line}\n" for line in lines)


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        load_job_text(text, file="job.yaml")
    return str(e.value)


def test_doris_is_the_selectdb_sink_and_its_jdbc_url_is_optional() -> None:
    config = load_job_text(sink()).sink
    assert config.type == "selectdb"
    assert config.jdbc_url == "jdbc:mysql://127.0.0.1:9030"  # type: ignore[attr-defined]
    given = load_job_text(sink("jdbc-url: jdbc:mysql://fe:9031")).sink
    assert given.jdbc_url == "jdbc:mysql://fe:9031"  # type: ignore[attr-defined]


def test_an_error_in_a_doris_sink_is_at_its_key() -> None:
    assert refusal(sink("sink.label-prefix: 'no spaces'")).startswith("job.yaml:7:3: sink.sink.label-prefix")


@pytest.mark.parametrize(
    ("flink", "ferry", "value", "attribute", "expected"),
    [
        ("sink.enable.batch-mode", "sink.enable-batch-mode", "false", "enable_batch_mode", False),
        (
            "table.schema-change.timeout",
            "schema.evolution.timeout",
            "5min",
            "schema_evolution_timeout",
            300.0,
        ),
        ("sink.connect.timeout-ms", "sink.connect.timeout-s", "2500", "connect_timeout", 3),
    ],
)
def test_flink_and_ferry_spellings_of_a_sink_option(
    flink: str, ferry: str, value: str, attribute: str, expected: object
) -> None:
    ferry_value = "3" if ferry == "sink.connect.timeout-s" else value
    assert getattr(load_job_text(sink(f"{flink}: {value}")).sink, attribute) == expected
    assert getattr(load_job_text(sink(f"{ferry}: {ferry_value}")).sink, attribute) == expected
    assert "keep one" in refusal(sink(f"{flink}: {value}", f"{ferry}: {ferry_value}"))


def test_starrocks_takes_flink_s_timeouts() -> None:
    head = "sink:\n  type: starrocks\n  jdbc-url: jdbc:mysql://fe:9030\n  username: root\n"
    config = load_job_text(
        sink("table.schema-change.timeout: 30min", "sink.connect.timeout-ms: 30000", head=head)
    )
    assert (config.sink.schema_evolution_timeout, config.sink.connect_timeout) == (1800.0, 30)  # type: ignore[attr-defined]
    assert "whole number of milliseconds" in refusal(sink("sink.connect.timeout-ms: soon", head=head))


def test_the_schema_operator_timeout_in_both_spellings() -> None:
    for key in ("schema-operator.rpc-timeout", "schema.operator.rpc-timeout"):
        assert load_job_text(pipeline(f"{key}: 1min")).pipeline.schema_operator_rpc_timeout == timedelta(
            minutes=1
        )
    message = refusal(pipeline("schema-operator.rpc-timeout: 1min", "schema.operator.rpc-timeout: 2min"))
    assert (
        message.startswith("job.yaml:5:3: pipeline.schema.operator.rpc-timeout: ") and "keep one" in message
    )


def test_local_time_zone_is_a_time_zone() -> None:
    assert (
        load_job_text(pipeline("local-time-zone: Asia/Shanghai")).pipeline.local_time_zone == "Asia/Shanghai"
    )
    assert refusal(pipeline("local-time-zone: Mars/Olympus")).startswith(
        "job.yaml:4:3: pipeline.local-time-zone: "
    )


def test_batch_runtime_mode_is_a_bounded_read() -> None:
    job = load_job_text(pipeline("execution.runtime-mode: BATCH"))
    assert job.pipeline.execution_runtime_mode is RuntimeMode.BATCH
    assert job.source.scan_bounded_mode is BoundedMode.LATEST_OFFSET
    assert (
        load_job_text(pipeline("execution.runtime-mode: streaming")).source.scan_bounded_mode
        is BoundedMode.UNBOUNDED
    )
    assert "STREAMING" in refusal(pipeline("execution.runtime-mode: MICRO_BATCH"))


def test_flink_runtime_keys_are_accepted_and_named_in_warnings_at_their_lines() -> None:
    text = pipeline(
        "name: Sync MySQL Database to Doris",
        "operator.uid.prefix: cdc",
        "sink.partitioning.strategy: TABLE_ID",
    )
    job, warnings = read_job_text(text, file="job.yaml")
    assert job.pipeline.name == "Sync MySQL Database to Doris"
    assert [(w.line, w.column, w.key_path) for w in warnings] == [
        (5, 3, "pipeline.operator.uid.prefix"),
        (6, 3, "pipeline.sink.partitioning.strategy"),
    ]
    assert all(w.message.startswith("accepted and ignored: ") for w in warnings)
    _, sink_warnings = read_job_text(sink("benodes: 127.0.0.1:8040", "sink.buffer-flush.interval: 10s"))
    assert [w.key_path for w in sink_warnings] == ["sink.benodes", "sink.sink.buffer-flush.interval"]


def test_an_ignored_key_of_another_sink_is_still_unknown() -> None:
    assert "unknown key" in refusal(pipeline("benodes: x"))


def test_the_hadoop_catalog_is_refused_at_its_line_naming_the_alternative() -> None:
    text = (
        SOURCE
        + "sink:\n  type: iceberg\n  catalog.properties.type: hadoop\n  catalog.properties.warehouse: /tmp/w\n"
    )
    message = refusal(text)
    assert message.startswith("job.yaml:4:3: sink.catalog.properties.type: ")
    assert "use sql" in message and "rest" in message


def test_parallelism_is_accepted() -> None:
    assert load_job_text(pipeline("parallelism: 2")).pipeline.parallelism == 2
    assert refusal(pipeline("parallelism: 0")).startswith("job.yaml:4:3: pipeline.parallelism: ")


def test_validate_prints_the_warnings_and_exits_0(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(pipeline("operator.uid.prefix: cdc"))
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 0, result.output
    assert f"warning: {job}:4:3: pipeline.operator.uid.prefix: accepted and ignored: " in result.stderr
    assert ": valid." in result.stdout


def test_validate_refuses_with_exit_2_at_the_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(pipeline("route-mode: SOME_MATCH"))
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 2
    assert f"error: {job}:4:3: pipeline.route-mode: " in result.stderr
