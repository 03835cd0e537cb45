"""Renames on PostgreSQL, whose Debezium connector sends no DDL: told from the column positions.

The records are shaped as Debezium's PostgreSQL connector (``plugin.name=pgoutput``, the JSON
converter with ``schemas.enable=true``) writes them: the envelope's ``before``/``after`` structs list
the table's live columns in ``attnum`` order (pgoutput's relation message), the ``source`` block is
``io.debezium.connector.postgresql.Source`` (``connector: postgresql``, ``schema``, ``table``,
``txId``, ``lsn``, ``xmin``), the key is the primary key's struct. ``ALTER TABLE ... RENAME COLUMN``
keeps a column's place; ``ADD COLUMN`` puts a column last, after any column dropped. The expected
tables come from a model of the source table (its columns and rows after each statement), read
back from the memory sink.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.kills import Killed, killed_at_rename
from tests.support.partition_log import PartitionLogSource, hand_over

from ferry.connectors.formats import decoder_for
from ferry.connectors.formats.source_order import record_columns, record_source_order
from ferry.connectors.memory import MemoryDeadLetter
from ferry.connectors.record import Record
from ferry.model.events import SCHEMA_CHANGE_TAGS, AddColumn, DropColumn, RenameColumn
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, INT, STRING
from ferry.pipeline.positions import position_note, readded_by_position, renames_by_position
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

PREFIX = "pg"
TOPIC = f"{PREFIX}.public.customers"
TABLE = TableId(None, "public", "customers")

#: PostgreSQL types as the connector's envelope has them (Kafka Connect schema, default modes).
INTEGER: dict[str, Any] = {"type": "int32"}
TEXT: dict[str, Any] = {"type": "string"}

SOURCE_FIELDS: list[dict[str, Any]] = [
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


@dataclass
class PostgresTable:
    """``public.customers`` of a PostgreSQL database and what the connector writes of its changes:
    columns in ``attnum`` order (a rename keeps the place, an add goes last), rows by ``id``."""

    connector: str = "postgresql"
    columns: list[tuple[str, dict[str, Any]]] = field(
        default_factory=lambda: [("id", INTEGER), ("email", TEXT), ("name", TEXT), ("visits", INTEGER)]
    )
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    lsn: int = 24_000_000

    # the statements ------------------------------------------------------------------------

    def rename(self, old: str, new: str) -> None:
        self.columns = [(new if n == old else n, t) for n, t in self.columns]
        for row in self.rows.values():
            row[new] = row.pop(old)

    def drop(self, name: str) -> None:
        self.columns = [(n, t) for n, t in self.columns if n != name]
        for row in self.rows.values():
            del row[name]

    def add(self, name: str, spec: dict[str, Any]) -> None:
        self.columns.append((name, spec))
        for row in self.rows.values():
            row[name] = None

    def upsert(self, key: int, n: int) -> tuple[bytes, bytes]:
        """An INSERT, or an UPDATE of every column but the key: the change event (key, value)."""
        after = {
            name: key if name == "id" else (f"{name}-{n}" if spec is TEXT else n)
            for name, spec in self.columns
        }
        before = self.rows.get(key)
        self.rows[key] = after
        return self._event("u" if before is not None else "c", before, after)

    # the change event ----------------------------------------------------------------------

    def _event(self, op: str, before: dict[str, Any] | None, after: dict[str, Any]) -> tuple[bytes, bytes]:
        self.lsn += 120
        row_fields = [{**spec, "optional": name != "id", "field": name} for name, spec in self.columns]
        row_struct = {"type": "struct", "fields": row_fields, "optional": True, "name": f"{TOPIC}.Value"}
        value_schema = {
            "type": "struct",
            "fields": [
                {**row_struct, "field": "before"},
                {**row_struct, "field": "after"},
                {
                    "type": "struct",
                    "fields": SOURCE_FIELDS,
                    "optional": False,
                    "name": "io.debezium.connector.postgresql.Source",
                    "version": 1,
                    "field": "source",
                },
                {
                    "type": "struct",
                    "fields": [
                        {"type": "string", "optional": False, "field": "id"},
                        {"type": "int64", "optional": False, "field": "total_order"},
                        {"type": "int64", "optional": False, "field": "data_collection_order"},
                    ],
                    "optional": True,
                    "name": "event.block",
                    "version": 1,
                    "field": "transaction",
                },
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
                {"type": "int64", "optional": True, "field": "ts_us"},
                {"type": "int64", "optional": True, "field": "ts_ns"},
            ],
            "optional": False,
            "name": f"{TOPIC}.Envelope",
            "version": 2,
        }
        ts_ms = 1_765_000_000_000 + self.lsn // 1000
        source = {
            "version": "3.1.3.Final",
            "connector": self.connector,
            "name": PREFIX,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": "shop",
            "sequence": orjson.dumps([str(self.lsn - 120), str(self.lsn)]).decode(),
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "schema": "public",
            "table": "customers",
            "txId": 700 + self.lsn // 120,
            "lsn": self.lsn,
            "xmin": None,
        }
        payload = {
            "before": before,
            "after": after,
            "source": source,
            "transaction": None,
            "op": op,
            "ts_ms": ts_ms + 3,
            "ts_us": (ts_ms + 3) * 1000,
            "ts_ns": (ts_ms + 3) * 1_000_000,
        }
        key = {
            "schema": {
                "type": "struct",
                "fields": [{"type": "int32", "optional": False, "field": "id"}],
                "optional": False,
                "name": f"{TOPIC}.Key",
            },
            "payload": {"id": after["id"]},
        }
        return orjson.dumps(key), orjson.dumps({"schema": value_schema, "payload": payload})


# ---------------------------------------------------------------------------------- the run


@pytest.fixture
def state() -> Iterator[StateStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = StateStore(f"sqlite:///{folder}/state.db")
        yield store
        store.close()


def replicate(
    table: PostgresTable, script: Sequence[tuple[Any, ...]], state: StateStore, partitions: int = 1
) -> MemorySink:
    """Run ``script`` (``("upsert", key, n)``, ``("rename", old, new)``, ``("drop", name)``,
    ``("add", name, spec)``) on ``table``, its change events into ``partitions`` partitions (by
    key, as the connector's producer does), then read them partition after partition, one record
    at a time, into the memory sink."""
    topics: dict[tuple[str, int], list[Record]] = {(TOPIC, p): [] for p in range(partitions)}
    for statement in script:
        match statement:
            case ("upsert", key, n):
                records = topics[(TOPIC, key % partitions)]
                k, v = table.upsert(key, n)
                records.append(Record(TOPIC, key % partitions, len(records), key=k, value=v))
            case ("rename", old, new):
                table.rename(old, new)
            case ("drop", name):
                table.drop(name)
            case ("add", name, spec):
                table.add(name, spec)
    sink = MemorySink()
    source = PartitionLogSource(topics, list(topics))
    runner = PipelineRunner(
        settings=RunnerSettings(name="pg", tune_gc=False),
        source=source,
        decode=decoder_for("debezium-json").decode,
        sink=sink,
        state=state,
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
        source_order=record_source_order,  # as the worker gives it for debezium-json
    )
    runner.open()
    try:
        for tp in topics:
            while source.left(tp):
                hand_over(runner, source.take(tp, 1))
        runner.checkpoint()
    finally:
        runner.close()
    return sink


def check(sink: MemorySink, table: PostgresTable) -> None:
    """The sink table has the source table's columns and rows, value for value."""
    stored = sink.tables[TABLE]
    applied = [str(c) for c in sink.applied]
    assert list(stored.schema.names) == [n for n, _ in table.columns], applied
    assert {row["id"]: row for row in stored.all_rows()} == table.rows, applied


def history(state: StateStore) -> list[tuple[str, str]]:
    return [
        (e.change, e.reason)
        for e in state.schema_history("pg")
        if e.change.startswith(("rename", "drop", "add"))
    ]


# ---------------------------------------------------------------------------------- the rule


def schema(*columns: tuple[str, Any]) -> Schema:
    return Schema(tuple(Column(n, t) for n, t in columns), ("id",))


def test_a_column_new_where_one_went_before_a_kept_column_is_a_rename() -> None:
    old = schema(("id", INT()), ("email", STRING()), ("name", STRING()))
    assert renames_by_position(old, schema(("id", INT()), ("mail", STRING()), ("name", STRING()))) == [
        ("email", "mail")
    ]


def test_a_column_added_last_where_one_was_dropped_is_a_drop_and_an_add() -> None:
    old = schema(("id", INT()), ("email", STRING()), ("name", STRING()))
    assert renames_by_position(old, schema(("id", INT()), ("name", STRING()), ("mail", STRING()))) == []


def test_the_last_column_renamed_is_not_told_from_a_drop_and_an_add() -> None:
    # RENAME COLUMN name TO label and DROP COLUMN name; ADD COLUMN label TEXT write the same envelope
    old = schema(("id", INT()), ("email", STRING()), ("name", STRING()))
    assert renames_by_position(old, schema(("id", INT()), ("email", STRING()), ("label", STRING()))) == []


def test_a_column_of_another_type_at_a_dropped_columns_place_is_no_rename() -> None:
    # a rename keeps the type: between the same kept columns, another type means another column
    old = schema(("id", INT()), ("email", STRING()), ("name", STRING()))
    assert renames_by_position(old, schema(("id", INT()), ("score", BIGINT()), ("name", STRING()))) == []


def test_renames_in_several_places_and_an_add_in_one_step_pair_in_order() -> None:
    old = schema(("id", INT()), ("a", STRING()), ("b", INT()), ("c", STRING()), ("d", STRING()))
    new = schema(
        ("id", INT()), ("a2", STRING()), ("b2", INT()), ("c", STRING()), ("d", STRING()), ("e", INT())
    )
    assert renames_by_position(old, new) == [("a", "a2"), ("b", "b2")]


def test_as_many_columns_gone_as_new_between_the_same_kept_columns_only() -> None:
    # two columns gone, one new before ``name``: one was dropped, which one is not told
    old = schema(("id", INT()), ("a", STRING()), ("b", STRING()), ("name", STRING()))
    assert renames_by_position(old, schema(("id", INT()), ("x", STRING()), ("name", STRING()))) == []


def test_a_column_moved_after_one_it_stood_before_was_dropped_and_added_again() -> None:
    # DROP COLUMN email; ADD COLUMN email: PostgreSQL never reorders columns, email moved last
    old = schema(("id", INT()), ("email", STRING()), ("name", STRING()), ("visits", INT()))
    new = schema(("id", INT()), ("name", STRING()), ("visits", INT()), ("email", STRING()))
    assert readded_by_position(old, new) == (["email"], ("email", "name"))
    # of another type too; and a column after it in the new schema was added again after it
    new = schema(("id", INT()), ("name", STRING()), ("email", BIGINT()), ("visits", INT()))
    assert readded_by_position(old, new) == (["email", "visits"], ("email", "name"))
    # the last column dropped and added again keeps its place: nothing tells it
    assert readded_by_position(old, old) == ([], None)
    # a drop, an add and a rename move no kept column
    renamed = schema(("id", INT()), ("mail", STRING()), ("visits", INT()), ("tier", STRING()))
    assert readded_by_position(old, renamed) == ([], None)


def test_the_history_note_follows_a_rename_through_several_steps() -> None:
    by_position = {"email": "mail", "mail": "e_mail"}
    assert position_note(by_position, set(), RenameColumn(TABLE, "email", "e_mail")) is not None
    assert position_note(by_position, set(), RenameColumn(TABLE, "name", "label")) is None
    assert position_note({}, {"x"}, DropColumn(TABLE, "x")) is not None
    assert position_note({}, {"x"}, AddColumn(TABLE, Column("y", INT()))) is None


# ---------------------------------------------------------------------------------- end to end


def test_a_rename_on_postgresql_keeps_the_values_of_rows_not_updated_since(state: StateStore) -> None:
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(4)),
        ("rename", "email", "email_address"),
        ("upsert", 0, 10),
        ("upsert", 5, 11),
    ]
    sink = replicate(table, script, state)
    check(sink, table)  # rows 1, 2, 3 keep the e-mail they had under the old name
    assert [str(c) for c in sink.applied if isinstance(c, RenameColumn)] == [
        "rename.column public.customers email -> email_address"
    ]
    assert any(
        change.startswith("rename.column") and "proved by the column positions" in reason
        for change, reason in history(state)
    )


def test_a_drop_and_an_add_on_postgresql_stay_a_drop_and_an_add(state: StateStore) -> None:
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(4)),
        ("drop", "email"),
        ("add", "email_address", TEXT),
        ("upsert", 0, 10),
    ]
    sink = replicate(table, script, state)
    check(sink, table)  # rows 1, 2, 3: NULL in the new column
    assert not any(isinstance(c, RenameColumn) for c in sink.applied)
    notes = {change.split(" ")[0]: reason for change, reason in history(state)}
    assert "no column position proves a rename" in notes["drop.column"]
    assert "no column position proves a rename" in notes["add.column"]


def test_a_rename_and_an_add_in_one_step_on_postgresql(state: StateStore) -> None:
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(4)),
        ("rename", "name", "full_name"),
        ("add", "tier", TEXT),
        ("upsert", 0, 10),
    ]
    sink = replicate(table, script, state)
    check(sink, table)
    assert [type(c).__name__ for c in sink.applied if not c.tag.startswith("create")] == [
        "AddColumn",
        "RenameColumn",
    ]


def test_the_last_column_renamed_on_postgresql_is_a_drop_and_an_add(state: StateStore) -> None:
    # nothing tells it from DROP COLUMN + ADD COLUMN: the rows not updated since have NULL there
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(3)),
        ("rename", "visits", "visit_count"),
        ("upsert", 0, 10),
    ]
    sink = replicate(table, script, state)
    stored = sink.tables[TABLE]
    assert list(stored.schema.names) == ["id", "email", "name", "visit_count"]
    rows = {row["id"]: row for row in stored.all_rows()}
    assert rows[0] == table.rows[0]
    assert [rows[key]["visit_count"] for key in (1, 2)] == [None, None]


def test_a_column_renamed_twice_on_postgresql_over_two_partitions(state: StateStore) -> None:
    # partition 0 (even keys) shows both renames before partition 1 (odd keys) shows any
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(6)),
        ("rename", "email", "mail"),
        ("upsert", 0, 10),
        ("rename", "mail", "e_mail"),
        ("upsert", 2, 11),
        ("upsert", 3, 12),
    ]
    sink = replicate(table, script, state, partitions=2)
    check(sink, table)


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("spec", [TEXT, INTEGER], ids=["same-type", "other-type"])
def test_a_column_dropped_and_added_again_on_postgresql_loses_its_values(
    state: StateStore, partitions: int, spec: dict[str, Any]
) -> None:
    # DROP COLUMN email; ADD COLUMN email in one transaction: the records before and after differ
    # only in email's place (last now); the rows not written since have NULL in it at the source.
    # Read partition after partition: partitions 1 and 2 hold rows older than the drop (email
    # cleared) and rows newer (email kept) when partition 0 shows the move
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(6)),
        ("drop", "email"),
        ("add", "email", spec),
        *(("upsert", key, 10 + key) for key in range(3)),
    ]
    sink = replicate(table, script, state, partitions)
    check(sink, table)
    assert [row["email"] for _, row in sorted(table.rows.items())][3:] == [None, None, None]
    applied = [str(c) for c in sink.applied if not c.tag.startswith("create")]
    assert applied[:2] == [
        "drop.column public.customers email",
        f"add.column public.customers `email` {'STRING' if spec is TEXT else 'INT'} LAST",
    ], applied
    assert all("dropped and added again" in note for change, note in history(state) if "email" in change)


def test_rows_older_than_the_column_a_re_added_column_passed_lose_its_values(state: StateStore) -> None:
    # visits moves after tier, added shortly before: partitions 1 and 2 hold rows older than tier
    # (they lack it, so their columns cannot tell the move; their place in the log does)
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(6)),
        ("add", "tier", TEXT),
        ("upsert", 0, 10),
        ("drop", "visits"),
        ("add", "visits", INTEGER),
        ("upsert", 0, 20),
        ("upsert", 1, 21),
    ]
    sink = replicate(table, script, state, partitions=3)
    check(sink, table)
    assert [table.rows[key]["visits"] for key in (2, 3, 4, 5)] == [None] * 4


@pytest.mark.parametrize("per_table", [False, True], ids=["checkpoint", "table-barrier"])
def test_a_kill_right_after_a_column_added_again_reached_the_sink(state: StateStore, per_table: bool) -> None:
    # partition 0 shows email moved last and the sink takes the drop and the add, then the process
    # dies: started again from the checkpoint before, the move shows again and is the same change
    script = [
        *(("upsert", key, key) for key in range(6)),
        ("drop", "email"),
        ("add", "email", TEXT),
        *(("upsert", key, 10 + key) for key in range(3)),
        ("upsert", 4, 20),
    ]
    schedule = [("read", 1, 1), ("checkpoint",), ("read", 0, 3), ("read", 1, 5), ("read", 2, 5)]
    sink = killed_at_rename({1}, before=False, per_table=per_table, kind=AddColumn)
    table = play_kills(3, script, schedule, sink, state)
    check(sink, table)
    assert [table.rows[key]["email"] for key in (3, 5)] == [None, None]
    # (the changes on their way when the process died go to the sink again first)
    assert {str(c) for c in sink.applied if not c.tag.startswith("create")} == {
        "drop.column public.customers email",
        "add.column public.customers `email` STRING LAST",
    }


def test_the_columns_of_a_debezium_json_record() -> None:
    _, value = PostgresTable().upsert(1, 1)
    assert record_columns(value) == ["id", "email", "name", "visits"]
    assert record_columns(b'{"id": 1}') is None


def test_renames_are_told_by_position_for_postgresql_only(state: StateStore) -> None:
    # the same envelopes from a connector whose columns follow no attnum: a drop and an add
    table = PostgresTable(connector="mysql")
    script = [
        *(("upsert", key, key) for key in range(3)),
        ("rename", "email", "email_address"),
        ("upsert", 0, 10),
    ]
    sink = replicate(table, script, state)
    assert not any(isinstance(c, RenameColumn) for c in sink.applied)
    rows = {row["id"]: row for row in sink.tables[TABLE].all_rows()}
    assert [rows[key]["email_address"] for key in (1, 2)] == [None, None]


def test_a_column_dropped_alone_later_is_not_noted_as_a_drop_and_an_add(state: StateStore) -> None:
    # nickname came in a step with a drop (noted); dropped alone later, its drop is a plain drop
    table = PostgresTable()
    script = [
        *(("upsert", key, key) for key in range(3)),
        ("drop", "name"),
        ("add", "nickname", TEXT),
        ("upsert", 0, 10),
        ("rename", "email", "mail"),
        ("upsert", 0, 11),
        ("drop", "nickname"),
        ("upsert", 0, 12),
    ]
    sink = replicate(table, script, state)
    check(sink, table)
    notes = dict(history(state))
    assert "no column position proves" in notes["drop.column public.customers name"]
    assert "proved by the column positions" in notes["rename.column public.customers email -> mail"]
    assert "; " not in notes["drop.column public.customers nickname"]


# ---------------------------------------------------------------------------------- any interleaving


@dataclass
class PostgresModel:
    """Draws statements that fit the table as the earlier ones left it (``table``: its columns).
    A name is never given twice (a column dropped or renamed away is not added again under its
    old name: records alone cannot tell its rows from the new column's while the drop waits)."""

    table: PostgresTable
    used: set[str] = field(default_factory=lambda: {"id", "email", "name", "visits"})

    #: After a DDL, an upsert on every partition (each partition shows the step), or none (a
    #: partition may show several steps at once, or none).
    touch: bool = True

    def statement(self, kind: str, n: int, partitions: int) -> list[tuple[Any, ...]]:
        """One statement (``n`` picks its column) and, after a DDL, the upserts of :attr:`touch`:
        the script's lines."""
        names = [name for name, _ in self.table.columns if name != "id"]
        if kind == "upsert":
            return [("upsert", n % 12, n)]
        if kind == "add" and f"c{n}" not in self.used:
            self.used.add(f"c{n}")
            spec = TEXT if n % 2 else INTEGER
            self.table.add(f"c{n}", spec)
            return [("add", f"c{n}", spec), *self.touched(n, partitions)]
        if kind == "drop" and len(names) > 1:
            self.table.drop(names[n % len(names)])
            return [("drop", names[n % len(names)]), *self.touched(n, partitions)]
        if kind == "rename" and names and f"{names[n % len(names)]}_r{n}" not in self.used:
            old = names[n % len(names)]
            self.used.add(f"{old}_r{n}")
            self.table.rename(old, f"{old}_r{n}")
            return [("rename", old, f"{old}_r{n}"), *self.touched(n, partitions)]
        return []

    def touched(self, n: int, partitions: int) -> list[tuple[Any, ...]]:
        return self._touch(n, partitions) if self.touch else []

    @staticmethod
    def _touch(n: int, partitions: int) -> list[tuple[Any, ...]]:
        return [("upsert", key, n * 100 + key) for key in range(partitions)]


def play_postgres(
    partitions: int,
    kinds: Sequence[tuple[str, int]],
    schedule: Sequence[tuple[Any, ...]],
    state: StateStore,
    touch: bool = True,
) -> None:
    """``kinds`` drawn into statements (``touch``: a row on every partition after each DDL, else
    only at the end), read as ``schedule`` says, then to the end, against the model."""
    model = PostgresModel(PostgresTable(), touch=touch)  # the table's columns as the statements are drawn
    script: list[tuple[Any, ...]] = [("upsert", key, key) for key in range(partitions)]
    for kind, n in kinds:
        script += model.statement(kind, n, partitions)
    if not touch:  # each partition shows the last schema, whatever steps it skipped
        script += PostgresModel._touch(10_000, partitions)
    table = PostgresTable()
    # the model: PostgreSQL's table, with a rename of the last column taken as a drop and an add
    lost: set[tuple[int, str]] = set()
    topics: dict[tuple[str, int], list[Record]] = {(TOPIC, p): [] for p in range(partitions)}
    for statement in script:
        match statement:
            case ("upsert", key, n):
                records = topics[(TOPIC, key % partitions)]
                k, v = table.upsert(key, n)
                records.append(Record(TOPIC, key % partitions, len(records), key=k, value=v))
                lost = {(row, c) for row, c in lost if row != key}
            case ("rename", old, new):
                last = table.columns[-1][0] == old
                table.rename(old, new)
                lost = {(row, new if c == old else c) for row, c in lost}
                if last:
                    lost |= {(row, new) for row in table.rows}
            case ("drop", name):
                table.drop(name)
                lost = {(row, c) for row, c in lost if c != name}
            case ("add", name, spec):
                table.add(name, spec)
    expected = {
        key: {c: (None if (key, c) in lost else v) for c, v in row.items()} for key, row in table.rows.items()
    }
    sink = MemorySink()
    data = list(topics)

    def start() -> tuple[PipelineRunner, PartitionLogSource]:
        source = PartitionLogSource(topics, data)
        runner = PipelineRunner(
            settings=RunnerSettings(name="pg", tune_gc=False),
            source=source,
            decode=decoder_for("debezium-json").decode,
            sink=sink,
            state=state,
            router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
            tables=TableRouter(),
            dead_letter=MemoryDeadLetter(),
        )
        runner.open()
        return runner, source

    runner, source = start()
    for action in schedule:
        match action:
            case ("read", index, count):
                hand_over(runner, source.take(data[index % len(data)], count))
            case ("checkpoint",):
                runner.checkpoint()
            case ("kill",):
                sink.pending.clear()  # written, never committed
                runner, source = start()
    for tp in data:
        hand_over(runner, source.take(tp, source.left(tp)))
    runner.checkpoint()
    stored = sink.tables[TABLE]
    applied = [str(c) for c in sink.applied]
    assert list(stored.schema.names) == [n for n, _ in table.columns], applied
    assert {row["id"]: row for row in stored.all_rows()} == expected, applied


@pytest.mark.timeout(1800)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    partitions=st.integers(1, 3),
    kinds=st.lists(
        st.tuples(st.sampled_from(["upsert"] * 4 + ["rename"] * 3 + ["add", "drop"]), st.integers(0, 1000)),
        max_size=30,
    ),
    schedule=st.lists(
        st.one_of(
            st.tuples(st.just("read"), st.integers(0, 2), st.integers(1, 5)),
            st.tuples(st.just("checkpoint")),
            st.tuples(st.just("kill")),
        ),
        max_size=40,
    ),
)
@example(  # a column renamed twice and one added between, partition 0 past both before a kill
    partitions=3,
    kinds=[("rename", 1), ("upsert", 5), ("rename", 2), ("add", 7), ("rename", 0)],
    schedule=[("read", 0, 3), ("checkpoint",), ("read", 1, 2), ("kill",), ("read", 2, 4)],
)
def test_every_interleaving_of_postgresql_steps_and_kills_ends_as_the_rule_says(
    partitions: int, kinds: list[tuple[str, int]], schedule: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        state = StateStore(f"sqlite:///{folder}/state.db")
        try:
            play_postgres(partitions, kinds, schedule, state)
        finally:
            state.close()


# ---------------------------------------------------------------------------------- kills at the sink


def play_kills(
    partitions: int,
    script: Sequence[tuple[Any, ...]],
    schedule: Sequence[tuple[Any, ...]],
    sink: MemorySink,
    state: StateStore,
) -> PostgresTable:
    """``script`` on the table into ``partitions`` partitions, read as ``schedule`` says (then to
    the end), with the process killed where ``sink`` dies and started again from the last
    checkpoint: the table as the source has it."""
    table = PostgresTable()
    topics: dict[tuple[str, int], list[Record]] = {(TOPIC, p): [] for p in range(partitions)}
    for statement in script:
        match statement:
            case ("upsert", key, n):
                records = topics[(TOPIC, key % partitions)]
                k, v = table.upsert(key, n)
                records.append(Record(TOPIC, key % partitions, len(records), key=k, value=v))
            case ("rename", old, new):
                table.rename(old, new)
            case ("drop", name):
                table.drop(name)
            case ("add", name, spec):
                table.add(name, spec)
    data = list(topics)

    def start() -> tuple[PipelineRunner, PartitionLogSource]:
        while True:
            sink.pending.clear()  # written, never committed
            source = PartitionLogSource(topics, data)
            runner = PipelineRunner(
                settings=RunnerSettings(name="pg", tune_gc=False),
                source=source,
                decode=decoder_for("debezium-json").decode,
                sink=sink,
                state=state,
                router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
                tables=TableRouter(),
                dead_letter=MemoryDeadLetter(),
                source_order=record_source_order,
            )
            try:
                runner.open()
            except Killed:
                continue  # killed again while it started
            return runner, source

    runner, source = start()

    def attempt(work: Callable[[PipelineRunner, PartitionLogSource], None]) -> None:
        """``work``, with the process started again as often as it dies meanwhile."""
        nonlocal runner, source
        while True:
            try:
                return work(runner, source)
            except Killed:
                runner, source = start()

    def to_the_end(runner: PipelineRunner, source: PartitionLogSource) -> None:
        for tp in data:
            hand_over(runner, source.take(tp, source.left(tp)))
        runner.checkpoint()

    for action in schedule:
        match action:
            case ("read", index, count):
                tp = data[index % len(data)]
                attempt(lambda runner, source, tp=tp, count=count: hand_over(runner, source.take(tp, count)))
            case ("checkpoint",):
                attempt(lambda runner, source: runner.checkpoint())
    attempt(to_the_end)
    return table


def test_a_kill_right_after_a_rename_reached_the_sink_with_a_partition_behind_it(state: StateStore) -> None:
    # partition 2 is behind both renames of name when the second, read in partitions 0 and 1
    # first, reaches the sink as one rename (name -> name_r2), and the process dies: restarted
    # from the checkpoint before it, partition 2 shows name_r1 first and name -> name_r1 settles
    # on its own, against a sink table that has name_r2
    script = [
        *(("upsert", key, key) for key in range(6)),
        ("rename", "name", "name_r1"),
        *(("upsert", key, 200 + key) for key in range(3)),
        ("rename", "name_r1", "name_r2"),
        *(("upsert", key, 300 + key) for key in range(3)),
        ("upsert", 5, 350),
        ("rename", "email", "email_r3"),
        *(("upsert", key, 400 + key) for key in range(3)),
        ("upsert", 0, 450),
    ]
    schedule = [
        ("read", 0, 2),
        ("read", 2, 1),
        ("checkpoint",),
        ("read", 1, 1),
        ("read", 1, 1),
        ("read", 0, 1),
        ("read", 1, 1),
        ("checkpoint",),
        ("read", 0, 10),
        ("read", 1, 10),
        ("read", 2, 10),  # killed here; started again, partition 2 is read first
    ]
    sink = killed_at_rename({1}, before=False, per_table=True)
    table = play_kills(3, script, schedule, sink, state)
    check(sink, table)


def test_a_kill_right_after_a_rename_reached_the_sink_before_the_first_checkpoint(
    state: StateStore,
) -> None:
    # the schemas saved after the first rename (email -> email_r1), before any checkpoint of the
    # run, must not take back the partitions' schemas of the checkpoint before it (name, not
    # name_r2): restarted after the second rename, the sink has name_r2 and nothing else
    script = [
        *(("upsert", key, key) for key in range(4)),
        ("rename", "email", "email_r1"),
        ("upsert", 0, 200),
        ("upsert", 1, 201),
        ("upsert", 3, 250),
        ("upsert", 1, 251),
        ("rename", "name", "name_r2"),
        ("upsert", 0, 300),
        ("upsert", 1, 301),
        ("upsert", 3, 350),
        ("upsert", 2, 351),
        ("upsert", 0, 352),
        ("rename", "name_r2", "name_r3"),
        ("upsert", 0, 400),
        ("upsert", 1, 401),
        ("upsert", 2, 450),
        ("upsert", 3, 451),
        ("upsert", 0, 452),
    ]
    schedule = [("read", 1, 2), ("read", 0, 1), ("read", 1, 2), ("read", 0, 3), ("read", 1, 5)]
    sink = killed_at_rename({2}, before=False, per_table=True)
    table = play_kills(2, script, schedule, sink, state)
    check(sink, table)


@pytest.mark.timeout(1800)
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    partitions=st.integers(2, 3),
    renames=st.lists(st.integers(0, 1), min_size=1, max_size=4),
    extra=st.lists(st.integers(0, 5), max_size=8),
    schedule=st.lists(
        st.one_of(
            st.tuples(st.just("read"), st.integers(0, 2), st.integers(1, 3)),
            st.tuples(st.just("checkpoint")),
        ),
        max_size=20,
    ),
    kills=st.sets(st.integers(1, 4), min_size=1, max_size=2),
    before=st.booleans(),
    per_table=st.booleans(),
    every_partition=st.booleans(),
)
@example(  # partition 0 goes from email to email_r3 at once, partition 1 shows email_r1 later
    partitions=3,
    renames=[0, 0, 0],
    extra=[1, 5, 0],
    schedule=[("read", 0, 9), ("checkpoint",), ("read", 1, 9)],
    kills={4},
    before=False,
    per_table=False,
    every_partition=False,
)
def test_a_kill_at_any_rename_of_a_chain_ends_with_the_source_table(
    partitions: int,
    renames: list[int],
    extra: list[int],
    schedule: list[tuple[Any, ...]],
    kills: set[int],
    before: bool,
    per_table: bool,
    every_partition: bool,
) -> None:
    # renames of email or name (never the last column: its rename is a drop and an add), each
    # followed by some rows, and with ``every_partition`` by a row in every partition too (else a
    # partition may show several renames in one step, or none, until a row in every partition at
    # the end); the process dies right before or right after the sink takes a rename, with a table
    # barrier (Iceberg, Paimon) or a whole checkpoint
    names = ["email", "name"]
    script: list[tuple[Any, ...]] = [("upsert", key, key) for key in range(2 * partitions)]
    for n, which in enumerate(renames, start=1):
        old = names[which]
        names[which] = f"{old.split('_')[0]}_r{n}"
        script.append(("rename", old, names[which]))
        if every_partition:
            script += [("upsert", key, 100 * n + key) for key in range(partitions)]
        script += [("upsert", key, 100 * n + 50 + i) for i, key in enumerate(extra[n - 1 :: len(renames)])]
    script += [("upsert", key, 1000 + key) for key in range(partitions)]
    with tempfile.TemporaryDirectory() as folder:
        store = StateStore(f"sqlite:///{folder}/state.db")
        try:
            sink = killed_at_rename(kills, before=before, per_table=per_table)
            table = play_kills(partitions, script, schedule, sink, store)
            check(sink, table)
        finally:
            store.close()
