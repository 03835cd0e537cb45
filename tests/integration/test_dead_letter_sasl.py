"""A broker that takes clients only through SASL/PLAIN: the pipeline reads it with the source's
credentials, and its dead letters get through with the same ones."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferry.config.loader import load_job_text
from ferry.local.jvm import HOST
from ferry.local.kafka_broker import KafkaBroker, create_topic, produce
from ferry.local.ports import free_ports
from ferry.model.schema import TableId
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table, read_all

pytestmark = pytest.mark.integration

USER, PASSWORD = "ferry", "ferry-secret"


@pytest.fixture(scope="module")
def secured_broker() -> Iterator[tuple[KafkaBroker, str]]:
    """A broker of its own with a SASL/PLAIN listener beside its PLAINTEXT one (which the test uses
    to set up and to read back): the broker and the SASL listener's address."""
    port, controller, sasl = free_ports(3)
    listeners = f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller},SASL_PLAINTEXT://{HOST}:{sasl}"
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
    properties = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }
    with KafkaBroker(port=port, controller_port=controller, properties=properties) as broker:
        yield broker, f"{HOST}:{sasl}"


def test_dead_letters_reach_a_sasl_broker_with_the_sources_credentials(
    secured_broker: tuple[KafkaBroker, str], tmp_path: Path, group_id: str
) -> None:
    broker, sasl_bootstrap = secured_broker
    plain = broker.bootstrap_servers
    topic = f"orders-{group_id}"
    create_topic(plain, topic)
    create_topic(plain, f"{group_id}.dlq")
    table = orders_table()
    rows = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 6)]
    produce(
        plain,
        topic,
        [rows[0][1], b"{not json", *(v for _, v in rows[1:])],
        keys=[rows[0][0], None, *(k for k, _ in rows[1:])],
    )
    source = (
        "  properties.security.protocol: SASL_PLAINTEXT\n"
        "  properties.sasl.mechanism: PLAIN\n"
        f"  properties.sasl.username: {USER}\n"
        f"  properties.sasl.password: {PASSWORD}\n"
    )
    # a dead-letter producer without the credentials is not let in: it would fail after 20 s
    retries = "  restart-strategy.timeout: 20s\n"
    text = job_yaml(sasl_bootstrap, topic, tmp_path, group_id, source_extra=source, pipeline_extra=retries)
    sink = MemorySink()
    runner = build_runner(load_job_text(text), sink=sink)
    runner.run(threading.Event())  # bounded: to the end of the topic
    assert sorted(r["id"] for r in sink.rows(TableId.parse("inventory.orders"))) == [1, 2, 3, 4, 5]
    [dead] = read_all(plain, f"{group_id}.dlq", expected=1)
    headers = dict(dead.headers())
    assert (dead.value(), headers["ferry.offset"], headers["ferry.topic"]) == (
        b"{not json",
        b"1",
        topic.encode(),
    )
