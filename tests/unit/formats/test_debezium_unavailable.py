"""Debezium's unavailable-value placeholder (an unchanged TOASTed value of a PostgreSQL UPDATE) read
as UNAVAILABLE, in records shaped as the PostgreSQL connector (3.6, pgoutput) writes them with the
JSON converter and schemas: text, varchar, bytea (base64 of the placeholder's bytes), jsonb
(``io.debezium.data.Json``), ``text[]`` (a one-element list), ``int[]`` (the placeholder's bytes as
numbers), through the generic path, the typed path and a partition's run."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ferry.connectors.formats.debezium import DebeziumJsonDecoder
from ferry.connectors.formats.placeholders import Placeholders
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.model.events import SCHEMA_CHANGE_TAGS, DataChange, Op
from ferry.model.unavailable import UNAVAILABLE, PartialRow
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

PLACEHOLDER = "__debezium_unavailable_value"
TOPIC = "dbz.public.docs"

_FIELDS: list[dict[str, Any]] = [
    {"type": "int32", "optional": False, "default": 0, "field": "id"},
    {"type": "int32", "optional": False, "field": "n"},
    {"type": "string", "optional": True, "field": "body"},
    {"type": "string", "optional": True, "field": "title"},
    {"type": "bytes", "optional": True, "field": "blob"},
    {"type": "string", "optional": True, "name": "io.debezium.data.Json", "version": 1, "field": "doc"},
]
_ARRAYS: list[dict[str, Any]] = [
    {"type": "array", "items": {"type": "string", "optional": True}, "optional": True, "field": "tags"},
    {"type": "array", "items": {"type": "int32", "optional": True}, "optional": True, "field": "counts"},
]
_SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
        },
        "default": "false",
        "field": "snapshot",
    },
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": True, "field": "sequence"},
    {"type": "int64", "optional": True, "field": "ts_us"},
    {"type": "int64", "optional": True, "field": "ts_ns"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": True, "field": "xmin"},
]


def _envelope_schema(fields: list[dict[str, Any]]) -> dict[str, Any]:
    value = {
        "type": "struct",
        "fields": fields,
        "optional": True,
        "name": "dbz.public.docs.Value",
        "field": "",
    }
    return {
        "type": "struct",
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            {"type": "struct", "fields": _SOURCE_FIELDS, "optional": False, "name": "io.debezium.connector.postgresql.Source", "version": 1, "field": "source"},
            {"type": "struct", "fields": [{"type": "string", "optional": False, "field": "id"}, {"type": "int64", "optional": False, "field": "total_order"}, {"type": "int64", "optional": False, "field": "data_collection_order"}], "optional": True, "name": "event.block", "version": 1, "field": "transaction"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {"type": "int64", "optional": True, "field": "ts_us"},
            {"type": "int64", "optional": True, "field": "ts_ns"},
        ],
        "optional": False,
        "name": "dbz.public.docs.Envelope",
        "version": 2,
    }  # fmt: skip


_KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int32", "optional": False, "default": 0, "field": "id"}],
    "optional": False,
    "name": "dbz.public.docs.Key",
}


def _record(offset: int, op: str, after: dict[str, Any], fields: list[dict[str, Any]] = _FIELDS) -> Record:
    """A change event as the PostgreSQL connector writes it (REPLICA IDENTITY DEFAULT: an
    update has no before-image)."""
    source = {
        "version": "3.6.1.Final",
        "connector": "postgresql",
        "name": "dbz",
        "ts_ms": 1765100000000 + offset,
        "snapshot": "false",
        "db": "ferry",
        "sequence": '["24023128","24023184"]',
        "ts_us": 1765100000000000,
        "ts_ns": 1765100000000000000,
        "schema": "public",
        "table": "docs",
        "txId": 747 + offset,
        "lsn": 24023184 + offset,
        "xmin": None,
    }
    payload = {
        "before": None,
        "after": after,
        "source": source,
        "transaction": None,
        "op": op,
        "ts_ms": 1765100000100,
        "ts_us": 1765100000100000,
        "ts_ns": 1765100000100000000,
    }
    value = json.dumps({"schema": _envelope_schema(fields), "payload": payload}, separators=(",", ":"))
    key = json.dumps({"schema": _KEY_SCHEMA, "payload": {"id": after["id"]}}, separators=(",", ":"))
    return Record(TOPIC, 0, offset, key=key.encode(), value=value.encode())


def _row(key: int, n: int, body: Any = "b" * 2500, blob: Any = None, doc: Any = None) -> dict[str, Any]:
    return {
        "id": key,
        "n": n,
        "body": body,
        "title": f"title {key}",
        "blob": base64.b64encode(b"\x00\x01" * 1500).decode() if blob is None else blob,
        "doc": json.dumps({"k": "v" * 2500}) if doc is None else doc,
    }


_UNCHANGED = {
    "body": PLACEHOLDER,
    "blob": base64.b64encode(PLACEHOLDER.encode()).decode(),
    "doc": PLACEHOLDER,
}


def _changes(events: list[Any]) -> list[DataChange]:
    return [e for e in events if isinstance(e, DataChange)]


def _decoders() -> list[DebeziumJsonDecoder]:
    generic = DebeziumJsonDecoder()
    generic._typed_rows = False
    return [DebeziumJsonDecoder(), generic, DebeziumJsonDecoder(raw_values=True)]


@pytest.mark.parametrize("decoder", _decoders(), ids=["typed", "generic", "raw-values"])
def test_an_update_that_leaves_toasted_values_alone_has_them_unavailable(
    decoder: DebeziumJsonDecoder,
) -> None:
    batch = [
        _record(0, "c", _row(1, 0)),
        _record(1, "u", {**_row(1, 1), **_UNCHANGED}),
        _record(2, "u", {**_row(2, 1), **_UNCHANGED}),  # a run of the partition's shape
        _record(3, "u", {**_row(3, 1), "body": PLACEHOLDER}),
        _record(4, "u", _row(4, 2, body="x" * 3000)),
    ]
    changes = _changes(decoder.decode(batch))
    assert [c.op for c in changes] == [Op.INSERT, Op.UPDATE, Op.UPDATE, Op.UPDATE, Op.UPDATE]
    assert changes[0].after is not None and changes[0].after["body"] == "b" * 2500
    for change in changes[1:3]:
        assert change.after is not None
        assert change.after["body"] is UNAVAILABLE
        assert change.after["blob"] is UNAVAILABLE
        assert change.after["doc"] is UNAVAILABLE
        assert change.after["title"] == f"title {change.after['id']}"
        assert change.after["n"] == 1
    third = changes[3].after
    assert third is not None and third["body"] is UNAVAILABLE
    assert third["blob"] == b"\x00\x01" * 1500 and third["doc"] == json.dumps({"k": "v" * 2500})
    assert changes[4].after is not None and UNAVAILABLE not in changes[4].after.values()


def test_runs_of_updates_mark_every_record() -> None:
    decoder = DebeziumJsonDecoder()
    batch = [_record(i, "u", {**_row(i, i), **_UNCHANGED}) for i in range(200)]
    changes = _changes(decoder.decode(batch))
    assert len(changes) == 200
    assert all(
        c.after is not None and c.after["body"] is UNAVAILABLE and c.after["blob"] is UNAVAILABLE
        for c in changes
    )


def test_an_insert_keeps_a_value_equal_to_the_placeholder() -> None:
    changes = _changes(DebeziumJsonDecoder().decode([_record(0, "c", {**_row(1, 0), "body": PLACEHOLDER})]))
    assert changes[0].after is not None and changes[0].after["body"] == PLACEHOLDER


def test_arrays_hold_the_placeholder_in_their_types_form() -> None:
    fields = [*_FIELDS, *_ARRAYS]
    numbers = list(PLACEHOLDER.encode())
    batch = [
        _record(0, "u", {**_row(1, 1), "tags": [PLACEHOLDER], "counts": numbers}, fields),
        _record(1, "u", {**_row(2, 1), "tags": ["a", PLACEHOLDER], "counts": [1, 2]}, fields),
    ]
    changes = _changes(DebeziumJsonDecoder().decode(batch))
    first, second = changes[0].after, changes[1].after
    assert first is not None and first["tags"] is UNAVAILABLE and first["counts"] is UNAVAILABLE
    assert second is not None and second["tags"] == ["a", PLACEHOLDER] and second["counts"] == [1, 2]


def test_the_placeholder_is_the_connectors_setting() -> None:
    decoder = DebeziumJsonDecoder(unavailable_value_placeholder="hex:00ff")
    unchanged = {"body": "\x00\ufffd", "blob": base64.b64encode(b"\x00\xff").decode()}
    changes = _changes(decoder.decode([_record(0, "u", {**_row(1, 1), **unchanged, "doc": PLACEHOLDER})]))
    after = changes[0].after
    assert after is not None and after["blob"] is UNAVAILABLE
    assert after["doc"] == PLACEHOLDER  # Debezium's default is not this connector's placeholder


def test_payload_only_updates_mark_the_placeholder() -> None:
    record = Record(
        TOPIC,
        0,
        0,
        key=b'{"id":1}',
        value=json.dumps(
            {
                "before": None,
                "after": {**_row(1, 1), **_UNCHANGED},
                "source": {"schema": "public", "table": "docs"},
                "op": "u",
            }
        ).encode(),
    )
    changes = _changes(DebeziumJsonDecoder(infer_types=True).decode([record]))
    after = changes[0].after
    assert after is not None and after["body"] is UNAVAILABLE and after["doc"] is UNAVAILABLE


def test_placeholder_forms_follow_debezium() -> None:
    forms = Placeholders()
    assert forms.base64 == base64.b64encode(PLACEHOLDER.encode()).decode()
    assert forms.numbers == list(PLACEHOLDER.encode())
    assert Placeholders("hex:80").numbers == [-128]  # Java's signed bytes


# ---------------------------------------------------------------------------------- captured records

CAPTURED = Path(__file__).parent / "fixtures" / "debezium-postgres-toast.txt"


def _captured() -> list[Record]:
    lines = [line for line in CAPTURED.read_bytes().splitlines() if not line.startswith(b"#")]
    records = []
    for head, key, value in zip(lines[0::3], lines[1::3], lines[2::3], strict=True):
        topic, partition, offset = head.decode().split()
        records.append(Record(topic, int(partition), int(offset), key=key, value=value))
    return records


@pytest.mark.parametrize("decoder", _decoders(), ids=["typed", "generic", "raw-values"])
def test_captured_updates_read_the_placeholder_as_unavailable(decoder: DebeziumJsonDecoder) -> None:
    records = _captured()
    changes = _changes(decoder.decode(records))
    assert len(changes) == len(records)
    placeholders = (PLACEHOLDER, PLACEHOLDER.encode())
    for record, change in zip(records, changes, strict=True):
        written = json.loads(record.value() or b"")["payload"]["after"]
        assert change.after is not None
        for column, value in change.after.items():
            assert value not in placeholders
            unchanged = written[column] in (PLACEHOLDER, _UNCHANGED["blob"])
            assert (value is UNAVAILABLE) is unchanged, (record.topic(), record.offset(), column)
        assert (type(change.after) is PartialRow) is (UNAVAILABLE in change.after.values())
    default = [c for c in changes if c.table_id.table_name == "docs_default" and c.op is Op.UPDATE]
    full = [c for c in changes if c.table_id.table_name == "docs_full"]
    assert default and all(UNAVAILABLE in (c.after or {}).values() for c in default)
    assert full and not any(UNAVAILABLE in (c.after or {}).values() for c in full)


def test_captured_changes_keep_the_values_the_sink_holds(tmp_path: Path) -> None:
    """Through the runner into the memory sink, the rows end as the source's: each column's last
    value that was sent."""
    decoder = DebeziumJsonDecoder()
    records = _captured()
    events = decoder.decode(records)
    expected: dict[tuple[str, int], dict[str, Any]] = {}
    for change in _changes(DebeziumJsonDecoder().decode(records)):
        assert change.after is not None
        row = expected.setdefault((change.table_id.table_name, change.after["id"]), {})
        row.update({k: v for k, v in change.after.items() if v is not UNAVAILABLE})
    sink = MemorySink()
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False),
        source=MemorySource(),
        decode=lambda batch: [],
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    try:
        runner.process(events[:3], [])
        runner.checkpoint()  # the rows read first are in the table: the others are completed from it
        runner.process(events[3:], [])
        runner.checkpoint()
    finally:
        runner.close()
    held = {(table.table_name, row["id"]): row for table in sink.tables for row in sink.rows(table)}
    assert held == expected


def test_the_source_option_names_the_placeholder(tmp_path: Path) -> None:
    from ferry.config.exceptions import ConfigError
    from ferry.config.loader import load_job_text
    from ferry.worker import build_runner

    text = (
        "source:\n  type: kafka\n  properties.bootstrap.servers: localhost:9\n  topic: dbz.public.docs\n"
        "  debezium.unavailable.value.placeholder: '{}'\n"
        f"sink:\n  type: memory\npipeline:\n  name: p\n  state.url: sqlite:///{tmp_path}/state.db\n"
    )
    job = load_job_text(text.format("hex:00ff"))
    assert job.source.debezium_unavailable_value_placeholder == "hex:00ff"
    with pytest.raises(ConfigError, match=r"debezium\.unavailable\.value\.placeholder.*hexadecimal"):
        load_job_text(text.format("hex:zz"))
    runner = build_runner(job)
    try:
        record = _record(0, "u", {**_row(1, 1), "blob": base64.b64encode(b"\x00\xff").decode()})
        [change] = _changes(runner.decode([record]))
        assert change.after is not None and change.after["blob"] is UNAVAILABLE
    finally:
        runner.close()


def test_flattened_updates_read_the_placeholder_as_unavailable() -> None:
    """``ExtractNewRecordState`` (``add.fields=op``) passes the placeholder on in the row."""
    fields = [*_FIELDS, {"type": "string", "optional": True, "field": "__op"}]
    schema = {"type": "struct", "fields": fields, "optional": False, "name": "dbz.public.docs.Value"}
    rows = [
        {**_row(1, 0), "__op": "c"},
        {**_row(1, 1), **_UNCHANGED, "__op": "u"},
    ]
    key = json.dumps({"schema": _KEY_SCHEMA, "payload": {"id": 1}}, separators=(",", ":")).encode()
    batch = [
        Record(TOPIC, 0, i, key=key, value=json.dumps({"schema": schema, "payload": row}).encode())
        for i, row in enumerate(rows)
    ]
    inserted, updated = _changes(DebeziumJsonDecoder().decode(batch))
    assert inserted.after is not None and inserted.after["body"] == "b" * 2500
    assert type(updated.after) is PartialRow
    assert updated.after["body"] is UNAVAILABLE and updated.after["blob"] is UNAVAILABLE
    assert updated.after["doc"] is UNAVAILABLE and updated.after["n"] == 1
