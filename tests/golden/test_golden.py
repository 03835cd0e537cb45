"""Golden specs that pin the router: DDL and rows in, the changes each sink received and its rows out.

Each ``cases/*.yaml`` names a sink (its declared capabilities, enforced by the memory sink), a
behaviour, optional routes (and their ``route-mode``), transforms and include/exclude lists, the events (DDL as SQL text, as Canal or
Maxwell carry it in order with the rows; rows as inserts, updates and deletes) and what must come
out: the schema changes the sink applied, the failure (if any), the sink tables' columns and rows,
and the dead-letter reasons.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry.config.checks import accepted_schema_changes
from ferry.config.job import TransformConfig
from ferry.connectors.formats.ddl import parse_ddl
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.model import events as E
from ferry.model.schema import TableId
from ferry.pipeline.route import Route, RouteMode, TableRouter
from ferry.pipeline.router import SchemaChangeBehavior, SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.base.registry import SINKS
from ferry.sinks.hologres.types import TypeNormalizeStrategy, hologres_type
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.transform.blocks import TableTransforms

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))


def events_of(spec: list[dict[str, Any]]) -> list[E.Event]:
    out: list[E.Event] = []
    for offset, item in enumerate(spec):
        position = E.SourcePosition("golden", 0, offset)
        if "ddl" in item:
            changes = parse_ddl(item["ddl"], default_database="db")
            table = changes[0].table_id
            out.append(E.SchemaHint(table, tuple(changes), item["ddl"], True, position))
            continue
        [(op, body)] = item.items()
        table = TableId.parse(body["table"])
        before, after = body.get("before"), body.get("after", body.get("row"))
        if op == "delete":
            before, after = body.get("row", before), None
        out.append(E.DataChange(table, E.Op(op), before, after, position))
    return out


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    sink_type = case["sink"]
    strategy = case.get("type-normalize-strategy")
    sink = MemorySink(
        capabilities=SINKS[sink_type].capabilities,
        type=sink_type,
        type_mapping=None
        if strategy is None
        else partial(hologres_type, strategy=TypeNormalizeStrategy(strategy)),
        pending_polls=case.get("pending-polls", 0),
    )
    sink.refuse_tags = set(case.get("refuse", []))
    dead_letter = MemoryDeadLetter()
    routes = [
        Route(r["source-table"], r["sink-table"], r.get("replace-symbol")) for r in case.get("routes", [])
    ]
    runner = PipelineRunner(
        settings=RunnerSettings(name="golden", tune_gc=False, schema_change_poll_s=0.01),
        source=MemorySource(),
        decode=lambda records: [],
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(
            sink,
            SchemaChangeBehavior(case["behavior"]),
            accepted_schema_changes(case.get("include"), tuple(case.get("exclude", ()))),
        ),
        tables=TableRouter(routes, RouteMode(case.get("route-mode", RouteMode.ALL_MATCH))),
        dead_letter=dead_letter,
        transforms=TableTransforms([TransformConfig.model_validate(t) for t in case["transforms"]])
        if "transforms" in case
        else None,
    )
    runner.open()
    expect = case["expect"]
    failure: Exception | None = None
    try:
        runner.process(events_of(case["events"]), [])
        runner.checkpoint()
    except Exception as e:  # the expectation says whether the pipeline fails
        failure = e
    if "fails" in expect:
        assert failure is not None, "the pipeline should have failed"
        for part in expect["fails"]:
            assert part in str(failure)
    else:
        assert failure is None, f"unexpected failure: {failure}"
    assert [str(c) for c in sink.applied] == expect["applied"]
    for name, table in expect.get("tables", {}).items():
        schema = sink.table_schema(TableId.parse(name))
        assert schema is not None, f"{name} does not exist at the sink"
        assert list(schema.names) == table["columns"]
        assert sorted(sink.rows(name), key=lambda r: str(r[table["columns"][0]])) == table["rows"]
    assert [d.reason for d in dead_letter.records] == expect.get("dead-letter", [])
    if "polls" in expect:
        assert sink.polls == expect["polls"]
