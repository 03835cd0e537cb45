"""The schema-change matrix, row by row, under LENIENT and EVOLVE, for every sink.

The oracle is the project's matrix (``spec/schema-change-matrix.tsv``, its ``project_*`` columns),
read here and nowhere in ferry's code. Each case creates a table, writes rows, sends one schema
change through the router into the sink, writes rows in the new source schema, and checks the
sink's schema, the pipeline's state (running, or failed naming sink, table and change) and the
rows written before and after.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model import types as T
from ferry.model.apply import apply_schema_change
from ferry.model.events import SCHEMA_CHANGE_TAGS
from ferry.model.schema import Column, Schema, TableId
from ferry.pipeline.exceptions import SchemaChangeRefusedError
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base import ChangeKind as K
from ferry.state import StateStore
from tests.conformance.backends import BACKENDS, Backend, Context
from tests.shared import SHARED

#: The Fluss backend runs on the session's Fluss cluster (tests.support.fluss.shared_cluster).
pytestmark = pytest.mark.services("fluss_cluster")

MATRIX = SHARED / "spec" / "schema-change-matrix.tsv"
TID = TableId.parse("db.t")
OTHER = TableId.parse("db.t2")
BASE = Schema.of(
    [
        Column("id", T.INT().not_null()),
        Column("name", T.STRING()),
        Column("qty", T.INT()),
        Column("code", T.STRING().not_null()),
    ],
    ["id"],
)
BEFORE = [{"id": 1, "name": "a", "qty": 1, "code": "x"}, {"id": 2, "name": "b", "qty": 2, "code": "y"}]

#: matrix change name → the change ferry receives (as in-order DDL)
CHANGES: dict[K, E.SchemaChange] = {
    K.ADD_COLUMN_LAST: E.AddColumn(TID, Column("extra", T.INT())),
    K.ADD_COLUMN_POSITIONED: E.AddColumn(TID, Column("extra", T.INT()), E.after("id")),
    K.DROP_COLUMN: E.DropColumn(TID, "qty"),
    K.RENAME_COLUMN: E.RenameColumn(TID, "qty", "quantity"),
    K.ALTER_COLUMN_TYPE: E.AlterColumnType(TID, "qty", T.BIGINT(), T.INT()),
    K.RELAX_NULLABILITY: E.AlterColumnType(TID, "code", T.STRING(), T.STRING().not_null()),
    K.TIGHTEN_NULLABILITY: E.AlterColumnType(TID, "qty", T.INT().not_null(), T.INT()),
    K.CREATE_TABLE: E.CreateTable(OTHER, Schema.of([Column("k", T.BIGINT().not_null())], ["k"])),
    K.DROP_TABLE: E.DropTable(TID),
    K.TRUNCATE_TABLE: E.TruncateTable(TID),
    K.ALTER_COLUMN_COMMENT: E.AlterColumnComment(TID, "qty", "units ordered"),
    K.ALTER_TABLE_COMMENT: E.AlterTableComment(TID, "orders"),
}


@dataclass(frozen=True)
class Case:
    sink: str
    change: K
    behavior: SchemaChangeBehavior
    outcome: str
    note: str

    @property
    def id(self) -> str:
        return f"{self.sink}-{self.change}-{self.behavior.value}"


def load_cases() -> list[Case]:
    with MATRIX.open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    cases = []
    for row in rows:
        for behavior, column in (
            (SchemaChangeBehavior.LENIENT, "project_lenient"),
            (SchemaChangeBehavior.EVOLVE, "project_evolve"),
        ):
            # the matrix names each change by its kind's member name (``add_column_last``)
            kind = K[row["change"].upper()]
            cases.append(Case(row["sink"], kind, behavior, row[column], row.get("note") or ""))
    return cases


CASES = load_cases()


def test_the_matrix_covers_every_sink_and_change() -> None:
    assert {c.sink for c in CASES} == set(BACKENDS)
    assert {c.change for c in CASES} == set(CHANGES)
    assert len(CASES) == 2 * 8 * 12


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_declared_matrix_is_the_oracles(case: Case) -> None:
    # what ``ferry sinks`` and docs/schema-changes.md say of each sink, derived from its declaration and the
    # router, is what the matrix says (the rows below check what each sink then does)
    from ferry.sinks.base.matrix import outcome

    assert outcome(case.sink, case.change, case.behavior) == case.outcome


def at(offset: int) -> E.SourcePosition:
    return E.SourcePosition("db.t", 0, offset)


def row_events(
    schema: Schema, rows: list[tuple[E.Op, dict[str, Any] | None, dict[str, Any]]], first: int
) -> list[E.Event]:
    out: list[E.Event] = []
    for i, (op, before, after) in enumerate(rows):
        out.append(E.DataChange(TID, op, before, after, at(first + i)))
    return out


@dataclass
class Result:
    error: Exception | None
    runner: PipelineRunner


def run_case(
    backend: Backend,
    behavior: SchemaChangeBehavior,
    change: E.SchemaChange,
    tmp_path: Path,
    after_rows: list[dict[str, Any]],
) -> Result:
    sink = backend.sink
    runner = PipelineRunner(
        settings=RunnerSettings(name="conformance", tune_gc=False, retries=backend.retries),
        source=MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(sink, behavior, SCHEMA_CHANGE_TAGS),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
    )
    runner.open()
    runner.process([E.SchemaHint(TID, (E.CreateTable(TID, BASE),), "CREATE TABLE t", True, at(0))], [])
    runner.process(row_events(BASE, [(E.Op.INSERT, None, r) for r in BEFORE], 1), [])
    try:
        runner.process([E.SchemaHint(change.table_id, (change,), "DDL", True, at(10))], [])
        runner.process(
            [E.DataChange(TID, E.Op.INSERT, None, r, at(11 + i)) for i, r in enumerate(after_rows)], []
        )
        runner.checkpoint()
    except SchemaChangeRefusedError as e:
        return Result(e, runner)
    return Result(None, runner)


def source_after(change: E.SchemaChange) -> Schema | None:
    if isinstance(change, E.CreateTable):
        return BASE
    return apply_schema_change(BASE, change)


def expected_names(case: Case, change: E.SchemaChange) -> tuple[str, ...] | None:
    applied = apply_schema_change(BASE, change) if not isinstance(change, E.CreateTable) else BASE
    match case.outcome:
        case "apply":
            return None if applied is None else applied.names
        case "ignored":
            # nothing changes at the sink (a topic and its records stay); later rows carry the new schema
            return None if applied is None else applied.names
        case "apply-at-end":
            assert isinstance(change, E.AddColumn)
            return (*BASE.names, change.column.name)
        case "add-new-column":
            assert isinstance(change, E.RenameColumn)
            return (*BASE.names, change.new_name)
        case "skip" | "no-event" | "fail":
            return BASE.names
    raise AssertionError(f"unknown outcome {case.outcome!r} in the matrix")


def context(tmp_path: Path, request: pytest.FixtureRequest) -> Context:
    return Context(
        tmp_path,
        "conformance",
        lambda: str(request.getfixturevalue("kafka_bootstrap")),
        lambda: request.getfixturevalue("postgres_server"),
        lambda: request.getfixturevalue("mariadb_server"),
        request.addfinalizer,
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_schema_change(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = BACKENDS[case.sink](context(tmp_path, request))
    change = CHANGES[case.change]
    new_source = source_after(change)
    after_rows = (
        []
        if new_source is None
        else [
            {
                name: value
                for name, value in {
                    "id": 3,
                    "name": "c",
                    "qty": 3,
                    "quantity": 3,
                    "code": "z",
                    "extra": 30,
                }.items()
                if name in new_source
            }
        ]
    )
    result = run_case(backend, case.behavior, change, tmp_path, after_rows)
    sink_schema = backend.sink.table_schema(TID)
    history = [
        h
        for h in result.runner.state.schema_history("conformance")
        if "CREATE TABLE" not in h.change and not h.change.startswith("create.table db.t ")
    ]

    if case.outcome == "fail":
        assert result.error is not None, f"{case.id}: expected the pipeline to fail"
        message = str(result.error)
        assert case.sink in message and "db.t" in message and change.tag.split(".")[0] in message
        # the rows read before the change were flushed by the barrier
        assert sorted(r["id"] for r in backend.read_rows(TID)) == [1, 2]
        assert sink_schema is not None and sink_schema.names == BASE.names
        return
    assert result.error is None, f"{case.id}: {result.error}"

    names = expected_names(case, change)
    if names is None:
        assert sink_schema is None, f"{case.id}: the table should be gone"
        return
    assert sink_schema is not None
    assert sink_schema.names == names, f"{case.id}: sink columns {sink_schema.names}"
    if case.outcome == "no-event":
        assert history == [], f"{case.id}: a change was recorded: {history}"
    if (
        isinstance(change, E.AlterColumnType)
        and case.outcome == "apply"
        and change.new_type.nullable == (change.old_type or change.new_type).nullable
    ):
        assert sink_schema.column("qty").type == backend.sink.sink_type(T.BIGINT())
    if change.tag == "rename.column" and case.outcome == "apply":
        assert "qty" not in sink_schema
    if isinstance(change, E.CreateTable):
        assert backend.sink.table_schema(OTHER) is not None
    if case.outcome == "apply" and isinstance(change, E.AlterColumnType) and change.new_type.nullable:
        assert sink_schema.column(change.column_name).type.nullable

    rows = {r["id"]: r for r in backend.read_rows(TID)}
    truncated = (
        case.outcome in ("apply", "ignored") and isinstance(change, E.TruncateTable) and case.sink != "kafka"
    )
    expected_ids = ([] if truncated else [1, 2]) + [r["id"] for r in after_rows]
    assert sorted(rows) == expected_ids, f"{case.id}: rows {sorted(rows)}"
    renamed = change.tag == "rename.column" and case.outcome == "apply"
    # a sink that keeps no schema (Kafka) keeps records as they were written: compare what no change touched
    compared = ("id", "name") if case.outcome == "ignored" else names
    for before in [] if truncated else BEFORE:
        shaped = {("quantity" if renamed and k == "qty" else k): v for k, v in before.items()}
        assert {k: rows[before["id"]].get(k) for k in compared} == {k: shaped.get(k) for k in compared}
    for after in after_rows:
        assert {k: rows[after["id"]].get(k) for k in names} == {k: after.get(k) for k in names}


def test_a_repeated_change_is_applied_once(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = BACKENDS["iceberg"](context(tmp_path, request))
    change = CHANGES[K.ADD_COLUMN_POSITIONED]
    run_case(backend, SchemaChangeBehavior.EVOLVE, change, tmp_path, [])
    # a replay of the same DDL (a restart from an earlier checkpoint) finds it applied
    replay = run_case(backend, SchemaChangeBehavior.EVOLVE, change, tmp_path / "again", [])
    assert replay.error is None
    history = replay.runner.state.schema_history("conformance")
    assert any("already applied" in h.reason for h in history)
    schema = backend.sink.table_schema(TID)
    assert schema is not None and schema.names == ("id", "extra", "name", "qty", "code")
