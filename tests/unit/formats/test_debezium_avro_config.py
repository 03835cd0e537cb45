"""The job-file keys of ``value.format: debezium-avro``: the schema registry's URL and credentials,
in ferry's and Flink's spellings, checked with the file, line and column of the key."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from ferry.config.exceptions import ConfigError
from ferry.config.job import JobConfig, RegistryCredentialsSource, ValueFormat
from ferry.config.loader import load_job_text


def job(*source: str, env: dict[str, str] | None = None) -> JobConfig:
    lines = "\n".join(f"  {line}" for line in source)
    text = f"""source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9092
  topic: shop.inventory.orders
{lines}
sink:
  type: memory
pipeline:
  name: avro
"""
    return load_job_text(text, file="job.yaml", env=env or {})


def error(*source: str) -> str:
    with pytest.raises(ConfigError) as raised:
        job(*source)
    return str(raised.value)


def test_ferry_spelling() -> None:
    config = job(
        "value.format: debezium-avro",
        "schema-registry.url: http://registry:8080/apis/ccompat/v7",
        "schema-registry.basic-auth.user-info: ${REGISTRY_USER_INFO}",
        env={"REGISTRY_USER_INFO": "reader:s3cret"},
    )
    source = config.source
    assert source.value_format is ValueFormat.DEBEZIUM_AVRO
    assert source.decoder_options() == {
        "schema_registry_url": "http://registry:8080/apis/ccompat/v7",
        "schema_registry_user_info": SecretStr("reader:s3cret"),
    }
    assert source.schema_change_format == "debezium-avro-schema-change"
    assert "s3cret" not in repr(config) and "s3cret" not in config.model_dump_json()


@pytest.mark.parametrize("prefix", ["debezium-avro-confluent", "value.debezium-avro-confluent"])
def test_flink_spellings(prefix: str) -> None:
    source = job(
        "value.format: debezium-avro-confluent",
        f"{prefix}.url: https://a:8081, https://b:8081",
        f"{prefix}.basic-auth.credentials-source: user_info",
        f"{prefix}.basic-auth.user-info: reader:pw",
    ).source
    assert source.value_format is ValueFormat.DEBEZIUM_AVRO
    assert source.schema_registry_url == "https://a:8081,https://b:8081"
    assert source.schema_registry_credentials_source is RegistryCredentialsSource.USER_INFO


def test_credentials_in_the_url_or_from_the_consumers_sasl_settings() -> None:
    in_url = job("value.format: debezium-avro", "schema-registry.url: http://reader:pw@registry:8081").source
    assert in_url.decoder_options()["schema_registry_user_info"] is None
    sasl = job(
        "value.format: debezium-avro",
        "schema-registry.url: http://registry:8081",
        "schema-registry.basic-auth.credentials-source: SASL_INHERIT",
        "properties.sasl.username: app",
        "properties.sasl.password: pw",
    ).source
    assert sasl.decoder_options()["schema_registry_user_info"] == SecretStr("app:pw")


def test_json_formats_take_no_decoder_options() -> None:
    source = job("value.format: debezium-json").source
    assert source.decoder_options() == {}
    assert source.schema_change_format == "debezium-schema-change"
    assert job("value.format: debezium-avro", "schema-registry.url: http://r:1", "schema-change.topic: shop")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            ["value.format: debezium-avro"],
            "job.yaml:5:3: source.value.format: schema-registry.url is required when value.format is debezium-avro",
        ),
        (
            ["value.format: debezium-avro", "value.debezium-avro-confluent.url: ftp://reader:pw@h"],
            "job.yaml:6:3: source.value.debezium-avro-confluent.url: 'ftp://***@h' is not an http:// or https:// URL",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1", "schema-registry.basic-auth.user-info: pw"],
            "job.yaml:7:3: source.schema-registry.basic-auth.user-info: write the credentials as user:password",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1",
             "schema-registry.basic-auth.credentials-source: USER_INFO"],
            "job.yaml:7:3: source.schema-registry.basic-auth.credentials-source: schema-registry.basic-auth.user-info "
            "is required when schema-registry.basic-auth.credentials-source is USER_INFO",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1",
             "schema-registry.basic-auth.credentials-source: URL", "schema-registry.basic-auth.user-info: a:b"],
            "job.yaml:8:3: source.schema-registry.basic-auth.user-info: only used when "
            "schema-registry.basic-auth.credentials-source is USER_INFO (it is URL)",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://x:y@h:1",
             "schema-registry.basic-auth.user-info: a:b"],
            "job.yaml:6:3: source.schema-registry.url: the URL carries credentials and "
            "schema-registry.basic-auth.user-info is given: keep one",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1",
             "schema-registry.basic-auth.credentials-source: SASL_INHERIT"],
            "job.yaml:7:3: source.schema-registry.basic-auth.credentials-source: SASL_INHERIT takes the consumer's "
            "SASL credentials: properties.sasl.username is missing",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1",
             "schema-registry.basic-auth.credentials-source: TOKEN"],
            "job.yaml:7:3: source.schema-registry.basic-auth.credentials-source: Input should be 'USER_INFO', 'URL' "
            "or 'SASL_INHERIT'",
        ),
        (
            ["value.format: debezium-json", "debezium-avro-confluent.url: http://h:1"],
            "job.yaml:6:3: source.debezium-avro-confluent.url: only used when value.format is debezium-avro "
            "(it is debezium-json)",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.url: http://h:1", "debezium-avro-confluent.url: http://h:2"],
            "job.yaml:7:3: source.debezium-avro-confluent.url: schema-registry.url is also given as "
            "debezium-avro-confluent.url: keep one",
        ),
        (
            ["value.format: debezium-avro", "schema-registry.urll: http://h:1"],
            "job.yaml:6:3: source.schema-registry.urll: unknown key (did you mean 'schema-registry.url'?)",
        ),
    ],
)  # fmt: skip
def test_errors_name_the_key_where_the_file_has_it(source: list[str], message: str) -> None:
    text = error(*source)
    assert message in text, text
    assert "pw" not in text.replace("password", "")
