"""Partial rows (an update whose TOASTed values Debezium did not get: UNAVAILABLE) into Iceberg
(merge-on-read and copy-on-write) and Paimon tables on disk, with a composite primary key: the
unavailable values are taken from the key's version buffered for the same checkpoint, else from one
read of the table; a key the table does not hold is refused. Read back with each table's client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.model.events import CreateTable
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, BYTES, INT, STRING
from ferry.model.unavailable import UNAVAILABLE, PartialRow, partial_changes
from ferry.sinks.base.table_format import TableFormatSink
from tests.integration.helpers import Feed

pytestmark = pytest.mark.integration

T = TableId(None, "app", "docs")
DOCS = Schema.of(
    [
        Column("region", STRING().not_null()),
        Column("id", BIGINT().not_null()),
        Column("n", INT()),
        Column("body", STRING()),
        Column("blob", BYTES()),
    ],
    ["region", "id"],
)


@pytest.fixture(params=["iceberg-merge-on-read", "iceberg-copy-on-write", "paimon"])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TableFormatSink]:
    made: TableFormatSink
    if request.param.startswith("iceberg"):
        from ferry.sinks.iceberg.config import IcebergSinkConfig
        from ferry.sinks.iceberg.sink import IcebergSink

        mode = request.param.removeprefix("iceberg-")
        options = {
            "type": "iceberg",
            "catalog.properties.warehouse": str(tmp_path / "iceberg"),
            "table.properties.write.update.mode": mode,
            "table.properties.write.delete.mode": mode,
            "sink.compaction.enabled": False,
        }
        made = IcebergSink(IcebergSinkConfig.model_validate(options), pipeline="p1")
    else:
        from ferry.sinks.paimon.config import PaimonSinkConfig
        from ferry.sinks.paimon.sink import PaimonSink

        options = {"type": "paimon", "catalog.properties.warehouse": str(tmp_path / "paimon")}
        made = PaimonSink(PaimonSinkConfig.model_validate(options), pipeline="p1")
    yield made
    made.close()


def rows(sink: TableFormatSink) -> list[dict[str, Any]]:
    table = sink.load_table(T)
    assert table is not None
    found = sink.read_rows(table, ("region", "id"), [("eu", 1), ("eu", 2), ("us", 1), ("us", 9)])
    return sorted(
        ({k: row[k] for k in DOCS.names} for row in found), key=lambda row: (row["region"], row["id"])
    )


def test_partial_rows_take_the_keys_last_version(sink: TableFormatSink) -> None:
    feed = Feed(T)
    sink.apply_schema_change(CreateTable(T, DOCS), DOCS)
    first = [
        feed.insert({"region": "eu", "id": 1, "n": 0, "body": "a" * 3000, "blob": b"\x01" * 3000}),
        feed.insert({"region": "us", "id": 1, "n": 0, "body": "b", "blob": b"\x02"}),
    ]
    sink.write(T, DOCS, first)
    sink.flush(feed.offsets())

    changes = [
        feed.update({"region": "eu", "id": 1}, PartialRow({"region": "eu", "id": 1, "n": 1, "body": UNAVAILABLE, "blob": UNAVAILABLE})),
        feed.update({"region": "us", "id": 9}, PartialRow({"region": "us", "id": 9, "n": 1, "body": UNAVAILABLE, "blob": b""})),
        feed.insert({"region": "eu", "id": 2, "n": 0, "body": "c", "blob": None}),
        feed.update({"region": "eu", "id": 2}, PartialRow({"region": "eu", "id": 2, "n": 1, "body": UNAVAILABLE, "blob": b"\x03"})),
        feed.update({"region": "eu", "id": 1}, PartialRow({"region": "eu", "id": 1, "n": 2, "body": "d", "blob": UNAVAILABLE})),
        feed.update({"region": "us", "id": 1}, PartialRow({"region": "us", "id": 1, "n": 3, "body": UNAVAILABLE, "blob": None})),
    ]  # fmt: skip
    rejected = sink.complete_rows(T, DOCS, changes, partial_changes(changes))
    assert [(i, "no row of its key" in reason) for i, reason in rejected] == [(1, True)]
    sink.write(T, DOCS, [c for i, c in enumerate(changes) if i != 1])
    sink.flush(feed.offsets())

    assert rows(sink) == [
        {"region": "eu", "id": 1, "n": 2, "body": "d", "blob": b"\x01" * 3000},
        {"region": "eu", "id": 2, "n": 1, "body": "c", "blob": b"\x03"},
        {"region": "us", "id": 1, "n": 3, "body": "b", "blob": None},
    ]
