"""Outage trials: the state store, a sink's database and the broker each down for a while during a
run, with the default retry policy (``pipeline.restart-strategy``), on real components.

Each scenario starts a pipeline (Debezium JSON from a real Apache Kafka broker into the Hologres sink
on a real PostgreSQL server, its state in another real PostgreSQL server), lets it checkpoint a
first share of inserts, updates and deletes, stops one component for ``--outage`` seconds while more
changes arrive (for the broker: just before it stops and once it is back), starts it again and waits
until the pipeline has checkpointed every record. It reports what the pipeline showed while it
waited (the highest attempt in its status detail, its phases), how long it took to catch up once the
component was back, and the rows of the sink table (read with psycopg) against an independent oracle:
the final state of every key computed here from the changes produced.

    .venv/bin/python bench/outages.py                       # each of the three for 30 s
    .venv/bin/python bench/outages.py --outage 60 --scenarios broker
    .venv/bin/python bench/outages.py --json > outages.json

The exit code is 1 when a scenario failed: the pipeline stopped, or the rows differ from the oracle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

# the PostgreSQL servers and the run helper are the test suite's (tests/ is not in the wheel): the
# repository's root on the path lets `.venv/bin/python bench/outages.py` find them
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.outages import running as running_for
from tests.support.postgres import PostgresServer

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import KafkaBroker, create_topic, produce
from ferry.pipeline.runner import PipelineRunner
from ferry.sinks.hologres.config import HologresSinkConfig
from ferry.sinks.hologres.sink import HologresSink
from ferry.state import StateStore
from ferry.worker import build_runner

SCENARIOS = ("state-store", "sink-database", "broker")
ATTEMPT = re.compile(r"attempt (\d+) of (\d+)")


@dataclass
class Trial:
    scenario: str
    outage_s: float
    changes: int = 0
    highest_attempt: int = 0
    waiting_for: str = ""
    phases: list[str] = field(default_factory=list)
    recovery_s: float | None = None
    oracle_rows: int = 0
    sink_rows: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    error: str | None = None

    @property
    def exact(self) -> bool:
        return (
            self.error is None
            and self.sink_rows == self.oracle_rows
            and not (self.missing or self.extra or self.different)
        )


class Workload:
    """Random inserts, updates and deletes of one table, and the oracle: the final row of each key."""

    def __init__(self, database: str, seed: int) -> None:
        columns = [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ]
        self.table = dbz.DebeziumTable("shop", database, "orders", columns)
        self.random = random.Random(seed)
        self.rows: dict[int, dict[str, Any]] = {}
        self.next_id = 1
        self.count = 0

    def changes(self, n: int) -> list[tuple[bytes | None, bytes]]:
        out = []
        for _ in range(n):
            roll = self.random.random()
            if roll < 0.6 or len(self.rows) < 10:
                row = {"id": self.next_id, "item": f"item-{self.next_id}", "qty": self.random.randint(1, 100)}
                self.next_id += 1
                self.rows[row["id"]] = row
                out.append(self.table.insert(row))
            elif roll < 0.9:
                before = self.rows[self.random.choice(list(self.rows))]
                after = {**before, "qty": before["qty"] + 1, "item": f"{before['item']}'"}
                self.rows[after["id"]] = after
                out.append(self.table.update(before, after))
            else:
                gone = self.rows.pop(self.random.choice(list(self.rows)))
                out.append(self.table.delete(gone))
        self.count += n
        return out


def job(bootstrap: str, topic: str, name: str, state_url: str) -> str:
    # the default retry policy: nothing about restart-strategy here
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  topic: {topic}
  value.format: debezium-json
  scan.startup.mode: earliest-offset
  scan.bounded.mode: unbounded
sink:
  type: memory
pipeline:
  name: {name}
  state.url: '{state_url}'
  checkpoint.interval: 1s
"""


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(0.2)


def running(runner: PipelineRunner) -> contextlib.AbstractContextManager[list[BaseException]]:
    """The outage tests' pipeline thread, given longer to stop after a trial."""
    return running_for(runner, join_s=120)


def sink_rows(server: PostgresServer, database: str) -> dict[int, dict[str, Any]]:
    with psycopg.connect(server.conninfo) as conn, conn.cursor() as cursor:
        cursor.execute(f'SELECT id, item, qty FROM "{database}"."orders"')
        return {row[0]: {"id": row[0], "item": row[1], "qty": row[2]} for row in cursor.fetchall()}


def trial(
    scenario: str, outage_s: float, broker: KafkaBroker, state_pg: PostgresServer, sink_pg: PostgresServer
) -> Trial:
    result = Trial(scenario, outage_s)
    bootstrap = broker.bootstrap_servers
    name = f"outage-{scenario}-{uuid.uuid4().hex[:6]}"
    database = f"shop_{uuid.uuid4().hex[:8]}"
    topic = f"{name}.orders"
    create_topic(bootstrap, topic)
    workload = Workload(database, seed=len(scenario))
    sink = HologresSink(
        HologresSinkConfig.model_validate(
            {
                "type": "hologres",
                "endpoint": f"{sink_pg.host}:{sink_pg.port}",
                "dbname": sink_pg.database,
                "username": sink_pg.user,
                "password": sink_pg.password,
            }
        ),
        pipeline=name,
        hologres_only_statements=False,
    )
    runner = build_runner(load_job_text(job(bootstrap, topic, name, state_pg.sqlalchemy_url)), sink=sink)
    store = StateStore(state_pg.sqlalchemy_url)
    produced = 0

    def send(n: int) -> None:
        nonlocal produced
        changes = workload.changes(n)
        produce(bootstrap, topic, [v for _, v in changes], keys=[k for k, _ in changes])
        produced += n

    def checkpointed() -> int:
        with contextlib.suppress(Exception):  # the state store may be the one that is down
            checkpoint = store.latest_checkpoint(name)
            if checkpoint is not None:
                return checkpoint.offsets.get((topic, 0), 0)
        return -1

    component = {"state-store": state_pg.stopped, "sink-database": sink_pg.stopped, "broker": broker.stopped}
    try:
        with running(runner) as errors:
            send(500)
            wait_until(lambda: checkpointed() == produced, 120, "the first checkpoint")
            if scenario == "broker":
                send(300)  # in flight when the broker stops
            with component[scenario]():
                began = time.monotonic()
                while time.monotonic() - began < outage_s:  # the trial's outage: a set duration
                    if scenario != "broker" and produced < 800 and time.monotonic() - began > outage_s / 3:
                        send(300)  # changes arriving while the component is down
                    match = ATTEMPT.search(runner.status.detail)
                    if match and int(match[1]) >= result.highest_attempt:
                        result.highest_attempt = int(match[1])
                        result.waiting_for = runner.status.detail.split(":", 1)[0]
                    if not result.phases or result.phases[-1] != runner.status.phase.value:
                        result.phases.append(runner.status.phase.value)
                    if errors:
                        break
                    time.sleep(0.1)
            back = time.monotonic()
            send(200)
            wait_until(lambda: checkpointed() == produced or bool(errors), 300, "the last checkpoint")
            result.recovery_s = round(time.monotonic() - back, 1)
            if runner.status.phase.value not in result.phases:
                result.phases.append(runner.status.phase.value)
        if errors:
            result.error = f"{type(errors[0]).__name__}: {errors[0]}"
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        store.close()
    result.changes = produced
    expected = workload.rows
    try:
        actual = sink_rows(sink_pg, database)
    except psycopg.Error as e:
        result.error = result.error or f"reading the sink: {e}"
        actual = {}
    result.oracle_rows, result.sink_rows = len(expected), len(actual)
    result.missing = len(expected.keys() - actual.keys())
    result.extra = len(actual.keys() - expected.keys())
    result.different = sum(1 for k in expected.keys() & actual.keys() if expected[k] != actual[k])
    with psycopg.connect(sink_pg.conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{database}" CASCADE')
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--outage", type=float, default=30.0, help="seconds each component is down (30)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, of {SCENARIOS}")
    parser.add_argument("--json", action="store_true", help="JSON on stdout")
    args = parser.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    results = []
    with KafkaBroker() as broker, PostgresServer() as state_pg, PostgresServer() as sink_pg:
        for scenario in scenarios:
            print(f"{scenario}: down for {args.outage:g} s ...", file=sys.stderr)
            results.append(trial(scenario, args.outage, broker, state_pg, sink_pg))
            print(f"  {results[-1]}", file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(r) | {"exact": r.exact} for r in results], indent=2))
    else:
        print(
            f"{'scenario':<14} {'outage':>7} {'changes':>7} {'attempt':>7} {'recovery':>9} "
            f"{'oracle':>6} {'sink':>6} {'miss':>4} {'extra':>5} {'diff':>4}  phases / error"
        )
        for r in results:
            recovery = "-" if r.recovery_s is None else f"{r.recovery_s:.1f} s"
            print(
                f"{r.scenario:<14} {r.outage_s:>5.0f} s {r.changes:>7} {r.highest_attempt:>7} {recovery:>9} "
                f"{r.oracle_rows:>6} {r.sink_rows:>6} {r.missing:>4} {r.extra:>5} {r.different:>4}  "
                f"{'/'.join(r.phases)} {r.waiting_for!r} {r.error or ''}"
            )
    return 0 if all(r.exact for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
