"""The web page of ``ferry serve`` in Debian's headless Chromium, against a served control plane
whose worker runs a real pipeline (Kafka broker, Iceberg tables on disk).

The screenshot goes to ``$FERRY_SCREENSHOT_DIR/web-page.png`` when that is set (the one in
``docs/`` was taken so), else into the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright.sync_api import Page, expect, sync_playwright

from ferry.api.app import create_app
from ferry.control.config import TokenConfig
from ferry.control.service import ControlPlane, iso
from ferry.control.store import runtime_name
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from tests.integration.control_helpers import (
    ENV,
    events_table,
    job_text,
    running_control,
    wait_for,
    wait_rows,
)

pytestmark = pytest.mark.integration

VIEWER = "web-page-viewer-token-0123456789"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(plane: ControlPlane) -> Iterator[str]:
    """The API and its page over HTTP on a free port (uvicorn in a thread), as ``ferry serve`` runs it."""
    tokens = [TokenConfig.model_validate({"name": "dashboards", "token": VIEWER, "roles": {"*": "viewer"}})]
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(plane, tokens), host="127.0.0.1", port=port, log_config=None, lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 15, lambda: "uvicorn started")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextmanager
def browser_page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def rows_written(status: Mapping[str, Any] | None) -> int:
    """The rows a runner's saved status counts as written, over its tables."""
    written = ((status or {}).get("metrics") or {}).get("rows_written") or {}
    return sum(int(n) for n in written.values())


def test_the_page_shows_a_running_pipeline_its_schema_change_dead_letters_and_savepoints(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse = tmp_path / "warehouse"
    table = events_table()
    produce(kafka_bootstrap, topic, [table.insert({"id": i, "payload": f"p{i}"})[1] for i in range(20)])
    with running_control(tmp_path) as control, serving(control.plane) as url, browser_page() as page:
        control.create("orders", job_text(kafka_bootstrap, topic, warehouse))
        wait_rows(warehouse, "app.events", 20)
        table.add_column("note", dbz.STRING)
        produce(
            kafka_bootstrap,
            topic,
            [b"{not json", *(table.insert({"id": i, "payload": "q", "note": "n"})[1] for i in range(20, 25))],
        )
        wait_rows(warehouse, "app.events", 25)
        history = control.plane.state.schema_history(runtime_name(ENV, "orders"))
        assert [e.change.split()[0] for e in history if "note" in e.change] == ["add.column"], history
        wait_for(
            lambda: control.plane.get_pipeline(ENV, "orders").status.metrics,
            30,
            lambda: "the runner's status",
        )
        savepoint = control.plane.create_savepoint(ENV, "orders")
        wait_for(
            lambda: (
                control.plane.get_savepoint(ENV, "orders", savepoint.metadata.uid).status.state == "COMPLETED"
            ),
            30,
            lambda: "the manual savepoint completed",
        )
        # the change's barrier is told once a sample after it was taken
        wait_for(
            lambda: any(s.schema_changes >= 1 for s in control.plane.store.samples(ENV, "orders")),
            30,
            lambda: f"a sample after the change: {control.plane.store.samples(ENV, 'orders')}",
        )

        # the page shows the runner's status as last saved (every second): it counts every row
        def status() -> Mapping[str, Any] | None:
            return control.plane.state.get_status(runtime_name(ENV, "orders"))

        wait_for(lambda: rows_written(status()) == 25, 30, lambda: f"the status counting 25 rows: {status()}")

        page.goto(url + "/")
        expect(page.locator("form.login")).to_be_visible()
        page.fill("#token", VIEWER)
        page.click("form.login button")
        expect(page.locator("header .account")).to_contain_text("dashboards")

        row = page.locator("table.pipelines tr[data-pipeline=orders]")
        expect(row.locator(".phase")).to_have_text("RUNNING")
        expect(row.locator(".rows")).to_have_text("25")
        expect(row.locator(".lag")).to_have_text("0")
        expect(row.locator(".throughput")).not_to_have_text("–")
        expect(row.locator(".eta")).to_have_text("caught up")  # 0 records behind

        article = page.locator("#pipeline-default-orders")
        timeline = article.locator("table.timeline tbody tr")
        change = timeline.filter(has_text="note")
        expect(change).to_have_count(1)
        expect(change.locator(".change")).to_contain_text("add.column")
        expect(change.locator(".decision")).to_have_text("apply")
        added = next(e for e in history if "note" in e.change)
        assert added.barrier_ms is not None  # measured by the schema operator with the change
        expect(change.locator(".barrier")).to_have_text(f"{added.barrier_ms:,} ms")
        expect(change.locator("time")).to_have_attribute("datetime", iso(added.at_ms) or "")

        dead_letters = article.locator(".dead-letters")
        expect(dead_letters.locator(".count")).to_have_text("1")
        expect(dead_letters.locator("table.latest-dead-letters tbody tr")).to_have_count(1)
        expect(dead_letters).to_contain_text(f"{topic}[0]@20")

        expect(article.locator("table.savepoints")).to_contain_text(savepoint.metadata.uid)
        expect(article.locator("table.savepoints .name")).to_have_text(savepoint.metadata.name)
        expect(article.locator("table.savepoints")).to_contain_text("COMPLETED")
        expect(article.locator(".lag-chart svg polyline.lag")).to_have_count(1)

        folder = Path(os.environ.get("FERRY_SCREENSHOT_DIR") or tmp_path)
        shot = folder / "web-page.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
