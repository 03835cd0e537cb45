"""Deletes of ``ExtractNewRecordState`` (Debezium 3.6) in each ``delete.tombstone.handling.mode``,
as the JSON converter writes them with and without schemas, and payload-only rows that nothing
types.

What the transform emits for a delete (``DefaultDeleteHandlingStrategy``), and the bytes the JSON
converter makes of it:

* ``tombstone`` (the default): the ``after`` field of the delete, null, with its schema: with
  ``schemas.enable=true`` ``{"schema": <the row's struct>, "payload": null}``, without it the four
  bytes ``null``; the connector's tombstone is dropped.
* ``delete-to-tombstone``: a tombstone (null value and schema: no bytes); the connector's tombstone
  is dropped.
* ``rewrite``: the before-image with ``__deleted: "true"``; the tombstone is dropped.
* ``rewrite-with-tombstone``: the same, then the connector's tombstone.
* ``drop``: nothing (refused by the job's validation: see ``tests/unit/config``).

The key is the record key the connector wrote, in every mode. The table here is keyed by a DATE
and a DECIMAL, so a key taken as it was read (day numbers, base64) would not name the row.
"""

from __future__ import annotations

import base64
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from ferry.connectors.exceptions import UntypedRecordsError
from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.model import types as t
from ferry.model.events import SCHEMA_CHANGE_TAGS, DataChange, Event, Op, SchemaObserved, Tombstone
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TOPIC = "dbserver1.inventory.days"
TABLE = TableId(None, "inventory", "days")
DAY, PRICE = 18460, base64.b64encode((1250).to_bytes(2, "big", signed=True)).decode()
KEY_ROW = {"day": date(2020, 7, 17), "price": Decimal("12.50")}
DEFINED = Schema(
    (
        Column("day", t.DATE().not_null()),
        Column("price", t.DECIMAL(10, 2).not_null()),
        Column("name", t.VARCHAR(64)),
    ),
    ("day", "price"),
)

_DAY = {"type": "int32", "optional": False, "name": "io.debezium.time.Date", "version": 1, "field": "day"}
_PRICE = {
    "type": "bytes",
    "optional": False,
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    "field": "price",
}
#: The transform's value schema: the envelope's ``after`` struct (optional), every mode alike.
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [_DAY, _PRICE, {"type": "string", "optional": True, "field": "name"}],
    "optional": True,
    "name": "dbserver1.inventory.days.Value",
}
KEY_SCHEMA = {
    "type": "struct",
    "fields": [_DAY, _PRICE],
    "optional": False,
    "name": "dbserver1.inventory.days.Key",
}


def key(*, schemas: bool) -> bytes:
    payload = {"day": DAY, "price": PRICE}
    return orjson.dumps({"schema": KEY_SCHEMA, "payload": payload} if schemas else payload)


def row(*, schemas: bool, name: str = "a", **metadata: Any) -> bytes:
    payload = {"day": DAY, "price": PRICE, "name": name, **metadata}
    if not schemas:
        return orjson.dumps(payload)
    fields = VALUE_SCHEMA["fields"] + [{"type": "string", "optional": True, "field": n} for n in metadata]
    return orjson.dumps({"schema": {**VALUE_SCHEMA, "fields": fields}, "payload": payload})


def null_row(*, schemas: bool) -> bytes:
    """``tombstone`` mode's delete: the null ``after`` with its schema."""
    return orjson.dumps({"schema": VALUE_SCHEMA, "payload": None}) if schemas else b"null"


def defined() -> TableDefinitions:
    known = TableDefinitions()
    known.add(TABLE, DEFINED)
    return known


def decode(
    decoder: DebeziumJsonDecoder, values: list[bytes | None], *, schemas: bool, first: int = 0
) -> list[Event]:
    return decoder.decode(
        [Record(TOPIC, 0, first + i, key=key(schemas=schemas), value=v) for i, v in enumerate(values)]
    )


def changes(events: list[Event]) -> list[tuple[Op, dict[str, Any] | None]]:
    return [(e.op, e.before if e.op is Op.DELETE else e.after) for e in events if isinstance(e, DataChange)]


def decoder_for(schemas: bool) -> DebeziumJsonDecoder:
    """With schemas, the records type themselves; without, the schema-change topic's definitions do."""
    return DebeziumJsonDecoder() if schemas else DebeziumJsonDecoder(defined())


ROW = {**KEY_ROW, "name": "a"}


@pytest.mark.parametrize("schemas", [True, False])
def test_tombstone_mode_a_null_row_is_a_delete_by_the_key_converted(schemas: bool) -> None:
    events = decode(decoder_for(schemas), [row(schemas=schemas), null_row(schemas=schemas)], schemas=schemas)
    assert changes(events) == [(Op.UPDATE, ROW), (Op.DELETE, KEY_ROW)]
    assert all(e.table_id == TABLE for e in events if isinstance(e, DataChange))


@pytest.mark.parametrize("schemas", [True, False])
def test_tombstone_mode_a_null_row_read_first_is_a_delete_by_the_key(schemas: bool) -> None:
    # a restart between the insert and the delete: nothing of the table seen yet
    events = decode(decoder_for(schemas), [null_row(schemas=schemas)], schemas=schemas, first=7)
    assert changes(events) == [(Op.DELETE, KEY_ROW)]
    if schemas:  # the null row's schema is the table's
        (observed,) = [e for e in events if isinstance(e, SchemaObserved)]
        assert observed.schema.primary_keys == ("day", "price")


@pytest.mark.parametrize("schemas", [True, False])
def test_delete_to_tombstone_mode_a_tombstone_alone_is_a_delete_by_the_key(schemas: bool) -> None:
    # after a flattened row of its partition, a tombstone not following a delete is one
    events = decode(decoder_for(schemas), [row(schemas=schemas), None], schemas=schemas)
    assert changes(events) == [(Op.UPDATE, ROW), (Op.DELETE, KEY_ROW)]


@pytest.mark.parametrize("schemas", [True, False])
def test_delete_to_tombstone_mode_declared_a_tombstone_read_first_is_a_delete(schemas: bool) -> None:
    # read first (after a restart): the job says the mode; the key's own schema, or the definition,
    # converts the key
    known = None if schemas else defined()
    events = decode(DebeziumJsonDecoder(known, tombstone_deletes=True), [None], schemas=schemas, first=9)
    assert changes(events) == [(Op.DELETE, KEY_ROW)]
    # not declared: nothing says the partition's rows are flattened, it is passed over
    (event,) = decode(decoder_for(schemas), [None], schemas=schemas, first=9)
    assert isinstance(event, Tombstone)


@pytest.mark.parametrize("schemas", [True, False])
def test_rewrite_with_tombstone_mode_deletes_once_and_passes_the_tombstone_over(schemas: bool) -> None:
    values = [row(schemas=schemas), row(schemas=schemas, __deleted="true"), None]
    events = decode(decoder_for(schemas), values, schemas=schemas)
    assert changes(events) == [(Op.UPDATE, ROW), (Op.DELETE, ROW)]
    assert [type(e) for e in events][-1] is Tombstone


def test_the_connectors_tombstone_after_an_envelope_delete_is_passed_over() -> None:
    source = {"connector": "mysql", "db": "inventory", "table": "days"}
    schema = {
        "type": "struct",
        "fields": [{**VALUE_SCHEMA, "field": "before"}, {**VALUE_SCHEMA, "field": "after"}],
        "optional": False,
    }
    payload = {"day": DAY, "price": PRICE, "name": "a"}

    def change(op: str) -> bytes:
        before, after = (payload, None) if op == "d" else (None, payload)
        value = {"before": before, "after": after, "op": op, "source": source}
        return orjson.dumps({"schema": schema, "payload": value})

    decoder = DebeziumJsonDecoder()
    events = decode(decoder, [change("c"), change("d"), None], schemas=True)
    assert changes(events) == [(Op.INSERT, ROW), (Op.DELETE, ROW)]
    assert isinstance(events[-1], Tombstone)
    # a tombstone of another key after an envelope row: passed over too
    events = decode(decoder, [change("c")], schemas=True, first=3)
    stray = Record(TOPIC, 0, 4, key=b'{"day":1,"price":"AA=="}', value=None)
    assert [type(e) for e in decoder.decode([stray])] == [Tombstone]


def test_a_delete_by_key_removes_the_row_at_the_sink(tmp_path: Path) -> None:
    """The default mode end to end through the runner: the rows the source deleted are gone."""
    values: list[bytes | None] = [row(schemas=True), null_row(schemas=True)]
    other = orjson.dumps({"schema": KEY_SCHEMA, "payload": {"day": DAY + 1, "price": PRICE}})
    records = [Record(TOPIC, 0, i, key=key(schemas=True), value=v) for i, v in enumerate(values)]
    kept = {"day": DAY + 1, "price": PRICE, "name": "b"}
    records.append(
        Record(TOPIC, 0, 2, key=other, value=orjson.dumps({"schema": VALUE_SCHEMA, "payload": kept}))
    )
    sink = MemorySink()
    runner = PipelineRunner(
        settings=RunnerSettings(name="flat", tune_gc=False),
        source=MemorySource(records),
        decode=DebeziumJsonDecoder().decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.run()
    assert sink.rows(TABLE) == [{"day": date(2020, 7, 18), "price": Decimal("12.50"), "name": "b"}]


# ------------------------------------------------------------------------ payload-only, untyped


def test_payload_only_rows_without_a_definition_stop_the_pipeline() -> None:
    # the PostgreSQL connector with schemas.enable=false: no schema-change topic to type them
    value = orjson.dumps(
        {
            "before": None,
            "after": {"id": 1, "amount": "etTAOg=="},
            "op": "c",
            "source": {"schema": "public", "table": "accounts"},
        }
    )
    with pytest.raises(UntypedRecordsError) as info:
        DebeziumJsonDecoder().decode([Record("pg.public.accounts", 2, 41, key=b'{"id":1}', value=value)])
    message = str(info.value)
    assert "topic pg.public.accounts, partition 2, offset 41" in message
    assert "value.converter.schemas.enable=true" in message and "debezium-json.infer-types: true" in message
    assert "\n" not in message
    # a flattened payload-only row alike
    with pytest.raises(UntypedRecordsError):
        DebeziumJsonDecoder().decode([Record(TOPIC, 0, 0, key=key(schemas=False), value=row(schemas=False))])


def test_payload_only_rows_are_inferred_when_the_job_accepts_it() -> None:
    value = orjson.dumps({"id": 1, "amount": "etTAOg=="})
    (observed, change) = DebeziumJsonDecoder(infer_types=True).decode(
        [Record("pg.public.accounts", 0, 0, value=value)]
    )
    assert isinstance(change, DataChange) and change.after == {"id": 1, "amount": "etTAOg=="}
    assert isinstance(observed, SchemaObserved)


def test_a_delete_without_a_row_needs_no_types() -> None:
    # a payload-only delete with no before-image (PostgreSQL without REPLICA IDENTITY FULL): by key
    value = orjson.dumps(
        {"before": None, "after": None, "op": "d", "source": {"schema": "public", "table": "accounts"}}
    )
    (change,) = DebeziumJsonDecoder().decode(
        [Record("pg.public.accounts", 0, 0, key=b'{"id":1}', value=value)]
    )
    assert isinstance(change, DataChange) and change.op is Op.DELETE and change.before == {"id": 1}
