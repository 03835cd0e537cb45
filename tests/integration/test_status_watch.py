"""``ferry status --watch`` against a real running pipeline: the live table, redrawn with rich, shows
its phase, records read, rate, records behind, the ETA of the catch-up and the rows written."""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path

import pytest
from rich.console import Console

from ferry.cli.watch import watch_status
from ferry.config.loader import load_job_text
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.pipeline.catch_up import eta_seconds, format_eta
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.worker import build_runner
from tests.integration.control_helpers import wait_for
from tests.integration.helpers import job_yaml, orders_table

pytestmark = pytest.mark.integration


def test_the_watched_table_shows_a_running_pipeline_as_its_status_says(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, group_id: str
) -> None:
    topic = topic_factory(1)
    table = orders_table()
    records = [table.insert({"id": i, "item": f"item-{i}", "qty": i}) for i in range(1, 41)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    job = load_job_text(job_yaml(kafka_bootstrap, topic, tmp_path, group_id, bounded="unbounded"))
    runner = build_runner(job, sink=MemorySink())
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), name="test-runner")
    thread.start()
    store = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        wait_for(
            lambda: (
                (s := store.get_status(group_id)) is not None
                and s["phase"] == "RUNNING"
                and s["metrics"].get("records_read") == 40
            ),
            120,
            lambda: f"the runner's status after reading 40 records: {store.get_status(group_id)}",
        )
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, width=220, color_system=None)
        watch_status(store, None, 0.1, refreshes=3, console=console)
        status = store.get_status(group_id)
        assert status is not None
    finally:
        stop.set()
        thread.join(60)
        store.close()
    text = out.getvalue()
    # redrawn in place: the terminal is told to move the cursor up over the last table
    assert text.count("ferry status at") >= 3 and "\x1b[1A" in text, text
    last = text.rsplit("ferry status at", 1)[1]
    for header in ("pipeline", "phase", "records read", "rate", "behind", "ETA", "rows written"):
        assert header in last, last
    row = next(line for line in last.splitlines() if group_id in line)
    cells = [c.strip() for c in re.split(r"[│┃|]", row) if c.strip()]
    metrics = status["metrics"]
    assert cells[:3] == [group_id, "RUNNING", "40"], cells
    assert cells[4] == f"{metrics['records_behind']:,}" == "0", cells
    assert cells[5] == format_eta(eta_seconds(metrics["records_behind"], metrics["rate_eps"])) == "0 s"
    assert cells[6] == "40", cells
