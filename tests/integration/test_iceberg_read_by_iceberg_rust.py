"""Iceberg tables read back by two independent readers: pyiceberg and iceberg-rust.

iceberg-rust (through ``pyiceberg-core``'s DataFusion table provider) shares no code with
pyiceberg: it is given the metadata file the SQLite catalog names (read with sqlite3) and reads
the metadata, manifests, data files and position delete files with its own implementation of the
spec.
Both must show exactly the rows a model of the source holds, after every checkpoint of a stream
of inserts, updates (key-changing ones too) and deletes with compactions in between, written
merge-on-read (position delete files, the default) and copy-on-write.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext
from pyiceberg.manifest import ManifestContent
from pyiceberg_core.datafusion import IcebergDataFusionTable

from ferry.model.events import DataChange
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import DATE, DECIMAL, INT, STRING, TIMESTAMP_LTZ
from ferry.sinks.iceberg.deletes import DELETE_FILES_PER_DATA_FILE, DELETE_MANIFESTS
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import ORDERS, Feed, Gate, create
from tests.integration.test_iceberg_sink import make_config, order

pytestmark = pytest.mark.integration

CATALOG = "ferry"
ORDERS_ID = TableId(None, "shop", "orders")
LINES_ID = TableId(None, "shop", "order_lines")
LINES = Schema.of(
    [
        Column("region", STRING().not_null()),
        Column("n", INT().not_null()),
        Column("amount", DECIMAL(12, 3)),
        Column("at", TIMESTAMP_LTZ(6)),
        Column("day", DATE()),
        Column("note", STRING()),
    ],
    ["region", "n"],
)
START = datetime(2024, 3, 1, tzinfo=UTC)


def order_row(key: int, version: int) -> dict[str, Any]:
    return order(key, customer=f"c{key % 7}", qty=version)


def line_row(key: int, version: int) -> dict[str, Any]:
    return {
        "region": ("eu", "us", "ap")[key % 3],
        "n": key,
        "amount": Decimal(f"{key}.{version:03d}"),
        "at": START + timedelta(seconds=key, microseconds=version),
        "day": date(2024, 1, 1) + timedelta(days=version),
        "note": None if version % 3 == 0 else f"v{version}",
    }


@dataclass
class Model:
    """The live rows of one source table, by key, and the changes that made them."""

    table_id: TableId
    schema: Schema
    make: Callable[[int, int], dict[str, Any]]
    feed: Feed = field(init=False)
    live: dict[int, dict[str, Any]] = field(default_factory=dict)
    versions: dict[int, int] = field(default_factory=dict)
    gone: list[int] = field(default_factory=list)
    next_key: int = 0

    def __post_init__(self) -> None:
        self.feed = Feed(self.table_id)

    def key_of(self, row: dict[str, Any]) -> Hashable:
        return tuple(row[name] for name in self.schema.primary_keys)

    def rows(self) -> list[dict[str, Any]]:
        return sorted(self.live.values(), key=self.key_of)

    def _new_version(self, key: int) -> dict[str, Any]:
        self.versions[key] = self.versions.get(key, 0) + 1
        return self.make(key, self.versions[key])

    def insert(self, key: int | None = None) -> DataChange:
        if key is None:
            key, self.next_key = self.next_key, self.next_key + 1
        row = self.live[key] = self._new_version(key)
        return self.feed.insert(row)

    def update(self, key: int) -> DataChange:
        old = self.live[key]
        new = self.live[key] = self._new_version(key)
        return self.feed.update(old, new)

    def delete(self, key: int) -> DataChange:
        old = self.live.pop(key)
        self.gone.append(key)
        return self.feed.delete(old)

    def change_key(self, key: int) -> DataChange:
        """An update that moves a row to a new key: the old key is deleted."""
        old = self.live.pop(key)
        self.gone.append(key)
        new_key, self.next_key = self.next_key, self.next_key + 1
        new = self.live[new_key] = self._new_version(new_key)
        return self.feed.update(old, new)

    def batch(self, rng: random.Random, size: int) -> list[DataChange]:
        """``size`` changes of every kind, each against the rows the changes before it left."""
        changes: list[DataChange] = []
        for _ in range(size):
            roll = rng.random()
            if not self.live or roll < 0.3:
                changes.append(self.insert())
            elif roll < 0.6:
                changes.append(self.update(rng.choice(list(self.live))))
            elif roll < 0.8:
                changes.append(self.delete(rng.choice(list(self.live))))
            elif roll < 0.9 and self.gone:
                changes.append(self.insert(self.gone.pop(rng.randrange(len(self.gone)))))
            else:
                changes.append(self.change_key(rng.choice(list(self.live))))
        # a row inserted and deleted in the same checkpoint never shows
        changes.append(self.insert())
        changes.append(self.delete(self.next_key - 1))
        return changes


def metadata_location(warehouse: Path, table_id: TableId) -> str:
    """The table's current metadata file, read from the SQL catalog's own table (not through pyiceberg)."""
    uri = f"file:{warehouse / 'catalog.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        found = db.execute(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (CATALOG, table_id.schema_name, table_id.table_name),
        ).fetchall()
    assert len(found) == 1, f"{table_id} is not in the catalog"
    location: str = found[0][0]
    return location


def read_with_iceberg_rust(warehouse: Path, table_id: TableId) -> list[dict[str, Any]]:
    """Every row of the table as iceberg-rust's scan reads it (its deletes applied), unsorted."""
    assert table_id.schema_name is not None
    provider = IcebergDataFusionTable(
        identifier=[table_id.schema_name, table_id.table_name],
        metadata_location=metadata_location(warehouse, table_id),
        file_io_properties=None,
    )
    context = SessionContext()
    context.register_table("scanned", provider)
    rows: list[dict[str, Any]] = context.table("scanned").to_arrow_table().to_pylist()
    return rows


def read_with_pyiceberg(sink: IcebergSink, table_id: TableId) -> list[dict[str, Any]]:
    table = sink.load_table(table_id)
    assert table is not None
    rows: list[dict[str, Any]] = table.scan().to_arrow().to_pylist()
    return rows


def deletes_per_data_file(sink: IcebergSink, table_id: TableId) -> tuple[dict[str, int], int]:
    """How many live delete files apply to each live data file, and how many delete manifests
    the current snapshot lists."""
    table = sink.load_table(table_id)
    assert table is not None
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = [m for m in snapshot.manifests(table.io) if m.content == ManifestContent.DELETES]
    return {t.file.file_path: len(t.delete_files) for t in table.scan().plan_files()}, len(manifests)


def rows_without_deletes(sink: IcebergSink, table_id: TableId) -> tuple[int, list[dict[str, Any]]]:
    """The live delete files and the rows of the live data files, as a reader ignoring deletes sees them."""
    table = sink.load_table(table_id)
    assert table is not None
    tasks = list(table.scan().plan_files())
    delete_files = {d.file_path for t in tasks for d in t.delete_files}
    rows = [row for t in tasks for row in pq.read_table(t.file.file_path.removeprefix("file://")).to_pylist()]
    return len(delete_files), rows


@pytest.mark.parametrize(
    ("mode", "background"), [("merge-on-read", False), ("merge-on-read", True), ("copy-on-write", False)]
)
def test_upserts_deletes_and_compactions_read_back_exactly_with_both_readers(
    tmp_path: Path, mode: str, background: bool
) -> None:
    warehouse = tmp_path / "warehouse"
    options = {
        "catalog.name": CATALOG,
        "table.properties.write.update.mode": mode,
        "table.properties.write.delete.mode": mode,
        "sink.compaction.enabled": True,
        # a data file's deletes reach their most files, and are merged, before a compaction
        "sink.compaction.commit-interval": 6,
        "sink.compaction.min-input-files": 3,
        "sink.compaction.background": background,
    }
    sink = IcebergSink(make_config(warehouse, **options), pipeline="p1")
    # a compaction started by a checkpoint is written before the next one's changes, which touch
    # its input files: that commit deletes their rows from the compacted file too
    gate = sink.compaction_executor = Gate()
    rng = random.Random(14)
    models = [Model(ORDERS_ID, ORDERS, order_row), Model(LINES_ID, LINES, line_row)]
    try:
        for model in models:
            create(sink, model.schema, model.table_id)
        most_delete_files = 0
        for checkpoint in range(14):
            for model in models:
                changes = [model.insert() for _ in range(40)] if checkpoint == 0 else model.batch(rng, 25)
                sink.write(model.table_id, model.schema, changes)
            sink.flush({(topic, p): o for m in models for (topic, p), o in m.feed.offsets().items()})
            gate.open()
            for model in models:
                expected = model.rows()
                where = f"{model.table_id} after checkpoint {checkpoint}"
                assert (
                    sorted(read_with_iceberg_rust(warehouse, model.table_id), key=model.key_of) == expected
                ), f"iceberg-rust: {where}"
                assert sorted(read_with_pyiceberg(sink, model.table_id), key=model.key_of) == expected, (
                    f"pyiceberg: {where}"
                )
                if mode == "merge-on-read":
                    # a few delete files per data file at most, then one with all its positions;
                    # a few delete manifests at most, then one listing them all
                    per_file, delete_manifests = deletes_per_data_file(sink, model.table_id)
                    assert max(per_file.values()) <= DELETE_FILES_PER_DATA_FILE, f"{where}: {per_file}"
                    assert delete_manifests <= DELETE_MANIFESTS, where
                    most_delete_files = max(most_delete_files, *per_file.values())

        for model in models:
            table = sink.load_table(model.table_id)
            assert table is not None
            summaries = [s.summary.additional_properties for s in table.snapshots() if s.summary]
            delete_files, raw = rows_without_deletes(sink, model.table_id)
            if mode == "copy-on-write":
                assert all(s["total-delete-files"] == "0" for s in summaries)
                assert sorted(raw, key=model.key_of) == model.rows()
                continue
            # a compaction every 6th commit rewrote the data files and dropped the deletes it applied
            # (written in the background: committed with the commit after, and the rows that
            # commit deleted from its input files deleted from its file; one table's at a time, so
            # the second table, due with the first, starts a commit later and its second
            # compaction is still being written at the end)
            compactions = [s for s in summaries if "deleted-data-files" in s]
            assert len(compactions) == (1 if background and model is models[1] else 2)
            assert all("removed-position-delete-files" in s for s in compactions)
            # in the background, rows were deleted from the input files while it was written
            assert any("added-position-delete-files" in s for s in compactions) == background
            # the data files reached their most delete files, and then a commit merged them
            assert most_delete_files == DELETE_FILES_PER_DATA_FILE
            assert any("removed-position-delete-files" in s for s in summaries if s not in compactions)
            # the last checkpoints left position deletes that hide rows still in the data files:
            # a reader that ignored them would have shown rows the source no longer has
            assert delete_files > 0
            assert sorted(raw, key=model.key_of) != model.rows()
            assert len(raw) > len(model.live)
    finally:
        sink.close()
