"""The pipeline examples of Flink CDC's documentation (quickstarts, core concepts) as ferry reads
them: only the ``source`` block replaced by a Kafka source, each validates or is refused naming the
one key ferry lacks.

The examples are the shared fixtures ``apache-flink-cdc/docs-extracted/*.yaml``: code blocks of
apache/flink-cdc's ``docs/content/docs`` at commit 23fb108e9bea7f689230fa188e5f80c6eef0dbc3 (the
fixtures' README names each page)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.shared import SHARED

from ferry.config import ConfigError
from ferry.config.checks import check_supported
from ferry.config.loader import read_job_text

EXAMPLES = sorted((SHARED / "fixtures/apache-flink-cdc/docs-extracted").glob("*.yaml"))
KAFKA_SOURCE = {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:9092", "topic": "app_db"}

#: Example → the one key ferry refuses in it; every other example validates. (Its functions are
#: Java classes; ferry's are Python callables.)
REFUSED = {"data-pipeline-full-example": "pipeline.user-defined-function[0].classpath"}


def with_kafka_source(path: Path) -> str:
    job = yaml.safe_load(path.read_text(encoding="utf-8"))
    job["source"] = KAFKA_SOURCE
    return yaml.safe_dump(job, sort_keys=False)


def test_the_examples_are_there() -> None:
    assert len(EXAMPLES) == 6
    assert set(REFUSED) <= {p.stem for p in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_flink_cdc_example_validates_or_names_the_one_key_ferry_lacks(path: Path) -> None:
    text = with_kafka_source(path)
    if path.stem in REFUSED:
        with pytest.raises(ConfigError) as e:
            read_job_text(text, file=path.name)
        assert [p.key_path for p in e.value.problems] == [REFUSED[path.stem]]
        return
    job, _ = read_job_text(text, file=path.name)
    check_supported(job)
    assert job.pipeline.name == yaml.safe_load(path.read_text())["pipeline"]["name"]
