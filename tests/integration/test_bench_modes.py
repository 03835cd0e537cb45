"""The long-run and latency benchmarks, end to end at a tiny size on the real broker (not timed)."""

from __future__ import annotations

import importlib.util
import json
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


def test_a_short_long_run_reports_every_segment_and_verifies_the_table(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_run = _load("long_run")
    code = long_run.main(
        [
            "--events",
            "4000",
            "--tables",
            "2",
            "--segments",
            "2",
            "--bootstrap",
            kafka_bootstrap,
            "--work-dir",
            str(tmp_path),
            "--json",
            "--timeout",
            "600",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["verified"] and report["exit_code"] == 0
    assert [s["to_event"] for s in report["segments"]] == [2000, 4000]
    assert set(report["targets"]) >= {"throughput", "rss"}
    assert report["records_read"] == 4000
    tables = report["verification"]
    assert len(tables) == 2 and all(
        t["exact"] and t["rows"] == t["expected_rows"] > 0 for t in tables.values()
    )
    assert report["rss_samples"] and report["peak_rss_mib"] > 0


def test_a_short_latency_run_sees_every_record_once(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latency = _load("latency")
    code = latency.main(
        [
            "--rate",
            "200",
            "--seconds",
            "2",
            "--bootstrap",
            kafka_bootstrap,
            "--work-dir",
            str(tmp_path),
            "--json",
            "--drain-timeout",
            "300",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    verification = report["verification"]
    assert verification["produced"] == verification["visible"] == verification["final_rows"] == 400
    assert verification["exactly_once"]
    visible = report["latency"]["visible"]
    assert 0 < visible["p50_s"] <= visible["p99_s"] <= visible["max_s"]
    assert report["target_p99_s"] == 3.0
