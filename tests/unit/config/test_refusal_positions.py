"""Refusals of a whole-job check (:func:`ferry.config.checks.check_supported`) are at the line and
column of the key the user wrote, with exit 2, as the model's own refusals are."""

from __future__ import annotations

from pathlib import Path

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
