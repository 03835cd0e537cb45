"""A column dropped on one table and a column renamed on another, read from two partitions, with the
pipeline killed at every step and restarted from its last checkpoint.

Two source tables, ``t`` and ``u``, get upserts; then ``t`` loses a column (DROP COLUMN) and ``u``
renames one (RENAME COLUMN); then more upserts. Debezium's MySQL connector writes each row change
to a partition of its table's topic (or, with topic routing, of one topic both tables share) with
the table's schema envelope as it is then, and each DDL statement to the schema-change topic
before the rows that follow it. Which partition shows the new schemas first, and whether the
schema-change topic is read ahead of the data or only when a record asks for it, vary; so does the
step after which the runner dies (after a checkpoint, or with rows read since the last one).

The rows after the DDL include keys the rows before it had not: a partition of a table may then
hold only rows with the new schema. Killed before a checkpoint saved a table whose sink table it had
just created, the runner's successor met the table again in such a partition first, created it
from that row (a create.table the existing sink table skipped) and never renamed or dropped the
column at the sink.

The expected tables are computed from the statements alone (:func:`expected_tables`), and compared
with what the memory sink stores.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.kills import Killed, killed_at_rename
from tests.support.partition_log import PartitionLogHints, PartitionLogSource, hand_over

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.source_order import record_source_order
from ferry.connectors.memory import MemoryDeadLetter
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import SCHEMA_CHANGE_TAGS, CreateTable
from ferry.model.schema import Column as SchemaColumn
from ferry.model.schema import Schema, TableId
from ferry.model.types import INT, STRING
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

SERVER = "sim"
PARTITIONS = 2
#: Where the state store's file goes: memory when the machine has it (no disk sync per checkpoint).
MEMORY_FOLDER = "/dev/shm" if os.path.isdir("/dev/shm") else None
#: The columns both tables start with, and their Kafka Connect types.
COLUMNS = {"id": dbz.INT32, "a": dbz.INT32, "b": dbz.STRING}
TABLES = ("t", "u")

#: A statement of the source database: ("upsert", table, key, n), ("drop", table, column) or
#: ("rename", table, old, new).
Statement = tuple[Any, ...]


def value(column: str, spec: Mapping[str, Any], n: int) -> Any:
    """The value an upsert numbered ``n`` writes into a column."""
    return f"{column}-{n}" if spec["type"] == "string" else n * 10 + len(column)


def upserts(table: str, start: int, keys: Sequence[int]) -> list[Statement]:
    return [("upsert", table, key, start + key) for key in keys]


#: The reported scenario: upserts on both tables, a drop on t, a rename on u, upserts again. The
#: rows before the DDL have keys 0 and 2, those after it keys 0 to 3: of each table, one partition
#: holds rows written before the DDL and after it, the other only rows written after it.
SCENARIO: list[Statement] = [
    *upserts("t", 0, [0, 2]),
    *upserts("u", 10, [0, 2]),
    ("drop", "t", "a"),
    ("rename", "u", "b", "b_r"),
    *upserts("t", 20, range(4)),
    *upserts("u", 30, range(4)),
]

#: The rename first, and rows between the two statements.
SCENARIO_INTERLEAVED: list[Statement] = [
    *upserts("u", 0, range(3)),
    *upserts("t", 10, range(3)),
    ("rename", "u", "b", "b_r"),
    *upserts("u", 20, [3]),
    ("drop", "t", "a"),
    *upserts("t", 30, range(5)),
    *upserts("u", 40, range(5)),
]


# ---------------------------------------------------------------------------------- the oracle


def expected_tables(
    statements: Sequence[Statement],
) -> dict[str, tuple[list[str], dict[int, dict[str, Any]]]]:
    """Each table's columns and rows after ``statements``, as the source database has them."""
    tables: dict[str, tuple[list[str], dict[int, dict[str, Any]]]] = {}
    types: dict[str, dict[str, Mapping[str, Any]]] = {}
    for statement in statements:
        kind, table = statement[0], statement[1]
        if table not in tables:
            tables[table] = (list(COLUMNS), {})
            types[table] = dict(COLUMNS)
        columns, rows = tables[table]
        if kind == "upsert":
            key, n = statement[2], statement[3]
            rows[key] = {"id": key, **{c: value(c, types[table][c], n) for c in columns if c != "id"}}
        elif kind == "drop":
            column = statement[2]
            columns.remove(column)
            for row in rows.values():
                del row[column]
        elif kind == "rename":
            old, new = statement[2], statement[3]
            columns[columns.index(old)] = new
            types[table][new] = types[table].pop(old)
            for row in rows.values():
                row[new] = row.pop(old)
    return tables


# ---------------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class Layout:
    """Where the rows go: a topic per table, or one topic for both (Debezium's topic routing)."""

    shared_topic: bool

    def topic(self, table: str) -> str:
        return f"{SERVER}.db.all" if self.shared_topic else f"{SERVER}.db.{table}"

    def partitions(self) -> list[tuple[str, int]]:
        """The data partitions, partition 0 of every topic first."""
        topics = dict.fromkeys(self.topic(t) for t in TABLES)
        return [(topic, p) for p in range(PARTITIONS) for topic in topics]

    def partition(self, table: str, key: int) -> int:
        return (key + (TABLES.index(table) if self.shared_topic else 0)) % PARTITIONS


def debezium_log(layout: Layout, statements: Sequence[Statement]) -> dict[tuple[str, int], list[Record]]:
    """What Debezium writes for ``statements``: the data partitions and the schema-change topic."""
    tables = {
        name: dbz.DebeziumTable(
            SERVER,
            "db",
            name,
            [dbz.ConnectColumn(c, spec, optional=c != "id") for c, spec in COLUMNS.items()],
            ts_ms=1_000_000,
        )
        for name in TABLES
    }
    rows: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in TABLES}
    topics: dict[tuple[str, int], list[Record]] = {tp: [] for tp in layout.partitions()}
    topics[(SERVER, 0)] = []

    def write(topic: str, partition: int, key: bytes | None, value_: bytes | None) -> None:
        records = topics[(topic, partition)]
        records.append(Record(topic, partition, len(records), key=key, value=value_))

    for statement in statements:
        kind, name = statement[0], statement[1]
        table = tables[name]
        if kind == "upsert":
            key, n = statement[2], statement[3]
            after = {"id": key, **{c.name: value(c.name, c.spec, n) for c in table.columns if c.name != "id"}}
            before = rows[name].get(key)
            record = table.insert(after) if before is None else table.update(before, after)
            rows[name][key] = after
            write(layout.topic(name), layout.partition(name, key), *record)
        else:
            if kind == "drop":
                ddl = table.drop_column(statement[2])
                for row in rows[name].values():
                    row.pop(statement[2])
            else:
                ddl = table.rename_column(statement[2], statement[3])
                for row in rows[name].values():
                    row[statement[3]] = row.pop(statement[2])
            write(SERVER, 0, *table.schema_change(ddl))
    return topics


# ---------------------------------------------------------------------------------- the run

#: Numbers the runs: each is a pipeline of its own in the module's state store.
RUNS = itertools.count()


@pytest.fixture(scope="module")
def state() -> Iterator[StateStore]:
    with tempfile.TemporaryDirectory(dir=MEMORY_FOLDER) as folder:
        store = StateStore(f"sqlite:///{folder}/state.db")
        yield store
        store.close()


class Run:
    """One pipeline over the log: the runner of the moment, killed and started again at will."""

    def __init__(
        self,
        layout: Layout,
        statements: Sequence[Statement],
        state: StateStore,
        sink: MemorySink | None = None,
    ) -> None:
        self.layout = layout
        self.topics = debezium_log(layout, statements)
        self.sink = sink if sink is not None else MemorySink()
        self.state = state
        self.name = f"run-{next(RUNS)}"  # the state store's pipeline: one per run
        self.start()

    def start(self) -> None:
        self.source = PartitionLogSource(self.topics, self.layout.partitions())
        self.hints = PartitionLogHints(self.topics[(SERVER, 0)])
        self.runner = PipelineRunner(
            settings=RunnerSettings(name=self.name, tune_gc=False),
            source=self.source,
            decode=decoder_for("debezium-json").decode,
            sink=self.sink,
            state=self.state,
            router=SchemaChangeRouter(self.sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
            tables=TableRouter(),
            dead_letter=MemoryDeadLetter(),
            hints=self.hints,
            source_order=record_source_order,
        )
        self.runner.open()

    def read(self, partition: tuple[str, int], count: int) -> None:
        hand_over(self.runner, self.source.take(partition, count))

    def kill(self) -> None:
        """The runner dies: what the sink was handed since its last flush is lost with it."""
        self.sink.pending.clear()
        self.start()

    def finish(self, order: Sequence[tuple[str, int]]) -> None:
        """Everything read, in ``order`` of partitions, and a last checkpoint."""
        self.hints.fetch(len(self.topics[(SERVER, 0)]))
        for partition in order:
            self.read(partition, self.source.left(partition))
        self.runner.checkpoint()


def check_sink(sink: MemorySink, statements: Sequence[Statement]) -> None:
    applied = [str(c) for c in sink.applied]
    for name, (columns, rows) in expected_tables(statements).items():
        table = sink.tables.get(TableId(None, "db", name))
        assert table is not None, (name, applied)
        assert list(table.schema.names) == columns, (name, applied)
        got = {row["id"]: row for row in table.all_rows()}
        assert got == rows, (name, applied)


def one_by_one(left: Mapping[tuple[str, int], int], first: int) -> list[tuple[str, int]]:
    """Reads of one record each: the data partitions numbered ``first`` (of every topic) read
    through before the others, given how many records each has ``left``."""
    ordered = sorted(left, key=lambda tp: tp[1] != first)
    return [tp for tp in ordered for _ in range(left[tp])]


#: When checkpoints are taken before the kill: ``last``: just before it (the kill loses nothing);
#: ``each``: after every read but the last one (the kill loses that one); ``none``: only at the
#: barriers before a drop or a rename (the kill loses every row read since).
KILLS = {
    "last": "killed after a checkpoint",
    "each": "killed one read after a checkpoint",
    "none": "killed with rows read since the last barrier",
}


def play(
    layout: Layout,
    statements: Sequence[Statement],
    state: StateStore,
    *,
    first: int,
    kill_after: int,
    checkpoints: str,
    then_first: int,
    hints_early: bool,
) -> MemorySink:
    """Read one record at a time, partition ``first`` through first; after ``kill_after`` reads
    (checkpoints taken as :data:`KILLS` says), the runner dies; the next one reads the rest one
    record at a time, partition ``then_first`` first. With ``hints_early`` the schema-change topic
    is read ahead of the data, else only when a record has columns the table has not."""
    run = Run(layout, statements, state)
    ddl = len(run.topics[(SERVER, 0)])
    steps = one_by_one({tp: len(run.topics[tp]) for tp in layout.partitions()}, first)
    for index, partition in enumerate(steps[:kill_after], start=1):
        if hints_early:
            run.hints.fetch(ddl)
        run.read(partition, 1)
        if checkpoints == "each" and index < kill_after:
            run.runner.checkpoint()
    if checkpoints == "last":
        run.runner.checkpoint()
    run.kill()
    for partition in one_by_one({tp: run.source.left(tp) for tp in layout.partitions()}, then_first):
        if hints_early:
            run.hints.fetch(ddl)
        run.read(partition, 1)
    run.finish(layout.partitions())
    return run.sink


def plays() -> Iterator[Any]:
    for shared_topic in (False, True):
        for hints_early in (True, False):
            for checkpoints, kill in KILLS.items():
                yield pytest.param(
                    Layout(shared_topic),
                    hints_early,
                    checkpoints,
                    id=f"{'one-topic' if shared_topic else 'topic-per-table'}-"
                    f"{'hints-early' if hints_early else 'hints-late'}-{kill.replace(' ', '-')}",
                )


@pytest.mark.parametrize(("layout", "hints_early", "checkpoints"), [*plays()])
def test_a_drop_on_one_table_and_a_rename_on_another_survive_a_kill_at_every_step(
    state: StateStore, layout: Layout, hints_early: bool, checkpoints: str
) -> None:
    """Either partition read through first, the runner killed after each read, either partition
    read through first after the restart."""
    statements = SCENARIO
    reads = sum(1 for s in statements if s[0] == "upsert")
    for first, then_first in itertools.product(range(PARTITIONS), repeat=2):
        for kill_after in range(reads + 1):
            sink = play(
                layout,
                statements,
                state,
                first=first,
                kill_after=kill_after,
                checkpoints=checkpoints,
                then_first=then_first,
                hints_early=hints_early,
            )
            try:
                check_sink(sink, statements)
            except AssertionError as e:
                where = (
                    f"partition {first} first, killed after read {kill_after}, then partition {then_first}"
                )
                raise AssertionError(f"{where}: {e}") from e


# ---------------------------------------------------------------------------------- any interleaving


@st.composite
def scenarios(draw: st.DrawFn) -> list[Statement]:
    """Upserts on t and u, one DROP COLUMN on t and one RENAME COLUMN on u, anywhere among them."""
    rows = draw(st.lists(st.tuples(st.sampled_from(TABLES), st.integers(0, 5)), min_size=2, max_size=24))
    statements: list[Statement] = [("upsert", table, key, n) for n, (table, key) in enumerate(rows)]
    drop_at = draw(st.integers(0, len(statements)))
    statements.insert(drop_at, ("drop", "t", draw(st.sampled_from(["a", "b"]))))
    rename_at = draw(st.integers(0, len(statements)))
    statements.insert(rename_at, ("rename", "u", draw(st.sampled_from(["a", "b"])), "r"))
    return [*upserts("t", 100, [0]), *upserts("u", 200, [0]), *statements]


schedules = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(0, 3), st.integers(1, 4)),
        st.tuples(st.just("hints"), st.integers(1, 2)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("kill")),
    ),
    max_size=40,
)


def run_schedule(
    layout: Layout,
    statements: Sequence[Statement],
    state: StateStore,
    schedule: Sequence[tuple[Any, ...]],
    sink: MemorySink | None = None,
) -> MemorySink:
    """Play ``schedule`` (reads of the ``index``-th data partition, hints fetched, checkpoints,
    kills), then read everything; returns the sink."""
    partitions = layout.partitions()
    run = Run(layout, statements, state, sink)
    for action in schedule:
        match action:
            case ("read", index, count):
                run.read(partitions[index % len(partitions)], count)
            case ("hints", count):
                run.hints.fetch(count)
            case ("checkpoint",):
                run.runner.checkpoint()
            case ("kill",):
                run.kill()
    run.finish(partitions)
    return run.sink


@pytest.mark.timeout(1800)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_topic=st.booleans(), statements=scenarios(), schedule=schedules)
@example(  # the rename first, rows between the two statements, the kill after a checkpoint
    shared_topic=True,
    statements=SCENARIO_INTERLEAVED,
    schedule=[
        ("hints", 1),
        ("read", 0, 4),
        ("read", 1, 2),
        ("checkpoint",),
        ("read", 1, 3),
        ("kill",),
        ("read", 0, 1),
    ],
)
@example(  # the same, a table's topic each, the kill between batches
    shared_topic=False,
    statements=SCENARIO_INTERLEAVED,
    schedule=[("read", 1, 2), ("checkpoint",), ("read", 0, 2), ("read", 3, 1), ("kill",), ("read", 2, 2)],
)
def test_every_interleaving_of_a_drop_a_rename_and_kills_ends_with_the_source_tables(
    state: StateStore, shared_topic: bool, statements: list[Statement], schedule: list[tuple[Any, ...]]
) -> None:
    check_sink(run_schedule(Layout(shared_topic), statements, state, schedule), statements)


# partitions of the per-table layout: 0 t/0, 1 u/0, 2 t/1, 3 u/1


def test_a_table_created_after_the_checkpoint_then_read_first_past_its_rename_is_renamed(
    state: StateStore,
) -> None:
    # u's sink table is created from partition 0 (old names), the runner dies before the next
    # checkpoint; the new one reads u's partition 1 first, whose row carries the new name
    statements: list[Statement] = [
        ("upsert", "t", 0, 1),
        ("upsert", "u", 0, 2),
        ("rename", "u", "b", "b_r"),
        ("drop", "t", "a"),
        ("upsert", "u", 1, 3),
        ("upsert", "t", 1, 4),
    ]
    schedule = [("read", 0, 1), ("checkpoint",), ("read", 1, 1), ("kill",), ("read", 3, 1)]
    check_sink(run_schedule(Layout(False), statements, state, schedule), statements)


def test_a_table_created_before_the_first_checkpoint_then_read_first_past_its_drop_loses_the_column(
    state: StateStore,
) -> None:
    statements: list[Statement] = [("upsert", "t", 0, 1), ("drop", "t", "a"), ("upsert", "t", 1, 2)]
    check_sink(
        run_schedule(Layout(False), statements, state, [("read", 0, 1), ("kill",), ("read", 2, 1)]),
        statements,
    )


def test_a_sink_table_created_elsewhere_is_renamed_as_the_ddl_says_and_keeps_its_own_columns(
    state: StateStore,
) -> None:
    # the sink table has the source's columns as they were and one of its own; the first row read
    # carries the new name: the rename reaches the sink, the sink's own column stays (NULL)
    sink = MemorySink()
    existing = Schema(
        (
            SchemaColumn("id", INT().with_nullable(False)),
            SchemaColumn("a", INT()),
            SchemaColumn("b", STRING()),
            SchemaColumn("loaded_at", STRING()),
        ),
        ("id",),
    )
    sink.apply_schema_change(CreateTable(TableId(None, "db", "u"), existing), existing)
    statements: list[Statement] = [
        ("upsert", "u", 0, 1),
        ("rename", "u", "b", "b_r"),
        ("upsert", "u", 1, 2),
        ("upsert", "u", 0, 3),
    ]
    run_schedule(Layout(False), statements, state, [("read", 3, 1)], sink)
    table = sink.tables[TableId(None, "db", "u")]
    assert list(table.schema.names) == ["id", "a", "b_r", "loaded_at"]
    expected = expected_tables(statements)["u"][1]
    assert {row["id"]: row for row in table.all_rows()} == {
        key: {**row, "loaded_at": None} for key, row in expected.items()
    }


#: Renames named by DDL on u, one of them twice, with rows between them in both partitions.
SCENARIO_CHAIN: list[Statement] = [
    *upserts("u", 0, range(4)),
    ("rename", "u", "b", "b_r"),
    *upserts("u", 10, [0, 1]),
    ("rename", "u", "b_r", "b_r2"),
    *upserts("u", 20, [1, 2]),
    ("rename", "u", "a", "a_r"),
    *upserts("u", 30, range(4)),
]


@pytest.mark.parametrize("per_table", [True, False], ids=["table-barrier", "checkpoint-barrier"])
@pytest.mark.parametrize("hints_early", [True, False], ids=["hints-early", "hints-late"])
@pytest.mark.parametrize(("first", "then_first"), [(0, 1), (1, 0), (0, 0)])
@pytest.mark.parametrize("kill", [1, 2])
@pytest.mark.parametrize("before", [False, True], ids=["after-the-sink-took-it", "before-the-sink-took-it"])
def test_a_kill_at_a_rename_named_by_ddl_reaching_the_sink_ends_with_the_source_tables(
    state: StateStore,
    per_table: bool,
    hints_early: bool,
    first: int,
    then_first: int,
    kill: int,
    before: bool,
) -> None:
    # the process dies right before or right after the sink takes a rename (the kill-th it is
    # asked for), after the barrier before it; started again from the last checkpoint, the
    # partition read first may be behind the renames, with the old names in its rows
    run = Run(
        Layout(False), SCENARIO_CHAIN, state, killed_at_rename({kill}, before=before, per_table=per_table)
    )
    ddl = len(run.topics[(SERVER, 0)])
    killed = False

    def attempt(work: Callable[[], None]) -> None:
        nonlocal killed
        while True:
            try:
                return work()
            except Killed:
                killed = True
                while True:
                    try:
                        run.kill()
                        break
                    except Killed:
                        continue  # killed again while it started

    def read_one() -> None:
        order = sorted(run.layout.partitions(), key=lambda tp: tp[1] != (then_first if killed else first))
        partition = next(tp for tp in order if run.source.left(tp))
        if hints_early:
            run.hints.fetch(ddl)
        run.read(partition, 1)

    reads = 0
    while any(run.source.left(tp) for tp in run.layout.partitions()):
        attempt(read_one)
        reads += 1
        if reads % 3 == 0:
            attempt(run.runner.checkpoint)
    attempt(lambda: run.finish(run.layout.partitions()))
    assert killed
    check_sink(run.sink, SCENARIO_CHAIN)
