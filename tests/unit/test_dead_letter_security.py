"""The dead-letter producer connects to the source's brokers as the source's consumer does: with
its security settings (SASL, SSL), and without the settings only a consumer takes."""

from __future__ import annotations

from pathlib import Path

from ferry.config.loader import load_job_text
from ferry.connectors.kafka.dead_letter import KafkaDeadLetter
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner

SECURED = """
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  properties.security.protocol: SASL_SSL
  properties.sasl.mechanism: SCRAM-SHA-512
  properties.sasl.username: ferry
  properties.sasl.password: s3cret
  properties.ssl.endpoint.identification.algorithm: none
  properties.enable.ssl.certificate.verification: 'false'
  properties.socket.keepalive.enable: 'true'
  properties.client.id: orders-reader
  properties.auto.offset.reset: earliest
  properties.isolation.level: read_committed
  properties.session.timeout.ms: '30000'
  topic: shop.inventory.orders
  value.format: debezium-json
sink:
  type: memory
pipeline:
  name: orders
  state.url: sqlite:///{state}
"""


def test_the_dead_letter_producer_takes_the_sources_security_settings(tmp_path: Path) -> None:
    runner = build_runner(load_job_text(SECURED.format(state=tmp_path / "state.db")), sink=MemorySink())
    try:
        dead_letter = runner.dead_letter
        assert isinstance(dead_letter, KafkaDeadLetter)
        settings = dead_letter.settings
        assert {
            k: settings[k] for k in settings if k.startswith(("security.", "sasl.", "ssl.", "enable.ssl."))
        } == {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "ferry",
            "sasl.password": "s3cret",
            "ssl.endpoint.identification.algorithm": "none",
            "enable.ssl.certificate.verification": "false",
        }
        assert settings["bootstrap.servers"] == "127.0.0.1:9"
        assert settings["socket.keepalive.enable"] == "true" and settings["client.id"] == "orders-reader"
        # a producer refuses (or warns of) a consumer's settings
        for consumer_only in ("group.id", "auto.offset.reset", "isolation.level", "session.timeout.ms"):
            assert consumer_only not in settings
    finally:
        runner.close()
