"""Refusals of a whole-job check (:func:`ferry.config.checks.check_supported`) are at the line and
column of the key the user wrote, with exit 2, as the model's own refusals are."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ferry.cli.main import main

HOLOGRES_TRY_EVOLVE = """\
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: t
sink:
  type: hologres
  endpoint: holo:80
  username: u
  password: p
  dbname: d
pipeline:
  name: to holo
  schema.change.behavior: try_evolve
"""


def test_a_sink_that_refuses_the_behaviour_is_refused_at_the_key(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(HOLOGRES_TRY_EVOLVE)
    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, str(job)])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(
            f"error: {job}:13:3: pipeline.schema.change.behavior: the hologres sink does not take TRY_EVOLVE"
        ), result.stderr


@pytest.mark.parametrize(
    ("sink", "line", "key", "message"),
    [
        (
            "  type: iceberg\n  catalog.properties.warehouse: /tmp/w\n  hadoop.conf.fs.s3a.endpoint: http://minio:9000\n",
            8,
            "hadoop.conf.fs.s3a.endpoint",
            "give its FileIO the same settings as catalog.properties (s3.endpoint",
        ),
        (
            "  type: iceberg\n  catalog.properties.type: hadoop\n  catalog.properties.warehouse: /tmp/w\n",
            7,
            "catalog.properties.type",
            "the hadoop catalog (Iceberg's Java file-system catalog) is not in pyiceberg; use sql",
        ),
        (
            "  type: doris\n  fenodes: fe:8030\n  username: root\n"
            "  table.create.auto-partition.properties.default-partition-key: dt\n",
            9,
            "table.create.auto-partition.properties.default-partition-key",
            "ferry does not create auto-partitioned tables",
        ),
    ],
)
def test_flink_cdc_sink_keys_ferry_lacks_are_refused_at_the_key(
    tmp_path: Path, sink: str, line: int, key: str, message: str
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(HOLOGRES_TRY_EVOLVE.split("sink:", maxsplit=1)[0] + "sink:\n" + sink)
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {job}:{line}:3: sink.{key}: "), result.stderr
    assert message in result.stderr


def test_ai_models_are_refused_with_the_alternative(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    pipeline = "pipeline:\n  model:\n    - model-name: CHAT\n      class-name: OpenAIChatModel\n"
    job.write_text(HOLOGRES_TRY_EVOLVE.split("sink:", maxsplit=1)[0] + "sink:\n  type: memory\n" + pipeline)
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {job}:8:3: pipeline.model: AI models "), result.stderr
    assert "pipeline.user-defined-function" in result.stderr
