"""The job model: ``source``, ``sink``, ``route``, ``transform`` and ``pipeline`` (SPEC §3, §6).

The YAML shape follows Flink CDC's pipeline files; the source is always Kafka, since ferry reads
the change events that Debezium, Canal or Maxwell wrote there. Every model is frozen and refuses
unknown keys; dotted YAML keys are pydantic aliases. A validator that finds a problem about one
option raises :class:`OptionError` naming that option, so the loader can point at its line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta, tzinfo
from enum import StrEnum
from typing import Annotated, Any, Literal, Self, Union

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    PlainSerializer,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ferry.config.exceptions import OptionError
from ferry.config.flink import SINK_TYPE_SPELLINGS, refused_key
from ferry.config.names import kafka_name
from ferry.config.transforms import (
    TransformConfig,
    UserDefinedFunctionConfig,
    check_regex,
    check_transform_expressions,
    load_functions,
)
from ferry.exceptions import FerryError
from ferry.model.events import SCHEMA_CHANGE_TAGS, SchemaChangeType
from ferry.model.schema import TableId
from ferry.model.table_patterns import RoutePattern, TablePatternError
from ferry.model.unavailable import DEFAULT_PLACEHOLDER
from ferry.options import ConfigModel, Duration, fold_prefixed
from ferry.pipeline.route import RouteMode, UnroutedTables
from ferry.pipeline.router import SchemaChangeBehavior
from ferry.retry import RestartStrategyConfig, fold_restart_strategy
from ferry.sinks.base.registry import SINKS, SinkConfig
from ferry.transform.datetime_patterns import zone_id
from ferry.transform.udf import UserFunction

# --------------------------------------------------------------------------------------------------
# Schema-change names


_T = SchemaChangeType
#: Family name → the schema-change types it stands for (Flink CDC's ``SchemaChangeEventTypeFamily``,
#: with ferry's comment changes added to ``alter``, ``table`` and ``column``).
SCHEMA_CHANGE_FAMILIES: dict[str, frozenset[SchemaChangeType]] = {
    "table": frozenset({_T.CREATE_TABLE, _T.DROP_TABLE, _T.TRUNCATE_TABLE, _T.ALTER_TABLE_COMMENT}),
    "column": frozenset(
        {_T.ADD_COLUMN, _T.DROP_COLUMN, _T.RENAME_COLUMN, _T.ALTER_COLUMN_TYPE, _T.ALTER_COLUMN_COMMENT}
    ),
    "create": frozenset({_T.CREATE_TABLE}),
    "drop": frozenset({_T.DROP_COLUMN, _T.DROP_TABLE}),
    "add": frozenset({_T.ADD_COLUMN}),
    "alter": frozenset({_T.ALTER_COLUMN_TYPE, _T.ALTER_COLUMN_COMMENT, _T.ALTER_TABLE_COMMENT}),
    "rename": frozenset({_T.RENAME_COLUMN}),
    "truncate": frozenset({_T.TRUNCATE_TABLE}),
}


def _unknown_schema_change(name: str) -> str:
    known = [*map(str, SchemaChangeType), *SCHEMA_CHANGE_FAMILIES]
    close = difflib.get_close_matches(name.strip().lower(), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"unknown schema change {name!r}{hint}; use a change type ({', '.join(SCHEMA_CHANGE_TAGS)}) "
        f"or a family ({', '.join(SCHEMA_CHANGE_FAMILIES)})"
    )


def expand_schema_change_tags(names: Iterable[str]) -> frozenset[SchemaChangeType]:
    """The schema-change types that change types and families (``column``, ``drop``, …) stand for.

    Names are case-insensitive. An unknown name raises :class:`ValueError` naming it.
    """
    tags: set[SchemaChangeType] = set()
    for name in names:
        key = name.strip().lower()
        if key in SCHEMA_CHANGE_TAGS:
            tags.add(SchemaChangeType(key))
        elif key in SCHEMA_CHANGE_FAMILIES:
            tags |= SCHEMA_CHANGE_FAMILIES[key]
        else:
            raise ValueError(_unknown_schema_change(name))
    return frozenset(tags)


# --------------------------------------------------------------------------------------------------
# Kafka source


class ValueFormat(StrEnum):
    """``value.format``: how the change events in the data topics are written."""

    DEBEZIUM_JSON = "debezium-json"
    DEBEZIUM_AVRO = "debezium-avro"
    """Debezium's Avro converter: the Confluent wire format, schemas in a schema registry."""
    CANAL_JSON = "canal-json"
    MAXWELL_JSON = "maxwell-json"


#: Other spellings of ``value.format`` values (Flink's name of the Debezium Avro format).
_VALUE_FORMAT_SPELLINGS = {"debezium-avro-confluent": ValueFormat.DEBEZIUM_AVRO}
#: The Debezium JSON format's options by field name → their key after ``debezium-json.``.
_DEBEZIUM_JSON_OPTIONS = {
    "delete_tombstone_handling_mode": "delete.tombstone.handling.mode",
    "infer_types": "infer-types",
    "schema_include": "schema-include",
}
#: The formats written by Debezium, which has a schema-change topic.
_DEBEZIUM_FORMATS = frozenset({ValueFormat.DEBEZIUM_JSON, ValueFormat.DEBEZIUM_AVRO})


class DeleteTombstoneHandling(StrEnum):
    """``debezium-json.delete.tombstone.handling.mode``: the ``delete.tombstone.handling.mode`` of
    Debezium's ``ExtractNewRecordState`` transform (its values, its default), as the connector runs
    it. What each writes for a delete, and what ferry reads it as:"""

    TOMBSTONE = "tombstone"
    """A record of the key with a null row (``{"schema": ..., "payload": null}``, or ``null``
    without schemas): a delete by key."""
    REWRITE = "rewrite"
    """The before-image with ``__deleted: "true"``: a delete."""
    REWRITE_WITH_TOMBSTONE = "rewrite-with-tombstone"
    """The rewritten delete, then the connector's tombstone (passed over)."""
    DELETE_TO_TOMBSTONE = "delete-to-tombstone"
    """A tombstone alone (a key, no value): a delete by key."""
    DROP = "drop"
    """Nothing: the deletes never reach Kafka. Refused: no sink's table can be exact."""


def _debezium_json_field(option: str, default: Any) -> Any:
    """An option of the Debezium JSON format: ``debezium-json.<option>`` (Flink's spelling), or
    prefixed with ``value.`` as Flink's Kafka connector writes the options of its value format."""
    keys = (f"debezium-json.{option}", f"value.debezium-json.{option}")
    return Field(default=default, alias=keys[0], validation_alias=AliasChoices(*keys))


class RegistryCredentialsSource(StrEnum):
    """``schema-registry.basic-auth.credentials-source``: where the schema registry's HTTP basic
    credentials come from (the values of Confluent's ``basic.auth.credentials.source``)."""

    USER_INFO = "USER_INFO"
    """``schema-registry.basic-auth.user-info`` (``user:password``)."""
    URL = "URL"
    """The registry URL itself (``https://user:password@host``), or none."""
    SASL_INHERIT = "SASL_INHERIT"
    """The Kafka consumer's ``properties.sasl.username`` and ``properties.sasl.password``."""


#: Registry option → its accepted keys: ferry's first, then Flink's ``debezium-avro-confluent``
#: format options (bare, and prefixed with ``value.`` as Flink's Kafka connector writes them).
_REGISTRY_KEYS: dict[str, tuple[str, ...]] = {
    option: (
        f"schema-registry.{option}",
        f"debezium-avro-confluent.{option}",
        f"value.debezium-avro-confluent.{option}",
    )
    for option in ("url", "basic-auth.user-info", "basic-auth.credentials-source")
}


def _registry_field(option: str, **kwargs: Any) -> Any:
    keys = _REGISTRY_KEYS[option]
    return Field(default=None, alias=keys[0], validation_alias=AliasChoices(*keys), **kwargs)


def _check_registry_urls(value: str | None) -> str | None:
    if value is None:
        return None
    urls = [url.strip() for url in value.split(",")]
    for url in urls:
        if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
            raise ValueError(f"{_without_userinfo(url)!r} is not an http:// or https:// URL")
    return ",".join(urls)


def _url_has_userinfo(url: str) -> bool:
    authority = url.split("://", 1)[-1].split("/", 1)[0]
    return "@" in authority


def _without_userinfo(url: str) -> str:
    """``url`` with the credentials it may carry replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}{sep}{authority}{slash}{path}"


class StartupMode(StrEnum):
    """``scan.startup.mode``: where reading starts (Flink's Kafka connector options)."""

    EARLIEST_OFFSET = "earliest-offset"
    LATEST_OFFSET = "latest-offset"
    GROUP_OFFSETS = "group-offsets"
    TIMESTAMP = "timestamp"
    SPECIFIC_OFFSETS = "specific-offsets"


class BoundedMode(StrEnum):
    """``scan.bounded.mode``: where reading stops, for replays; ``unbounded`` never stops."""

    UNBOUNDED = "unbounded"
    LATEST_OFFSET = "latest-offset"
    TIMESTAMP = "timestamp"
    SPECIFIC_OFFSETS = "specific-offsets"


_OFFSET_ENTRY_RE = re.compile(r"partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)")
_OFFSETS_SYNTAX = "write 'partition:<n>,offset:<n>' entries separated by ';'"


def parse_specific_offsets(value: object) -> dict[int, int]:
    """``"partition:0,offset:42;partition:1,offset:300"`` → ``{0: 42, 1: 300}``.

    A mapping of partition to offset is accepted as it is (after checking it).
    """
    pairs: list[tuple[int, int]] = []
    if isinstance(value, Mapping):
        for partition, offset in value.items():
            if not isinstance(partition, int) or not isinstance(offset, int):
                raise ValueError("specific offsets map integer partitions to integer offsets")
            pairs.append((partition, offset))
    elif isinstance(value, str):
        entries = [entry.strip() for entry in value.split(";") if entry.strip()]
        if not entries:
            raise ValueError(f"no offsets given: {_OFFSETS_SYNTAX}")
        for entry in entries:
            match = _OFFSET_ENTRY_RE.fullmatch(entry)
            if match is None:
                raise ValueError(f"cannot read {entry!r}: {_OFFSETS_SYNTAX}")
            pairs.append((int(match.group(1)), int(match.group(2))))
    else:
        raise ValueError(f"specific offsets are a string: {_OFFSETS_SYNTAX}")
    offsets: dict[int, int] = {}
    for partition, offset in pairs:
        if partition < 0 or offset < 0:
            raise ValueError("partitions and offsets are not negative")
        if partition in offsets:
            raise ValueError(f"partition {partition} is given twice")
        offsets[partition] = offset
    return offsets


def format_specific_offsets(offsets: Mapping[int, int]) -> str:
    """``{0: 42, 1: 300}`` → ``"partition:0,offset:42;partition:1,offset:300"``."""
    return ";".join(f"partition:{p},offset:{o}" for p, o in sorted(offsets.items()))


#: ``scan.*.specific-offsets``; JSON renders it in the job-file syntax.
SpecificOffsets = Annotated[
    dict[int, int],
    BeforeValidator(parse_specific_offsets),
    PlainSerializer(format_specific_offsets, return_type=str, when_used="json"),
]

#: Legal Kafka topic names.
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _check_topic_name(topic: str) -> str:
    if not _TOPIC_RE.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(
            f"{topic!r} is not a Kafka topic name (1 to 249 of the characters a-z A-Z 0-9 . _ -)"
        )
    return topic


def _check_position(prefix: str, mode: str, millis: int | None, offsets: Mapping[int, int] | None) -> None:
    """``<prefix>.timestamp-millis`` / ``<prefix>.specific-offsets`` are given iff the mode needs them."""
    mode_key = f"{prefix}.mode"
    for needed, key, value in (
        ("timestamp", f"{prefix}.timestamp-millis", millis),
        ("specific-offsets", f"{prefix}.specific-offsets", offsets),
    ):
        if mode == needed and value is None:
            raise OptionError(f"{key} is required when {mode_key} is {needed}", mode_key)
        if mode != needed and value is not None:
            raise OptionError(f"only used when {mode_key} is {needed} (it is {mode})", key)


class StartupOptions(ConfigModel):
    """Where reading starts: the source's default, or one topic's override."""

    scan_startup_mode: StartupMode = Field(default=StartupMode.GROUP_OFFSETS, alias="scan.startup.mode")
    scan_startup_timestamp_millis: int | None = Field(
        default=None, ge=0, alias="scan.startup.timestamp-millis"
    )
    scan_startup_specific_offsets: SpecificOffsets | None = Field(
        default=None, alias="scan.startup.specific-offsets"
    )

    @model_validator(mode="after")
    def _check_startup(self) -> Self:
        _check_position(
            "scan.startup",
            self.scan_startup_mode,
            self.scan_startup_timestamp_millis,
            self.scan_startup_specific_offsets,
        )
        return self


class TopicStartConfig(StartupOptions):
    """A per-topic start position that wins over the source's (SPEC §3, §4)."""

    topic: str
    scan_startup_mode: StartupMode = Field(alias="scan.startup.mode")

    _topic_name = field_validator("topic")(_check_topic_name)


class KafkaSourceConfig(StartupOptions):
    """``source`` with ``type: kafka``. ``properties.*`` are confluent-kafka consumer settings."""

    type: Literal["kafka"] = "kafka"
    name: str | None = None
    bootstrap_servers: str = Field(alias="properties.bootstrap.servers", min_length=1)
    #: Every ``properties.*`` option without its prefix, ``bootstrap.servers`` included.
    properties: dict[str, str] = Field(default_factory=dict, repr=False)
    topic: tuple[str, ...] | None = None
    topic_pattern: str | None = Field(default=None, alias="topic-pattern")
    #: A topic of ``topic`` that does not exist once the start-up timeout passed: ``fail`` the run
    #: naming it, or ``wait`` for it (the status PENDING, saying so).
    topic_missing: Literal["fail", "wait"] = Field(default="fail", alias="topic-missing")
    value_format: ValueFormat = Field(default=ValueFormat.DEBEZIUM_JSON, alias="value.format")
    schema_change_topic: str | None = Field(default=None, alias="schema-change.topic")
    #: The schema registry of ``debezium-avro``: comma-separated ``http(s)://`` URLs.
    schema_registry_url: str | None = _registry_field("url")
    schema_registry_user_info: SecretStr | None = _registry_field("basic-auth.user-info", repr=False)
    schema_registry_credentials_source: RegistryCredentialsSource | None = _registry_field(
        "basic-auth.credentials-source"
    )
    #: Whether the records carry their schema (Flink's key; unset: each record says so itself).
    schema_include: bool | None = _debezium_json_field("schema-include", None)
    #: Whether payload-only records without a table definition are typed from their JSON values.
    infer_types: bool = _debezium_json_field("infer-types", False)
    delete_tombstone_handling_mode: DeleteTombstoneHandling = _debezium_json_field(
        "delete.tombstone.handling.mode", DeleteTombstoneHandling.TOMBSTONE
    )
    #: How often the consumer looks for new topics (of ``topic-pattern``) and partitions.
    topic_partition_discovery_interval: Duration = Field(
        default=timedelta(seconds=30), alias="scan.topic-partition-discovery.interval"
    )
    scan_bounded_mode: BoundedMode = Field(default=BoundedMode.UNBOUNDED, alias="scan.bounded.mode")
    scan_bounded_timestamp_millis: int | None = Field(
        default=None, ge=0, alias="scan.bounded.timestamp-millis"
    )
    scan_bounded_specific_offsets: SpecificOffsets | None = Field(
        default=None, alias="scan.bounded.specific-offsets"
    )
    tables: tuple[TopicStartConfig, ...] = ()
    #: Debezium's ``unavailable.value.placeholder`` (its PostgreSQL connector writes it for an
    #: unchanged TOASTed value): set it as the connector sets it.
    debezium_unavailable_value_placeholder: str = Field(
        default=DEFAULT_PLACEHOLDER, min_length=1, alias="debezium.unavailable.value.placeholder"
    )
    #: What becomes of a record naming a table the job does not route (see ``TableSelection``).
    unrouted_tables: UnroutedTables = Field(default=UnroutedTables.DEAD_LETTER, alias="unrouted-tables")

    @property
    def topics_name_tables(self) -> bool:
        """Whether each topic carries one table, named in the topic's name (Debezium's topics)."""
        return self.value_format in _DEBEZIUM_FORMATS

    @model_validator(mode="before")
    @classmethod
    def _fold_properties(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        servers = data.get("properties.bootstrap.servers", data.get("bootstrap_servers"))
        folded = dict(fold_prefixed(data, "properties", "properties"))
        if servers is not None:
            folded["properties.bootstrap.servers"] = servers
            if isinstance(servers, str) and isinstance(folded.get("properties"), dict):
                folded["properties"] = {**folded["properties"], "bootstrap.servers": servers}
        return folded

    @field_validator("topic", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(";") if part.strip()]
        if isinstance(value, list | tuple):
            if not value:
                raise ValueError("no topic given")
            duplicates = sorted({t for t in value if isinstance(t, str) and value.count(t) > 1})
            if duplicates:
                raise ValueError(f"topic {duplicates[0]!r} is listed twice")
            for topic in value:
                if isinstance(topic, str):
                    _check_topic_name(topic)
        return value

    _pattern = field_validator("topic_pattern")(check_regex)

    @field_validator("debezium_unavailable_value_placeholder")
    @classmethod
    def _placeholder_hex(cls, value: str) -> str:
        if value.startswith("hex:"):
            try:
                bytes.fromhex(value[4:])
            except ValueError:
                raise ValueError("after 'hex:' write the placeholder's bytes in hexadecimal") from None
        return value

    @field_validator("value_format", mode="before")
    @classmethod
    def _value_format_spelling(cls, value: Any) -> Any:
        return _VALUE_FORMAT_SPELLINGS.get(value, value) if isinstance(value, str) else value

    _registry_urls = field_validator("schema_registry_url")(_check_registry_urls)

    @field_validator("schema_registry_credentials_source", mode="before")
    @classmethod
    def _credentials_source_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("schema_registry_user_info")
    @classmethod
    def _user_info_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and ":" not in value.get_secret_value():
            raise ValueError("write the credentials as user:password")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _check_registry(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """The registry options, named in errors by the spelling the job file uses."""
        given: dict[str, str] = {}
        if isinstance(data, dict):
            for option, keys in _REGISTRY_KEYS.items():
                present = [k for k in keys if data.get(k) is not None]
                if len(present) > 1:
                    raise OptionError(f"{present[0]} is also given as {present[1]}: keep one", present[1])
                if present:
                    given[option] = present[0]
        source = handler(data)

        def key(option: str) -> str:
            return given.get(option, _REGISTRY_KEYS[option][0])

        url, user_info = source.schema_registry_url, source.schema_registry_user_info
        if source.value_format is not ValueFormat.DEBEZIUM_AVRO:
            if given:
                option = next(iter(given))
                avro, actual = ValueFormat.DEBEZIUM_AVRO, source.value_format
                raise OptionError(f"only used when value.format is {avro} (it is {actual})", key(option))
            return source
        if url is None:
            raise OptionError(
                f"{key('url')} is required when value.format is {ValueFormat.DEBEZIUM_AVRO}", "value.format"
            )
        credentials = source.schema_registry_credentials_source
        if credentials is None:
            credentials = RegistryCredentialsSource.USER_INFO if user_info else RegistryCredentialsSource.URL
        if credentials is RegistryCredentialsSource.USER_INFO:
            if user_info is None:
                raise OptionError(
                    f"{key('basic-auth.user-info')} is required when {key('basic-auth.credentials-source')} "
                    "is USER_INFO",
                    key("basic-auth.credentials-source"),
                )
            if _url_has_userinfo(url):
                raise OptionError(
                    f"the URL carries credentials and {key('basic-auth.user-info')} is given: keep one",
                    key("url"),
                )
        elif user_info is not None:
            raise OptionError(
                f"only used when {key('basic-auth.credentials-source')} is USER_INFO (it is {credentials})",
                key("basic-auth.user-info"),
            )
        if credentials is RegistryCredentialsSource.SASL_INHERIT:
            missing = [k for k in ("sasl.username", "sasl.password") if k not in source.properties]
            if missing:
                raise OptionError(
                    f"SASL_INHERIT takes the consumer's SASL credentials: properties.{missing[0]} is missing",
                    key("basic-auth.credentials-source"),
                )
        return source

    @field_validator("schema_change_topic")
    @classmethod
    def _schema_change_topic_name(cls, value: str | None) -> str | None:
        return None if value is None else _check_topic_name(value)

    @field_validator("tables", mode="before")
    @classmethod
    def _no_tables(cls, value: Any) -> Any:
        return () if value is None else value

    @model_validator(mode="after")
    def _check_source(self) -> Self:
        if self.topic is None and self.topic_pattern is None:
            raise OptionError("one of topic or topic-pattern is required", "topic")
        if self.topic is not None and self.topic_pattern is not None:
            raise OptionError("give topic or topic-pattern, not both", "topic-pattern")
        if self.schema_change_topic is not None and self.value_format not in _DEBEZIUM_FORMATS:
            raise OptionError(
                f"only Debezium has a schema-change topic; {self.value_format} has DDL in the data topics",
                "schema-change.topic",
            )
        self._check_debezium_json()
        _check_position(
            "scan.bounded",
            self.scan_bounded_mode,
            self.scan_bounded_timestamp_millis,
            self.scan_bounded_specific_offsets,
        )
        seen: set[str] = set()
        for i, table in enumerate(self.tables):
            if not self.reads_topic(table.topic):
                raise OptionError(f"this source does not read topic {table.topic!r}", "tables", i, "topic")
            if table.topic in seen:
                raise OptionError(f"topic {table.topic!r} already has a start override", "tables", i, "topic")
            seen.add(table.topic)
        return self

    def _check_debezium_json(self) -> None:
        # options other than their defaults (a job written back whole has them all)
        given = sorted(
            name
            for name in _DEBEZIUM_JSON_OPTIONS
            if getattr(self, name) != type(self).model_fields[name].default
        )
        if given and self.value_format is not ValueFormat.DEBEZIUM_JSON:
            option = f"debezium-json.{_DEBEZIUM_JSON_OPTIONS[given[0]]}"
            json, actual = ValueFormat.DEBEZIUM_JSON, self.value_format
            raise OptionError(f"only used when value.format is {json} (it is {actual})", option)
        if self.delete_tombstone_handling_mode is DeleteTombstoneHandling.DROP:
            raise OptionError(
                "ExtractNewRecordState with delete.tombstone.handling.mode=drop removes every delete "
                "before it reaches Kafka, so the sink's tables keep the rows the source deleted: set the "
                "transform's delete.tombstone.handling.mode to tombstone (Debezium's default), rewrite, "
                "rewrite-with-tombstone or delete-to-tombstone, and this key with it",
                "debezium-json.delete.tombstone.handling.mode",
            )
        if self.schema_include is False and self.schema_change_topic is None and not self.infer_types:
            raise OptionError(
                "records without their schema cannot be typed without table definitions (decimals, "
                "dates, times and bytes would be guessed from their JSON values): turn the converter's "
                "schemas on (value.converter.schemas.enable=true) and remove this key, or name the "
                "schema-change topic (schema-change.topic, the MySQL connector's topic.prefix), or "
                "accept types inferred from the values with debezium-json.infer-types: true",
                "debezium-json.schema-include",
            )

    def consumer_properties(self) -> dict[str, str]:
        """The consumer's settings: ``properties.*``, with new topics and partitions looked for at
        ``scan.topic-partition-discovery.interval`` unless the metadata refresh is given there."""
        properties = dict(self.properties)
        interval = self.topic_partition_discovery_interval
        # librdkafka re-reads the topic metadata (and matches topic-pattern again) at this interval
        properties.setdefault(
            "topic.metadata.refresh.interval.ms", str(max(1, round(interval.total_seconds() * 1000)))
        )
        return properties

    def reads_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of this source's data topics (by name or by pattern)."""
        if self.topic is not None:
            return topic in self.topic
        return self.topic_pattern is not None and re.fullmatch(self.topic_pattern, topic) is not None

    def startup_for(self, topic: str) -> StartupOptions:
        """The start position of one topic: its ``tables`` override, else the source's own."""
        return next((t for t in self.tables if t.topic == topic), self)

    @property
    def schema_change_format(self) -> str:
        """The decoder format of the schema-change topic: Debezium writes it with the data topics'
        converter (``debezium-schema-change`` for JSON, ``debezium-avro-schema-change`` for Avro)."""
        if self.value_format is ValueFormat.DEBEZIUM_AVRO:
            return "debezium-avro-schema-change"
        return "debezium-schema-change"

    def decoder_options(self) -> dict[str, Any]:
        """The options of this source's decoders (of ``value.format`` and of
        :attr:`schema_change_format`): none for the JSON formats; for ``debezium-avro``, the schema
        registry's URLs and its basic credentials (a secret), as the credentials source says."""
        if self.value_format is not ValueFormat.DEBEZIUM_AVRO:
            return {}
        credentials = self.schema_registry_user_info
        if self.schema_registry_credentials_source is RegistryCredentialsSource.SASL_INHERIT:
            sasl = self.properties
            credentials = SecretStr(f"{sasl['sasl.username']}:{sasl['sasl.password']}")
        return {"schema_registry_url": self.schema_registry_url, "schema_registry_user_info": credentials}


#: Every source type; today Kafka only. A union keyed on ``type`` so that more can be added.
SourceConfig = Annotated[Union[KafkaSourceConfig], Field(discriminator="type")]  # noqa: UP007


# --------------------------------------------------------------------------------------------------
# Route, transform, pipeline


class RouteConfig(ConfigModel):
    """Send the tables ``source-table`` names (a table pattern over the id's text: ``mydb.\\.*``;
    :class:`~ferry.model.table_patterns.RoutePattern`) to ``sink-table``.

    With ``replace-symbol``, that symbol in ``sink-table`` stands for the source table's name
    (``sink-table: ods.ods_<>`` with ``replace-symbol: <>``); without it, ``$1``, ``$2`` stand for
    the pattern's groups.
    """

    source_table: str = Field(alias="source-table")
    sink_table: str = Field(alias="sink-table", min_length=1)
    replace_symbol: str | None = Field(default=None, alias="replace-symbol", min_length=1)
    description: str | None = None

    @field_validator("source_table")
    @classmethod
    def _table_pattern(cls, value: str) -> str:
        RoutePattern(value, "")  # raises TablePatternError, a ValueError saying what is wrong
        return value

    @field_validator("sink_table")
    @classmethod
    def _sink_table_id(cls, value: str) -> str:
        try:
            TableId.parse(value)
        except FerryError as e:
            raise ValueError(str(e)) from None
        return value

    @model_validator(mode="after")
    def _symbol_used(self) -> Self:
        if self.replace_symbol is not None and self.replace_symbol not in self.sink_table:
            raise OptionError(f"{self.replace_symbol!r} does not occur in sink-table", "replace-symbol")
        if self.replace_symbol is not None and re.search(r"\$(\d|\{)", self.sink_table):
            raise OptionError(
                "sink-table takes the pattern's groups ($1) or replace-symbol, not both: with "
                "replace-symbol a $ is plain text (as in Flink CDC)",
                "sink-table",
            )
        try:
            RoutePattern(self.source_table, self.sink_table, self.replace_symbol)
        except TablePatternError as e:
            raise OptionError(str(e), "sink-table") from None
        return self


def _behavior_name(value: Any) -> Any:
    return value.strip().upper().replace("-", "_") if isinstance(value, str) else value


class RuntimeMode(StrEnum):
    """``pipeline.execution.runtime-mode``, as in Flink."""

    STREAMING = "STREAMING"
    BATCH = "BATCH"


#: ``pipeline`` keys of the schema operator's timeout: Flink CDC's spelling, then ferry's.
_RPC_TIMEOUT_KEYS = ("schema-operator.rpc-timeout", "schema.operator.rpc-timeout")


def one_spelling(data: Any, keys: Iterable[str]) -> None:
    """Refuse a mapping that gives one option under two of its spellings (naming the second)."""
    if isinstance(data, dict):
        present = [k for k in keys if k in data]
        if len(present) > 1:
            raise OptionError(f"{present[0]} is also given as {present[1]}: keep one", present[1])


class PipelineConfig(ConfigModel):
    """``pipeline``: name, behaviour, error handling, checkpoints and state."""

    name: str = Field(default="ferry", min_length=1)
    parallelism: int = Field(default=1, ge=1)
    schema_change_behavior: Annotated[SchemaChangeBehavior, BeforeValidator(_behavior_name)] = Field(
        default=SchemaChangeBehavior.LENIENT, alias="schema.change.behavior"
    )
    #: How the routes that match one source table combine (Flink CDC's default: every one applies).
    route_mode: Annotated[RouteMode, BeforeValidator(_behavior_name)] = Field(
        default=RouteMode.ALL_MATCH, alias="route-mode"
    )
    #: Bound on the flush-then-apply of one schema change (Flink CDC: ``schema-operator.rpc-timeout``).
    schema_operator_rpc_timeout: Duration = Field(
        default=timedelta(minutes=3),
        alias="schema.operator.rpc-timeout",
        validation_alias=AliasChoices(*_RPC_TIMEOUT_KEYS),
    )
    #: The session time zone (an IANA name such as ``Asia/Shanghai``, or ``UTC``); None: the system's.
    local_time_zone: str | None = Field(default=None, alias="local-time-zone")
    #: ``BATCH`` reads what the topics hold at the start and stops (a bounded read); ``STREAMING`` runs on.
    execution_runtime_mode: Annotated[RuntimeMode, BeforeValidator(_behavior_name)] = Field(
        default=RuntimeMode.STREAMING, alias="execution.runtime-mode"
    )
    on_bad_record: Literal["dead-letter", "fail"] = Field(default="dead-letter", alias="on-bad-record")
    #: Where bad records go; ``<name>.dlq`` unless given.
    dead_letter_topic: str = Field(alias="dead-letter.topic")
    checkpoint_interval: Duration = Field(default=timedelta(seconds=5), alias="checkpoint.interval")
    #: A checkpoint's commit (the sink's flush, the dead letters, the state store's save) runs on a
    #: thread of its own while the next batches are read and decoded; false: in the reading thread.
    checkpoint_concurrent: bool = Field(default=False, alias="checkpoint.concurrent")
    #: Most records taken from Kafka per consume call.
    batch_size: int = Field(default=10_000, ge=1, alias="batch.size")
    #: SQLAlchemy URL of the state store.
    state_url: str = Field(default="sqlite:///var/ferry/state.db", alias="state.url")
    #: Port of the metrics and status HTTP endpoint; none when unset.
    status_port: int | None = Field(default=None, ge=1, le=65535, alias="status.port")
    #: The most digits of a DECIMAL that transform arithmetic computes: ``UP_TO_38`` (ferry's
    #: default) or ``UP_TO_19`` (Flink CDC's default, Calcite's type system).
    transform_decimal_precision_mode: Annotated[
        Literal["UP_TO_19", "UP_TO_38"], BeforeValidator(_behavior_name)
    ] = Field(default="UP_TO_38", alias="transform.decimal.precision.mode")
    #: Python functions transforms may call, by name (Flink CDC's ``user-defined-function``).
    user_defined_function: tuple[UserDefinedFunctionConfig, ...] = Field(
        default=(), alias="user-defined-function"
    )
    #: How transient errors are retried (``restart-strategy.type``, ``.attempts``, ``.timeout``, ...).
    restart_strategy: RestartStrategyConfig = Field(
        default_factory=RestartStrategyConfig, alias="restart-strategy"
    )

    _restart_strategy_keys = model_validator(mode="before")(fold_restart_strategy)

    @field_validator("local_time_zone")
    @classmethod
    def _time_zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            zone_id(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a time zone: give an IANA name (Asia/Shanghai), UTC, or a fixed "
                "offset (+08:00, GMT+08:00, UTC-05:30), as Java's ZoneId reads them"
            ) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_rpc_timeout(cls, data: Any) -> Any:
        one_spelling(data, _RPC_TIMEOUT_KEYS)
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_models(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" in data:
            raise OptionError(
                "AI models (Flink CDC's model functions in transforms) are not in ferry; call a model "
                "from a Python function declared in pipeline.user-defined-function",
                "model",
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_dead_letter_topic(cls, data: Any) -> Any:
        if isinstance(data, dict) and "dead-letter.topic" not in data and "dead_letter_topic" not in data:
            name = data.get("name")
            # A pipeline name is free text (Flink CDC's examples have spaces): the topic is named
            # after its Kafka name. An invalid name is reported on its own.
            base = kafka_name(name) if isinstance(name, str) and name else "ferry"
            data = {**data, "dead-letter.topic": f"{base}.dlq"}
        return data

    @property
    def decimal_precision(self) -> int:
        """The most digits of a DECIMAL computed in a transform."""
        return 19 if self.transform_decimal_precision_mode == "UP_TO_19" else 38

    @property
    def time_zone(self) -> tzinfo | None:
        """The session time zone of transforms (``local-time-zone``); None: the system's."""
        return None if self.local_time_zone is None else zone_id(self.local_time_zone)

    @property
    def kafka_name(self) -> str:
        """The name as Kafka names allow it: the consumer group (unless ``properties.group.id``)
        and the default dead-letter topic are named after it."""
        return kafka_name(self.name)

    _dead_letter_topic_name = field_validator("dead_letter_topic")(_check_topic_name)

    @field_validator("state_url")
    @classmethod
    def _sqlalchemy_url(cls, value: str) -> str:
        try:
            make_url(value)
        except (ArgumentError, ValueError):
            raise ValueError(
                "not a SQLAlchemy URL (e.g. sqlite:///var/ferry/state.db or postgresql+psycopg://host/db)"
            ) from None
        return value


# --------------------------------------------------------------------------------------------------
# The job


def _tag_of(data: Any, section: str, known: Iterable[str], hint: str) -> None:
    if not isinstance(data, dict):
        return
    tag = data.get("type")
    if tag is None:
        raise OptionError(f"missing key 'type' ({hint})", "type")
    if tag not in known:
        raise OptionError(f"{section} type {tag!r} is not supported: {hint}", "type")


class JobConfig(ConfigModel):
    """A whole job file, resolved: the one object the runtime is built from."""

    source: SourceConfig
    sink: SinkConfig
    route: tuple[RouteConfig, ...] = ()
    transform: tuple[TransformConfig, ...] = ()
    pipeline: PipelineConfig = Field(default_factory=lambda: PipelineConfig.model_validate({}))

    @field_validator("source", mode="before")
    @classmethod
    def _source_type(cls, value: Any) -> Any:
        _tag_of(
            value,
            "source",
            ("kafka",),
            "ferry reads the change events that Debezium, Canal or Maxwell wrote to Kafka; "
            "the source type is 'kafka'",
        )
        return value

    @field_validator("sink", mode="before")
    @classmethod
    def _sink_type(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("type") in SINK_TYPE_SPELLINGS:
            value = {**value, "type": SINK_TYPE_SPELLINGS[value["type"]]}
        known = [*SINKS, *SINK_TYPE_SPELLINGS]
        _tag_of(value, "sink", known, "the sink types are " + ", ".join(repr(t) for t in known))
        if isinstance(value, dict) and value.get("type") == "iceberg":
            catalog = value.get("catalog.properties.type")
            if isinstance(catalog, str) and catalog.strip().lower() == "hadoop":
                raise OptionError(
                    "the hadoop catalog (Iceberg's Java file-system catalog) is not in pyiceberg; "
                    "use sql: a catalog database beside the same warehouse "
                    "(catalog.properties.uri: sqlite:///<warehouse>/catalog.db, or PostgreSQL), "
                    "or rest, hive or glue",
                    "catalog.properties.type",
                )
        if isinstance(value, dict):
            for key in value:
                reason = refused_key(str(value.get("type")), key) if isinstance(key, str) else None
                if reason is not None:
                    raise OptionError(reason, key)
        return value

    @field_validator("sink")
    @classmethod
    def _schema_change_names(cls, sink: SinkConfig) -> SinkConfig:
        for key, names in (
            ("include.schema.changes", sink.include_schema_changes or ()),
            ("exclude.schema.changes", sink.exclude_schema_changes),
        ):
            for i, name in enumerate(names):
                try:
                    expand_schema_change_tags([name])
                except ValueError as e:
                    raise OptionError(str(e), key, i) from None
        return sink

    @model_validator(mode="after")
    def _batch_is_a_bounded_read(self) -> Self:
        """``execution.runtime-mode: BATCH`` reads what the topics hold at the start, then stops."""
        if (
            self.pipeline.execution_runtime_mode is RuntimeMode.BATCH
            and self.source.scan_bounded_mode is BoundedMode.UNBOUNDED
        ):
            bounded = self.source.model_copy(update={"scan_bounded_mode": BoundedMode.LATEST_OFFSET})
            return self.model_copy(update={"source": bounded})
        return self

    @model_validator(mode="after")
    def _workers_can_write(self) -> Self:
        """``pipeline.parallelism`` workers can write the sink as it is configured."""
        refused = self.sink.refused_workers(self.pipeline.parallelism)
        if refused is not None:
            key, reason = refused
            raise OptionError(reason, "sink", key)
        return self

    @model_validator(mode="after")
    def _table_options_apply(self) -> Self:
        """Every option of a transform's ``table-options`` is one the sink gives the tables it
        creates (``comment``: every sink)."""
        for i, transform in enumerate(self.transform):
            for key, value in transform.table_option_map.items():
                reason = None if key == "comment" else self.sink.refused_table_option(key, value)
                if reason is not None:
                    message = f"table-options {key}={value}: {reason}"
                    raise OptionError(message, "transform", i, "table-options")
        return self

    @model_validator(mode="after")
    def _transform_functions(self) -> Self:
        """The user-defined functions load and type-check, and every function a transform calls
        is one ferry evaluates."""
        if not self.transform and not self.pipeline.user_defined_function:
            return self
        try:
            functions = load_functions(self.pipeline.user_defined_function)
        except OptionError as e:
            raise OptionError(str(e), "pipeline", *e.path) from None
        check_transform_expressions(self.transform, functions)
        return self

    def user_functions(self) -> dict[str, UserFunction]:
        """The job's user-defined functions, imported (``pipeline.user-defined-function``)."""
        return load_functions(self.pipeline.user_defined_function, runnable=True)

    @field_validator("route", "transform", "pipeline", mode="before")
    @classmethod
    def _empty_section(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return {} if info.field_name == "pipeline" else ()
        return value
