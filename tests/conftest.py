"""Shared fixtures. Every service is real and started once per session, only if a test asks for it:
the Kafka broker here (``ferry.local.kafka_broker``), the others in the plugins below.

With pytest-xdist (``make test``: ``--dist loadgroup``) a session is one per test process, and
:func:`pytest_collection_modifyitems` groups the tests so that each costly service starts once:
a file's tests stay in one process, and the files needing one of :data:`SHARED_SERVICES` share one.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

from ferry.local.kafka_broker import (
    KafkaBroker,
    KafkaBrokerError,
    TopicFactory,
    create_topic,
    delete_topic,
)

# The property-based tests draw the same examples at every run of the suite, so that it passes or
# fails on the code, never on the draw; FERRY_HYPOTHESIS_PROFILE=explore draws new ones each run (a
# failure found there becomes a named example).
settings.register_profile("suite", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("FERRY_HYPOTHESIS_PROFILE", "suite"))

pytest_plugins = [
    # the test services: PostgreSQL, MariaDB, the Fluss cluster, the schema registry, the Hive Metastore
    "tests.support.postgres",
    "tests.support.mariadb",
    "tests.support.fluss",
    "tests.support.registry",
    "tests.support.hive_metastore",
    # the real Debezium producers (Kafka Connect, the captured databases)
    "tests.support.fixtures",
]


#: Session fixtures whose start costs most (a JVM service of its own, or databases and the Debezium
#: captures of a workload): the files needing one of them run in the same test process.
SHARED_SERVICES = frozenset(
    {"schema_registry", "fluss_cluster", "kafka_connect", "binlog_mariadb_server", "logical_postgres_server"}
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``: mark every test with its group (its file, or the files it shares
    a service of :data:`SHARED_SERVICES` with), and order the groups so that those sharing services
    come first, then those with integration tests, then the rest: the longest work starts first and
    the short tests fill in at the end. Before xdist's own hook, which reads the marks."""
    # an xdist worker sees ``loadgroup`` set (its own ``dist`` is "no")
    if not getattr(config.option, "loadgroup", False) and config.getoption("dist", "no") != "loadgroup":
        return
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    # files joined by the services they share (a small union-find over files and services)
    parent: dict[object, object] = {}

    def root(node: object) -> object:
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    def services(item: pytest.Item) -> set[str]:
        named = {name for mark in item.iter_markers("services") for name in mark.args}
        return SHARED_SERVICES.intersection({*getattr(item, "fixturenames", ()), *named})

    for path, tests in files.items():
        for item in tests:
            for service in services(item):
                parent[root(path)] = root(service)
    groups: dict[object, list[Path]] = {}
    for path in files:
        groups.setdefault(root(path), []).append(path)

    def rank(paths: list[Path]) -> int:
        tests = [item for path in paths for item in files[path]]
        if any(services(item) for item in tests):
            return 0
        return 1 if any(item.get_closest_marker("integration") for item in tests) else 2

    ordered: list[pytest.Item] = []
    for paths in sorted(groups.values(), key=rank):
        services = sorted(str(s) for s in parent if isinstance(s, str) and root(s) == root(paths[0]))
        name = "+".join(services) if services else str(paths[0].relative_to(config.rootpath))
        for path in paths:
            for item in files[path]:
                item.add_marker(pytest.mark.xdist_group(name))
                ordered.append(item)
    items[:] = ordered


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
