"""The table barrier into a real Iceberg table: a column dropped or renamed commits only its table,
the runner is abandoned right after (no checkpoint), and the restart ends with exactly the source's
columns and rows, as pyiceberg reads them from the warehouse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink
from ferry.state import StateStore
from tests.support.partition_log import PartitionLogHints, PartitionLogSource, hand_over

pytestmark = pytest.mark.integration

SERVER = "shop"
#: The changed table's topic has two partitions (row id % 2), the others one.
PARTITIONS = {"t": 2, "u": 1, "v": 1}


class Source:
    """Three source tables without a primary key (a row written twice would show twice), rows of
    each, then ``change`` on ``t`` and more rows of ``t``, as Debezium writes them."""

    def __init__(self, change: str) -> None:
        self.tables = {
            name: dbz.DebeziumTable(
                SERVER,
                "db",
                name,
                [
                    dbz.ConnectColumn("id", dbz.INT32, optional=False),
                    dbz.ConnectColumn("a", dbz.INT32),
                    dbz.ConnectColumn("b", dbz.STRING),
                ],
                key=(),
            )
            for name in PARTITIONS
        }
        self.rows: dict[str, list[dict[str, Any]]] = {name: [] for name in PARTITIONS}
        self.topics: dict[tuple[str, int], list[Record]] = {
            (self.tables[name].topic, p): [] for name, count in PARTITIONS.items() for p in range(count)
        }
        self.ddl: list[Record] = []
        for name in PARTITIONS:
            for i in range(1, 7):
                self.insert(name, {"id": i, "a": i * 10, "b": f"b{i}"})
        t = self.tables["t"]
        if change == "drop":
            ddl = t.drop_column("b")
            self.rows["t"] = [{"id": r["id"], "a": r["a"]} for r in self.rows["t"]]
        else:
            ddl = t.rename_column("b", "b2")
            self.rows["t"] = [{"id": r["id"], "a": r["a"], "b2": r["b"]} for r in self.rows["t"]]
        key, value = t.schema_change(ddl)
        self.ddl.append(Record(SERVER, 0, len(self.ddl), key=key, value=value))
        for i in range(7, 11):
            self.insert("t", {"id": i, "a": i * 10, **({"b2": f"b{i}"} if change == "rename" else {})})

    def insert(self, name: str, row: dict[str, Any]) -> None:
        table = self.tables[name]
        key, value = table.insert(row)
        log = self.topics[(table.topic, row["id"] % PARTITIONS[name])]
        log.append(Record(table.topic, row["id"] % PARTITIONS[name], len(log), key=key, value=value))
        self.rows[name].append(row)


class Pipeline:
    """A runner over ``source`` into the Iceberg warehouse, with its state store; closed by the test."""

    def __init__(self, source: Source, warehouse: Path, state_url: str) -> None:
        self.source = source
        self.reader = PartitionLogSource(source.topics, list(source.topics))
        self.sink = IcebergSink(
            IcebergSinkConfig.model_validate(
                {"type": "iceberg", "catalog.properties.warehouse": str(warehouse)}
            ),
            pipeline="barrier",
        )
        self.runner = PipelineRunner(
            settings=RunnerSettings(name="barrier", tune_gc=False),
            source=self.reader,
            decode=decoder_for("debezium-json").decode,
            sink=self.sink,
            state=StateStore(state_url),
            router=SchemaChangeRouter(self.sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
            tables=TableRouter(),
            dead_letter=MemoryDeadLetter(),
            hints=PartitionLogHints(source.ddl),
        )
        self.runner.open()

    def read(self, partition: tuple[str, int], count: int) -> None:
        """Up to ``count`` more records of ``partition``, processed as one batch."""
        hand_over(self.runner, self.reader.take(partition, count))

    def read_all(self) -> None:
        for partition in self.source.topics:
            self.read(partition, len(self.source.topics[partition]))


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "warehouse"


def iceberg_table(warehouse: Path, name: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    return catalog.load_table(name)


def rows_of(warehouse: Path, name: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and rows (by id) of an Iceberg table, read by pyiceberg itself."""
    table = iceberg_table(warehouse, name)
    rows: list[dict[str, Any]] = table.scan().to_arrow().sort_by("id").to_pylist()
    return [f.name for f in table.schema().fields], rows


@pytest.mark.parametrize("change", ["drop", "rename"])
def test_a_change_commits_only_its_table_and_a_restart_ends_with_the_source_rows(
    warehouse: Path, tmp_path: Path, change: str
) -> None:
    source = Source(change)
    state_url = f"sqlite:///{tmp_path}/state.db"
    first = Pipeline(source, warehouse, state_url)
    t0, t1 = (source.tables["t"].topic, 0), (source.tables["t"].topic, 1)
    try:
        for name in ("u", "v"):
            first.read((source.tables[name].topic, 0), 100)
        # t's partitions each up to their last row: partition 0 to id 8 (past the change, which
        # waits for partition 1), then partition 1 to id 7, whose record shows the change: the
        # barrier commits t's rows read before it (1 to 6, and 8), alone
        first.read(t0, len(source.topics[t0]) - 1)
        first.read(t1, len(source.topics[t1]) - 1)
        first.read(t1, 1)  # id 9, after the barrier: buffered with 7
        assert first.runner.metrics.checkpoints == 0
        saved = first.runner.state.latest_checkpoint("barrier")
        assert saved is not None and saved.offsets == {}  # the schemas after the change, alone
    finally:
        first.runner.close()  # abandoned: u's and v's rows and t's 7 and 9 were never committed
    columns, rows = rows_of(warehouse, "db.t")
    expected_columns = ["id", "a"] if change == "drop" else ["id", "a", "b2"]
    assert columns == expected_columns
    assert rows == [r for r in source.rows["t"] if r["id"] in (1, 2, 3, 4, 5, 6, 8)]
    for name in ("u", "v"):
        assert iceberg_table(warehouse, f"db.{name}").current_snapshot() is None, name

    again = Pipeline(source, warehouse, state_url)
    try:
        again.read_all()
        again.runner.checkpoint()
        skipped = again.runner.partitions.rows_skipped
    finally:
        again.runner.close()
    assert skipped == 7  # t's rows the barrier committed, by their offsets
    assert rows_of(warehouse, "db.t") == (expected_columns, source.rows["t"])
    for name in ("u", "v"):
        assert rows_of(warehouse, f"db.{name}") == (["id", "a", "b"], source.rows[name])
