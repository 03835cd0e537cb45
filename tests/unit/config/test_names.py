"""Kafka names derived from free-text pipeline names (Flink CDC's ``MySQL to Kafka Pipeline``)."""

from __future__ import annotations

import pytest

from ferry.config import load_job_text
from ferry.config.names import MAX_DERIVED_LENGTH, is_kafka_name, kafka_name

JOB = """\
source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:9092, topic: orders}
sink: {type: memory}
pipeline: {name: %s}
"""


@pytest.mark.parametrize("name", ["shop", "shop.orders_v2", "a-b", "x" * MAX_DERIVED_LENGTH])
def test_a_legal_name_is_kept(name: str) -> None:
    assert kafka_name(name) == name


@pytest.mark.parametrize(
    "name", ["MySQL to Kafka Pipeline", "Sync MySQL Database to Doris", "订单同步", "..", "a/b", "x" * 300]
)
def test_any_other_name_becomes_a_legal_one(name: str) -> None:
    derived = kafka_name(name)
    assert is_kafka_name(derived)
    assert derived == kafka_name(name)  # stable across runs: the group stays the same


def test_the_derived_name_reads_like_the_name_and_tells_close_names_apart() -> None:
    assert kafka_name("MySQL to Kafka Pipeline").startswith("MySQL-to-Kafka-Pipeline-")
    assert kafka_name("a b") != kafka_name("a-b") == "a-b"
    assert kafka_name("a b") != kafka_name("a  b")


def test_the_group_and_the_dead_letter_topic_follow_a_name_with_spaces() -> None:
    pipeline = load_job_text(JOB % "MySQL to Kafka Pipeline").pipeline
    assert pipeline.name == "MySQL to Kafka Pipeline"
    assert pipeline.kafka_name == kafka_name("MySQL to Kafka Pipeline")
    assert pipeline.dead_letter_topic == f"{pipeline.kafka_name}.dlq"


def test_a_legal_name_keeps_its_group_and_topic() -> None:
    pipeline = load_job_text(JOB % "shop").pipeline
    assert (pipeline.kafka_name, pipeline.dead_letter_topic) == ("shop", "shop.dlq")
