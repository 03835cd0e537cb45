"""What connector options mean for state: data, not branches.

A ``WITH``-clause change is judged by the changed option alone. Most options do not touch state.
The ones that do are listed here: the connector itself, options that decide the changelog a source
emits, options that split a table into chunks or shards, and options that declare a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ferry.sql.model import Changelog

__all__ = [
    "CHANGELOG_OPTIONS",
    "KEY_OPTIONS",
    "RESTORE_IGNORED_OPTIONS",
    "SHARDING_OPTIONS",
    "OptionRole",
    "option_role",
    "source_changelog",
]

OptionRole = Literal["connector", "changelog", "sharding", "key", "startup", "other"]


@dataclass(frozen=True, slots=True)
class _OptionRule:
    role: OptionRole
    connectors: frozenset[str] | None  # None: any connector
    meaning: str


CDC_CONNECTORS = frozenset(
    {
        "mysql-cdc",
        "postgres-cdc",
        "oracle-cdc",
        "sqlserver-cdc",
        "tidb-cdc",
        "db2-cdc",
        "oceanbase-cdc",
        "vitess-cdc",
        "polardbx-cdc",
        "mongodb-cdc",
        "mysql",
        "postgres",
        "mongodb",
    }
)
"""Connectors that read a database's change log (``mysql`` and friends are the VVR names)."""

CHANGELOG_FORMATS = frozenset(
    {
        "debezium-json",
        "debezium-avro-confluent",
        "canal-json",
        "maxwell-json",
        "ogg-json",
    }
)
"""Formats whose records are changes (inserts, updates and deletes), not plain rows."""

_TRUE = {"true", "1", "yes", "on"}

CHANGELOG_OPTIONS: Mapping[str, _OptionRule] = {
    "cdcMode": _OptionRule(
        "changelog", frozenset({"hologres"}), "whether the Hologres binlog is read as a change log (CDC)"
    ),
    "binlog": _OptionRule("changelog", frozenset({"hologres"}), "whether the Hologres binlog is read"),
    "scan.full-changelog": _OptionRule(
        "changelog",
        frozenset({"mongodb-cdc", "mongodb"}),
        "whether MongoDB changes carry the row before the update, or are read as upserts",
    ),
    "changelog-mode": _OptionRule(
        "changelog",
        frozenset({"postgres-cdc", "postgres", "mongodb-cdc", "mongodb"}),
        "whether changes are read in full (all) or as upserts",
    ),
    "scan.read-changelog-as-append-only.enabled": _OptionRule(
        "changelog", None, "whether updates and deletes are read as appended rows"
    ),
    "format": _OptionRule(
        "changelog", frozenset({"kafka"}), "the record format (a CDC format is a change log)"
    ),
    "value.format": _OptionRule(
        "changelog", frozenset({"kafka"}), "the value format (a CDC format is a change log)"
    ),
}
"""Options that decide which change kinds (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE) a source emits."""

SHARDING_OPTIONS: Mapping[str, _OptionRule] = {
    "scan.incremental.snapshot.chunk.key-column": _OptionRule(
        "sharding", None, "the column the snapshot (full-scan) phase splits the table on"
    ),
    "scan.partition.column": _OptionRule("sharding", None, "the column a JDBC scan is split on"),
    "scan.partition.num": _OptionRule("sharding", None, "the number of splits of a JDBC scan"),
    "shard.key": _OptionRule("sharding", None, "the sharding column"),
    "bucket-key": _OptionRule("sharding", None, "the bucket (sharding) columns"),
    "bucket.key": _OptionRule("sharding", None, "the bucket (sharding) columns"),
    "distribution.key": _OptionRule("sharding", None, "the distribution (sharding) columns"),
}
"""Options that decide how a source splits its table; the splits are part of the source's state."""

KEY_OPTIONS: Mapping[str, _OptionRule] = {
    "primary-key": _OptionRule("key", None, "the primary key declared in the WITH clause"),
    "primary.key": _OptionRule("key", None, "the primary key declared in the WITH clause"),
    "key.fields": _OptionRule("key", frozenset({"kafka", "upsert-kafka"}), "the fields of the record key"),
}
"""Options that declare the key a connector reads or writes by."""

RESTORE_IGNORED_OPTIONS = frozenset(
    {
        "scan.startup.mode",
        "scan.startup.timestamp-millis",
        "scan.startup.specific-offsets",
        "scan.startup.specific-offset.file",
        "scan.startup.specific-offset.pos",
        "scan.startup.specific-offset.gtid-set",
        "scan.startup.specific-offset.skip-events",
        "scan.startup.specific-offset.skip-rows",
        "scan.bounded.mode",
        "startTime",
        "startupMode",
    }
)
"""Start options: a job restored from state resumes from its saved position and ignores them."""


def option_role(key: str, connector: str | None) -> tuple[OptionRole, str]:
    """What a ``WITH`` option means for state, and a short description of it."""
    if key == "connector":
        return "connector", "the connector type"
    for table in (CHANGELOG_OPTIONS, SHARDING_OPTIONS, KEY_OPTIONS):
        rule = table.get(key)
        if rule is not None and (rule.connectors is None or connector in rule.connectors):
            return rule.role, rule.meaning
    if key in RESTORE_IGNORED_OPTIONS:
        return "startup", "where a fresh start begins reading"
    return "other", ""


def _flag(options: Mapping[str, str], key: str, default: bool = False) -> bool:
    value = options.get(key)
    return default if value is None else value.strip().lower() in _TRUE


def source_changelog(connector: str | None, options: Mapping[str, str], has_primary_key: bool) -> Changelog:
    """The change kinds a source emits, from its connector and options.

    ``all``: inserts, both halves of updates and deletes; ``upsert``: no UPDATE_BEFORE, which Flink
    restores with a stateful ChangelogNormalize operator; ``insert-only``: plain rows.
    """
    if _flag(options, "scan.read-changelog-as-append-only.enabled"):
        return "insert-only"
    if connector == "upsert-kafka":
        return "upsert"
    if connector == "kafka":
        value_format = (options.get("value.format") or options.get("format") or "").lower()
        return "all" if value_format in CHANGELOG_FORMATS else "insert-only"
    if connector in {"mongodb-cdc", "mongodb"}:
        full = _flag(options, "scan.full-changelog") or options.get("changelog-mode", "").lower() == "all"
        return "all" if full else "upsert"
    if connector in {"postgres-cdc", "postgres"} and options.get("changelog-mode", "").lower() == "upsert":
        return "upsert"
    if connector in CDC_CONNECTORS:
        return "all"
    if connector == "hologres":
        return "all" if _flag(options, "binlog") and _flag(options, "cdcMode") else "insert-only"
    if connector in {"paimon", "fluss"} and (has_primary_key or "primary-key" in options):
        return "all"
    return "insert-only"
