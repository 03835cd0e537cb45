"""Shared fixtures. Every service is real and started once per session, only if a test asks for it:
the Kafka broker here (``ferry.local.kafka_broker``), the others in the plugins below."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping

import pytest

from ferry.local.kafka_broker import (
    KafkaBroker,
    KafkaBrokerError,
    TopicFactory,
    create_topic,
    delete_topic,
)

pytest_plugins = [
    # the test services: PostgreSQL, MariaDB, the Fluss cluster, the schema registry
    "tests.support.postgres",
    "tests.support.mariadb",
    "tests.support.fluss",
    "tests.support.registry",
    # the real Debezium producers (Kafka Connect, the captured databases)
    "tests.support.fixtures",
]


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A single-node Apache Kafka broker on 127.0.0.1, shared by the whole session."""
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    """``bootstrap.servers`` of the session's broker, e.g. ``127.0.0.1:41234``."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def topic_factory(kafka_bootstrap: str) -> Iterator[TopicFactory]:
    """``topic_factory(partitions=1, config=None)`` creates a topic ``t-<uuid>``, deleted after the test."""
    created: list[str] = []

    def make(partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        name = f"t-{uuid.uuid4().hex}"
        create_topic(kafka_bootstrap, name, partitions=partitions, config=config)
        created.append(name)
        return name

    yield make
    for name in created:
        with contextlib.suppress(KafkaBrokerError):
            delete_topic(kafka_bootstrap, name, timeout=10.0)


@pytest.fixture
def group_id() -> str:
    """A consumer group id no other test uses."""
    return f"g-{uuid.uuid4().hex}"
