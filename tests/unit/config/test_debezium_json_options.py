"""The Debezium JSON format's options of the Kafka source (``debezium-json.*``), and the discovery
of new topics (``scan.topic-partition-discovery.interval``) as it reaches the consumer."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from ferry.config import ConfigError, JobConfig, load_job_text
from ferry.config.job import DeleteTombstoneHandling
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner


def job(*source_lines: str, tmp_path: Path | None = None) -> str:
    state = f"sqlite:///{tmp_path}/state.db" if tmp_path is not None else "sqlite:///:memory:"
    lines = "".join(f"  {line}\n" for line in source_lines)
    return (
        "source:\n"
        "  type: kafka\n"
        "  properties.bootstrap.servers: 127.0.0.1:9\n"
        "  topic-pattern: shop\\.inventory\\..*\n"
        f"{lines}"
        "sink:\n"
        "  type: memory\n"
        "pipeline:\n"
        f"  state.url: '{state}'\n"
    )


def load(text: str) -> JobConfig:
    return load_job_text(textwrap.dedent(text), file="job.yaml", env={})


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(text)
    return info.value


def test_the_delete_mode_defaults_to_debeziums() -> None:
    assert load(job()).source.delete_tombstone_handling_mode is DeleteTombstoneHandling.TOMBSTONE
    for mode in ("tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone"):
        source = load(job(f"debezium-json.delete.tombstone.handling.mode: {mode}")).source
        assert source.delete_tombstone_handling_mode.value == mode


def test_the_drop_mode_is_refused_with_what_to_change() -> None:
    error = refused(job("debezium-json.delete.tombstone.handling.mode: drop"))
    assert error.line == 5 and error.key_path == "source.debezium-json.delete.tombstone.handling.mode"
    assert "removes every delete before it reaches Kafka" in str(error)
    assert "tombstone (Debezium's default), rewrite, rewrite-with-tombstone or delete-to-tombstone" in str(
        error
    )


def test_an_unknown_delete_mode_is_refused() -> None:
    error = refused(job("debezium-json.delete.tombstone.handling.mode: delete"))
    assert "delete-to-tombstone" in str(error)


def test_payload_only_records_without_definitions_are_refused_when_the_job_says_so() -> None:
    error = refused(job("debezium-json.schema-include: false"))
    assert error.key_path == "source.debezium-json.schema-include"
    assert "value.converter.schemas.enable=true" in str(error)
    assert "schema-change.topic" in str(error) and "debezium-json.infer-types: true" in str(error)
    # typed by the schema-change topic's definitions, or inferred on purpose: accepted
    load(job("debezium-json.schema-include: false", "schema-change.topic: shop"))
    source = load(job("value.debezium-json.schema-include: false", "debezium-json.infer-types: true")).source
    assert source.infer_types is True and source.schema_include is False


def test_the_debezium_json_options_belong_to_its_format() -> None:
    error = refused(job("value.format: canal-json", "debezium-json.infer-types: true"))
    assert "only used when value.format is debezium-json (it is canal-json)" in str(error)


def test_new_topics_are_discovered_every_30_seconds_by_default(tmp_path: Path) -> None:
    config = load(job(tmp_path=tmp_path))
    assert config.source.topic_partition_discovery_interval == timedelta(seconds=30)
    runner = build_runner(config, sink=MemorySink())
    try:
        assert runner.source.settings["topic.metadata.refresh.interval.ms"] == "30000"  # type: ignore[attr-defined]
    finally:
        runner.close()


def test_the_discovery_interval_and_an_explicit_refresh(tmp_path: Path) -> None:
    config = load(job("scan.topic-partition-discovery.interval: 2s", tmp_path=tmp_path))
    assert config.source.consumer_properties()["topic.metadata.refresh.interval.ms"] == "2000"
    given = load(
        job(
            "scan.topic-partition-discovery.interval: 2s",
            "properties.topic.metadata.refresh.interval.ms: 5000",
            tmp_path=tmp_path,
        )
    )
    assert given.source.consumer_properties()["topic.metadata.refresh.interval.ms"] == "5000"
