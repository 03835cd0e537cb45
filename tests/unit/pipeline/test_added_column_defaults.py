"""A column added with a default: the rows read before it (the source filled them) reach the sink
with the default, rows that carry the column keep their value, an explicit NULL included, and a
sink that cannot backfill the default gets the column without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.pipeline.test_debezium_stream import records, runner_for

from ferry.connectors.memory import MemorySource
from ferry.local import debezium as dbz
from ferry.model import types as T
from ferry.model.events import AddColumn, DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.adapt import RowAdapter
from ferry.pipeline.router import Action, SchemaChangeBehavior, SchemaChangeRouter
from ferry.sinks.base import ChangeKind, SinkCapabilities, Support
from ferry.sinks.memory import ALL_SUPPORTED, MemorySink

TABLE = TableId(None, "db", "t")
SOURCE = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("region", T.VARCHAR(10).not_null(), default="eu"),
        Column("score", T.INT(), default="7"),
    ],
    ["id"],
)


def same(t: T.DataType) -> T.DataType:
    return t


def change(op: Op, row: dict[str, Any]) -> DataChange:
    return DataChange(TABLE, op, row if op is Op.DELETE else None, None if op is Op.DELETE else row)


def test_a_row_without_a_column_that_has_a_default_takes_it() -> None:
    adapter = RowAdapter(SOURCE, SOURCE, same)
    read_before = adapter.adapt(change(Op.INSERT, {"id": 1}))
    assert read_before.after == {"id": 1, "region": "eu", "score": 7}
    explicit = change(Op.INSERT, {"id": 2, "region": "us", "score": None})
    assert adapter.adapt(explicit) is explicit  # complete rows pass as they are
    assert adapter.adapt(change(Op.DELETE, {"id": 3})).before == {"id": 3, "region": "eu", "score": 7}
    # a sink column the source no longer has is NULL (its default was the source's)
    dropped = RowAdapter(SOURCE.with_columns(SOURCE.columns[:2]), SOURCE, same)
    assert dropped.adapt(change(Op.INSERT, {"id": 4, "region": "eu"})).after == {
        "id": 4,
        "region": "eu",
        "score": None,
    }


def test_rows_read_before_the_column_was_added_are_written_with_its_default(tmp_path: Path) -> None:
    table = dbz.DebeziumTable(
        "srv",
        "db",
        "t",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT64)],
    )
    pairs = [table.insert({"id": 1, "n": 1}), table.insert({"id": 2, "n": 2})]
    # nullable: added in place, rows 1 and 2 still buffered; NOT NULL: a barrier writes them first
    table.add_column("score", {**dbz.INT32, "default": 7})
    table.add_column("region", {**dbz.STRING, "default": "eu"})
    table.columns[-1].optional = False
    pairs += [
        table.insert({"id": 3, "n": 3, "region": "us", "score": None}),  # an explicit NULL stays NULL
        table.update(
            {"id": 1, "n": 1, "region": "eu", "score": 7}, {"id": 1, "n": 10, "region": "eu", "score": 7}
        ),
    ]
    source = MemorySource(records(pairs))
    sink = MemorySink()
    runner = runner_for(source, sink, tmp_path)
    try:
        runner.open()
        batch = source.poll(10, 0)  # one checkpoint: rows 1 and 2 are still buffered at the add
        runner.process(runner.decode(batch), batch)
        runner.checkpoint()
        rows = sorted(sink.rows(TABLE), key=lambda r: r["id"])
        added = [c for c in sink.applied if isinstance(c, AddColumn)]
    finally:
        runner.close()
    assert rows == [
        {"id": 1, "n": 10, "score": 7, "region": "eu"},
        {"id": 2, "n": 2, "score": 7, "region": "eu"},
        {"id": 3, "n": 3, "score": None, "region": "us"},
    ]
    assert [(c.column.name, c.column.default) for c in added] == [("score", "7"), ("region", "eu")]


def test_a_sink_that_cannot_backfill_gets_the_column_without_its_default() -> None:
    without = SinkCapabilities(
        changes={**ALL_SUPPORTED.changes, ChangeKind.ADD_COLUMN_DEFAULT: Support.NOT_SYNCED}
    )
    existing = SOURCE.with_columns(SOURCE.columns[:1])
    added = AddColumn(TABLE, SOURCE.column("region"))
    for capabilities, default in ((ALL_SUPPORTED, "eu"), (without, None)):
        router = SchemaChangeRouter(
            MemorySink(capabilities=capabilities), SchemaChangeBehavior.EVOLVE, ["add.column"]
        )
        decision = router.decide(added, existing)
        assert decision.action is Action.APPLY
        assert isinstance(decision.change, AddColumn) and decision.change.column.default == default
    assert (
        "without its default"
        in SchemaChangeRouter(MemorySink(capabilities=without), SchemaChangeBehavior.LENIENT, ["add.column"])
        .decide(added, existing)
        .reason
    )
