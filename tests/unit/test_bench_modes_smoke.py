"""The long-run and latency benchmarks' reports: their segments, targets and verification."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def long_run() -> ModuleType:
    return _load("long_run")


@pytest.fixture(scope="module")
def latency() -> ModuleType:
    _load("long_run")
    return _load("latency")


def _samples(long_run: ModuleType, rates: list[float], rss: list[float]) -> list[object]:
    """One look a second; ``rates[i]`` events/s in second i, at 10 CPU µs per event."""
    looks = [long_run.Sample(100.0, 0, 0, None, rss[0], 1.0)]
    read = 0
    for second, (rate, memory) in enumerate(zip(rates, rss, strict=True), start=1):
        read += int(rate)
        looks.append(long_run.Sample(100.0 + second, read, second, 100 * second, memory, 1.0 + read * 1e-5))
    return looks


def test_segments_report_throughput_checkpoints_and_rss_and_a_slowdown_misses_the_target(
    long_run: ModuleType,
) -> None:
    looks = _samples(long_run, [1000.0] * 4 + [500.0] * 8, [200.0] * 6 + [300.0] * 6)
    checkpoints = [
        long_run.CheckpointSeen(s.at, s.records_read, 100 * i, 0) for i, s in enumerate(looks[1:], 1)
    ]
    segments = long_run.segment_report(looks, checkpoints, 8000, 2)

    assert [s["to_event"] for s in segments] == [4000, 8000]
    assert segments[0]["events_per_s"] == pytest.approx(1000.0)
    assert segments[1]["events_per_s"] == pytest.approx(500.0)
    assert segments[0]["cpu_us_per_event"] == pytest.approx(10.0)
    assert segments[0]["checkpoints"] == 4 and segments[1]["checkpoints"] == 8
    assert segments[0]["checkpoint_mean_s"] == pytest.approx(0.25)
    assert segments[1]["checkpoint_max_s"] == pytest.approx(1.2)
    assert segments[0]["peak_rss_mib"] == 200.0 and segments[1]["peak_rss_mib"] == 300.0

    targets = long_run.verdicts(segments)
    assert targets["throughput"]["ratio"] == pytest.approx(0.5) and not targets["throughput"]["met"]
    assert not targets["checkpoint"]["met"]
    assert not targets["rss"]["met"]

    flat = long_run.segment_report(_samples(long_run, [1000.0] * 8, [200.0] * 8), [], 8000, 2)
    flat_targets = long_run.verdicts(flat)
    assert flat_targets["throughput"]["met"] and flat_targets["rss"]["met"]
    assert "checkpoint" not in flat_targets  # no checkpoint seen: not measured, not met


def test_the_read_back_is_checked_against_the_final_state_of_every_key(long_run: ModuleType) -> None:
    note = long_run.tp.expected_note
    live = {"orders": {1: 0, 2: 3, 3: 1}, "customers": {7: 2}}
    right = {"orders": ([1, 2, 3], [note(1, 0), note(2, 3), note(3, 1)]), "customers": ([7], [note(7, 2)])}
    assert all(t["exact"] for t in long_run.verify_tables(right, live).values())

    missing = long_run.verify_tables({**right, "orders": ([1, 3], [note(1, 0), note(3, 1)])}, live)
    assert missing["orders"]["missing"] == 1 and not missing["orders"]["exact"]
    assert missing["customers"]["exact"]

    stale = long_run.verify_tables({**right, "customers": ([7], [note(7, 1)])}, live)
    assert stale["customers"]["stale"] == 1 and not stale["customers"]["exact"]

    doubled = long_run.verify_tables({**right, "customers": ([7, 7, 8], [note(7, 2)] * 2 + ["x"])}, live)
    assert doubled["customers"]["duplicated"] == 1 and doubled["customers"]["unexpected"] == 1

    absent = long_run.verify_tables({"orders": right["orders"]}, live)
    assert not absent["customers"]["exact"] and absent["customers"]["missing"] == 1


def test_the_long_run_report_prints_a_missed_target_and_a_failed_check(long_run: ModuleType) -> None:
    looks = _samples(long_run, [1000.0] * 4 + [500.0] * 8, [200.0] * 12)
    segments = long_run.segment_report(looks, [], 8000, 2)
    verification = long_run.verify_tables({"orders": ([], [])}, {"orders": {1: 0}})
    report = {
        "events": 8000,
        "tables": 1,
        "partitions": 1,
        "shape": "payload only",
        "ops": {"c": 8000, "u": 0, "d": 0},
        "schema_changes": 0,
        "checkpoint_interval": "5s",
        "load_before": "1.0 1.0 1.0",
        "load_after": "1.0 1.0 1.0",
        "run_s": 10.0,
        "events_per_s": 600.0,
        "cpu_us_per_event": 10.0,
        "peak_rss_mib": 200.0,
        "checkpoints": 0,
        "exit_code": 0,
        "segments": segments,
        "targets": long_run.verdicts(segments),
        "verification": verification,
        "verified": False,
    }
    text = long_run.render(report)
    assert "events/s 1,000 → 500 (0.50×), no more than 20 % slower (≥ 0.80×): NOT met" in text
    assert "mean checkpoint duration: not measured" in text
    assert "missing 1" in text and "NOT EXACT" in text and "verified: NO" in text


def test_latency_verification_finds_a_record_never_visible_seen_twice_or_wrong(latency: ModuleType) -> None:
    stamps = [1_000_000, 2_000_000, 3_000_000]
    seen = {
        1: latency.Sighting(2.0, 1.5, 1_000_000),
        2: latency.Sighting(3.0, 2.5, 2_000_000),
        3: latency.Sighting(4.5, 4.0, 3_000_000),
    }
    final = ([1, 2, 3], [1_000_000, 2_000_000, 3_000_000])
    assert latency.verify(stamps, seen, {}, final)["exactly_once"]

    without = {k: v for k, v in seen.items() if k != 2}
    found = latency.verify(stamps, without, {}, ([1, 3], [1_000_000, 3_000_000]))
    assert found["never_visible"] == 1 and found["missing_in_final_table"] == 1 and not found["exactly_once"]

    assert latency.verify(stamps, seen, {3: 1}, final)["seen_twice"] == 1
    twice = latency.verify(stamps, seen, {}, ([1, 2, 3, 3], [1_000_000, 2_000_000, 3_000_000, 3_000_000]))
    assert twice["duplicated_in_final_table"] == 1 and not twice["exactly_once"]
    wrong = latency.verify(stamps, seen, {}, ([1, 2, 3], [1_000_000, 2_000_001, 3_000_000]))
    assert wrong["wrong_stamp"] == 1 and not wrong["exactly_once"]


def test_latency_percentiles_and_the_target(latency: ModuleType) -> None:
    figures = latency.percentiles([float(i) for i in range(1, 101)])
    assert figures == {"p50_s": 50.0, "p99_s": 99.0, "max_s": 100.0, "mean_s": 50.5}
    assert latency.percentiles([]) is None
    assert latency.target_p99_s(1.0) == 3.0
