"""A checkpoint's Iceberg tables committed together in the SQL catalog (real pyiceberg and SQLite).

A flush of several tables writes each table's files and metadata as before, then points the
catalog's rows at the new metadata in one SQL transaction. Read back with pyiceberg's own SQL
catalog (not the sink's), and the SQL transactions counted on the sink's real engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from ferry.model.events import DataChange, Op
from ferry.model.schema import TableId
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink
from tests.integration.helpers import ORDERS, Feed, create
from tests.support.sinks import reading_catalog

pytestmark = pytest.mark.integration

TABLES = [TableId(None, "shop", f"orders_{i}") for i in range(4)]


def make_config(warehouse: Path, **options: Any) -> IcebergSinkConfig:
    return IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(warehouse), **options}
    )


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def sink(warehouse: Path) -> Iterator[IcebergSink]:
    s = IcebergSink(make_config(warehouse), pipeline="p1")
    for table_id in TABLES:
        create(s, ORDERS, table_id)
    yield s
    s.close()


def order(i: int, customer: str = "ada") -> dict[str, Any]:
    return {"id": i, "customer": customer, "qty": i, "price": Decimal("9.99")}


def table_rows(warehouse: Path, table_id: TableId) -> list[tuple[int, str]]:
    """``(id, customer)`` of every row, read with pyiceberg's own SQL catalog."""
    catalog = reading_catalog(warehouse)
    try:
        rows = catalog.load_table(f"shop.{table_id.table_name}").scan().to_arrow().to_pylist()
        return sorted((row["id"], row["customer"]) for row in rows)
    finally:
        catalog.engine.dispose()


def snapshots(warehouse: Path, table_id: TableId) -> int:
    catalog = reading_catalog(warehouse)
    try:
        return len(catalog.load_table(f"shop.{table_id.table_name}").snapshots())
    finally:
        catalog.engine.dispose()


class Transactions:
    """The SQL transactions committed on an engine (a real event of SQLAlchemy's)."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.count = engine, 0
        event.listen(engine, "commit", self.committed)

    def committed(self, _connection: Any) -> None:
        self.count += 1

    def close(self) -> None:
        event.remove(self.engine, "commit", self.committed)


def test_a_checkpoint_commits_its_tables_in_one_catalog_transaction_and_skips_tables_without_rows(
    warehouse: Path, sink: IcebergSink
) -> None:
    feeds = [Feed(t, partition=i) for i, t in enumerate(TABLES)]
    with_rows = TABLES[:3]  # the fourth has nothing to write at this checkpoint
    for i, (table_id, feed) in enumerate(zip(with_rows, feeds, strict=False)):
        sink.write(table_id, ORDERS, [feed.insert(order(10 * i + k)) for k in range(3)])
    offsets = {tp: o for feed in feeds for tp, o in feed.offsets().items()}
    before = {t: snapshots(warehouse, t) for t in TABLES}
    transactions = Transactions(sink.catalog.engine)  # type: ignore[attr-defined]
    try:
        sink.flush(offsets)
    finally:
        transactions.close()

    assert transactions.count == 1  # the three tables' rows pointed at their new metadata together
    for i, table_id in enumerate(with_rows):
        assert table_rows(warehouse, table_id) == [(10 * i + k, "ada") for k in range(3)]
        assert snapshots(warehouse, table_id) == before[table_id] + 1
        assert sink.committed_offsets(table_id) == offsets
    assert table_rows(warehouse, TABLES[3]) == []
    assert snapshots(warehouse, TABLES[3]) == before[TABLES[3]]  # not committed


def test_the_tables_become_visible_together_and_another_writers_commit_makes_them_commit_one_by_one(
    warehouse: Path, sink: IcebergSink
) -> None:
    first, second, third = TABLES[:3]
    feeds = {t: Feed(t, partition=i) for i, t in enumerate((first, second, third))}
    for i, (table_id, feed) in enumerate(feeds.items()):
        sink.write(table_id, ORDERS, [feed.insert(order(10 * i + k)) for k in range(3)])
    offsets = {tp: o for feed in feeds.values() for tp, o in feed.offsets().items()}

    # when the sink loads the third table, the first two are committed in the gathered commit:
    # a reader must not see them yet, and another writer then commits to the second table
    seen_meanwhile: dict[str, Any] = {}
    other = IcebergSink(make_config(warehouse), pipeline="p2")

    def before_execute(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if seen_meanwhile or not statement.lstrip().upper().startswith("SELECT"):
            return
        if third.table_name not in tuple(parameters or ()):
            return
        seen_meanwhile["first"] = table_rows(warehouse, first)
        seen_meanwhile["second"] = table_rows(warehouse, second)
        other.write(second, ORDERS, [DataChange(second, Op.INSERT, None, order(100, "bob"), None)])
        other.flush({("elsewhere", 0): 7})

    engine = sink.catalog.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", before_execute)
    try:
        sink.flush(offsets)
        others = other.committed_offsets(second)
    finally:
        event.remove(engine, "before_cursor_execute", before_execute)
        other.close()

    # nothing of the checkpoint was visible before all of it was committed
    assert seen_meanwhile == {"first": [], "second": []}
    # the other writer's commit kept; the checkpoint's rows committed on top of it, each once
    assert table_rows(warehouse, first) == [(0, "ada"), (1, "ada"), (2, "ada")]
    assert table_rows(warehouse, second) == [(10, "ada"), (11, "ada"), (12, "ada"), (100, "bob")]
    assert table_rows(warehouse, third) == [(20, "ada"), (21, "ada"), (22, "ada")]
    for table_id in (first, second, third):
        assert sink.committed_offsets(table_id) == offsets
    assert others == {("elsewhere", 0): 7}
