from __future__ import annotations

import pytest

from ferry.connectors.exceptions import DecodeError, UnknownFormatError
from ferry.connectors.formats import FORMATS, decoder_for
from ferry.connectors.formats.canal import CanalJsonDecoder
from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.formats.debezium_schema_change import DebeziumSchemaChangeDecoder
from ferry.connectors.formats.maxwell import MaxwellJsonDecoder
from ferry.connectors.record import TIMESTAMP_CREATE_TIME, Record, RecordLike
from ferry.exceptions import FerryError


def test_record_has_the_message_accessors() -> None:
    record = Record(
        "orders", 3, 42, key="k", value=b"v", timestamp=(TIMESTAMP_CREATE_TIME, 1700), headers=[("h", b"1")]
    )
    like: RecordLike = record
    assert (like.topic(), like.partition(), like.offset()) == ("orders", 3, 42)
    assert like.key() == b"k"
    assert like.value() == b"v"
    assert like.timestamp() == (1, 1700)
    assert like.headers() == [("h", b"1")]
    assert not hasattr(record, "__dict__")
    assert repr(record) == "Record(orders[3]@42, value 1 bytes)"


def test_a_record_without_a_value_is_a_tombstone() -> None:
    record = Record("orders")
    assert record.value() is None and record.key() is None
    assert repr(record) == "Record(orders[0]@0, value null)"


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("debezium-json", DebeziumJsonDecoder),
        ("debezium-schema-change", DebeziumSchemaChangeDecoder),
        ("canal-json", CanalJsonDecoder),
        ("maxwell-json", MaxwellJsonDecoder),
    ],
)
def test_decoder_for_builds_each_format(name: str, cls: type) -> None:
    assert isinstance(decoder_for(name), cls)
    assert name in FORMATS


def test_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(UnknownFormatError) as raised:
        decoder_for("avro-confluent")
    message = str(raised.value)
    assert "unknown format 'avro-confluent'" in message
    for name in ("canal-json", "debezium-json", "debezium-schema-change", "maxwell-json"):
        assert name in message
    assert raised.value.format == "avro-confluent"
    assert isinstance(raised.value, FerryError)


def test_options_are_checked() -> None:
    decoder = decoder_for("canal-json", server_time_zone="Asia/Shanghai")
    assert isinstance(decoder, CanalJsonDecoder)
    with pytest.raises(UnknownFormatError, match="has no option 'schema_include'; it takes definitions"):
        decoder_for("debezium-json", schema_include=True)
    with pytest.raises(UnknownFormatError, match="it takes server_time_zone"):
        decoder_for("canal-json", time_zone="UTC")
    with pytest.raises(UnknownFormatError, match="unknown server_time_zone 'Mars/Olympus'"):
        decoder_for("canal-json", server_time_zone="Mars/Olympus")


def test_decode_error_carries_the_position() -> None:
    error = DecodeError("bad bytes", topic="t", partition=1, offset=7)
    assert (error.topic, error.partition, error.offset, error.reason) == ("t", 1, 7, "bad bytes")
    assert str(error) == "bad bytes (topic t, partition 1, offset 7)"
    assert str(DecodeError("no position")) == "no position"
    assert isinstance(error, FerryError)
