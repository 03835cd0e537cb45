"""Job files: the example configs, the model's rules, and errors that name file, line and key."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.shared import SHARED

from ferry.config import ConfigError, JobConfig, load_job, load_job_text, validate_command
from ferry.config.checks import UnsupportedOptionError, check_supported
from ferry.config.job import (
    SCHEMA_CHANGE_FAMILIES,
    BoundedMode,
    KafkaSourceConfig,
    SchemaChangeBehavior,
    StartupMode,
    ValueFormat,
    expand_schema_change_tags,
    format_specific_offsets,
    parse_specific_offsets,
)
from ferry.config.names import kafka_name
from ferry.exceptions import TerminalError
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import TableId
from ferry.model.table_patterns import RoutePattern
from ferry.options import format_duration, parse_duration

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
FLINK_MINIMIZED = SHARED / "fixtures/apache-flink-cdc/pipeline-definition-minimized.yaml"

SOURCE = """\
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: orders
"""
SINK = """\
sink:
  type: memory
"""


def job(text: str, env: dict[str, str] | None = None) -> JobConfig:
    return load_job_text(textwrap.dedent(text), file="job.yaml", env=env or {})


def error(text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        job(text, env)
    return info.value


def with_source(*lines: str, sink: str = SINK, rest: str = "") -> str:
    """A job whose source has the base options plus ``lines`` (each one YAML line of the source)."""
    return SOURCE + "".join(f"  {line}\n" for line in lines) + sink + rest


# --------------------------------------------------------------------------------------------------
# The example configs


def test_the_examples_exist() -> None:
    assert {p.name for p in CONFIGS} >= {"demo.yaml", "debezium-to-iceberg.yaml", "canal-to-iceberg.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_example_config_validates(path: Path) -> None:
    config = load_job(path, env={})
    assert config.source.bootstrap_servers
    summary = validate_command(path, env={})
    assert str(path) in summary
    assert config.sink.type in summary
    assert str(config.pipeline.schema_change_behavior) in summary
    check_supported(config)  # nothing in an example is refused at start


def test_what_ferry_does_not_do_yet_is_refused_before_start() -> None:
    text = (ROOT / "configs" / "demo.yaml").read_text()
    with pytest.raises(UnsupportedOptionError, match="transform.*SUM.* is an aggregate"):
        check_supported(
            load_job_text(
                text + "transform:\n  - source-table: a.b\n    projection: id, SUM(x) AS s\n", env={}
            )
        )


def test_example_bootstrap_servers_come_from_the_environment() -> None:
    for path in CONFIGS:
        config = load_job(path, env={"KAFKA_BOOTSTRAP_SERVERS": "broker-1:9092,broker-2:9092"})
        assert config.source.bootstrap_servers == "broker-1:9092,broker-2:9092"
        assert config.source.properties["bootstrap.servers"] == "broker-1:9092,broker-2:9092"


# --------------------------------------------------------------------------------------------------
# A small valid job and its defaults


def test_minimal_job_and_defaults() -> None:
    config = job(SOURCE + SINK)
    source = config.source
    assert isinstance(source, KafkaSourceConfig)
    assert source.topic == ("orders",)
    assert source.topic_pattern is None
    assert source.value_format is ValueFormat.DEBEZIUM_JSON
    assert source.scan_startup_mode is StartupMode.GROUP_OFFSETS
    assert source.scan_bounded_mode is BoundedMode.UNBOUNDED
    assert source.properties == {"bootstrap.servers": "127.0.0.1:9092"}
    assert config.sink.type == "memory"
    assert config.route == () and config.transform == ()
    pipeline = config.pipeline
    assert pipeline.name == "ferry"
    assert pipeline.parallelism == 1
    assert pipeline.schema_change_behavior is SchemaChangeBehavior.LENIENT
    assert pipeline.schema_operator_rpc_timeout == timedelta(minutes=3)
    assert pipeline.on_bad_record == "dead-letter"
    assert pipeline.dead_letter_topic == "ferry.dlq"
    assert pipeline.checkpoint_interval == timedelta(seconds=5)
    assert pipeline.batch_size == 10_000
    assert pipeline.state_url == "sqlite:///var/ferry/state.db"
    assert pipeline.status_port is None


def test_the_job_is_frozen() -> None:
    config = job(SOURCE + SINK)
    with pytest.raises(ValidationError):
        config.pipeline.batch_size = 5  # type: ignore[misc]


def test_consumer_properties_are_folded_with_bootstrap_servers() -> None:
    config = job(with_source("properties.group.id: ferry-orders", "properties.fetch.min.bytes: 1024"))
    assert config.source.properties == {
        "bootstrap.servers": "127.0.0.1:9092",
        "group.id": "ferry-orders",
        "fetch.min.bytes": "1024",
    }


def test_topic_list_forms() -> None:
    text = SOURCE.replace("topic: orders", "topic: orders; customers;")
    assert job(text + SINK).source.topic == ("orders", "customers")
    text = SOURCE.replace("topic: orders", "topic: [orders, customers]")
    assert job(text + SINK).source.topic == ("orders", "customers")


def test_dead_letter_topic_follows_the_pipeline_name_unless_given() -> None:
    assert (
        job(SOURCE + SINK + "pipeline:\n  name: orders-sync\n").pipeline.dead_letter_topic
        == "orders-sync.dlq"
    )
    named = job(SOURCE + SINK + "pipeline:\n  name: Orders to lake\n").pipeline
    assert named.dead_letter_topic == f"{kafka_name('Orders to lake')}.dlq"
    assert named.dead_letter_topic.startswith("Orders-to-lake-")
    given = job(SOURCE + SINK + "pipeline:\n  name: x\n  dead-letter.topic: bad-records\n").pipeline
    assert given.dead_letter_topic == "bad-records"


# --------------------------------------------------------------------------------------------------
# Errors name file, line, key


def test_misspelt_key_names_the_key_its_line_and_the_right_spelling() -> None:
    e = error(with_source("scan.startup.mod: earliest-offset"))
    assert (e.file, e.line, e.column, e.key_path) == ("job.yaml", 5, 3, "source.scan.startup.mod")
    assert "did you mean 'scan.startup.mode'?" in str(e)
    assert str(e).startswith("job.yaml:5:3: source.scan.startup.mod: unknown key")


def test_misspelt_section_and_sink_keys() -> None:
    e = error(SOURCE + SINK + "pipline:\n  name: x\n")
    assert e.line == 7 and e.key_path == "pipline" and "did you mean 'pipeline'?" in str(e)
    e = error(SOURCE + SINK + "  exclude.schema.change: [drop]\n")
    assert e.line == 7 and e.key_path == "sink.exclude.schema.change"
    assert "did you mean 'exclude.schema.changes'?" in str(e)


def test_wrong_type_names_the_key_and_line() -> None:
    e = error(SOURCE + SINK + "pipeline:\n  name: x\n  batch.size: lots\n")
    assert (e.line, e.column, e.key_path) == (9, 3, "pipeline.batch.size")
    assert "integer" in str(e)
    assert "lots" not in str(e)


def test_missing_required_option_is_named_at_its_parent() -> None:
    text = "sink:\n  type: memory\nsource:\n  type: kafka\n  topic: orders\n"
    e = error(text)
    assert (e.line, e.key_path) == (3, "source.properties.bootstrap.servers")
    assert "missing required key" in str(e)


def test_missing_sink_is_named() -> None:
    e = error(SOURCE)
    assert e.key_path == "sink" and "missing" in str(e)


def test_every_problem_is_listed_in_file_order() -> None:
    text = with_source("value.format: avro", rest="pipeline:\n  parallelism: 0\n  batch.size: lots\n")
    e = error(text)
    assert [p.key_path for p in e.problems] == [
        "source.value.format",
        "pipeline.parallelism",
        "pipeline.batch.size",
    ]
    assert [p.line for p in e.problems] == [5, 9, 10]
    assert str(e).splitlines() == [str(p) for p in e.problems]


def test_config_error_is_terminal() -> None:
    assert issubclass(ConfigError, TerminalError)


def test_input_values_are_never_echoed() -> None:
    text = (
        SOURCE.replace("127.0.0.1:9092", "[s3cr3t-value]") + SINK + "pipeline:\n  name: {password: hunter2}\n"
    )
    e = error(text)
    assert {p.key_path for p in e.problems} == {"source.properties.bootstrap.servers", "pipeline.name"}
    assert "s3cr3t" not in str(e) and "hunter2" not in str(e)


def test_yaml_syntax_error_has_line_and_column() -> None:
    e = error("source:\n  type: kafka\n  topic: [a, b\nsink: {type: memory}\n")
    assert e.line == 4 and e.column is not None
    assert "YAML" in str(e)


def test_duplicate_key_is_an_error() -> None:
    e = error(SOURCE + "  topic: customers\n" + SINK)
    assert e.line == 5 and "duplicate key 'topic'" in str(e)
    assert "customers" not in str(e)


def test_a_job_file_is_a_mapping() -> None:
    assert "mapping" in str(error(""))
    assert "mapping" in str(error("- source\n- sink\n"))


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_job(ROOT / "configs" / "no-such-job.yaml", env={})
    assert info.value.file.endswith("no-such-job.yaml")


def test_flink_cdc_mysql_source_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError) as info:
        load_job(FLINK_MINIMIZED, env={})
    e = info.value
    assert (e.line, e.column, e.key_path) == (18, 3, "source.type")
    assert "'mysql' is not supported" in str(e) and "Kafka" in str(e) and "'kafka'" in str(e)
    # the Kafka sink exists: what its section lacks is named
    sink = next(p for p in e.problems if p.key_path.startswith("sink"))
    assert sink.line == 20 and "properties.bootstrap.servers is required" in sink.message


def test_unknown_sink_type_lists_the_sink_types() -> None:
    e = error(SOURCE + "sink:\n  type: elasticsearch\n")
    assert (e.line, e.key_path) == (6, "sink.type")
    assert all(f"'{kind}'" in str(e) for kind in ("iceberg", "kafka", "memory", "null", "paimon"))


def test_sink_without_type() -> None:
    e = error(SOURCE + "sink:\n  name: lake\n")
    assert e.key_path == "sink.type" and "missing key 'type'" in str(e)


# --------------------------------------------------------------------------------------------------
# Source rules


def test_topic_and_topic_pattern_exclude_each_other() -> None:
    e = error(with_source("topic-pattern: orders_.*"))
    assert (e.line, e.key_path) == (5, "source.topic-pattern")
    assert "not both" in str(e)


def test_topic_or_topic_pattern_is_required() -> None:
    text = "source:\n  type: kafka\n  properties.bootstrap.servers: b:9092\n" + SINK
    e = error(text)
    assert (e.line, e.key_path) == (1, "source.topic")


def test_topic_pattern_must_compile() -> None:
    text = SOURCE.replace("topic: orders", "topic-pattern: 'orders_(a|b'")
    e = error(text + SINK)
    assert (e.line, e.key_path) == (4, "source.topic-pattern")
    assert "regular expression" in str(e)
    ok = job(SOURCE.replace("topic: orders", "topic-pattern: 'dbserver1\\.inventory\\..*'") + SINK)
    assert ok.source.reads_topic("dbserver1.inventory.orders")
    assert not ok.source.reads_topic("dbserver1.other.orders")


def test_topic_names_are_kafka_names() -> None:
    e = error(SOURCE.replace("topic: orders", "topic: orders;bad topic") + SINK)
    assert e.key_path == "source.topic" and "'bad topic' is not a Kafka topic name" in str(e)


def test_value_formats() -> None:
    for fmt in ("debezium-json", "canal-json", "maxwell-json"):
        assert job(with_source(f"value.format: {fmt}")).source.value_format == fmt
    e = error(with_source("value.format: avro"))
    assert e.key_path == "source.value.format" and "debezium-json" in str(e)


def test_schema_change_topic_is_debezium_only() -> None:
    config = job(with_source("schema-change.topic: dbserver1"))
    assert config.source.schema_change_topic == "dbserver1"
    e = error(with_source("value.format: canal-json", "schema-change.topic: dbserver1"))
    assert (e.line, e.key_path) == (6, "source.schema-change.topic")


def test_specific_offsets_are_parsed() -> None:
    config = job(
        with_source(
            "scan.startup.mode: specific-offsets",
            "scan.startup.specific-offsets: 'partition:0,offset:42;partition:1,offset:300'",
        )
    )
    assert config.source.scan_startup_specific_offsets == {0: 42, 1: 300}
    assert parse_specific_offsets(" partition : 2 , offset : 7 ; ") == {2: 7}
    assert format_specific_offsets({1: 300, 0: 42}) == "partition:0,offset:42;partition:1,offset:300"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("partition:0;offset:42", "cannot read 'partition:0'"),
        ("partition:0,offset:x", "cannot read"),
        ("partition:0,offset:1;partition:0,offset:2", "partition 0 is given twice"),
        (";", "no offsets given"),
        ("partition:-1,offset:3", "cannot read"),
    ],
)
def test_bad_specific_offsets_name_the_key(text: str, reason: str) -> None:
    e = error(with_source("scan.startup.mode: specific-offsets", f"scan.startup.specific-offsets: '{text}'"))
    assert (e.line, e.key_path) == (6, "source.scan.startup.specific-offsets")
    assert reason in str(e)


def test_startup_mode_needs_its_option_and_only_then() -> None:
    e = error(with_source("scan.startup.mode: timestamp"))
    assert (e.line, e.key_path) == (5, "source.scan.startup.mode")
    assert "scan.startup.timestamp-millis is required" in str(e)
    e = error(with_source("scan.startup.mode: specific-offsets"))
    assert "scan.startup.specific-offsets is required" in str(e)
    e = error(with_source("scan.startup.timestamp-millis: 1700000000000"))
    assert (e.line, e.key_path) == (5, "source.scan.startup.timestamp-millis")
    assert "only used when scan.startup.mode is timestamp" in str(e)
    config = job(with_source("scan.startup.mode: timestamp", "scan.startup.timestamp-millis: 1700000000000"))
    assert config.source.scan_startup_timestamp_millis == 1_700_000_000_000


def test_bounded_mode() -> None:
    config = job(
        with_source(
            "scan.bounded.mode: specific-offsets",
            "scan.bounded.specific-offsets: partition:0,offset:1000",
        )
    )
    assert config.source.scan_bounded_mode is BoundedMode.SPECIFIC_OFFSETS
    assert config.source.scan_bounded_specific_offsets == {0: 1000}
    e = error(with_source("scan.bounded.mode: timestamp"))
    assert e.key_path == "source.scan.bounded.mode" and "scan.bounded.timestamp-millis is required" in str(e)
    assert job(with_source("scan.bounded.mode: latest-offset")).source.scan_bounded_mode == "latest-offset"


def test_per_topic_start_overrides() -> None:
    text = SOURCE.replace("topic: orders", "topic: orders;customers") + (
        "  tables:\n"
        "    - topic: customers\n"
        "      scan.startup.mode: timestamp\n"
        "      scan.startup.timestamp-millis: 1700000000000\n"
    )
    config = job(text + SINK)
    assert config.source.startup_for("customers").scan_startup_mode is StartupMode.TIMESTAMP
    assert config.source.startup_for("orders").scan_startup_mode is StartupMode.GROUP_OFFSETS

    e = error(text.replace("- topic: customers", "- topic: payments") + SINK)
    assert (e.line, e.key_path) == (6, "source.tables[0].topic")
    assert "does not read topic 'payments'" in str(e)

    e = error(text.replace("      scan.startup.timestamp-millis: 1700000000000\n", "") + SINK)
    assert (e.line, e.key_path) == (7, "source.tables[0].scan.startup.mode")


# --------------------------------------------------------------------------------------------------
# Interpolation


def test_environment_variables_with_and_without_default() -> None:
    text = SOURCE.replace("127.0.0.1:9092", "${KAFKA:-localhost:9092}") + SINK
    assert job(text).source.bootstrap_servers == "localhost:9092"
    assert job(text, {"KAFKA": "k1:9092"}).source.bootstrap_servers == "k1:9092"
    assert job(text, {"KAFKA": ""}).source.bootstrap_servers == "localhost:9092"
    text = SOURCE.replace("127.0.0.1:9092", "${HOST}:${PORT}") + SINK
    assert job(text, {"HOST": "kafka", "PORT": "9093"}).source.bootstrap_servers == "kafka:9093"


def test_a_number_can_come_from_the_environment() -> None:
    config = job(SOURCE + SINK + "pipeline:\n  batch.size: ${BATCH:-500}\n")
    assert config.pipeline.batch_size == 500


def test_missing_variable_names_line_and_key() -> None:
    text = SOURCE + SINK + "pipeline:\n  name: x\n  state.url: ${STATE_URL}\n"
    e = error(text)
    assert (e.line, e.column, e.key_path) == (9, 14, "pipeline.state.url")
    assert "STATE_URL is not set" in str(e)


def test_bad_variable_reference_and_escape() -> None:
    e = error(SOURCE + SINK + "pipeline:\n  name: ${NAME\n")
    assert e.key_path == "pipeline.name" and "${NAME:-default}" in str(e)
    config = job(SOURCE + SINK + "pipeline:\n  state.url: sqlite:///$${X}.db\n")
    assert config.pipeline.state_url == "sqlite:///${X}.db"


def test_variables_in_lists() -> None:
    text = SOURCE.replace("topic: orders", "topic:\n    - ${PREFIX}.orders\n    - ${MISSING}") + SINK
    e = error(text, {"PREFIX": "db1"})
    assert (e.line, e.key_path) == (6, "source.topic[1]")


def test_environment_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TEST_BOOTSTRAP", "from-env:9092")
    text = SOURCE.replace("127.0.0.1:9092", "${FERRY_TEST_BOOTSTRAP}") + SINK
    assert load_job_text(text).source.bootstrap_servers == "from-env:9092"


# --------------------------------------------------------------------------------------------------
# Behaviour and schema-change names


@pytest.mark.parametrize(
    ("written", "behavior"),
    [
        ("evolve", SchemaChangeBehavior.EVOLVE),
        ("Try_Evolve", SchemaChangeBehavior.TRY_EVOLVE),
        ("try-evolve", SchemaChangeBehavior.TRY_EVOLVE),
        ("EXCEPTION", SchemaChangeBehavior.EXCEPTION),
        ("ignore", SchemaChangeBehavior.IGNORE),
        ("Lenient", SchemaChangeBehavior.LENIENT),
    ],
)
def test_behavior_is_case_insensitive(written: str, behavior: SchemaChangeBehavior) -> None:
    config = job(SOURCE + SINK + f"pipeline:\n  schema.change.behavior: {written}\n")
    assert config.pipeline.schema_change_behavior is behavior


def test_unknown_behavior() -> None:
    e = error(SOURCE + SINK + "pipeline:\n  schema.change.behavior: sometimes\n")
    assert e.key_path == "pipeline.schema.change.behavior" and "EVOLVE" in str(e)


def test_family_expansion() -> None:
    assert expand_schema_change_tags(["column"]) == {
        "add.column",
        "drop.column",
        "rename.column",
        "alter.column.type",
        "alter.column.comment",
    }
    assert expand_schema_change_tags(["table"]) == {
        "create.table",
        "drop.table",
        "truncate.table",
        "alter.table.comment",
    }
    assert expand_schema_change_tags(["drop"]) == {"drop.column", "drop.table"}
    assert expand_schema_change_tags(["create", "Add.Column", "rename"]) == {
        "create.table",
        "add.column",
        "rename.column",
    }
    assert expand_schema_change_tags([]) == frozenset()
    assert expand_schema_change_tags(["table", "column"]) == set(SCHEMA_CHANGE_TAGS)


def test_families_name_known_tags() -> None:
    for tags in SCHEMA_CHANGE_FAMILIES.values():
        assert tags <= set(SCHEMA_CHANGE_TAGS)


def test_unknown_schema_change_name() -> None:
    with pytest.raises(ValueError, match=r"'add\.colum'.*did you mean 'add\.column'"):
        expand_schema_change_tags(["add.colum"])


def test_include_and_exclude_are_checked_in_the_job() -> None:
    sink = (
        "sink:\n  type: memory\n"
        "  include.schema.changes: [column, create.table]\n"
        "  exclude.schema.changes: [drop]\n"
    )
    config = job(SOURCE + sink)
    assert config.sink.include_schema_changes == ("column", "create.table")
    assert expand_schema_change_tags(config.sink.exclude_schema_changes) == {"drop.column", "drop.table"}

    e = error(
        SOURCE + "sink:\n  type: memory\n  include.schema.changes:\n    - add.column\n    - drop.colunm\n"
    )
    assert (e.line, e.key_path) == (9, "sink.include.schema.changes[1]")
    assert "'drop.colunm'" in str(e) and "did you mean 'drop.column'?" in str(e)
    e = error(SOURCE + "sink:\n  type: memory\n  exclude.schema.changes: [everything]\n")
    assert e.key_path == "sink.exclude.schema.changes[0]" and "'everything'" in str(e)


# --------------------------------------------------------------------------------------------------
# Durations


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("5s", timedelta(seconds=5)),
        ("500ms", timedelta(milliseconds=500)),
        ("3min", timedelta(minutes=3)),
        ("1h", timedelta(hours=1)),
        ("1 h", timedelta(hours=1)),
        ("2 minutes", timedelta(minutes=2)),
        ("1d", timedelta(days=1)),
        ("250", timedelta(milliseconds=250)),
        (1500, timedelta(milliseconds=1500)),
    ],
)
def test_durations(written: str | int, expected: timedelta) -> None:
    assert parse_duration(written) == expected


@pytest.mark.parametrize("written", ["5 parsecs", "s", "-5s", "0s", "1.5s", True, 2.5])
def test_bad_durations(written: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(written)


def test_durations_in_the_job() -> None:
    config = job(
        SOURCE + SINK + "pipeline:\n  checkpoint.interval: 500ms\n  schema.operator.rpc-timeout: 2000\n"
    )
    assert config.pipeline.checkpoint_interval == timedelta(milliseconds=500)
    assert config.pipeline.schema_operator_rpc_timeout == timedelta(seconds=2)
    e = error(SOURCE + SINK + "pipeline:\n  checkpoint.interval: soon\n")
    assert (e.line, e.key_path) == (8, "pipeline.checkpoint.interval") and "duration" in str(e)


def test_format_duration() -> None:
    assert [
        format_duration(timedelta(**kw)) for kw in ({"seconds": 5}, {"minutes": 3}, {"milliseconds": 1500})
    ] == [
        "5s",
        "3min",
        "1500ms",
    ]


# --------------------------------------------------------------------------------------------------
# Route, transform, pipeline


def test_routes_and_transforms() -> None:
    rest = textwrap.dedent(
        """\
        route:
          - source-table: app_db.order_[0-9]+
            sink-table: ods.orders
            description: merge shards
          - source-table: app_db\\..*
            sink-table: ods.ods_<>
            replace-symbol: <>
        transform:
          - source-table: app_db.customers
            projection: id, UPPER(name) AS name
            filter: id > 10
            primary-keys: id, region
            partition-keys: region
        """
    )
    config = job(SOURCE + SINK + rest)
    first, second = config.route
    assert RoutePattern(first.source_table, first.sink_table).matches(TableId.parse("app_db.order_12"))
    assert first.sink_table == "ods.orders"
    assert second.replace_symbol == "<>"
    (transform,) = config.transform
    assert transform.primary_key_columns == ("id", "region")
    assert transform.partition_key_columns == ("region",)
    assert transform.filter == "id > 10"


def test_route_errors() -> None:
    e = error(SOURCE + SINK + "route:\n  - source-table: 'db.(x'\n    sink-table: ods.x\n")
    assert (e.line, e.key_path) == (8, "route[0].source-table") and "regular expression" in str(e)
    e = error(
        SOURCE + SINK + "route:\n  - source-table: db.x\n    sink-table: ods.x\n    replace-symbol: <>\n"
    )
    assert (e.line, e.key_path) == (10, "route[0].replace-symbol")
    e = error(SOURCE + SINK + "route:\n  - source-table: db.x\n")
    assert (e.line, e.key_path) == (8, "route[0].sink-table") and "missing" in str(e)


def test_transform_errors() -> None:
    e = error(SOURCE + SINK + "transform:\n  - source-table: db.x\n    primary-keys: id,,name\n")
    assert (e.line, e.key_path) == (9, "transform[0].primary-keys")
    e = error(SOURCE + SINK + "transform:\n  - source-table: db.x\n    table-options: comment\n")
    assert (e.line, e.key_path) == (9, "transform[0].table-options") and "is not key=value" in str(e)


def test_pipeline_errors() -> None:
    e = error(SOURCE + SINK + "pipeline:\n  on-bad-record: drop\n")
    assert e.key_path == "pipeline.on-bad-record" and "dead-letter" in str(e)
    e = error(SOURCE + SINK + "pipeline:\n  status.port: 70000\n")
    assert e.key_path == "pipeline.status.port"
    e = error(SOURCE + SINK + "pipeline:\n  state.url: not a url\n")
    assert e.key_path == "pipeline.state.url" and "SQLAlchemy" in str(e)
    e = error(SOURCE + SINK + "pipeline:\n  schema-operator.rpc-timeout: 1 fortnight\n")
    assert e.key_path == "pipeline.schema-operator.rpc-timeout" and "not a duration" in str(e)


def test_empty_sections_are_allowed() -> None:
    config = job(SOURCE + SINK + "route:\ntransform:\npipeline:\n")
    assert config.route == () and config.transform == () and config.pipeline.name == "ferry"


def test_validate_command_summary() -> None:
    path = CONFIGS[0]
    summary = validate_command(path, env={})
    config = load_job(path, env={})
    assert summary.startswith(f"{path}: valid.")
    assert str(config.source.value_format) in summary
    assert f"the {config.sink.type} sink" in summary
    assert f"{len(config.route)} route" in summary


def test_validate_command_hides_the_state_store_password(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(SOURCE + SINK + "pipeline:\n  state.url: postgresql+psycopg://ferry:pa55word@db/ferry\n")
    summary = validate_command(path, env={})
    assert "pa55word" not in summary and "postgresql+psycopg://ferry:***@db/ferry" in summary


def test_consumer_properties_are_not_in_the_repr() -> None:
    config = job(with_source("properties.sasl.password: pa55word"))
    assert config.source.properties["sasl.password"] == "pa55word"
    assert "pa55word" not in repr(config)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_a_job_survives_a_json_round_trip(path: Path) -> None:
    config = load_job(path, env={})
    assert JobConfig.model_validate_json(config.model_dump_json(by_alias=True)) == config
    assert JobConfig.model_validate(config.model_dump(by_alias=True)) == config


def test_json_uses_the_job_file_syntax() -> None:
    config = job(
        with_source(
            "scan.startup.mode: specific-offsets",
            "scan.startup.specific-offsets: partition:0,offset:4;partition:1,offset:9",
        )
    )
    dumped = config.model_dump(mode="json", by_alias=True)
    assert dumped["source"]["scan.startup.specific-offsets"] == "partition:0,offset:4;partition:1,offset:9"
    assert dumped["pipeline"]["checkpoint.interval"] == "5s"
    assert dumped["pipeline"]["schema.operator.rpc-timeout"] == "3min"


def test_misspelt_option_group_prefix() -> None:
    e = error(with_source("propertes.group.id: g"))
    assert e.key_path == "source.propertes.group.id" and "did you mean 'properties.group.id'?" in str(e)
    e = error(SOURCE + "sink:\n  type: iceberg\n  catalog.propertie.uri: http://catalog:8181\n")
    assert (e.line, e.key_path) == (7, "sink.catalog.propertie.uri")
    assert "did you mean 'catalog.properties.uri'?" in str(e)


def test_iceberg_sink_options_are_folded() -> None:
    text = SOURCE + textwrap.dedent(
        """\
        sink:
          type: iceberg
          namespace: ods
          catalog.properties.type: rest
          catalog.properties.uri: ${CATALOG:-http://127.0.0.1:8181}
          table.properties.format-version: 2
        """
    )
    sink = job(text).sink
    assert sink.type == "iceberg"
    assert sink.catalog_properties == {"type": "rest", "uri": "http://127.0.0.1:8181"}
    assert sink.table_properties == {"format-version": "2"}
    assert sink.namespace == "ods"
