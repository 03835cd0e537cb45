"""Shared fixtures. The Kafka broker is real: started once per session, only if a test asks for it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping

import pytest

from ferry.testing.fluss import FlussCluster, shared_cluster, stop_shared_cluster
from ferry.testing.kafka_broker import (
    KafkaBroker,
    KafkaBrokerError,
    TopicFactory,
    create_topic,
    delete_topic,
)
from ferry.testing.mariadb import MariaDbServer
from ferry.testing.postgres import PostgresServer
from tests.support.registry import SchemaRegistry

#: The real Debezium producers (Kafka Connect, the captured databases): started only when asked for.
pytest_plugins = ["tests.support.fixtures"]


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 in a temporary directory, shared by the whole session.

    Its database ``ferry`` is owned by the password user ``ferry``: ``postgres_server.conninfo``.
    """
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDbServer]:
    """A MariaDB server on 127.0.0.1 in a temporary directory, shared by the whole session.

    Its password user ``mariadb_server.user`` has every privilege, on ``ferry`` and new databases.
    """
    with MariaDbServer() as server:
        yield server


@pytest.fixture(scope="session")
def fluss_cluster() -> Iterator[FlussCluster]:
    """A real Apache Fluss cluster (ZooKeeper, CoordinatorServer, TabletServer) on 127.0.0.1, shared by
    the whole session (and by the conformance suite's Fluss backend): ``fluss_cluster.bootstrap_servers``."""
    yield shared_cluster()
    stop_shared_cluster()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """A real schema registry (Apicurio Registry) on 127.0.0.1, shared by the whole session:
    ``schema_registry.url`` is its Confluent-compatible API."""
    with SchemaRegistry() as registry:
        yield registry
