"""The web page of ``ferry serve`` in Debian's headless Chromium, against a served control plane
whose worker runs a real pipeline (Kafka broker, Iceberg tables on disk).

The screenshot goes to ``$FERRY_SCREENSHOT_DIR/web-page.png`` when that is set (the one in
``docs/`` was taken so), else into the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import Page, expect, sync_playwright

from ferry.api.app import create_app
from ferry.control.config import TokenConfig
from ferry.control.service import ControlPlane, iso
from ferry.control.store import runtime_name
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import TopicFactory, produce
from ferry.local.ports import free_ports
from tests.integration.control_helpers import (
    ENV,
    events_table,
    job_text,
    running_control,
    wait_for,
    wait_rows,
)
from tests.integration.helpers import orders_table
from tests.integration.outages import RETRIES

pytestmark = pytest.mark.integration

VIEWER = "web-page-viewer-token-0123456789"
EDITOR = "web-page-editor-token-0123456789"
TOKENS = [
    TokenConfig.model_validate({"name": "dashboards", "token": VIEWER, "roles": {"*": "viewer"}}),
    TokenConfig.model_validate({"name": "operators", "token": EDITOR, "roles": {"*": "editor"}}),
]
#: The words of an element's text that the browser broke across lines.
BROKEN_WORDS = """(element) => {
  const broken = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const word of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(word[0]);
    }
  }
  return broken;
}"""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(plane: ControlPlane) -> Iterator[str]:
    """The API and its page over HTTP on a free port (uvicorn in a thread), as ``ferry serve`` runs it."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(plane, TOKENS), host="127.0.0.1", port=port, log_config=None, lifespan="off"
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
def browser_page(width: int = 1280) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": width, "height": 900})
        finally:
            browser.close()


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("form.login button")
    expect(page.locator("header .account")).to_be_visible()


def broken_words(page: Page, selector: str) -> list[str]:
    """The words the browser broke across lines in the elements ``selector`` matches."""
    return [w for each in page.locator(selector).all() for w in each.evaluate(BROKEN_WORDS)]


def screenshot(page: Page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("FERRY_SCREENSHOT_DIR") or tmp_path)
    shot = folder / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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

        # the partition read, where it is, and the worker reading it; the checkpoints of the run
        metrics = control.plane.get_pipeline(ENV, "orders").status.metrics or {}
        [reader] = [w for w, said in metrics["workers"].items() if said["assigned"] == {topic: [0]}]
        partition = article.locator(f"table.partitions tr[data-partition='{topic}[0]']")
        expect(partition.locator(".offset")).to_have_text("26")  # 20 records, a bad one, 5 more
        expect(partition.locator(".lag")).to_have_text("0")
        expect(partition.locator(".worker")).to_have_text(reader)
        assert metrics["recent_checkpoints"], metrics
        expect(article.locator("table.checkpoints tbody tr").first).to_contain_text(" ms")
        expect(article.locator("table.errors")).to_have_count(0)  # no error in this run

        screenshot(page, "web-page.png", tmp_path)
        # in a narrow window, lines break between words, and never in a time
        page.set_viewport_size({"width": 640, "height": 900})
        assert broken_words(page, "table.timeline td.reason, td.when, table.pipelines td.detail") == []


def test_a_failed_pipeline_keeps_its_lag_and_its_detail_breaks_between_words(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    table = orders_table("shop")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 9)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    [closed] = free_ports(1)
    job = f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  scan.startup.mode: earliest-offset
sink:
  type: hologres
  endpoint: 127.0.0.1:{closed}
  dbname: ods_db
  username: ferry
  password: not-shown
pipeline:
  checkpoint.interval: 200ms
  restart-strategy.initial-backoff: 100ms
  restart-strategy.max-backoff: 200ms
  restart-strategy.timeout: 2s
"""
    with running_control(tmp_path) as control, serving(control.plane) as url, browser_page(640) as page:
        control.create("orders", job)
        control.wait_phase("orders", "FAILED")
        sign_in(page, url, VIEWER)
        row = page.locator("table.pipelines tr[data-pipeline=orders]")
        expect(row.locator(".phase")).to_have_text("FAILED")
        expect(row.locator(".detail")).to_contain_text("Connection refused")
        # the 8 records were never written: a restart reads them again
        expect(row.locator(".lag")).to_have_text("8")
        caption = page.locator("#pipeline-default-orders .lag-chart figcaption")
        expect(caption).to_contain_text("now 8")
        assert broken_words(page, "table.pipelines td.detail") == []


def test_a_retrying_pipeline_shows_the_retry_its_last_errors_its_partition_and_its_masked_job(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    table = orders_table("shop")
    records = [table.insert({"id": i, "item": f"i{i}", "qty": i}) for i in range(1, 9)]
    produce(kafka_bootstrap, topic, [v for _, v in records], keys=[k for k, _ in records])
    [closed] = free_ports(1)
    job = f"""
source:
  type: kafka
  properties.bootstrap.servers: {kafka_bootstrap}
  topic: {topic}
  scan.startup.mode: earliest-offset
sink:
  type: hologres
  endpoint: 127.0.0.1:{closed}
  dbname: ods_db
  username: ferry
  password: hologres-secret-never-shown
pipeline:
  checkpoint.interval: 200ms
{RETRIES}"""
    with running_control(tmp_path) as control, serving(control.plane) as url, browser_page() as page:
        control.create("orders", job)

        # through the API: the attempts that failed, with their time, and the retry in progress
        def errors() -> list[dict[str, Any]] | None:
            response = httpx.get(
                f"{url}/api/v1/environments/{ENV}/pipelines/orders",
                headers={"Authorization": f"Bearer {VIEWER}"},
            )
            assert response.status_code == 200, response.text
            metrics = response.json()["status"].get("metrics") or {}
            found = metrics.get("recent_errors") or []
            return found if len(found) >= 2 and metrics.get("retry") else None

        found = wait_for(errors, 120, lambda: "two failed attempts in status.metrics.recent_errors")
        assert all(e["what"] == "reading the schema of inventory.orders" for e in found), found
        assert all("refused" in e["error"] and e["at_ms"] > 0 for e in found), found
        assert [e["at_ms"] for e in found] == sorted(e["at_ms"] for e in found)

        sign_in(page, url, VIEWER)
        article = page.locator("#pipeline-default-orders")
        retry = article.locator(".retry-now")
        expect(retry.locator(".what")).to_have_text("reading the schema of inventory.orders")
        expect(retry.locator(".attempt")).to_contain_text(" of 100")
        expect(retry.locator("time.next")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
        last = article.locator("table.errors tbody tr").first
        expect(last.locator(".what")).to_have_text("reading the schema of inventory.orders")
        expect(last.locator(".reason")).to_contain_text("Connection refused")
        expect(last.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
        partition = article.locator(f"table.partitions tr[data-partition='{topic}[0]']")
        expect(partition.locator(".worker")).not_to_have_text("–")
        article.locator("details.job summary").click()
        expect(article.locator("details.job pre")).to_contain_text(f"topic: {topic}")
        expect(article.locator("details.job pre")).to_contain_text("password:")
        expect(article.locator("details.job pre")).not_to_contain_text("hologres-secret-never-shown")
        expect(page.locator("body")).not_to_contain_text("hologres-secret-never-shown")
        screenshot(page, "web-page-retrying.png", tmp_path)


def test_an_editor_stops_and_resumes_a_pipeline_from_the_page_and_a_viewer_is_refused(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    warehouse = tmp_path / "warehouse"
    table = events_table()
    produce(kafka_bootstrap, topic, [table.insert({"id": i, "payload": f"p{i}"})[1] for i in range(10)])
    with running_control(tmp_path) as control, serving(control.plane) as url, browser_page() as page:
        control.create("orders", job_text(kafka_bootstrap, topic, warehouse))
        wait_rows(warehouse, "app.events", 10)
        control.wait_phase("orders", "RUNNING")
        article = page.locator("#pipeline-default-orders")

        # a viewer sees the actions, and is refused with the API's reason
        sign_in(page, url, VIEWER)
        article.locator("a.action[data-action=stop]").click()
        expect(page.locator(".refused")).to_contain_text("needs the editor role")
        expect(page.locator(".refused h2")).to_have_text("Refused (403)")
        posted = page.request.post(url + "/pipelines/default/orders/stop", max_redirects=0)
        assert posted.status == 403, posted.text()
        assert control.phase("orders") == "RUNNING"
        page.goto(url + "/")
        page.click("form.account button")

        # an editor stops it: a confirmation, then STOPPED with its UPGRADE savepoint
        sign_in(page, url, EDITOR)
        expect(article.locator("a.action[data-action=resume]")).to_have_count(0)
        article.locator("a.action[data-action=stop]").click()
        expect(page.locator("form.confirm .question")).to_contain_text("Stop pipeline orders?")
        screenshot(page, "web-page-confirm.png", tmp_path)
        assert control.phase("orders") == "RUNNING"  # nothing happens before the confirmation
        page.click("form.confirm button.confirm-action")
        expect(page.locator(".notice")).to_contain_text("default/orders: stop requested")
        control.wait_phase("orders", "STOPPED")
        expect(article.locator("h3 .phase")).to_have_text("STOPPED", timeout=30_000)  # it reloads itself
        [upgrade] = [s for s in control.plane.list_savepoints(ENV, "orders") if s.spec.source == "UPGRADE"]
        assert upgrade.status.state == "COMPLETED"
        expect(article.locator("table.savepoints")).to_contain_text(upgrade.metadata.uid)
        expect(article.locator("table.partitions .worker")).to_have_text("–")  # nobody reads it now
        screenshot(page, "web-page-stopped.png", tmp_path)

        # and resumes it
        article.locator("a.action[data-action=resume]").click()
        page.click("form.confirm button.confirm-action")
        expect(page.locator(".notice")).to_contain_text("default/orders: resumed")
        control.wait_phase("orders", "RUNNING")
        expect(article.locator("h3 .phase")).to_have_text("RUNNING", timeout=30_000)

        # a MANUAL savepoint
        article.locator("a.action[data-action=savepoint]").click()
        page.click("form.confirm button.confirm-action")
        expect(page.locator(".notice")).to_contain_text("savepoint requested")
        wait_for(
            lambda: any(
                s.spec.source == "MANUAL" and s.status.state == "COMPLETED"
                for s in control.plane.list_savepoints(ENV, "orders")
            ),
            60,
            lambda: f"a completed MANUAL savepoint: {control.plane.list_savepoints(ENV, 'orders')}",
        )

        # a bounded replay from the stop's savepoint, under a new name, then deleted with its savepoints
        article.locator("a.action[data-action=replay]").click()
        page.fill("#replay_name", "orders-again")
        page.select_option("form.confirm select[name=savepoint]", upgrade.metadata.uid)
        page.click("form.confirm button.confirm-action")
        expect(page.locator(".notice")).to_contain_text("default/orders-again: replay created")
        replay = control.plane.get_pipeline(ENV, "orders-again")
        assert replay.spec.start_from is not None and replay.spec.start_from.savepoint == upgrade.metadata.uid
        assert replay.spec.job == control.plane.get_pipeline(ENV, "orders").spec.job
        control.wait_phase("orders-again", "COMPLETED")
        page.goto(url + "/")
        page.locator("#pipeline-default-orders-again a.action[data-action=delete]").click()
        page.check("form.confirm input[name=savepoints]")
        page.click("form.confirm button.confirm-action")
        expect(page.locator(".notice")).to_contain_text("default/orders-again: deleted")
        expect(page.locator("#pipeline-default-orders-again")).to_have_count(0)
        assert [p.metadata.name for p in control.plane.list_pipelines(ENV)] == ["orders"]
