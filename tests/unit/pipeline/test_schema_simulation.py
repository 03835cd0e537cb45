"""Deterministic simulation of the core: several tables with several partitions each, schema
changes, DDL hints early and late, and a kill at any step, checked against a model of the source
tables.

Two source tables live in a small model database. Each statement becomes what Debezium's MySQL
connector writes: a row change goes to partition ``id % P`` of the table's topic, with the schema
envelope of the table as it is then; a schema change goes to the schema-change topic, before the
rows that follow it. Production and consumption interleave as Hypothesis draws them: records are
produced a few at a time; the runner reads any partition's produced records in any order; the
schema-change topic is read ahead of or behind the data; checkpoints happen at random, some of
them left in flight (their commit's steps taken one by one while reading goes on, as its thread
would); a kill abandons the runner (and what the sink had not committed, and the rest of a commit
in flight) and a new one starts from the state store. Throughout, no schema change reaches the
sink while a commit is in flight, and no offsets are saved that the sink's last flush did not
commit. At the end everything is read, and the sink must hold exactly the model's tables: the same
columns (after every add, drop, rename and widening) and the same rows, value for value.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.partition_log import PartitionLogHints, PartitionLogSource, hand_over

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.definitions import TableDefinitions
from ferry.connectors.formats.source_order import record_source_order
from ferry.connectors.memory import MemoryDeadLetter
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import SCHEMA_CHANGE_TAGS, DataChange, SchemaChange
from ferry.model.raw_values import RAW_TYPES, RawForms, materialize_column
from ferry.model.schema import Schema, TableId
from ferry.offsets import Offsets
from ferry.pipeline.commits import SteppedCommits
from ferry.pipeline.route import Route, TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink, OffsetCommittingMemorySink
from ferry.state import StateStore

SERVER = "sim"
#: Where the state store's file goes: memory when the machine has it (no disk sync per checkpoint).
MEMORY_FOLDER = "/dev/shm" if os.path.isdir("/dev/shm") else None
#: The source tables: the first one unless a statement names another.
TABLES = ("t", "u")
#: With ``copy``, the first table also feeds this sink table (route-mode ALL_MATCH): a barrier on
#: it must commit both of its sink tables.
COPY = TableId(None, "copy", TABLES[0])


def data_topic(table: str) -> str:
    return f"{SERVER}.db.{table}"


#: With ``raw``, the tables also have a timestamp, a date and a decimal (Debezium writes an epoch
#: count, an epoch day and the bytes of an unscaled integer: ferry keeps them so until they are written)
RAW_COLUMNS = [
    dbz.ConnectColumn("ts", dbz.TIMESTAMP_MICROS),
    dbz.ConnectColumn("day", dbz.DATE),
    dbz.ConnectColumn("price", dbz.DECIMAL(10, 2)),
]


def new_table(name: str, raw: bool = False) -> dbz.DebeziumTable:
    columns = [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("a", dbz.INT32)]
    if raw:
        columns += [dbz.ConnectColumn(c.name, c.spec) for c in RAW_COLUMNS]
    return dbz.DebeziumTable(SERVER, "db", name, columns)


@dataclass
class SourceTable:
    """One table of the source database: its columns, its rows."""

    table: dbz.DebeziumTable
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    added: int = 0

    def columns(self) -> list[str]:
        return [c.name for c in self.table.columns]


@dataclass
class World:
    """What the source database holds and what Debezium has written of it."""

    partitions: int
    raw: bool = False
    tables: dict[str, SourceTable] = field(default_factory=dict)
    #: everything Debezium will write, in the order it writes it: (topic, partition, key, value)
    writes: list[tuple[str, int, bytes | None, bytes | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tables = self.tables or {name: SourceTable(new_table(name, self.raw)) for name in TABLES}

    def statement(self, kind: str, n: int, table: str = TABLES[0]) -> None:
        source = self.tables[table]
        names = [c for c in source.columns() if c != "id"]
        if kind == "upsert":
            key = n % 12
            row = {c: _value(source, c, n, i) for i, c in enumerate(names)}
            before = source.rows.get(key)
            after = {"id": key, **row}
            record = source.table.update(before, after) if before is not None else source.table.insert(after)
            source.rows[key] = after
            self._data(source, key, record)
        elif kind == "delete":
            key = n % 12
            if key in source.rows:
                record = source.table.delete(source.rows.pop(key))
                self._data(source, key, record)
                self.writes.append((source.table.topic, key % self.partitions, record[0], None))  # tombstone
        elif kind == "add":
            source.added += 1
            name = f"c{source.added}"
            after = names[n % len(names)] if names and n % 2 else None
            self._ddl(source, source.table.add_column(name, dbz.INT32 if n % 3 else dbz.STRING, after=after))
            for row in source.rows.values():
                row[name] = None
        elif kind == "drop" and names:
            name = names[n % len(names)]
            self._ddl(source, source.table.drop_column(name))
            for row in source.rows.values():
                row.pop(name, None)
        elif kind in ("rename", "rename-chain") and names:
            if kind == "rename":
                old = names[n % len(names)]
                new = f"{old}_r"
            else:  # the column renamed last, or any other, renamed again: c → c_r5 → c_r5_r9
                renamed = [c for c in names if "_r" in c]
                old = renamed[-1] if renamed and n % 3 else names[n % len(names)]
                new = f"{old}_r{n}"
                if new in names:
                    return
            self._ddl(source, source.table.rename_column(old, new))
            for row in source.rows.values():
                row[new] = row.pop(old, None)
        elif kind == "readd" and names:
            # DROP COLUMN x; ADD COLUMN x, no row between (the new column last, of the old one's type;
            # an odd n gives an int or text column a DEFAULT, which MySQL writes in every row it
            # holds; n % 3 == 2: one statement, ``DROP COLUMN x, ADD COLUMN x``)
            name = names[n % len(names)]
            spec = _plain(_spec(source, name))
            default = _readded_default(spec, n)
            if default is not None:
                spec = {**spec, "default": default}
            drop = source.table.drop_column(name)
            if n % 3 != 2:
                self._ddl(source, drop)  # described without the column
            add = source.table.add_column(name, spec)
            self._ddl(source, add if n % 3 != 2 else f"{drop}, {add.split(' ', 3)[3]}")
            for row in source.rows.values():
                row[name] = default
        elif kind == "truncate":
            # no key: Debezium's producer puts it in any partition of the table's topic
            source.rows.clear()
            self.writes.append((source.table.topic, n % self.partitions, *source.table.truncate()))
        elif kind == "widen-decimal":  # a cast of the values buffered before it (named cases only)
            if "price" in source.columns():
                self._ddl(source, source.table.change_type("price", dbz.DECIMAL(12, 4)))
        elif kind == "widen":
            narrow = [c for c in source.table.columns if _plain(c.spec) == dbz.INT32 and c.name != "id"]
            if narrow:
                self._ddl(source, source.table.change_type(narrow[n % len(narrow)].name, dbz.INT64))

    def _data(self, source: SourceTable, key: int, record: tuple[bytes | None, bytes]) -> None:
        self.writes.append((source.table.topic, key % self.partitions, *record))

    def _ddl(self, source: SourceTable, ddl: str) -> None:
        key, value = source.table.schema_change(ddl)
        self.writes.append((SERVER, 0, key, value))


def _spec(source: SourceTable, name: str) -> dict[str, Any]:
    return next(c for c in source.table.columns if c.name == name).spec


def _plain(spec: dict[str, Any]) -> dict[str, Any]:
    """A column's type without its default."""
    return {k: v for k, v in spec.items() if k != "default"}


def _readded_default(spec: dict[str, Any], n: int) -> Any:
    """The DEFAULT of a column added again by the n-th statement (an odd n, an int or text column)."""
    if n % 2 == 0 or "name" in spec or spec["type"] not in ("int32", "int64", "string"):
        return None
    return 5000 + n if spec["type"] != "string" else f"d{n}"


def _value(source: SourceTable, name: str, n: int, i: int) -> Any:
    """The value the n-th statement writes in a column (the i-th but the key)."""
    spec = _spec(source, name)
    if spec == dbz.TIMESTAMP_MICROS:
        return 1_700_000_000_000_000 + n * 1_000_003 + i
    if spec == dbz.DATE:
        return 19_000 + (n + i) % 1000
    if spec.get("name") == "org.apache.kafka.connect.data.Decimal":
        return Decimal(n * 7 + i).scaleb(-2)
    return (n * 7 + i) % 1000 if spec["type"] != "string" else f"v{n}"


def _as_read(spec: dict[str, Any], value: Any) -> Any:
    """A model value as the sink holds it: an epoch count or day as a datetime or a date."""
    if value is None:
        return None
    if spec == dbz.TIMESTAMP_MICROS:
        return datetime(1970, 1, 1) + timedelta(microseconds=value)
    if spec == dbz.DATE:
        return date(1970, 1, 1) + timedelta(days=value)
    return value


class Log:
    """The Kafka topics: records produced so far, per partition."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.produced = 0
        #: the data topics' partitions, table by table
        self.data = [(data_topic(t), p) for t in TABLES for p in range(world.partitions)]
        self.topics: dict[tuple[str, int], list[Record]] = {tp: [] for tp in self.data}
        self.topics[(SERVER, 0)] = []

    def produce(self, count: int) -> None:
        for topic, partition, key, value in self.world.writes[self.produced : self.produced + count]:
            log = self.topics[(topic, partition)]
            log.append(Record(topic, partition, len(log), key=key, value=value))
        self.produced = min(len(self.world.writes), self.produced + count)


class SimSink(MemorySink):
    """The memory sink, refusing a schema change while a checkpoint's commit is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = SteppedCommits()

    def apply_schema_change(self, change: SchemaChange, schema_after: Schema | None) -> None:
        assert not self.commits.in_flight, f"{change} applied while a checkpoint's commit is in flight"
        super().apply_schema_change(change, schema_after)


class SimCommittingSink(SimSink, OffsetCommittingMemorySink):
    """The same, recording the offsets of each table's commits (as Iceberg and Paimon): rows a
    table committed are skipped after a kill, and a barrier commits only the changed tables."""

    def flush_tables(self, table_ids: Collection[TableId], offsets: Offsets) -> None:
        assert not self.commits.in_flight, f"{table_ids} committed while a checkpoint's commit is in flight"
        super().flush_tables(table_ids, offsets)


class RawWriting:
    """Takes rows whose epoch and decimal columns are raw, as Iceberg and Paimon do (they build
    those columns in Arrow): here they are converted in Python as the rows are written, and counted."""

    raw_values_written = 0

    def write_raw(
        self, table_id: TableId, schema: Schema, changes: Sequence[DataChange], forms: RawForms
    ) -> None:
        rows = [row for change in changes for row in (change.before, change.after) if row is not None]
        for name, form in forms.items():
            self.raw_values_written += sum(1 for row in rows if type(row.get(name)) in RAW_TYPES[form.input])
            materialize_column(rows, name, form)
        self.write(table_id, schema, changes)  # type: ignore[attr-defined]


class SimRawSink(RawWriting, SimSink):
    pass


class SimRawCommittingSink(RawWriting, SimCommittingSink):
    pass


class SimState(StateStore):
    """The state store, refusing offsets the sink's last flush did not commit."""

    def __init__(self, url: str, sink: MemorySink) -> None:
        super().__init__(url)
        self.sink = sink

    def save_checkpoint(self, pipeline: str, offsets: Offsets, schemas: Mapping[str, Any], **kw: Any) -> int:
        flushed = self.sink.flushed_offsets
        assert offsets.items() <= flushed.items(), f"offsets {offsets} saved, the sink flushed {flushed}"
        return super().save_checkpoint(pipeline, offsets, schemas, **kw)


def check_offsets_advanced(state: StateStore, source: PartitionLogSource) -> None:
    """A checkpoint waited for saves the offsets of everything read, whatever waits in the tracker
    (a drop or a rename some partition has not passed yet): a restart never reads again what a
    checkpoint before it had read."""
    checkpoint = state.latest_checkpoint("sim")
    assert checkpoint is not None
    read = {tp: offset for tp, offset in source.next.items() if offset}
    behind = {
        tp: (checkpoint.offsets.get(tp, 0), o) for tp, o in read.items() if checkpoint.offsets.get(tp, 0) < o
    }
    assert not behind, f"a checkpoint saved offsets behind what was read (saved, read): {behind}"


def routes(copy: bool) -> TableRouter:
    """Each source table into its own sink table (and, with ``copy``, the first one into
    :data:`COPY` as well)."""
    if not copy:
        return TableRouter()
    return TableRouter([Route(r"db\.(\w+)", "db.$1"), Route(rf"db\.{TABLES[0]}", str(COPY))])


def new_runner(
    log: Log,
    sink: SimSink,
    state: StateStore,
    copy: bool = False,
    defined: bool = False,
    late: PartitionLogHints | None = None,
) -> tuple[PipelineRunner, PartitionLogSource, PartitionLogHints]:
    """A runner over ``log`` (``defined``: the decoder types rows by the tables the schema-change
    topic describes, as ``ferry run`` has it for Debezium JSON with a schema-change topic: a
    record no definition describes reads that topic to its end in the middle of its batch).
    ``late``: the schema-change topic of the runner before, whose records become visible late:
    the new runner sees as many of them as it did."""
    raw = log.world.raw
    source = PartitionLogSource(log.topics, log.data)
    hints = PartitionLogHints(log.topics[(SERVER, 0)], late=late is not None)
    if late is not None:
        hints.visible = late.visible
    sink.commits = SteppedCommits()  # a commit of a runner killed is never taken further
    definitions = TableDefinitions() if defined else None
    # runs of column changes, as ``ferry run`` decodes for a sink that takes them (the memory sink)
    options: dict[str, Any] = {
        "raw_values": raw,
        "columns": True,
        **({"definitions": definitions} if defined else {}),
    }
    runner = PipelineRunner(
        settings=RunnerSettings(name="sim", tune_gc=False, concurrent_checkpoints=True, ddl_wait_s=0),
        source=source,
        decode=decoder_for("debezium-json", **options).decode,
        sink=sink,
        state=state,
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=routes(copy),
        dead_letter=MemoryDeadLetter(),
        hints=hints,
        source_order=record_source_order,
        background=sink.commits,
        definitions=definitions,
    )
    if definitions is not None:
        definitions.refresh = runner.sync_hints
    runner.open()
    return runner, source, hints


def statements_of(kinds: list[str], max_size: int) -> st.SearchStrategy[list[tuple[str, int, str]]]:
    """Scripts of statements of these kinds (a kind listed twice drawn twice as often)."""
    return st.lists(
        st.tuples(st.sampled_from(kinds), st.integers(0, 1000), st.sampled_from(TABLES)),
        min_size=1,
        max_size=max_size,
    )


statements = statements_of(
    ["upsert"] * 6 + ["delete", "add", "drop", "rename", "widen", "truncate", "readd"], 60
)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 8)),
        st.tuples(st.just("read"), st.integers(0, 5), st.integers(1, 6)),
        st.tuples(st.just("hints"), st.integers(1, 3)),
        st.tuples(st.just("publish"), st.integers(1, 3)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("begin")),
        st.tuples(st.just("commit-step")),
        st.tuples(st.just("kill")),
    ),
    max_size=80,
)

#: The sink: recording offsets per table or not, with the first table copied into a second sink table or not.
sinks = st.fixed_dictionaries({"committing": st.booleans(), "copy": st.booleans()})


def run_simulation(
    partitions: int,
    script: Sequence[tuple[Any, ...]],
    schedule: list[tuple[Any, ...]],
    committing: bool = False,
    copy: bool = False,
    raw: bool = False,
    raw_sink: bool = False,
    defined: bool = False,
    late_hints: bool = False,
) -> SimSink:
    """Run ``script`` (statements: kind, n and the table, the first one by default) through
    Debezium and ferry as ``schedule`` interleaves them, then compare every table with the model.
    ``committing``: the sink records offsets per table (barriers commit only the changed tables);
    ``copy``: the first table also feeds :data:`COPY`, which must end as that table. ``raw``: the
    tables have columns the decoder keeps raw (:data:`RAW_COLUMNS`), which ``raw_sink`` takes so.
    ``late_hints``: the schema-change topic's records become visible after the rows written after
    them, as ``("publish", n)`` says (or as a reader asking again finds them).
    Returns the sink."""
    world = World(partitions, raw)
    for table in TABLES:
        world.statement("upsert", 0, table)  # the tables exist from their first row on
    for statement in script:
        world.statement(*statement)
    log = Log(world)
    kinds = {(False, False): SimSink, (True, False): SimCommittingSink}
    kinds |= {(False, True): SimRawSink, (True, True): SimRawCommittingSink}
    sink = kinds[(committing, raw_sink)]()
    with tempfile.TemporaryDirectory(dir=MEMORY_FOLDER) as folder:
        state = SimState(f"sqlite:///{folder}/state.db", sink)
        runner, source, hints = new_runner(log, sink, state, copy, defined, late=None)
        hints.late = late_hints

        def read(index: int, count: int) -> None:
            # the index-th partition (the first table's partitions first)
            hand_over(runner, source.take(log.data[index % len(log.data)], count))

        for action in schedule:
            match action:
                case ("produce", count):
                    log.produce(count)
                case ("read", index, count):
                    read(index, count)
                case ("hints", count):
                    hints.fetch(count)
                case ("publish", count):
                    hints.publish(count)
                case ("checkpoint",):
                    runner.checkpoint()
                    check_offsets_advanced(state, source)
                case ("begin",):
                    runner.begin_checkpoint()  # its commit left in flight
                case ("commit-step",):
                    sink.commits.step()
                case ("kill",):
                    sink.pending.clear()  # written, never committed
                    late = hints if late_hints else None
                    runner, source, hints = new_runner(log, sink, state, copy, defined, late=late)
        log.produce(len(world.writes))
        hints.publish(len(world.writes))
        hints.fetch(len(world.writes))
        for index in range(len(log.data)):
            read(index, len(world.writes))
        runner.checkpoint()
        state.close()
    sink_tables = [(TableId(None, "db", name), source) for name, source in world.tables.items()]
    if copy:
        sink_tables.append((COPY, world.tables[TABLES[0]]))
    for table_id, source_table in sink_tables:
        expected_columns = source_table.columns()
        table = sink.tables[table_id]
        applied = [str(c) for c in sink.applied]
        assert list(table.schema.names) == expected_columns, (str(table_id), applied)
        got = {row["id"]: row for row in table.all_rows()}
        specs = {c: _spec(source_table, c) for c in expected_columns}
        expected = {
            key: {c: _as_read(specs[c], row.get(c)) for c in expected_columns}
            for key, row in source_table.rows.items()
        }
        assert got == expected, (str(table_id), applied)
    return sink


# hundreds of runs: on a loaded machine they take minutes, not the default bound of a hung test
@pytest.mark.timeout(1800)
@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    partitions=st.integers(1, 3), script=statements, schedule=actions, sink=sinks, late_hints=st.booleans()
)
# a column renamed, dropped and added again under its new name, then dropped: u ends without it
@example(
    partitions=1,
    script=[("rename", 0, "u"), ("readd", 0, "u"), ("drop", 0, "u")],
    schedule=[("produce", 1), ("produce", 1), ("read", 1, 1)],
    sink={"committing": False, "copy": False},
    late_hints=False,
)
# a column added again with a default, then widened (which leaves it without one), before t's first
# row is read: that row, older than the drop, reads the default the column was added with
@example(
    partitions=1,
    script=[("readd", 1, "t"), ("widen", 0, "t")],
    schedule=[],
    sink={"committing": False, "copy": False},
    late_hints=False,
)
# t's row read before the DDL, then a renamed to a_r, and a_r dropped and added again with a
# default: the row read afterwards, older than the rename, carries a and reads a_r's default
@example(
    partitions=1,
    script=[("upsert", 0, "t"), ("rename", 0, "t"), ("readd", 1, "t")],
    schedule=[("produce", 1), ("read", 0, 1)],
    sink={"committing": False, "copy": False},
    late_hints=False,
)
def test_every_interleaving_of_partitions_hints_and_kills_ends_with_the_source_table(
    partitions: int,
    script: list[tuple[Any, ...]],
    schedule: list[tuple[Any, ...]],
    sink: dict[str, bool],
    late_hints: bool,
) -> None:
    run_simulation(partitions, script, schedule, **sink, late_hints=late_hints)


# drops and renames into a sink recording offsets per table: each barrier commits only the tables
# it concerns, and kills come between it and the next checkpoint
table_barrier_statements = statements_of(
    ["upsert"] * 5 + ["delete", "add", "drop", "rename", "rename", "readd"], 40
)


@pytest.mark.timeout(1800)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(partitions=st.integers(1, 3), script=table_barrier_statements, schedule=actions, copy=st.booleans())
# a kill after the first table is created, from a partition already past a rename, into two sink
# tables: the restart reads an older row of it first, and must track it from the sink tables'
# columns, not create it anew from that row (the rename, or a drop of the renamed column, would
# then name a column the sink tables never had)
@example(
    partitions=2,
    script=[("rename", 0, "t"), ("upsert", 1, "t"), ("rename", 0, "t")],
    schedule=[("produce", 1), ("produce", 3), ("read", 1, 1), ("kill",)],
    copy=True,
)
@example(
    partitions=2,
    script=[("rename", 0, "t"), ("upsert", 1, "t"), ("drop", 0, "t")],
    schedule=[("produce", 1), ("produce", 3), ("read", 1, 1), ("kill",)],
    copy=True,
)
# c1 added by DDL, then (after a's drop and add) written in a row, dropped and added again: the only
# partition read so far showed t before c1, so c1's drop reached the sink at once, and the add after
# it must still leave the row older than the drop without its value
@example(
    partitions=1,
    script=[("add", 0, "t"), ("readd", 0, "t"), ("upsert", 0, "t"), ("readd", 0, "t")],
    schedule=[("produce", 1), ("read", 0, 1)],
    copy=False,
)
# the row older than c2 itself, c2 dropped and added again with a default before t is first read
@example(
    partitions=1,
    script=[
        ("add", 0, "t"),
        ("upsert", 0, "t"),
        ("add", 0, "t"),
        ("drop", 0, "t"),
        ("drop", 0, "t"),
        ("readd", 1, "t"),
    ],
    schedule=[],
    copy=False,
)
# a column added again with a default, then renamed; u's sink table created from a row older than
# the drop, then a kill before any checkpoint: u, tracked from its sink table's columns, must find
# the default under the column's new name, so the rows older than the drop read it
@example(
    partitions=1,
    script=[("readd", 891, "u"), ("rename", 77, "u")],
    schedule=[
        ("hints", 1),
        ("produce", 2),
        ("publish", 1),
        ("hints", 1),
        ("read", 1, 1),
        ("begin",),
        ("kill",),
    ],
    copy=False,
)
def test_every_interleaving_of_table_barriers_and_kills_ends_with_the_source_table(
    partitions: int, script: list[tuple[Any, ...]], schedule: list[tuple[Any, ...]], copy: bool
) -> None:
    run_simulation(partitions, script, schedule, committing=True, copy=copy)


# the tables have a timestamp, a date and a decimal, which the decoder leaves raw: whatever reads
# the rows before a sink that takes them so (a rename in flight, adapting buffered rows, a
# barrier within a batch, a sink that does not take them) must see them converted
@pytest.mark.timeout(1800)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(partitions=st.integers(1, 3), script=statements, schedule=actions, sink=sinks, raw_sink=st.booleans())
def test_every_interleaving_with_raw_values_ends_with_the_source_table(
    partitions: int,
    script: list[tuple[Any, ...]],
    schedule: list[tuple[Any, ...]],
    sink: dict[str, bool],
    raw_sink: bool,
) -> None:
    run_simulation(partitions, script, schedule, **sink, raw=True, raw_sink=raw_sink)


def test_raw_values_reach_a_sink_that_takes_them_raw_and_the_others_converted() -> None:
    script = [*(("upsert", n) for n in range(1, 9)), ("add", 0), *(("upsert", n, "u") for n in range(9))]
    schedule = [
        ("produce", 100),
        ("read", 0, 100),
        ("checkpoint",),
        ("read", 1, 100),
        ("kill",),
        ("read", 3, 5),
    ]
    taking = run_simulation(2, script, schedule, raw=True, raw_sink=True)
    assert isinstance(taking, RawWriting) and taking.raw_values_written > 0
    converted = run_simulation(2, script, schedule, raw=True, committing=True)
    assert not isinstance(converted, RawWriting)


@pytest.mark.parametrize("raw_sink", [False, True])
def test_rows_with_raw_values_adapted_to_a_widened_column_keep_every_value(raw_sink: bool) -> None:
    # the widening comes without a barrier: the buffered rows' decimals (raw) are cast to the new scale
    script = [*(("upsert", n) for n in range(1, 9)), ("widen-decimal", 0), ("upsert", 9)]
    run_simulation(1, script, [("produce", 100), ("read", 0, 100)], raw=True, raw_sink=raw_sink)


def test_a_raw_column_renamed_while_its_rows_are_read_keeps_every_value() -> None:
    # partition 0 shows the rename (its rows' ts_r is read under the table's name ts until the
    # rename is final), partition 1's rows still carry ts
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 2), ("rename", 1), ("upsert", 3), ("upsert", 4), ("upsert", 5)],
        [("produce", 100), ("hints", 5), ("read", 0, 100), ("read", 1, 1), ("checkpoint",), ("read", 1, 100)],
        raw=True,
        raw_sink=True,
    )


def test_a_table_met_again_after_a_kill_takes_a_column_the_ddl_added_since() -> None:
    # u's sink table was created (with c1) before the kill and nothing was saved; after it, u is
    # tracked from its sink table's columns, and the DDL read meanwhile adds c2 without a barrier
    run_simulation(
        3,
        [*[("upsert", 0, "t")] * 5, ("add", 0, "u"), ("upsert", 104, "u"), ("add", 0, "u")],
        [("produce", 9), ("read", 5, 1), ("kill",)],
    )


def test_a_rename_seen_first_in_one_partition_keeps_the_values_of_the_others() -> None:
    # partition 0 is read through (past the rename) before partition 1 shows its older rows
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 2), ("rename", 0), ("upsert", 3), ("upsert", 4)],
        [("produce", 100), ("hints", 5), ("read", 0, 100), ("checkpoint",), ("read", 1, 100)],
    )


def test_a_drop_seen_first_in_one_partition_does_not_come_back_with_the_others() -> None:
    run_simulation(
        3,
        [("upsert", 1), ("upsert", 2), ("upsert", 3), ("drop", 0), ("upsert", 4), ("upsert", 5)],
        [("produce", 100), ("read", 0, 100), ("kill",), ("read", 2, 1), ("read", 1, 100)],
    )


def test_a_column_added_before_a_kill_and_dropped_after_it_is_dropped() -> None:
    # the add reached the sink before the kill; the replay reads the drop with it
    run_simulation(1, [("upsert", 0), ("add", 0), ("drop", 1)], [("produce", 4), ("read", 0, 1), ("kill",)])


def test_a_column_renamed_twice_ends_with_its_last_name_and_every_value() -> None:
    # rows carrying the middle name lie between the renames: the second rename waits for them
    run_simulation(
        3,
        [("upsert", 479, "u"), ("rename", 783, "u"), ("upsert", 882, "u"), ("rename", 207, "u")],
        [("produce", 4), ("read", 3, 4), ("produce", 7), ("read", 5, 4)],
    )


def test_a_renamed_column_dropped_under_its_new_name_is_dropped() -> None:
    run_simulation(
        1, [("upsert", 1), ("rename", 0), ("upsert", 2), ("drop", 0)], [("produce", 3), ("read", 0, 2)]
    )


def test_a_rename_named_before_its_table_is_read_survives_a_kill() -> None:
    # the rename of table u is known (from DDL) before u's first row: the checkpoint keeps it
    run_simulation(
        2,
        [("drop", 679, "t"), ("rename", 420, "u"), ("upsert", 15, "t")],
        [("produce", 1), ("read", 4, 3), ("produce", 7), ("read", 1, 6), ("kill",)],
    )


def test_rows_written_after_a_truncate_but_read_before_it_are_kept() -> None:
    # partition 1 is read through (rows 3 and 5 come after the truncate) before partition 0 shows it
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 2), ("truncate", 0), ("upsert", 3), ("upsert", 5)],
        [("produce", 100), ("read", 1, 100), ("checkpoint",), ("read", 0, 100)],
    )


def test_rows_written_before_a_truncate_but_read_after_it_are_removed_across_a_kill() -> None:
    # partition 0 shows the truncate first; partition 1's older rows are read after a kill
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 3), ("truncate", 0), ("upsert", 4), ("upsert", 5)],
        [("produce", 100), ("read", 0, 100), ("checkpoint",), ("kill",), ("read", 1, 1)],
    )


def test_rows_read_again_after_a_truncate_keep_the_values_of_a_column_renamed_since() -> None:
    run_simulation(
        2,
        [("truncate", 804), ("upsert", 771), ("rename", 234), ("upsert", 897), ("upsert", 860)],
        [("produce", 6), ("read", 1, 3), ("produce", 3), ("read", 4, 4), ("kill",)],
    )


def test_rows_read_again_after_a_truncate_carry_any_name_of_a_column_renamed_twice() -> None:
    run_simulation(
        3,
        [
            ("rename", 903, "u"),
            ("truncate", 304, "u"),
            ("upsert", 201, "u"),
            ("rename", 22, "u"),
            ("upsert", 480, "u"),
        ],
        [],
    )


def test_rows_read_again_after_a_truncate_carry_the_name_of_a_column_renamed_after_it() -> None:
    run_simulation(
        3,
        [
            ("add", 6, "u"),
            ("drop", 554, "u"),
            ("truncate", 447, "u"),
            ("upsert", 698, "u"),
            ("rename", 662, "u"),
            ("upsert", 545, "u"),
        ],
        [("produce", 6), ("produce", 3), ("read", 3, 5), ("kill",), ("read", 5, 4)],
    )


# columns added and types widened reach the sink without a barrier: the rows read before them wait
# in the buffers, adapted; a kill then loses them and what the state store saved must explain it
in_place_statements = statements_of(["upsert"] * 4 + ["delete", "add", "add", "widen", "widen", "drop"], 40)


@pytest.mark.timeout(1800)
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(partitions=st.integers(2, 3), script=in_place_statements, schedule=actions, sink=sinks)
def test_every_interleaving_of_changes_without_a_barrier_and_kills_ends_with_the_source_table(
    partitions: int, script: list[tuple[Any, ...]], schedule: list[tuple[Any, ...]], sink: dict[str, bool]
) -> None:
    run_simulation(partitions, script, schedule, **sink)


def test_a_column_added_without_a_barrier_then_killed_and_dropped_by_later_ddl_is_dropped() -> None:
    # the add reaches the sink with no checkpoint before the drop is written; after the kill the
    # DDL is read past the drop before the rows that carry the column are read again
    run_simulation(
        1,
        [("upsert", 1), ("add", 0), ("upsert", 2), ("drop", 1), ("upsert", 3)],
        [("produce", 5), ("read", 0, 3), ("kill",)],
    )


def test_a_drop_named_before_its_table_is_read_survives_a_kill_after_its_add() -> None:
    # the DDL (add c1, drop a) is read ahead, before the checkpoint; t's first row then creates
    # the table and adds c1 without a barrier, and the drop waits for t's partitions when it dies
    run_simulation(
        3,
        [("upsert", 0, "t"), ("add", 0, "t"), ("drop", 0, "t")],
        [("produce", 5), ("read", 3, 1), ("checkpoint",), ("read", 0, 1), ("kill",)],
    )


def test_a_column_added_then_renamed_before_its_table_is_read_keeps_its_values_after_a_kill() -> None:
    # the first row of u reads the DDL (add c1, rename it c1_r) to its end: c1_r reaches the sink
    # without a barrier; after the kill the DDL read again must not add c1 anew beside c1_r
    run_simulation(
        3,
        [("add", 0, "u"), ("upsert", 1, "u"), ("rename", 1, "u")],
        [("produce", 5), ("read", 3, 1), ("kill",)],
    )


def test_changes_without_a_barrier_in_one_partition_then_a_kill_keep_the_other_partitions_rows() -> None:
    # partition 0 shows the add and the widening; its rows and partition 1's older ones are
    # buffered when the runner dies, and read again with the schemas the sink has
    run_simulation(
        2,
        [
            ("upsert", 1),
            ("upsert", 2),
            ("add", 0),
            ("upsert", 3),
            ("upsert", 4),
            ("widen", 0),
            ("upsert", 5),
            ("upsert", 6),
        ],
        [
            ("produce", 100),
            ("read", 0, 100),
            ("kill",),
            ("read", 1, 2),
            ("checkpoint",),
            ("read", 0, 1),
            ("kill",),
        ],
    )


def test_a_kill_after_the_sink_committed_but_before_the_offsets_were_saved_loses_and_repeats_nothing() -> (
    None
):
    # the commit in flight flushed the sink (rows before the drop) and died before saving its offsets
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 2), ("add", 0), ("upsert", 3), ("drop", 0), ("upsert", 4)],
        [("produce", 3), ("read", 0, 3), ("begin",), ("commit-step",), ("produce", 100), ("kill",)],
    )


def test_schema_changes_read_while_a_commit_is_in_flight_wait_for_it() -> None:
    run_simulation(
        2,
        [("upsert", 1), ("upsert", 2), ("add", 0), ("upsert", 3), ("rename", 1), ("upsert", 4)],
        [
            ("produce", 2),
            ("read", 0, 2),
            ("read", 1, 2),
            ("begin",),
            ("produce", 100),
            ("hints", 5),
            ("read", 0, 100),
            ("begin",),
            ("commit-step",),
            ("read", 1, 100),
        ],
    )


def test_rows_read_before_a_table_barrier_are_committed_before_its_rename_and_survive_a_kill() -> None:
    # the barrier commits t's rows with the offsets read so far; after the kill they are skipped by
    # those offsets, so they must be in the sink, under the column's old name renamed with it
    run_simulation(
        1,
        [("upsert", 1), ("upsert", 2), ("rename", 0), ("upsert", 3)],
        [("produce", 100), ("read", 0, 100), ("kill",)],
        committing=True,
    )


def test_a_rename_behind_a_table_barrier_is_not_derived_again_from_the_rows_read_again() -> None:
    # the kill comes before any checkpoint: t's first row is read again with the column's old name,
    # which the schemas saved after the barrier know to be older than the rename
    run_simulation(1, [("rename", 633)], [("produce", 3), ("read", 0, 2), ("kill",)], committing=True)


def test_a_table_barrier_commits_every_sink_table_its_source_table_feeds() -> None:
    # t feeds db.t and copy.t: the rename reaches both only after both hold the rows before it
    run_simulation(
        1,
        [("upsert", 1), ("rename", 3), ("upsert", 2)],
        [("produce", 100), ("read", 0, 100), ("kill",)],
        committing=True,
        copy=True,
    )


# chains of renames (a column renamed, its new name renamed again, a column added and then renamed)
# with kills anywhere between them, on up to three partitions, the DDL read early or late, and its
# statements visible before the rows after them or only later (``late_hints``). No row is written on
# every partition after each statement: a partition may show several renames in one step, or none
rename_chain_statements = statements_of(["upsert"] * 5 + ["rename-chain"] * 3 + ["add", "delete"], 40)


@pytest.mark.timeout(1800)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    partitions=st.integers(2, 3),
    script=rename_chain_statements,
    schedule=actions,
    sink=sinks,
    defined=st.booleans(),
    late_hints=st.booleans(),
)
def test_every_interleaving_of_rename_chains_and_kills_ends_with_the_source_table(
    partitions: int,
    script: list[tuple[Any, ...]],
    schedule: list[tuple[Any, ...]],
    sink: dict[str, bool],
    defined: bool,
    late_hints: bool,
) -> None:
    run_simulation(partitions, script, schedule, **sink, defined=defined, late_hints=late_hints)


def test_a_checkpoint_while_a_rename_waits_for_other_partitions_saves_every_offset_read() -> None:
    # partition 0 of t shows the rename; partitions 1 and 2 hold older rows not read yet: the rename
    # waits, kept in the checkpoint's schemas, and the offsets read are saved all the same; the
    # runner killed after it reads on from them
    world = World(3)
    for n in range(1, 10):
        world.statement("upsert", n)
    world.statement("rename", 1)
    for n in range(10, 19):
        world.statement("upsert", n)
    log = Log(world)
    log.produce(len(world.writes))
    sink = SimSink()
    with tempfile.TemporaryDirectory(dir=MEMORY_FOLDER) as folder:
        state = SimState(f"sqlite:///{folder}/state.db", sink)
        runner, source, hints = new_runner(log, sink, state)
        hints.fetch(len(world.writes))
        t0 = log.data[0]
        hand_over(runner, source.take(t0, len(log.topics[t0])))
        runner.checkpoint()
        checkpoint = state.latest_checkpoint("sim")
        assert checkpoint is not None
        assert checkpoint.offsets.get(t0) == len(log.topics[t0])
        pending = checkpoint.schemas["tables"][str(TableId(None, "db", TABLES[0]))]["pending"]
        assert [p["change"] for p in pending] == ["rename.column"]
        sink.pending.clear()
        runner, source, hints = new_runner(log, sink, state)
        assert source.next[t0] == len(log.topics[t0])  # nothing of partition 0 is read again
        hints.fetch(len(world.writes))
        for tp in log.data:
            hand_over(runner, source.take(tp, len(log.topics[tp])))
        runner.checkpoint()
        state.close()
    table = sink.tables[TableId(None, "db", TABLES[0])]
    source_table = world.tables[TABLES[0]]
    assert list(table.schema.names) == source_table.columns()
    assert {row["id"]: row for row in table.all_rows()} == source_table.rows


# a column renamed three times (a → a_r5 → a_r5_r10 → a_r5_r10_r16) while rows flow on three
# partitions: partition 0's first row after the renames carries the last name, partition 1 shows
# the first one later, partition 2 none; the schema-change topic's statements become visible after
# the rows (``late_hints``), so partition 0's row is read before any of them
RENAMED_THREE_TIMES = [
    ("upsert", 1),
    ("upsert", 2),
    ("rename-chain", 5),
    ("upsert", 4),
    ("rename-chain", 10),
    ("rename-chain", 16),
    ("upsert", 3),
]


@pytest.mark.parametrize("committing", [False, True])
def test_a_partition_past_three_renames_before_another_shows_the_first_keeps_every_value(
    committing: bool,
) -> None:
    schedule = [("produce", 100), ("read", 0, 100), ("read", 1, 100), ("read", 2, 100)]
    run_simulation(3, RENAMED_THREE_TIMES, schedule, committing=committing, late_hints=True)


def test_a_partition_past_three_renames_then_a_kill_keeps_every_value() -> None:
    schedule = [("produce", 100), ("read", 0, 100), ("checkpoint",), ("kill",), ("read", 1, 100)]
    run_simulation(3, RENAMED_THREE_TIMES, schedule, late_hints=True)


def test_a_column_added_before_a_kill_and_renamed_three_times_after_it_keeps_every_value() -> None:
    # c1 reaches the sink before the kill; its renames come after it, the statements late again
    script = [
        ("upsert", 1),
        ("upsert", 2),
        ("add", 0),
        ("upsert", 6),
        ("rename-chain", 7),
        ("upsert", 4),
        ("rename-chain", 10),
        ("rename-chain", 16),
        ("upsert", 3),
    ]
    schedule = [("produce", 6), ("read", 0, 100), ("checkpoint",), ("kill",), ("produce", 100)]
    schedule += [("read", 0, 100), ("read", 1, 100), ("read", 2, 100)]
    run_simulation(3, script, schedule, late_hints=True)


def test_every_checkpoint_of_three_partitions_saves_the_offsets_read_while_renames_wait() -> None:
    # 3,000 events on three partitions, a column renamed every 500 of them; the partitions are read
    # a hundred records at a time, one after the other, so that each rename waits for the partitions
    # behind it across several checkpoints: every checkpoint saves every offset read, none {}
    world = World(3)
    for n in range(1, 3001):
        world.statement("rename-chain" if n % 500 == 0 else "upsert", n)
    log = Log(world)
    log.produce(len(world.writes))
    sink = SimSink()
    saved: list[dict[tuple[str, int], int]] = []
    waiting = 0
    with tempfile.TemporaryDirectory(dir=MEMORY_FOLDER) as folder:
        state = SimState(f"sqlite:///{folder}/state.db", sink)
        try:
            runner, source, _ = new_runner(log, sink, state)
            t_partitions = log.data[:3]
            while any(source.left(tp) for tp in t_partitions):
                for tp in t_partitions:
                    hand_over(runner, source.take(tp, 100))
                    runner.checkpoint()
                    checkpoint = state.latest_checkpoint("sim")
                    assert checkpoint is not None
                    read = {p: o for p, o in source.next.items() if o}
                    assert dict(checkpoint.offsets) == read, (len(saved), dict(checkpoint.offsets), read)
                    assert not saved or any(checkpoint.offsets[p] > saved[-1].get(p, 0) for p in read)
                    saved.append(dict(checkpoint.offsets))
                    table = checkpoint.schemas["tables"][str(TableId(None, "db", TABLES[0]))]
                    waiting += bool(table["pending"])
            runner.checkpoint()
        finally:
            state.close()
    assert waiting > 0  # some checkpoints were taken while a rename waited
    table = sink.tables[TableId(None, "db", TABLES[0])]
    source_table = world.tables[TABLES[0]]
    assert list(table.schema.names) == source_table.columns()
    assert {row["id"]: row for row in table.all_rows()} == source_table.rows


# DROP COLUMN a; ADD COLUMN a with no row between: the rows not written since have NULL in a
@pytest.mark.parametrize("late_hints", [False, True])
@pytest.mark.parametrize("ahead", [False, True])
def test_a_column_dropped_and_added_again_with_no_row_between_holds_none_of_its_old_values(
    late_hints: bool, ahead: bool
) -> None:
    script = [("upsert", 1), ("upsert", 2), ("readd", 1), ("upsert", 3), ("upsert", 4)]
    schedule = [("produce", 100), *([("hints", 10)] if ahead else []), ("read", 0, 100)]
    run_simulation(1, script, schedule, late_hints=late_hints)


def test_a_column_dropped_and_added_again_while_another_partition_lags_holds_none_of_its_old_values() -> None:
    # partition 1 still holds rows written before the drop, with the old values of a, when
    # partition 0 shows rows written after the add
    script = [("upsert", 1), ("upsert", 2), ("upsert", 3), ("readd", 1), ("upsert", 4), ("upsert", 6)]
    schedule = [("produce", 100), ("hints", 10), ("read", 0, 100), ("checkpoint",), ("read", 1, 100)]
    run_simulation(2, script, schedule)
    run_simulation(2, script, [*schedule[:3], ("kill",), ("read", 1, 1)], committing=True)


@pytest.mark.parametrize(
    "script",
    [
        [("readd", 0), ("rename", 2)],  # a, added again, goes last; price is renamed after it
        [("rename", 0), ("readd", 0)],  # a renamed a_r, then a_r dropped and added again
        [("readd", 0), ("rename", 3)],  # a dropped and added again, then renamed a_r
    ],
)
def test_a_table_first_read_after_a_column_was_dropped_and_added_again_has_it_where_ddl_put_it(
    script: list[tuple[Any, ...]],
) -> None:
    # the DDL is read before the table's first row, which is older than the drop: the table is
    # created from that row with the column where the last statement put it, and the row's value in
    # it (the old column's) is not written
    run_simulation(1, script, [], raw=True)


def test_a_column_dropped_and_added_again_before_a_table_is_first_read_then_killed_holds_none_of_its_old_values() -> (
    None
):
    # t's first row (older than the drop) is read and creates the table; the runner dies before any
    # checkpoint, and the restart reads that row again: its value of a must not come back
    run_simulation(
        1,
        [("add", 0, "t"), ("readd", 0, "t")],
        [("produce", 1), ("produce", 1), ("produce", 3), ("read", 0, 1), ("kill",)],
    )


def test_a_table_created_before_its_column_was_dropped_and_added_again_is_read_then_killed() -> None:
    # t's sink table is created from its first row (a where it was) before the DDL is produced;
    # after the kill the DDL is read first: the sink's a is the old column, dropped and added last
    run_simulation(1, [("readd", 0, "t")], [("produce", 1), ("read", 0, 1), ("kill",)], raw=True)


@pytest.mark.parametrize("committing", [False, True])
@pytest.mark.parametrize(
    "script",
    [
        [("add", 0, "t"), ("upsert", 0, "t"), ("readd", 1, "t")],
        # the draw that found it: a dropped and added again before the row, c1 after it
        [("add", 0, "t"), ("readd", 0, "t"), ("upsert", 0, "t"), ("readd", 0, "t")],
    ],
)
def test_a_column_no_partition_showed_dropped_and_added_again_holds_none_of_its_old_values(
    script: list[tuple[Any, ...]], committing: bool
) -> None:
    # t's partition shows t before c1 was added; c1's drop then reaches the sink as soon as the DDL
    # is read (no partition showed the column), before its add: the row written between the first
    # add and the drop, read after both, carries the old c1's value, which the new c1 must not take
    run_simulation(1, script, [("produce", 1), ("read", 0, 1)], committing=committing)


# DROP COLUMN a; ADD COLUMN a ... DEFAULT: MySQL fills the rows it holds with the new column's
# default, so the rows older than the drop read after it (a partition behind it, a table first read
# after it, a restart) read the default, not their old value nor NULL
@pytest.mark.parametrize("committing", [False, True])
@pytest.mark.parametrize(
    "schedule",
    [
        [("produce", 100), ("hints", 10), ("read", 0, 100), ("checkpoint",), ("read", 1, 100)],
        [("produce", 100), ("hints", 10), ("read", 0, 100), ("kill",), ("read", 1, 1)],
        [("produce", 100), ("read", 1, 100)],
        [("produce", 3), ("read", 0, 100), ("read", 1, 100)],
        [],
    ],
)
def test_rows_older_than_a_column_dropped_and_added_again_with_a_default_read_the_default(
    schedule: list[tuple[Any, ...]], committing: bool
) -> None:
    script = [("upsert", 1), ("upsert", 2), ("upsert", 3), ("readd", 1), ("upsert", 4), ("upsert", 6)]
    run_simulation(2, script, schedule, committing=committing)


@pytest.mark.parametrize("committing", [False, True])
@pytest.mark.parametrize("n", [2, 5])  # without a default, with one
def test_a_column_dropped_and_added_again_in_one_statement_holds_none_of_its_old_values(
    n: int, committing: bool
) -> None:
    # ``DROP COLUMN a, ADD COLUMN a``: the statement's description still has a, so no drop of a
    # waits when it is read, t tracked already from its first rows; partition 1 lags behind it
    script = [("upsert", 1), ("upsert", 2), ("upsert", 3), ("readd", n), ("upsert", 4), ("upsert", 6)]
    schedule = [("produce", 3), ("read", 0, 100), ("read", 1, 100)]
    run_simulation(2, script, schedule, committing=committing)
    run_simulation(2, script, [*schedule, ("produce", 5), ("read", 0, 1), ("kill",)], committing=committing)


def test_a_text_column_added_dropped_and_added_again_with_a_default_reads_the_default() -> None:
    # c1 (text) added, written, then dropped and added again DEFAULT 'd3' with rows behind the drop
    script = [("add", 0), ("upsert", 1), ("upsert", 2), ("readd", 3), ("upsert", 5)]
    world = World(2)
    world.statement("upsert", 0)
    for statement in script:
        world.statement(*statement)
    assert {r["id"]: r["c1"] for r in world.tables[TABLES[0]].rows.values()} == {
        0: "d3",
        1: "d3",
        2: "d3",
        5: "v5",
    }
    run_simulation(
        2, script, [("produce", 100), ("hints", 10), ("read", 1, 100), ("checkpoint",), ("read", 0, 100)]
    )
    run_simulation(2, script, [("produce", 3), ("read", 0, 100), ("read", 1, 100)], committing=True)


@pytest.mark.parametrize(
    "schedule",
    [
        [],  # the statements read before t's first row
        [("produce", 3), ("read", 0, 1)],  # t tracked before them
        [("produce", 100), ("read", 0, 100), ("checkpoint",), ("read", 1, 100)],  # partition 1 lags
    ],
)
def test_a_column_added_again_with_a_default_then_widened_keeps_the_default_for_the_older_rows(
    schedule: list[tuple[Any, ...]],
) -> None:
    # MODIFY COLUMN a BIGINT leaves a without a DEFAULT, but the rows MySQL held when a was added
    # again keep the one it had then: the rows older than the drop read it (a draw found it)
    script = [("upsert", 1), ("readd", 1), ("widen", 0), ("upsert", 2), ("upsert", 3)]
    run_simulation(2, script, schedule)
    run_simulation(1, [("readd", 1, "t"), ("widen", 0, "t")], [])
    # and renamed after: the column keeps that default under its new name
    run_simulation(1, [("readd", 1, "t"), ("widen", 0, "t"), ("rename", 0, "t")], [])
    run_simulation(2, [*script, ("rename", 0), ("upsert", 5)], schedule)


def test_a_row_written_before_a_column_was_first_added_reads_the_default_it_was_added_again_with() -> None:
    # row 0 is older than c2 itself; c2 is dropped and added again DEFAULT 'd1' before t's first row
    # is read (a draw found it): row 0 carries no c2 at all, and reads 'd1' as the source has it
    script = [("add", 0), ("upsert", 0), ("add", 0), ("drop", 0), ("drop", 0), ("readd", 1)]
    run_simulation(1, script, [], committing=True)
    run_simulation(1, script, [("produce", 3), ("read", 0, 1)])
