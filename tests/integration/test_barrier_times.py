"""Each schema change's barrier time, as the schema operator measures it: from the start of the
barrier before the change to the change applied, kept with the change in the schema history and
shown by ``ferry status`` and the web page's timeline as it is (not a sample interval's share)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ferry.cli.main import main
from ferry.config.loader import load_job_text
from ferry.control.overview import timeline
from ferry.sinks.memory import MemorySink
from ferry.testing import debezium as dbz
from ferry.testing.kafka_broker import TopicFactory, produce
from ferry.worker import build_runner
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration

#: The memory sink's stand-in for a background ALTER: pending for this many polls of 0.2 s.
POLLS = 3
POLL_MS = 200


def test_every_change_keeps_the_time_from_its_barrier_start_to_its_apply(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"item-{i}", "qty": i}) for i in range(1, 4)]
    table.add_column("price", dbz.DECIMAL(10, 2), after="item")
    table.add_column("note", dbz.STRING)
    records.append(table.insert({"id": 4, "item": "four", "price": None, "note": "n", "qty": 4}))
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])

    sink = MemorySink(pending_polls=POLLS)
    runner = build_runner(load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id)), sink=sink)
    runner.run()

    history = runner.state.schema_history(group_id)
    assert [h.change.split(" ")[0] for h in history] == ["create.table", "add.column", "add.column"]
    for entry in history:
        assert entry.barrier_ms is not None and entry.barrier_ms >= POLLS * POLL_MS, entry
    # the two columns came in one record: one barrier, the second applied after the first
    first, second = history[1], history[2]
    assert second.barrier_ms is not None and first.barrier_ms is not None
    assert second.barrier_ms >= first.barrier_ms + POLLS * POLL_MS, (first, second)

    entries = timeline(history, [])  # exact without any sample
    assert [(e.barrier_ms, e.barrier_exact) for e in entries] == [
        (h.barrier_ms, True) for h in reversed(history)
    ]
    status = CliRunner().invoke(
        main, ["status", "--state-url", f"sqlite:///{tmp_path}/state.db", "--output", "json"]
    )
    assert status.exit_code == 0, status.output
    [shown] = json.loads(status.stdout)
    assert [h["barrier_ms"] for h in shown["schema_history"]] == [h.barrier_ms for h in history]
    text = CliRunner().invoke(main, ["status", "--state-url", f"sqlite:///{tmp_path}/state.db"]).stdout
    assert f"; barrier {second.barrier_ms} ms" in text
