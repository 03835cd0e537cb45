"""The web page's figures: barrier times per sample interval, the lag chart's geometry."""

from __future__ import annotations

from pathlib import Path

from ferry.api.web import CHART_HEIGHT, CHART_SPAN_MS, CHART_WIDTH, lag_chart
from ferry.control.overview import overview, timeline
from ferry.control.service import ControlPlane, ControlSettings
from ferry.control.store import Sample
from ferry.pipeline.checkpoints import SchemaHistoryEntry, now_ms
from ferry.pipeline.phase import Phase


def sample(at_ms: int, barrier_ms: int, lag: int = 0, changes: int = 0) -> Sample:
    return Sample(at_ms, lag, 0.0, 0, changes, barrier_ms)


def change(at_ms: int, what: str) -> SchemaHistoryEntry:
    return SchemaHistoryEntry("db.t", "db.t", what, "apply", "supported", None, at_ms)


def test_each_change_gets_the_barrier_time_of_its_sample_interval_newest_first() -> None:
    samples = [sample(1_000, 0), sample(2_000, 40), sample(3_000, 40), sample(4_000, 100)]
    history = [change(1_500, "a"), change(3_500, "b"), change(3_600, "c"), change(9_000, "d")]
    entries = timeline(history, samples)
    assert [(e.change, e.barrier_ms, e.barrier_shared_by) for e in entries] == [
        ("d", None, 1),  # not sampled yet
        ("c", 60, 2),
        ("b", 60, 2),
        ("a", 40, 1),
    ]


def test_a_runner_that_restarted_counts_its_barrier_time_from_zero() -> None:
    entries = timeline([change(2_500, "a")], [sample(2_000, 900), sample(3_000, 30)])
    assert entries[0].barrier_ms == 30


def test_the_lag_chart_spans_the_last_hour_with_the_peak_at_the_top() -> None:
    now = 10 * CHART_SPAN_MS
    old = sample(now - CHART_SPAN_MS - 1, 0, lag=10_000)
    chart = lag_chart([old, sample(now - CHART_SPAN_MS, 0, lag=50), sample(now, 0, lag=100)], now)
    assert (chart.peak, chart.latest, chart.samples) == (100, 100, 2)
    assert chart.points == f"0.0,{CHART_HEIGHT / 2:.1f} {CHART_WIDTH:.1f},0.0"
    assert lag_chart([], now).samples == 0


def test_a_change_recorded_with_its_barrier_time_shows_it_rather_than_its_sample_interval() -> None:
    exact = SchemaHistoryEntry("db.t", "db.t", "a", "apply", "supported", None, 1_500, barrier_ms=7)
    samples = [sample(1_000, 0), sample(2_000, 40)]
    entries = timeline([exact, change(1_600, "b")], samples)
    assert [(e.change, e.barrier_ms, e.barrier_shared_by, e.barrier_exact) for e in entries] == [
        ("b", 40, 1, False),
        ("a", 7, 1, True),
    ]


def test_a_failed_run_that_could_not_count_its_lag_keeps_the_lag_last_sampled(tmp_path: Path) -> None:
    plane = ControlPlane(ControlSettings(state_url=f"sqlite:///{tmp_path}/state.db"))
    try:
        job = "source:\n  type: kafka\n  properties.bootstrap.servers: 127.0.0.1:9\n  topic: t\nsink:\n  type: memory\n"
        plane.create_pipeline("default", {"metadata": {"name": "orders"}, "spec": {"job": job}})
        row = plane.store.pipeline("default", "orders")
        assert row is not None
        plane.store.add_sample("default", "orders", sample(now_ms() - 5_000, 0, lag=42))
        plane.store.update_pipeline(row, phase=Phase.FAILED, detail="the sink refused")
        # the run failed before its source was assigned a partition: no lag in its status
        plane.state.set_status(row.runtime_name, Phase.FAILED, "the sink refused", {"lag": {}})
        assert overview(plane, "default", "orders").lag_records == 42
    finally:
        plane.close()
