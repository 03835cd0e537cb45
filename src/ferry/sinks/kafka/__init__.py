"""The Kafka sink: change events written to Kafka topics as Debezium JSON or Canal JSON.

The sink itself is :class:`ferry.sinks.kafka.sink.KafkaSink`, loaded through its declaration; its
options are :class:`ferry.sinks.kafka.config.KafkaSinkConfig`. The Kafka client is one of ferry's
own dependencies (no extra); importing this package does not import it.
"""

from __future__ import annotations

from ferry.sinks.base import ChangeKind as K
from ferry.sinks.base import SinkCapabilities
from ferry.sinks.base import Support as S
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.kafka.config import KafkaSinkConfig

KAFKA = SinkDeclaration(
    type="kafka",
    config=KafkaSinkConfig,
    capabilities=SinkCapabilities(
        changes={K.CREATE_TABLE: S.APPLY, **{kind: S.IGNORED for kind in K if kind is not K.CREATE_TABLE}},
        notes={K.CREATE_TABLE: "creates the topic (compacted in upsert mode)"},
    ),
    sink_class="ferry.sinks.kafka.sink:KafkaSink",
)

__all__ = ["KAFKA", "KafkaSinkConfig"]
