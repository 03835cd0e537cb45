"""The Kafka sink: change events written to Kafka topics as Debezium JSON or Canal JSON.

The sink itself is :class:`ferry.sinks.kafka.sink.KafkaSink` (loaded through
:func:`ferry.sinks.sink_class`); its options are :class:`ferry.sinks.kafka.config.KafkaSinkConfig`.
Importing this package does not import the Kafka client.
"""

from __future__ import annotations

from ferry.sinks.kafka.config import KafkaSinkConfig

__all__ = ["KafkaSinkConfig"]
