"""No record stops a pipeline: the runner with every JSON decoder, the memory source and sink.

A record that cannot be written (a row without a value for its key, a null key, a key of another
type than its row's, a table the job does not route, any shape the decoder does not read) goes to
the dead-letter destination once, with its topic, partition, offset and reason, and the pipeline
goes on; a run that fails after it stored dead letters sends none of them again when it restarts.

The property test draws a stream of change events of one table in each producer's shape (Debezium
JSON with and without the envelope and flattened by ``ExtractNewRecordState``, Canal, Maxwell),
with records mutated into bad ones among them (objects missing any field, fields and keys of any
type, other tables, unknown ops), runs it (once straight through, once failing at the first
checkpoint and restarted) and compares the sink's rows with a model of the good events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.pipeline.route import Route, TableRouter, TableSelection, UnroutedTables
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base.exceptions import SinkTerminalError
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore

TOPIC = "srv.inv.items"
TABLE = "inv.items"
Pair = tuple[bytes | None, bytes | None]


# ---------------------------------------------------------------------------- the producers


def _dbz_table(with_schema: bool) -> dbz.DebeziumTable:
    return dbz.DebeziumTable(
        "srv",
        "inv",
        "items",
        [dbz.ConnectColumn("id", dbz.INT32, optional=False), dbz.ConnectColumn("n", dbz.INT64)],
        with_schema=with_schema,
    )


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()  # integers of any size


@dataclass
class Producer:
    """One producer's records of table ``inv.items`` (``id`` its key, ``n`` a number), and how a
    record of it is made bad."""

    format: str
    #: (op, before, after) → (key, value); op is ``insert``, ``update`` or ``delete``
    encode: Callable[[str, dict[str, Any] | None, dict[str, Any] | None], Pair]
    #: Whether the rows' types come from the record's own schema (a value of another type is bad).
    typed: bool
    #: Whether the sink table has the key (Maxwell's default output names no key columns: appended).
    keyed: bool = True
    routes: tuple[Route, ...] = ()
    #: The value of a good record edited (JSON object in, JSON object out) into a bad one, by kind.
    edits: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = field(default_factory=dict)
    #: The key of a good record with its id replaced.
    key_with: Callable[[bytes | None, Any], bytes | None] = lambda key, _: key


def debezium_producer(with_schema: bool) -> Producer:
    table = _dbz_table(with_schema)

    def encode(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Pair:
        if op == "insert":
            return table.insert(after or {})
        if op == "update":
            return table.update(before or {}, after or {})
        return table.delete(before or {})

    def payload(value: dict[str, Any]) -> dict[str, Any]:
        return value["payload"] if with_schema else value

    def other_table(value: dict[str, Any], name: Any) -> dict[str, Any]:
        payload(value)["source"]["table"] = f"ghost_{name}"
        return value

    def bad_op(value: dict[str, Any], op: Any) -> dict[str, Any]:
        payload(value)["op"] = op
        return value

    def row_of_another_type(value: dict[str, Any], row: Any) -> dict[str, Any]:
        payload(value)["after"], payload(value)["op"] = row, "c"
        return value

    def null_key(value: dict[str, Any], _: Any) -> dict[str, Any]:
        for image in ("before", "after"):
            if payload(value)[image] is not None:
                payload(value)[image]["id"] = None
        return value

    def value_of_another_type(value: dict[str, Any], n: Any) -> dict[str, Any]:
        for image in ("before", "after"):
            if payload(value)[image] is not None:
                payload(value)[image]["n"] = n
        return value

    def key_with(key: bytes | None, new: Any) -> bytes | None:
        document = orjson.loads(key or b"{}")
        (document["payload"] if with_schema else document)["id"] = new
        return _json(document)

    edits = {
        "other table": other_table,
        "unknown op": bad_op,
        "row of another type": row_of_another_type,
        "null key": null_key,
    }
    if with_schema:
        edits["value of another type"] = value_of_another_type
    return Producer(
        "debezium-json" if with_schema else "debezium-json payload-only",
        encode,
        typed=with_schema,
        edits=edits,
        key_with=key_with,
    )


def flattened_producer() -> Producer:
    """``ExtractNewRecordState`` with ``delete.tombstone.handling.mode=rewrite``: every row with
    ``__deleted``, a delete's row its before-image; keys as Kafka Connect's JSON converter writes
    them without schemas."""

    def encode(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Pair:
        row = before if op == "delete" else after
        assert row is not None
        deleted = "true" if op == "delete" else "false"
        return _json({"id": row["id"]}), _json({**row, "__deleted": deleted})

    def other_table(value: dict[str, Any], name: Any) -> dict[str, Any]:
        return {**value, "__db": "inv", "__table": f"ghost_{name}"}

    def null_key(value: dict[str, Any], _: Any) -> dict[str, Any]:
        return {**value, "id": None}

    def bad_deleted(value: dict[str, Any], flag: Any) -> dict[str, Any]:
        return {**value, "__deleted": flag}

    def key_with(key: bytes | None, new: Any) -> bytes | None:
        return _json({"id": new})

    return Producer(
        "debezium-json flattened",
        encode,
        typed=False,
        edits={"other table": other_table, "null key": null_key, "unknown op": bad_deleted},
        key_with=key_with,
    )


def canal_producer() -> Producer:
    """A Canal server's flat messages (values as text, typed by ``mysqlType``), without a key."""

    def text(row: dict[str, Any]) -> dict[str, Any]:
        return {k: None if v is None else str(v) for k, v in row.items()}

    def encode(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Pair:
        message: dict[str, Any] = {
            "data": [text((before if op == "delete" else after) or {})],
            "database": "inv",
            "table": "items",
            "pkNames": ["id"],
            "isDdl": False,
            "type": op.upper(),
            "mysqlType": {"id": "int", "n": "bigint"},
            "sqlType": {"id": 4, "n": -5},
            "es": 1,
            "ts": 2,
            "old": [{"n": text(before or {}).get("n")}] if op == "update" else None,
        }
        return None, _json(message)

    def other_table(value: dict[str, Any], name: Any) -> dict[str, Any]:
        return {**value, "table": f"ghost_{name}"}

    def bad_op(value: dict[str, Any], op: Any) -> dict[str, Any]:
        return {**value, "type": op}

    def rows_of_another_type(value: dict[str, Any], rows: Any) -> dict[str, Any]:
        return {**value, "data": rows}

    def null_key(value: dict[str, Any], _: Any) -> dict[str, Any]:
        return {**value, "data": [{**value["data"][0], "id": None}]}

    def value_of_another_type(value: dict[str, Any], n: Any) -> dict[str, Any]:
        return {**value, "data": [{**value["data"][0], "n": n}]}

    return Producer(
        "canal-json",
        encode,
        typed=True,
        routes=(Route(r"inv\.items", "inv.items"),),
        edits={
            "other table": other_table,
            "unknown op": bad_op,
            "row of another type": rows_of_another_type,
            "null key": null_key,
            "value of another type": value_of_another_type,
        },
    )


def maxwell_producer() -> Producer:
    """Maxwell's defaults: no primary key columns in the message, keys in the ``hash`` format."""

    def encode(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Pair:
        row = (before if op == "delete" else after) or {}
        message = {"database": "inv", "table": "items", "type": op, "ts": 1, "xid": 7, "data": row}
        if op == "update":
            message["old"] = {"n": (before or {}).get("n")}
        return _json({"database": "inv", "table": "items", "pk.id": row.get("id")}), _json(message)

    def other_table(value: dict[str, Any], name: Any) -> dict[str, Any]:
        return {**value, "table": f"ghost_{name}"}

    def bad_op(value: dict[str, Any], op: Any) -> dict[str, Any]:
        return {**value, "type": op}

    def row_of_another_type(value: dict[str, Any], row: Any) -> dict[str, Any]:
        return {**value, "data": row}

    def key_with(key: bytes | None, new: Any) -> bytes | None:
        return _json({**orjson.loads(key or b"{}"), "pk.id": new})

    return Producer(
        "maxwell-json",
        encode,
        typed=False,
        keyed=False,
        routes=(Route(r"inv\.items", "inv.items"),),
        edits={"other table": other_table, "unknown op": bad_op, "row of another type": row_of_another_type},
        key_with=key_with,
    )


PRODUCERS = {
    p.format: p
    for p in (
        debezium_producer(with_schema=True),
        debezium_producer(with_schema=False),
        flattened_producer(),
        canal_producer(),
        maxwell_producer(),
    )
}


def decoder_format(producer: Producer) -> str:
    return producer.format.split(" ")[0]


# ------------------------------------------------------------------------------- the runner


def runner_for(
    producer: Producer,
    records: list[Record],
    sink: MemorySink,
    dead_letter: MemoryDeadLetter,
    state: Path,
    *,
    batch_size: int = 10_000,
    unrouted: UnroutedTables = UnroutedTables.DEAD_LETTER,
) -> PipelineRunner:
    format = decoder_format(producer)
    # payload-only rows typed by their values (the job's debezium-json.infer-types: true)
    options = {"raw_values": True, "infer_types": True} if format == "debezium-json" else {}
    routes = TableRouter(producer.routes)
    return PipelineRunner(
        settings=RunnerSettings(name="poison", tune_gc=False, batch_size=batch_size),
        source=MemorySource(records),
        decode=decoder_for(format, **options).decode,
        sink=sink,
        state=StateStore(f"sqlite:///{state}"),
        router=SchemaChangeRouter(sink, SchemaChangeBehavior.EVOLVE, SCHEMA_CHANGE_TAGS),
        tables=routes,
        dead_letter=dead_letter,
        selection=TableSelection(routes, topics_name_tables=format.startswith("debezium"), unrouted=unrouted),
    )


def as_records(pairs: list[Pair], topic: str = TOPIC) -> list[Record]:
    return [Record(topic, 0, offset, key=k, value=v) for offset, (k, v) in enumerate(pairs)]


def letters(dead_letter: MemoryDeadLetter) -> list[tuple[str, int, int]]:
    return [(r.topic, r.partition, r.offset) for r in dead_letter.records]


# ---------------------------------------------------------------------------- named records


def debezium_row(id: int, n: int) -> Pair:
    return _dbz_table(with_schema=True).insert({"id": id, "n": n})


@pytest.mark.parametrize(
    "bad",
    [
        (b'{"id": 2}', b'{"hello":"world","payload":5}'),
        (b'{"id": 2}', b'{"schema":{"type":"struct","fields":[]}}'),
        (b'{"id": 2}', b'{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}]}}'),
        (b'{"id": null}', b'{"id": null, "n": 5}'),
    ],
    ids=["payload-field", "schema-without-payload", "schema-with-id-without-payload", "null-key"],
)
def test_a_debezium_record_without_its_key_is_dead_lettered_and_the_pipeline_goes_on(
    tmp_path: Path, bad: Pair
) -> None:
    sink, dead = MemorySink(), MemoryDeadLetter()
    records = as_records([debezium_row(1, 10), bad, debezium_row(3, 30)])
    runner_for(PRODUCERS["debezium-json"], records, sink, dead, tmp_path / "s.db").run()
    assert letters(dead) == [(TOPIC, 0, 1)]
    assert dead.records[0].value == bad[1]
    assert sorted(r["id"] for r in sink.rows(TABLE)) == [1, 3]


def test_a_canal_or_maxwell_row_whose_key_is_null_is_dead_lettered(tmp_path: Path) -> None:
    for producer in (PRODUCERS["canal-json"], PRODUCERS["maxwell-json"]):
        sink, dead = MemorySink(), MemoryDeadLetter()
        good = producer.encode("insert", None, {"id": 1, "n": 1})
        key, value = producer.encode("insert", None, {"id": None, "n": 2})
        message = orjson.loads(value or b"")
        message["primary_key_columns"] = ["id"]  # Maxwell's output_primary_key_columns
        null_key = (key, _json(message) if producer.format == "maxwell-json" else value)
        records = as_records([good, null_key])
        runner_for(producer, records, sink, dead, tmp_path / f"{producer.format}.db").run()
        assert letters(dead) == [(TOPIC, 0, 1)], producer.format
        assert "primary key column 'id'" in dead.records[0].reason
        assert [r["id"] for r in sink.rows(TABLE)] == [1]


def test_a_maxwell_key_of_true_does_not_name_row_1(tmp_path: Path) -> None:
    producer = PRODUCERS["maxwell-json"]
    sink, dead = MemorySink(), MemoryDeadLetter()
    first = producer.encode("insert", None, {"id": 1, "n": 1})
    _, update = producer.encode("update", {"id": 1, "n": 1}, {"id": 1, "n": 2})
    records = as_records([first, (producer.key_with(first[0], True), update)])
    runner_for(producer, records, sink, dead, tmp_path / "s.db").run()
    assert letters(dead) == [(TOPIC, 0, 1)]
    assert dead.records[0].reason.endswith("id is True in the key and 1 in the row")
    assert sink.rows(TABLE) == [{"id": 1, "n": 1}]


def test_a_record_naming_another_table_than_its_topics_is_dead_lettered(tmp_path: Path) -> None:
    sink, dead = MemorySink(), MemoryDeadLetter()
    ghost = dbz.DebeziumTable(
        "srv", "inventory", "ghost_1200", [dbz.ConnectColumn("id", dbz.INT32, optional=False)]
    )
    payload_only = dbz.DebeziumTable(
        "srv", "inv", "elsewhere", [dbz.ConnectColumn("id", dbz.INT32, optional=False)], with_schema=False
    )
    unsourced = orjson.loads(payload_only.insert({"id": 7})[1])
    del unsourced["source"]
    records = [
        *as_records([debezium_row(1, 10), ghost.insert({"id": 1200})]),
        # a payload-only record without a source block is of its topic's table: inv.elsewhere
        Record("srv.inv.elsewhere", 0, 0, key=b'{"id": 7}', value=_json(unsourced)),
    ]
    runner = runner_for(PRODUCERS["debezium-json"], records, sink, dead, tmp_path / "s.db")
    runner.bad.selection = TableSelection(TableRouter(), topics_name_tables=True)
    runner.run()
    assert letters(dead) == [(TOPIC, 0, 1)]
    assert dead.records[0].reason.startswith(
        "unrouted table: the record names table inventory.ghost_1200, topic srv.inv.items carries inv.items"
    )
    assert "inventory.ghost_1200" not in {str(t) for t in sink.tables}
    assert sink.rows("inv.elsewhere") == [{"id": 7}]


def test_unrouted_tables_create_takes_a_table_the_topic_does_not_carry(tmp_path: Path) -> None:
    sink, dead = MemorySink(), MemoryDeadLetter()
    ghost = dbz.DebeziumTable(
        "srv", "inventory", "ghost_1200", [dbz.ConnectColumn("id", dbz.INT32, optional=False)]
    )
    records = as_records([debezium_row(1, 10), ghost.insert({"id": 1200})])
    producer = PRODUCERS["debezium-json"]
    runner_for(producer, records, sink, dead, tmp_path / "s.db", unrouted=UnroutedTables.CREATE).run()
    assert dead.records == []
    assert sink.rows("inventory.ghost_1200") == [{"id": 1200}]


def test_a_canal_table_no_route_matches_is_dead_lettered_rows_and_ddl(tmp_path: Path) -> None:
    producer = PRODUCERS["canal-json"]
    sink, dead = MemorySink(), MemoryDeadLetter()
    good = producer.encode("insert", None, {"id": 1, "n": 1})
    _, value = producer.encode("insert", None, {"id": 2, "n": 2})
    other = {**orjson.loads(value or b""), "table": "other"}
    two_rows = {**other, "data": [{"id": "3", "n": "3"}, {"id": "4", "n": "4"}]}
    ddl = {
        "isDdl": True,
        "type": "CREATE",
        "database": "inv",
        "table": "other",
        "sql": "CREATE TABLE other (id INT)",
    }
    records = as_records([good, (None, _json(other)), (None, _json(two_rows)), (None, _json(ddl))])
    runner_for(producer, records, sink, dead, tmp_path / "s.db").run()
    assert sorted(letters(dead)) == [(TOPIC, 0, 1), (TOPIC, 0, 2), (TOPIC, 0, 3)]  # two rows, one letter
    assert all(r.reason.startswith("unrouted table: no route matches table inv.other") for r in dead.records)
    assert {str(t) for t in sink.tables} == {TABLE}


def test_a_restart_after_a_failed_run_sends_no_dead_letter_twice(tmp_path: Path) -> None:
    sink, dead = MemorySink(), MemoryDeadLetter()
    pairs = [debezium_row(1, 10), (b'{"id": 2}', b"not json"), debezium_row(3, 30), (None, b"[]")]
    producer = PRODUCERS["debezium-json"]
    sink.fail_next_flush = SinkTerminalError("the sink is gone", sink="memory")
    with pytest.raises(SinkTerminalError):
        runner_for(producer, as_records(pairs), sink, dead, tmp_path / "s.db").run()
    assert letters(dead) == [(TOPIC, 0, 1), (TOPIC, 0, 3)]
    sink.pending.clear()  # what the failed run wrote and did not commit is gone with it
    runner_for(producer, as_records(pairs), sink, dead, tmp_path / "s.db").run()
    assert letters(dead) == [(TOPIC, 0, 1), (TOPIC, 0, 3)]
    assert sorted(r["id"] for r in sink.rows(TABLE)) == [1, 3]


# ------------------------------------------------------------------------ the property test

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
#: Values that are never a number or its text (a key of another type than the row's id).
not_a_number = (
    st.booleans()
    | st.text(alphabet="abcxyz", min_size=1, max_size=5)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
#: (JSON ``null`` is no such value: with a key, Debezium's JSON converter's form of a tombstone.)
non_objects = json_values.filter(lambda v: type(v) is not dict and v is not None)
#: Fields a Debezium event or a flattened row is read by.
_READ_BY = {"id", "op", "before", "after", "source", "tableChanges", "type", "data", "isDdl", "schema"}


@dataclass(frozen=True)
class Step:
    """One record: a good change, or a good change made bad (``kind`` says how, ``arg`` with what)."""

    op: str
    id: int
    n: int
    kind: str | None = None
    arg: Any = None


@st.composite
def steps(draw: st.DrawFn, producer: Producer) -> list[Step]:
    kinds = ["not json", "not an object", "object missing fields", "key of another type", *producer.edits]
    out = [Step("insert", draw(st.integers(1, 4)), draw(st.integers(-(2**40), 2**40)))]
    for _ in range(draw(st.integers(0, 14))):
        op = draw(st.sampled_from(["insert", "update", "delete"]))
        step = Step(op, draw(st.integers(1, 4)), draw(st.integers(-(2**40), 2**40)))
        if draw(st.booleans()):
            kind = draw(st.sampled_from(kinds))
            arg: Any = None
            if kind == "not an object":
                arg = draw(non_objects)
            elif kind == "object missing fields":
                arg = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
            elif kind == "key of another type":
                arg = draw(not_a_number)
            elif kind == "other table":
                arg = draw(st.integers(0, 10**6))
            elif kind == "unknown op":
                arg = draw(json_values.filter(lambda v: v not in _KNOWN_OPS))
            elif kind in ("row of another type",):
                arg = draw(non_objects)
            elif kind == "value of another type":
                arg = draw(not_a_number.filter(lambda v: type(v) is not bool) | st.floats(0.5, 0.75))
            step = Step(op, step.id, step.n, kind, arg)
        out.append(step)
    return out


#: Every op and type a decoder reads as something (a good record, a truncate, a bootstrap marker).
_KNOWN_OPS = (
    "c",
    "u",
    "d",
    "r",
    "t",
    "INSERT",
    "UPDATE",
    "DELETE",
    "INIT",
    "insert",
    "update",
    "delete",
    "bootstrap-insert",
    "bootstrap-start",
    "bootstrap-complete",
    "table-create",
    "table-alter",
    "table-drop",
    "database-create",
    "database-alter",
    "database-drop",
    "true",
    "false",
    True,
    False,
    None,
)


class Model:
    """The oracle: the rows of the good changes, applied in order (by key, or appended)."""

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.rows: dict[int, dict[str, Any]] = {}
        self.appended: list[dict[str, Any]] = []

    def before(self, id: int) -> dict[str, Any]:
        return self.rows.get(id, {"id": id, "n": 0})

    def apply(self, op: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        if not self.keyed:
            if op != "delete":
                self.appended.append(after)
            return
        if op == "delete":
            self.rows.pop(before["id"], None)
        else:
            self.rows[after["id"]] = after

    def expected(self) -> list[dict[str, Any]]:
        if self.keyed:
            return sorted(self.rows.values(), key=lambda r: r["id"])
        return self.appended


def encode_stream(producer: Producer, stream: list[Step]) -> tuple[list[Pair], set[int], Model]:
    """The records of ``stream``, the offsets of the bad ones, and the model of the good ones."""
    model, pairs, bad = Model(producer.keyed), [], set()
    for offset, step in enumerate(stream):
        before = model.before(step.id)
        after = {"id": step.id, "n": step.n}
        key, value = producer.encode(step.op, before, after)
        if step.kind is None:
            model.apply(step.op, before, after)
            pairs.append((key, value))
            continue
        bad.add(offset)
        if step.kind == "not json":
            value = b"{" + (value or b"")[: step.n % 7]
        elif step.kind == "not an object":
            value = _json(step.arg)
        elif step.kind == "object missing fields":
            fields = {k: v for k, v in step.arg.items() if k not in _READ_BY and not k.startswith("__")}
            value = _json(fields)
            key = key if key is not None else _json({"id": step.id})  # a key naming a column the row lacks
        elif step.kind == "key of another type":
            if producer.format == "canal-json":
                key = _json({"id": step.arg})
            else:
                key = producer.key_with(key, step.arg)
        else:
            value = _json(producer.edits[step.kind](orjson.loads(value or b""), step.arg))
        pairs.append((key, value))
    return pairs, bad, model


@pytest.mark.parametrize("format", sorted(PRODUCERS))
@pytest.mark.parametrize("restart", [False, True], ids=["straight", "failed-and-restarted"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_records_are_dead_lettered_once_and_good_rows_are_exact(
    tmp_path_factory: pytest.TempPathFactory, format: str, restart: bool, data: st.DataObject
) -> None:
    producer = PRODUCERS[format]
    stream = data.draw(steps(producer))
    batch_size = data.draw(st.integers(1, 6))
    pairs, bad, model = encode_stream(producer, stream)
    records = as_records(pairs)
    sink, dead = MemorySink(), MemoryDeadLetter()
    state = tmp_path_factory.mktemp("state") / "state.db"
    if restart:
        sink.fail_next_flush = SinkTerminalError("the sink is gone", sink="memory")
        with pytest.raises(SinkTerminalError):
            runner_for(producer, records, sink, dead, state, batch_size=batch_size).run()
        sink.pending.clear()  # what the failed run wrote and did not commit is gone with it
    runner_for(producer, records, sink, dead, state, batch_size=batch_size).run()
    # each bad record once (in the order they were found: a row refused at a checkpoint comes later)
    assert sorted(letters(dead)) == [(TOPIC, 0, offset) for offset in sorted(bad)], [
        (r.offset, r.reason) for r in dead.records
    ]
    assert all(r.reason for r in dead.records)
    assert all(r.value == pairs[r.offset][1] and r.key == pairs[r.offset][0] for r in dead.records)
    rows = sink.rows(TABLE) if TABLE in {str(t) for t in sink.tables} else []
    if producer.keyed:
        rows = sorted(rows, key=lambda r: r["id"])
    assert rows == model.expected()
