r"""Options of the Kafka sink, in the spelling of Flink CDC's Kafka pipeline connector.

This module imports no Kafka client, so a job file validates without one.

.. code-block:: yaml

    sink:
      type: kafka
      properties.bootstrap.servers: broker-1:9092,broker-2:9092   # required
      properties.compression.type: zstd                # any librdkafka producer property
      value.format: debezium-json                      # or canal-json
      debezium-json.include-schema.enabled: false      # the Kafka Connect {"schema", "payload"} envelope
      topic: cdc-all-tables                            # default: one topic per table, named after it
      sink.tableId-to-topic.mapping: app.orders:orders;app.items_\.*:items   # else per table
      partition.strategy: hash-by-key                  # default; all-to-zero: partition 0 only
      key.format: json                                 # or csv: the table id, then the key's values
      sink.custom-header: team:sales,env:prod          # headers of every record
      sink.add-tableId-to-header-enabled: true         # headers namespace, schemaName, tableName
      sink.delivery-guarantee: at-least-once
      sink.upsert: false                               # compacted topics, tombstones after deletes
      partitions: 6                                    # of the topics the sink creates
      replication.factor: 3
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ferry.model.schema import TableId
from ferry.model.table_patterns import TablePatternError, TableSelector
from ferry.options import SinkConfigBase, fold_prefixed

#: Producer properties the sink sets unless ``properties.*`` overrides them: no duplicates or
#: reordering on retries, every in-sync replica acknowledges, and the Java client's partitioner, so
#: that a key lands in the partition a Java producer (Flink CDC, Kafka Connect) would choose.
DEFAULT_PRODUCER_PROPERTIES: dict[str, str] = {
    "enable.idempotence": "true",
    "acks": "all",
    "partitioner": "murmur2_random",
    "linger.ms": "5",
}


_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class KafkaSinkConfig(SinkConfigBase):
    """``properties.*`` go to the librdkafka producer (and the admin client that creates topics)."""

    type: Literal["kafka"] = "kafka"
    properties: dict[str, str] = Field(default_factory=dict)
    value_format: Literal["debezium-json", "canal-json"] = Field(
        default="debezium-json", alias="value.format"
    )
    #: Debezium JSON only: each record carries its table schema in the Kafka Connect envelope.
    include_schema: bool = Field(default=False, alias="debezium-json.include-schema.enabled")
    #: One topic for every table; by default each table has its own topic, named after its id.
    topic: str | None = Field(default=None, min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    #: ``(table pattern, topic)``: the topic of the tables a table pattern matches (the first that
    #: matches), when ``topic`` is not set; written ``db.t1:topic1;db.t2:topic2``. A pattern is read
    #: as a transform's ``source-table`` (:class:`~ferry.model.table_patterns.TableSelector`,
    #: Flink CDC's ``Selectors``): ``mydb.\.*`` is every table of ``mydb``.
    table_topics: tuple[tuple[str, str], ...] = Field(default=(), alias="sink.tableId-to-topic.mapping")
    #: ``hash-by-key``: the producer's partitioner spreads records by their key (a row's changes
    #: stay in one partition); ``all-to-zero``: every record goes to partition 0 (Flink CDC's default).
    partition_strategy: Literal["hash-by-key", "all-to-zero"] = Field(
        default="hash-by-key", alias="partition.strategy"
    )
    #: A record key's encoding: ``json``, the primary key as an object (``{"id": 42}``, Debezium's
    #: key); ``csv``, one CSV line of the table id then the key's values (Flink CDC's csv key).
    key_format: Literal["json", "csv"] = Field(default="json", alias="key.format")
    add_table_id_header: bool = Field(default=False, alias="sink.add-tableId-to-header-enabled")
    #: Headers of every record (``sink.custom-header: key1:value1,key2:value2``).
    custom_headers: tuple[tuple[str, str], ...] = Field(default=(), alias="sink.custom-header")
    delivery_guarantee: Literal["at-least-once", "exactly-once"] = Field(
        default="at-least-once", alias="sink.delivery-guarantee"
    )
    #: Compacted topics keyed by primary key; each delete is followed by a tombstone of its key.
    upsert: bool = Field(default=False, alias="sink.upsert")
    #: Partitions of the topics the sink creates; ``None``: the broker's ``num.partitions``.
    partitions: int | None = Field(default=None, ge=1)
    #: Replication factor of the topics the sink creates; ``None``: the broker's default.
    replication_factor: int | None = Field(default=None, ge=1, alias="replication.factor")
    #: How long a flush waits for the broker to acknowledge every record.
    flush_timeout_s: float = Field(default=60.0, gt=0, alias="sink.flush.timeout-s")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        return fold_prefixed(data, "properties", "properties")

    @field_validator("table_topics", mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        pairs = []
        for entry in (e.strip() for e in value.split(";")):
            if not entry:
                continue
            tables, *topics = entry.split(":")
            if len(topics) != 1 or not tables.strip() or not topics[0].strip():
                raise ValueError(f"{entry!r} is not table:topic (write db.t1:topic1;db.t2:topic2)")
            topic = topics[0].strip()
            if not _TOPIC.fullmatch(topic):
                raise ValueError(f"{topic!r} is not a Kafka topic name")
            try:
                _selector(tables.strip())
            except TablePatternError as e:
                raise ValueError(f"{entry!r}: {e}") from None
            pairs.append((tables.strip(), topic))
        return tuple(pairs)

    @field_validator("custom_headers", mode="before")
    @classmethod
    def _headers(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        headers = []
        for entry in (e.strip() for e in value.split(",")):
            if not entry:
                continue
            key, sep, header = entry.partition(":")
            if not sep or not key.strip():
                raise ValueError(f"{entry!r} is not key:value (write key1:value1,key2:value2)")
            headers.append((key.strip(), header.strip()))
        return tuple(headers)

    @model_validator(mode="after")
    def _check(self) -> KafkaSinkConfig:
        if not self.properties.get("bootstrap.servers"):
            raise ValueError("properties.bootstrap.servers is required")
        if self.delivery_guarantee == "exactly-once":
            raise ValueError(
                "sink.delivery-guarantee: exactly-once is not supported by the kafka sink: a Kafka "
                "transaction would have to commit the source offsets of ferry's consumer, which the sink "
                "does not own. Use at-least-once: records are keyed by primary key, so a replay after a "
                "restart rewrites the same keys (and compaction keeps the last one with sink.upsert)"
            )
        if self.include_schema and self.value_format != "debezium-json":
            raise ValueError(
                "debezium-json.include-schema.enabled applies to value.format debezium-json only"
            )
        if self.upsert and self.topic is not None:
            raise ValueError(
                "sink.upsert needs one topic per table: in a single compacted topic, rows of different "
                "tables with the same primary key would replace each other; remove 'topic'"
            )
        if "transactional.id" in self.properties:
            raise ValueError("properties.transactional.id: the kafka sink does not use transactions")
        return self

    def mapped_topic(self, table: TableId) -> str | None:
        """The topic ``sink.tableId-to-topic.mapping`` gives ``table``, if any."""
        return next((t for p, t in self.table_topics if _selector(p).matches(table)), None)

    def producer_properties(self) -> dict[str, str]:
        """The librdkafka producer configuration: ferry's defaults, then ``properties.*``."""
        return {**DEFAULT_PRODUCER_PROPERTIES, **self.properties}

    def admin_properties(self) -> dict[str, str]:
        """The configuration of the admin client that creates topics: ``properties.*`` alone."""
        return dict(self.properties)


@lru_cache(maxsize=256)
def _selector(pattern: str) -> TableSelector:
    """The table pattern of one ``sink.tableId-to-topic.mapping`` entry, read once."""
    return TableSelector(pattern)
