"""Partial rows (an update whose new row lacks values: UNAVAILABLE) through the runner: completed by
the memory sink from its rows, sent to the dead-letter destination where nothing can complete them
or the sink cannot write them, and written back as Debezium's placeholder by the Kafka sink."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.events import SCHEMA_CHANGE_TAGS, DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.model.unavailable import UNAVAILABLE, PartialRow, placeholder_value
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base.rows import complete_from_versions
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TID = TableId.parse("app.docs")
SCHEMA = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("n", T.INT()),
        Column("body", T.STRING()),
        Column("blob", T.BYTES()),
    ],
    ["id"],
)


class WholeRowsSink(MemorySink):
    """A sink that writes whole rows only (no ``complete_rows``)."""

    complete_rows = None  # type: ignore[assignment]


def runner_for(sink: MemorySink, tmp_path: Path) -> tuple[PipelineRunner, MemoryDeadLetter]:
    letters = MemoryDeadLetter()
    runner = PipelineRunner(
        settings=RunnerSettings(name="unit", tune_gc=False),
        source=MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=letters,
    )
    runner.open()
    return runner, letters


def at(offset: int) -> E.SourcePosition:
    return E.SourcePosition("t", 0, offset)


def insert(offset: int, key: int, body: str, blob: bytes) -> DataChange:
    return DataChange(TID, Op.INSERT, None, {"id": key, "n": 0, "body": body, "blob": blob}, at(offset))


def partial(offset: int, key: int, n: int, **values: Any) -> DataChange:
    row = PartialRow({"id": key, "n": n, "body": UNAVAILABLE, "blob": UNAVAILABLE, **values})
    return DataChange(TID, Op.UPDATE, None, row, at(offset))


def create(offset: int = 0) -> E.SchemaHint:
    return E.SchemaHint(TID, (E.CreateTable(TID, SCHEMA),), "CREATE", True, at(offset))


def test_a_partial_row_keeps_the_values_the_sink_holds(tmp_path: Path) -> None:
    sink = MemorySink()
    runner, letters = runner_for(sink, tmp_path)
    runner.process([create(), insert(1, 1, "a" * 3000, b"\x01" * 3000), insert(2, 2, "b", b"\x02")], [])
    runner.checkpoint()
    # key 1: its last version is in the table; key 2: earlier in the same checkpoint
    runner.process([partial(3, 1, 5), DataChange(TID, Op.UPDATE, None, {"id": 2, "n": 1, "body": "c", "blob": b"\x03"}, at(4)), partial(5, 2, 6, blob=b"\x04")], [])  # fmt: skip
    runner.checkpoint()
    assert sorted(sink.rows(TID), key=lambda r: r["id"]) == [
        {"id": 1, "n": 5, "body": "a" * 3000, "blob": b"\x01" * 3000},
        {"id": 2, "n": 6, "body": "c", "blob": b"\x04"},
    ]
    assert letters.records == []


def test_a_partial_row_nothing_completes_goes_to_the_dead_letter_destination(tmp_path: Path) -> None:
    sink = MemorySink()
    runner, letters = runner_for(sink, tmp_path)
    runner.process([create(), insert(1, 1, "a", b"\x01"), partial(2, 7, 1)], [])
    runner.process([DataChange(TID, Op.DELETE, {"id": 1, "n": 0, "body": "a", "blob": b"\x01"}, None, at(3)), partial(4, 1, 2)], [])  # fmt: skip
    runner.checkpoint()
    assert sink.rows(TID) == []
    reasons = [(r.offset, r.reason) for r in letters.records]
    assert [offset for offset, _ in reasons] == [2, 4]
    assert "body, blob is unavailable" in reasons[0][1] and "no row of its key" in reasons[0][1]
    assert "deleted before" in reasons[1][1]


def test_a_sink_that_writes_whole_rows_sends_partial_rows_to_the_dead_letter_destination(
    tmp_path: Path,
) -> None:
    sink = WholeRowsSink()
    runner, letters = runner_for(sink, tmp_path)
    runner.process([create(), insert(1, 1, "a", b"\x01")], [])
    runner.checkpoint()
    runner.process([partial(2, 1, 3), partial(3, 1, 4, body="new", blob=b"new")], [])
    runner.checkpoint()
    assert sink.rows(TID) == [{"id": 1, "n": 4, "body": "new", "blob": b"new"}]
    assert [r.offset for r in letters.records] == [2]
    assert "unavailable.value.placeholder" in letters.records[0].reason


def test_versions_in_order_complete_a_row_under_a_changed_key() -> None:
    changes = [
        insert(0, 1, "a", b"\x01"),
        DataChange(
            TID,
            Op.UPDATE,
            {"id": 1},
            PartialRow({"id": 2, "n": 1, "body": UNAVAILABLE, "blob": UNAVAILABLE}),
            at(1),
        ),
        partial(2, 3, 1),
        partial(3, 2, 2, blob=b"\x05"),
    ]
    still, deleted = complete_from_versions(changes, [1, 2, 3], ("id",), [], "memory")
    assert still == [2] and deleted == []
    assert changes[1].after == {"id": 2, "n": 1, "body": "a", "blob": b"\x01"}
    assert changes[3].after == {"id": 2, "n": 2, "body": "a", "blob": b"\x05"}


@pytest.mark.parametrize("include_schema", [True, False])
def test_the_kafka_sink_writes_the_placeholder_as_debezium_did(include_schema: bool) -> None:
    from ferry.sinks.kafka.config import KafkaSinkConfig
    from ferry.sinks.kafka.sink import TableFormat

    options = {
        "properties.bootstrap.servers": "localhost:9",
        "debezium-json.include-schema.enabled": include_schema,
    }
    config = KafkaSinkConfig.model_validate(options)
    table_format = TableFormat(config, TID, SCHEMA, "docs", placeholder="__gone")
    [(_key, value)] = table_format.records(partial(0, 1, 2))
    assert value is not None
    document = orjson.loads(value)
    after = (document["payload"] if include_schema else document)["after"]
    assert after == {"id": 1, "n": 2, "body": "__gone", "blob": base64.b64encode(b"__gone").decode()}


def test_placeholder_values_by_type() -> None:
    assert placeholder_value(T.ARRAY(T.STRING())) == ["__debezium_unavailable_value"]
    assert placeholder_value(T.ARRAY(T.INT())) == list(b"__debezium_unavailable_value")
    assert placeholder_value(T.BYTES(), "hex:00ff") == b"\x00\xff"
    assert placeholder_value(T.INT()) is UNAVAILABLE


def test_hologres_insert_or_replace_refuses_partial_rows() -> None:
    """``mutatetype: insertorreplace`` writes whole rows: a partial one would lose its values."""
    from ferry.sinks.hologres.config import HologresSinkConfig
    from ferry.sinks.hologres.sink import HologresSink

    options = {
        "type": "hologres",
        "endpoint": "localhost:9",
        "dbname": "d",
        "username": "u",
        "password": "p",
        "mutatetype": "insertorreplace",
    }
    sink = HologresSink(HologresSinkConfig.model_validate(options), pipeline="p")
    changes = [insert(0, 1, "a", b"\x01"), partial(1, 1, 2)]
    [(index, reason)] = sink.complete_rows(TID, SCHEMA, changes, [1])
    assert index == 1 and "insertorreplace writes whole rows" in reason
