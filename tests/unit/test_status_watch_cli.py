"""``ferry status --watch`` as a command: the live table of the state store's pipelines (here one
whose status a runner recorded), and a refusal to watch JSON."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ferry.cli.main import main
from ferry.state import StateStore


def test_watch_draws_the_table_of_the_state_stores_pipelines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store = StateStore(url)
    metrics = {"records_read": 500, "rate_eps": 25.0, "records_behind": 1_500, "rows_written": {"db.t": 480}}
    store.set_status("orders", "RUNNING", "reading", metrics)
    store.close()
    result = CliRunner().invoke(
        main,
        ["status", "--state-url", url, "--watch", "--interval", "0.1", "--refreshes", "2"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "orders" in line)
    for cell in ("RUNNING", "500", "25.0 records/s", "1,500", "1 min 00 s", "480", "reading"):
        assert cell in row, row


def test_watch_renders_text_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["status", "--state-url", f"sqlite:///{tmp_path}/s.db", "--watch", "--output", "json"]
    )
    assert result.exit_code == 2 and "--watch renders a table" in result.output
