"""The ETA of a catch-up (records behind ÷ the recent rate), its wording, and the catch-up line
the runner's metrics log while the lag is large."""

from __future__ import annotations

import logging

import pytest

from ferry.pipeline.catch_up import (
    LARGE_LAG_RECORDS,
    LOG_INTERVAL_S,
    RATE_WINDOW_S,
    CatchUpLog,
    RecentRate,
    eta_seconds,
    format_eta,
)
from ferry.pipeline.metrics import Metrics


@pytest.mark.parametrize(
    ("behind", "rate", "eta"),
    [(0, None, 0.0), (0, 50.0, 0.0), (100, None, None), (100, 0.0, None), (1_000, 250.0, 4.0)],
)
def test_the_eta_is_the_records_behind_divided_by_the_rate(
    behind: int, rate: float | None, eta: float | None
) -> None:
    assert eta_seconds(behind, rate) == eta


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "unknown"), (0.4, "0 s"), (59.4, "59 s"), (61, "1 min 01 s"), (3_725, "1 h 02 min")],
)
def test_an_eta_is_written_in_hours_minutes_and_seconds(seconds: float | None, text: str) -> None:
    assert format_eta(seconds) == text


def test_the_rate_is_taken_over_the_recent_window_only() -> None:
    rate = RecentRate()
    assert rate.add(0.0, 0) is None
    assert rate.add(10.0, 10_000) == 1_000.0
    rate.add(RATE_WINDOW_S, 10_000)  # a stall
    # 100 records/s after the window moved past the fast start
    assert rate.add(RATE_WINDOW_S + 20.0, 12_000) == pytest.approx(2_000 / 40.0)
    assert rate.add(RATE_WINDOW_S + 21.0, 5) is None  # the count started again: no rate yet


def test_the_catch_up_line_is_due_every_few_seconds_while_the_lag_is_large() -> None:
    due = CatchUpLog()
    assert due.due(0.0, LARGE_LAG_RECORDS)
    assert not due.due(LOG_INTERVAL_S / 2, LARGE_LAG_RECORDS)
    assert due.due(LOG_INTERVAL_S, LARGE_LAG_RECORDS)
    assert not due.due(LOG_INTERVAL_S + 1, LARGE_LAG_RECORDS - 1)
    assert due.due(LOG_INTERVAL_S + 1.5, LARGE_LAG_RECORDS)  # large again: at once


def test_the_metrics_log_records_behind_rate_and_eta_while_catching_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ferry.pipeline.metrics")
    metrics = Metrics()
    metrics.lag = {"orders": {"0": 30_000, "1": 10_000}}
    metrics.catching_up(100.0)
    metrics.records_read = 20_000
    metrics.catching_up(110.0)
    assert (metrics.records_behind, metrics.rate_eps, metrics.eta_s) == (40_000, 2_000.0, 20.0)
    lines = [r for r in caplog.records if r.getMessage().startswith("catching up")]
    assert [r.getMessage() for r in lines] == [
        "catching up: 40,000 records behind, no records read yet, ETA unknown",
        "catching up: 40,000 records behind, 2,000 records/s, ETA 20 s",
    ]
    assert (lines[-1].records_behind, lines[-1].rate_eps, lines[-1].eta_s) == (40_000, 2_000.0, 20.0)  # type: ignore[attr-defined]
    metrics.lag = {"orders": {"0": 5, "1": 0}}
    metrics.catching_up(120.0)
    assert metrics.eta_s is not None and metrics.eta_s < 1
    assert len([r for r in caplog.records if r.getMessage().startswith("catching up")]) == 2
    assert "recent" not in metrics.as_dict() and metrics.as_dict()["eta_s"] == metrics.eta_s
