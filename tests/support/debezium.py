"""Debezium connector configurations in the modes users run, and waiting until a connector has
emitted everything up to a point of its source's log.

Several MySQL connectors read the same binary log at once, each with its own ``topic.prefix``,
``database.server.id`` and schema-history topic, so one workload feeds every mode. Data topics are
created by Connect with 3 partitions. Debezium's defaults (``tombstones.on.delete=true``,
``decimal.handling.mode=precise``, ``time.precision.mode=adaptive_time_microseconds``) are kept
unless the mode is about changing one; the one exception is ``skipped.operations``: its default
(``t``) makes the MySQL connector drop a TRUNCATE without a trace (no truncate event, nothing on the
schema-change topic either), so the MySQL connectors emit truncate events (``skipped.operations=none``)
and a truncation can reach the sinks at all.

Two PostgreSQL connectors read the same publication (``FOR ALL TABLES``, whose default ``publish``
includes ``truncate``: pgoutput sends truncate messages), each with its own replication slot and
``topic.prefix``. One keeps every default, ``skipped.operations=t`` too (a TRUNCATE never reaches its
topics), on topics of 1 partition; the other runs topics of 3 partitions and emits truncate
events (``skipped.operations=none``), which a sink must order with the rows of the other partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.connect import KafkaConnect, KafkaConnectError, wait_until
from tests.support.mariadb import MariaDbServer
from tests.support.postgres import PostgresServer
from tests.support.sources import PUBLICATION, BinlogPosition

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DATA_TOPIC_PARTITIONS = 3


@dataclass(frozen=True)
class CaptureMode:
    """One way users run Debezium: the connector settings that differ from the defaults."""

    name: str
    description: str
    settings: Mapping[str, str] = field(default_factory=dict)
    #: The records are flattened by ``ExtractNewRecordState``: no envelope, added ``__`` fields.
    flattened: bool = False
    #: Whether a TRUNCATE reaches the topics (``ExtractNewRecordState`` drops truncate events).
    emits_truncate: bool = True
    #: Source keys the job file of this mode says (what the connector's settings mean to ferry).
    job_options: Mapping[str, str] = field(default_factory=dict)
    #: The message ``ferry run`` refuses the mode's job file with at validation, or None.
    refused: str | None = None

    @property
    def topic_prefix(self) -> str:
        return f"dbz-{self.name}"

    @property
    def connector_name(self) -> str:
        return f"{self.topic_prefix}-connector"


def _unwrap(delete_mode: str | None = None) -> dict[str, str]:
    """``ExtractNewRecordState`` with its defaults but ``delete.tombstone.handling.mode``."""
    settings = {
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    if delete_mode is not None:
        settings["transforms.unwrap.delete.tombstone.handling.mode"] = delete_mode
    return settings


MYSQL_MODES: tuple[CaptureMode, ...] = (
    CaptureMode("envelope", "JSON converter with schemas (Debezium's defaults)"),
    CaptureMode(
        "schemaless",
        "JSON converter without schemas (payload only), keys and values",
        {"key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"},
    ),
    CaptureMode(
        "flattened",
        "ExtractNewRecordState: deletes rewritten with __deleted, op/table/source.ts_ms added",
        {
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            # Debezium 3 spells the old delete.handling.mode=rewrite this way (the old key is gone)
            "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
            "transforms.unwrap.add.fields": "op,table,source.ts_ms",
        },
        flattened=True,
        emits_truncate=False,
        job_options={"debezium-json.delete.tombstone.handling.mode": "rewrite"},
    ),
    CaptureMode(
        "flattened-defaults",
        "ExtractNewRecordState at its defaults: a delete is a null row (delete.tombstone.handling.mode=tombstone)",
        _unwrap(),
        flattened=True,
        emits_truncate=False,
    ),
    CaptureMode(
        "flattened-rewrite-with-tombstone",
        "ExtractNewRecordState, rewrite-with-tombstone, payload only: __deleted rows, then tombstones",
        {
            **_unwrap("rewrite-with-tombstone"),
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
        },
        flattened=True,
        emits_truncate=False,
        job_options={"debezium-json.delete.tombstone.handling.mode": "rewrite-with-tombstone"},
    ),
    CaptureMode(
        "flattened-delete-to-tombstone",
        "ExtractNewRecordState, delete-to-tombstone: a delete is a tombstone alone",
        _unwrap("delete-to-tombstone"),
        flattened=True,
        emits_truncate=False,
        job_options={"debezium-json.delete.tombstone.handling.mode": "delete-to-tombstone"},
    ),
    CaptureMode(
        "flattened-drop",
        "ExtractNewRecordState, drop: deletes never reach Kafka (the job is refused)",
        _unwrap("drop"),
        flattened=True,
        emits_truncate=False,
        job_options={"debezium-json.delete.tombstone.handling.mode": "drop"},
        refused="delete.tombstone.handling.mode=drop removes every delete before it reaches Kafka",
    ),
    CaptureMode(
        "decimal-string-time-connect",
        "decimal.handling.mode=string, time.precision.mode=connect",
        {"decimal.handling.mode": "string", "time.precision.mode": "connect"},
    ),
    CaptureMode(
        "decimal-double-time-micros",
        "decimal.handling.mode=double, time.precision.mode=adaptive_time_microseconds",
        {"decimal.handling.mode": "double", "time.precision.mode": "adaptive_time_microseconds"},
    ),
)

POSTGRES_MODES: tuple[CaptureMode, ...] = (
    CaptureMode(
        "postgres",
        "PostgreSQL connector, pgoutput, JSON converter with schemas (Debezium's defaults: "
        "a TRUNCATE is not emitted), topics of 1 partition",
        {"topic.creation.default.partitions": "1"},
        emits_truncate=False,
    ),
    CaptureMode(
        "postgres-partitioned",
        "PostgreSQL connector, pgoutput, JSON converter with schemas, topics of 3 partitions, "
        "truncate events emitted (skipped.operations=none)",
        {"skipped.operations": "none"},
    ),
)


def data_topic_partitions(mode: CaptureMode) -> int:
    """How many partitions Connect gives the data topics of ``mode``."""
    return int(mode.settings.get("topic.creation.default.partitions", DATA_TOPIC_PARTITIONS))


def _common(bootstrap: str, mode: CaptureMode) -> dict[str, str]:
    return {
        "tasks.max": "1",
        "topic.prefix": mode.topic_prefix,
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
        "topic.creation.default.partitions": str(DATA_TOPIC_PARTITIONS),
        "topic.creation.default.replication.factor": "1",
        # the tests wait on committed offsets: let them follow the records closely
        "offset.flush.interval.ms": "250",
    }


def mysql_connector_config(
    mode: CaptureMode, source: MariaDbServer, databases: list[str], *, bootstrap: str, server_id: int
) -> dict[str, str]:
    """The MySQL connector reading ``databases`` of ``source``'s binary log in ``mode``."""
    return {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": source.host,
        "database.port": str(source.port),
        "database.user": source.user,
        "database.password": source.password,
        "database.server.id": str(server_id),
        "database.include.list": ",".join(databases),
        "database.ssl.mode": "disabled",
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "schema.history.internal.kafka.topic": f"{mode.topic_prefix}.schema-history",
        "skipped.operations": "none",
        **_common(bootstrap, mode),
        **mode.settings,
    }


def postgres_connector_config(
    mode: CaptureMode, source: PostgresServer, schemas: list[str], *, bootstrap: str
) -> dict[str, str]:
    """The PostgreSQL connector (``pgoutput``) reading ``schemas`` of ``source``'s database."""
    slot = mode.topic_prefix.replace("-", "_")
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": source.host,
        "database.port": str(source.port),
        "database.user": source.user,
        "database.password": source.password,
        "database.dbname": source.database,
        "plugin.name": "pgoutput",
        "publication.name": PUBLICATION,
        "publication.autocreate.mode": "disabled",
        "slot.name": slot,
        "schema.include.list": ",".join(schemas),
        **_common(bootstrap, mode),
        **mode.settings,
    }


# --------------------------------------------------------------------------------------------------
# Waiting until a connector has emitted everything
# --------------------------------------------------------------------------------------------------


def binlog_offset_reached(position: BinlogPosition) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a MySQL connector's committed offset covers an event written at ``position`` or
    later (its ``file``/``pos`` are where the transaction of its last record began)."""

    def reached(offset: Mapping[str, Any]) -> bool:
        if "file" not in offset or "pos" not in offset or offset.get("snapshot") in (True, "true"):
            return False
        return BinlogPosition.of(str(offset["file"]), int(offset["pos"])) >= position

    return reached


def wal_offset_reached(lsn: int) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a PostgreSQL connector's committed offset covers a change at ``lsn`` or later."""

    def reached(offset: Mapping[str, Any]) -> bool:
        value = offset.get("lsn")
        return value is not None and offset.get("snapshot") not in (True, "true") and int(value) >= lsn

    return reached


def wait_emitted(
    connect: KafkaConnect,
    connector: str,
    reached: Callable[[Mapping[str, Any]], bool],
    what: str,
    timeout: float = 180.0,
) -> None:
    """Wait until ``connector`` has committed an offset that ``reached`` accepts: Connect commits a
    source offset only once the broker acknowledged every record before it, so by then each of
    them is in its topic. A failed connector raises at once with its trace."""
    last: list[Any] = [None]

    def committed() -> bool:
        connect.fail_if_failed(connector)
        offsets = connect.committed_offsets(connector)
        last[0] = offsets
        return any(reached(entry.get("offset") or {}) for entry in offsets)

    try:
        wait_until(committed, timeout, lambda: f"connector {connector!r} emitted {what}")
    except KafkaConnectError as exc:
        raise KafkaConnectError(
            f"{exc}; its last committed offsets: {last[0]}; end of the worker's log:\n{connect.log_tail(30)}"
        ) from None
