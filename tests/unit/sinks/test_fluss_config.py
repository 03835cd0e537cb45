"""The Fluss sink's options and the request its Java client reads (nothing running)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ferry.sinks.base.registry import SINKS
from ferry.sinks.fluss.alter import NewColumn, escape, request
from ferry.sinks.fluss.config import FlussSinkConfig


def config(**options: object) -> FlussSinkConfig:
    return FlussSinkConfig.model_validate({"type": "fluss", "bootstrap.servers": "cs:9123", **options})


def test_the_sink_is_registered_without_importing_its_client() -> None:
    declared = SINKS["fluss"]
    assert declared.config is FlussSinkConfig
    assert (declared.sink_class, declared.extra) == ("ferry.sinks.fluss.sink:FlussSink", "fluss")


def test_flink_cdc_spelling_folds_into_the_model() -> None:
    c = config(
        **{
            "bucket.num": 4,
            "bucket.key": "shop.orders:customer_id, region; items:order_id",
            "properties.table.table.log.ttl": "7d",
            "properties.client.writer.acks": "all",
            "alter-table.classpath": "/a/fluss-client.jar:/b/extra.jar",
        }
    )
    assert c.bucket_num == 4
    assert c.bucket_keys_for("shop", "orders") == ["customer_id", "region"]
    assert c.bucket_keys_for("other", "items") == ["order_id"]
    assert c.bucket_keys_for("shop", "none") is None
    assert c.table_properties == {"table.log.ttl": "7d"}
    assert c.client_properties == {"writer.acks": "all"}
    assert c.alter_table_classpath == ("/a/fluss-client.jar", "/b/extra.jar")
    assert c.python_client_properties() == {"bootstrap.servers": "cs:9123", "writer.acks": "all"}
    assert c.java_client_properties() == {"bootstrap.servers": "cs:9123", "client.writer.acks": "all"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bucket.key": "orders"}, "table:column"),
        ({"bucket.num": 0}, "bucket.num is at least 1"),
        ({"username": "u"}, "username and password go together"),
        ({"bootstrap.server": "x"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_options_are_named(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        config(**options)


def test_the_password_is_a_secret_given_only_to_the_clients() -> None:
    c = config(username="ferry", password="s3cret!")
    assert "s3cret!" not in repr(c) and "s3cret!" not in str(c.model_dump())
    python = c.python_client_properties()
    assert python["security.protocol"] == "sasl" and python["security.sasl.password"] == "s3cret!"
    java = c.java_client_properties()
    assert java["client.security.sasl.username"] == "ferry"
    assert java["client.security.sasl.password"] == "s3cret!"


def test_the_java_request_escapes_what_properties_files_give_a_meaning() -> None:
    assert escape("a b=c:d#e!f\\g\nh") == "a\\ b\\=c\\:d\\#e\\!f\\\\g\\nh"
    text = request(
        {"bootstrap.servers": "cs:9123"},
        "shop",
        "orders",
        [NewColumn("note", "STRING", "what: it is"), NewColumn("n", "DECIMAL(10, 2)")],
        timeout=30,
    )
    assert text.splitlines() == [
        "bootstrap.servers=cs\\:9123",
        "ferry.database=shop",
        "ferry.table=orders",
        "ferry.timeout-seconds=30",
        "ferry.column.0.name=note",
        "ferry.column.0.type=STRING",
        "ferry.column.0.comment=what\\:\\ it\\ is",
        "ferry.column.1.name=n",
        "ferry.column.1.type=DECIMAL(10,\\ 2)",
    ]
