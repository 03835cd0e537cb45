"""A long run of one ferry → Iceberg pipeline: does throughput, checkpoint time and memory stay flat?

Produces a long Debezium JSON change stream (5,000,000 events by default, 70 % inserts, 25 %
updates with the before-image, 5 % deletes; the generator of ``bench/throughput.py``) into a real
Apache Kafka broker, then runs ``ferry run`` on it as its own process, reading from the earliest
offset to the end (``scan.bounded.mode: latest-offset``) into an Iceberg table store (SQLite
catalog, local warehouse). While it runs, it samples:

* the pipeline's status row in the state store (``ferry_status.metrics``: records read,
  checkpoints, the last checkpoint's duration), which ferry writes every second;
* the pipeline process's RSS and CPU time (psutil; the final CPU from the process's rusage).

It reports, per segment of the stream (``--segments``, default 10): events/s, CPU µs/event, the
checkpoints in it (count, mean and longest duration) and the peak RSS sampled in it. At the end it
reads every table back with pyiceberg and compares it with an independent model of the final state
(each live key once, with the ``note`` of its last version; see :func:`verify_tables`).

Targets: the last segment's events/s no more than 20 % below the first's, the last segment's mean
checkpoint duration within 20 % of the first's, the last segment's peak RSS within 20 % of the
first's. A miss is printed as NOT met. See ``bench/README.md``.

    .venv/bin/python bench/long_run.py                      # 5,000,000 events (long)
    .venv/bin/python bench/long_run.py --events 300000      # a quick run
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import throughput as tp

#: Within this share of the first segment, a figure counts as flat.
FLAT_WITHIN = 0.20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# A pipeline in its own process, watched from outside
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One look at the pipeline: its status row's counters and its process's memory and CPU."""

    at: float
    """``time.time()`` of the look."""
    records_read: int
    checkpoints: int
    last_checkpoint_duration_ms: int | None
    rss_mib: float
    cpu_s: float


@dataclass(frozen=True)
class CheckpointSeen:
    at: float
    records_read: int
    duration_ms: int
    missed: int
    """Checkpoints between two looks whose duration was not seen (the status keeps the last only)."""


@dataclass
class PipelineProcess:
    """``ferry run JOB --no-worker`` as a child process, with a thread sampling it every ``every`` s.

    Its state store is the SQLite file ``state_db``; its status row there is what is sampled, with
    psutil's view of the process. The process's final CPU time and peak RSS come from ``wait4``.
    """

    job_text: str
    name: str
    work_dir: Path
    state_db: Path
    every: float = 0.25
    samples: list[Sample] = field(default_factory=list)
    checkpoints: list[CheckpointSeen] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float | None = None
    exit_code: int | None = None
    cpu_s: float | None = None
    peak_rss_mib: float | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.log_path = self.work_dir / f"{self.name}.log"

    def start(self) -> None:
        import psutil

        job = self.work_dir / f"{self.name}.yaml"
        job.write_text(self.job_text, encoding="utf-8")
        self.started_at = time.time()
        with self.log_path.open("wb") as output:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "ferry.cli.main", "run", str(job), "--no-worker"],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self._psutil = psutil.Process(self._process.pid)
        self._thread = threading.Thread(target=self._watch, name=f"watch-{self.name}", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def status(self) -> dict[str, Any] | None:
        """The pipeline's status row (phase, detail, metrics), or None before it wrote one."""
        if not self.state_db.exists():
            return None
        try:
            with contextlib.closing(
                sqlite3.connect(f"file:{self.state_db}?mode=ro", uri=True, timeout=5)
            ) as db:
                row = db.execute(
                    "SELECT phase, detail, metrics FROM ferry_status WHERE pipeline = ?", (self.name,)
                ).fetchone()
        except sqlite3.OperationalError:  # not created yet, or locked for longer than the timeout
            return None
        if row is None:
            return None
        metrics = row[2] if isinstance(row[2], dict) else json.loads(row[2])
        return {"phase": row[0], "detail": row[1], "metrics": metrics}

    def _look(self) -> None:
        import psutil

        try:
            memory, times = self._psutil.memory_info(), self._psutil.cpu_times()
        except psutil.Error:  # it has just exited
            return
        self._record(time.time(), memory.rss / 2**20, times.user + times.system)

    def _last_look(self, cpu_s: float) -> None:
        """Once the process has exited: its final status row, at its end, with its whole CPU time
        and the last RSS seen (a run shorter than one look still has a sample of its end)."""
        assert self.ended_at is not None
        rss = self.samples[-1].rss_mib if self.samples else self.peak_rss_mib or 0.0
        self._record(self.ended_at, rss, cpu_s)

    def _record(self, at: float, rss_mib: float, cpu_s: float) -> None:
        status = self.status()
        metrics = status["metrics"] if status else {}
        sample = Sample(
            at,
            int(metrics.get("records_read", 0)),
            int(metrics.get("checkpoints", 0)),
            metrics.get("last_checkpoint_duration_ms"),
            rss_mib,
            cpu_s,
        )
        previous = self.samples[-1] if self.samples else None
        self.samples.append(sample)
        seen = previous.checkpoints if previous else 0
        if sample.checkpoints > seen and sample.last_checkpoint_duration_ms is not None:
            self.checkpoints.append(
                CheckpointSeen(
                    sample.at,
                    sample.records_read,
                    int(sample.last_checkpoint_duration_ms),
                    sample.checkpoints - seen - 1,
                )
            )

    def _watch(self) -> None:
        while True:
            pid, wait_status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.ended_at = time.time()
                self.exit_code = os.waitstatus_to_exitcode(wait_status)
                assert self._process is not None
                self._process.returncode = self.exit_code
                self.cpu_s = usage.ru_utime + usage.ru_stime
                self.peak_rss_mib = usage.ru_maxrss / 1024
                self._last_look(self.cpu_s)
                return
            self._look()
            if self._stop.wait(self.every):
                self._stop.clear()

    def running(self) -> bool:
        return self.ended_at is None

    def wait(self, timeout: float) -> bool:
        """Wait until the process exits; False when it is still running after ``timeout`` s."""
        assert self._thread is not None
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM (ferry takes a final checkpoint), then SIGKILL after ``timeout`` s."""
        if self._process is None or self._thread is None:
            return
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()
        if not self.wait(timeout):
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self.wait(30)

    def output_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(
                self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return ""

    def __enter__(self) -> PipelineProcess:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def iceberg_job(
    *,
    name: str,
    bootstrap: str,
    topics: Sequence[str],
    work_dir: Path,
    warehouse: Path,
    checkpoint_interval: str,
    bounded: bool,
    batch_size: int = 10_000,
) -> str:
    """A ferry job reading ``topics`` (Debezium JSON) from the earliest offset into Iceberg."""
    bounded_line = "\n  scan.bounded.mode: latest-offset" if bounded else ""
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  properties.group.id: {name}
  topic: {";".join(topics)}
  value.format: debezium-json
  debezium-json.infer-types: true  # latency.py's payload-only rows: BIGINT and STRING columns
  scan.startup.mode: earliest-offset{bounded_line}
sink:
  type: iceberg
  catalog.properties.warehouse: {warehouse.as_uri()}
pipeline:
  name: {name}
  state.url: sqlite:///{work_dir / (name + "-state.db")}
  checkpoint.interval: {checkpoint_interval}
  batch.size: {batch_size}
"""


def iceberg_catalog(warehouse: Path) -> Any:
    """The catalog the job's Iceberg sink writes to (its default SQLite catalog in the warehouse)."""
    from ferry.config.loader import load_job_text

    job = load_job_text(
        iceberg_job(
            name="reader",
            bootstrap="127.0.0.1:9",
            topics=["t"],
            work_dir=warehouse,
            warehouse=warehouse,
            checkpoint_interval="5s",
            bounded=True,
        ),
        file="<reader>",
    )
    from pyiceberg.catalog import load_catalog

    sink = job.sink
    return load_catalog(sink.catalog_name, **sink.resolved_catalog_properties())  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------


def _at(samples: Sequence[Sample], events: float) -> tuple[float, float] | None:
    """``(time, CPU s)`` when the pipeline had read ``events`` records, interpolated between looks."""
    for before, after in itertools.pairwise(samples):
        if after.records_read >= events > before.records_read:
            share = (events - before.records_read) / (after.records_read - before.records_read)
            return (
                before.at + share * (after.at - before.at),
                before.cpu_s + share * (after.cpu_s - before.cpu_s),
            )
    return None


def segment_report(
    samples: Sequence[Sample], checkpoints: Sequence[CheckpointSeen], events: int, segments: int
) -> list[dict[str, Any]]:
    """Per segment of the stream: events/s, CPU µs/event, its checkpoints and its peak RSS.

    The first segment starts at the last look before the first record was read (process start-up,
    group join and table creation are left out of it).
    """
    reading = [s for s in samples if s.records_read > 0]
    if not reading:
        return []
    first = samples.index(reading[0])
    looks = list(samples[max(0, first - 1) :])
    out = []
    start: tuple[float, float] | None = (looks[0].at, looks[0].cpu_s)
    for index in range(segments):
        low, high = events * index / segments, events * (index + 1) / segments
        end = _at(looks, high)
        if start is None or end is None:
            break
        spans = [c for c in checkpoints if low < c.records_read <= high]
        rss = [s.rss_mib for s in looks if start[0] <= s.at <= end[0]] or [
            min(looks, key=lambda s: abs(s.at - end[0])).rss_mib
        ]
        wall, cpu = end[0] - start[0], end[1] - start[1]
        out.append(
            {
                "to_event": int(high),
                "wall_s": wall,
                "events_per_s": (high - low) / wall if wall > 0 else float("inf"),
                "cpu_us_per_event": cpu / (high - low) * 1e6,
                "checkpoints": len(spans) + sum(c.missed for c in spans),
                "checkpoints_timed": len(spans),
                "checkpoint_mean_s": statistics.fmean(c.duration_ms for c in spans) / 1000 if spans else None,
                "checkpoint_max_s": max(c.duration_ms for c in spans) / 1000 if spans else None,
                "peak_rss_mib": max(rss),
            }
        )
        start = end
    return out


def verdicts(segments: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The three targets, last segment against the first (within :data:`FLAT_WITHIN`)."""
    if len(segments) < 2:
        return {}
    first, last = segments[0], segments[-1]
    out: dict[str, dict[str, Any]] = {}
    ratio = last["events_per_s"] / first["events_per_s"]
    out["throughput"] = {
        "first": first["events_per_s"],
        "last": last["events_per_s"],
        "ratio": ratio,
        "met": ratio >= 1 - FLAT_WITHIN,
    }
    timed = [s for s in segments if s["checkpoint_mean_s"] is not None]
    if len(timed) >= 2:
        ratio = timed[-1]["checkpoint_mean_s"] / timed[0]["checkpoint_mean_s"]
        out["checkpoint"] = {
            "first": timed[0]["checkpoint_mean_s"],
            "last": timed[-1]["checkpoint_mean_s"],
            "ratio": ratio,
            "met": ratio <= 1 + FLAT_WITHIN,
        }
    ratio = last["peak_rss_mib"] / first["peak_rss_mib"]
    out["rss"] = {
        "first": first["peak_rss_mib"],
        "last": last["peak_rss_mib"],
        "ratio": ratio,
        "met": ratio <= 1 + FLAT_WITHIN,
    }
    return out


def verify_tables(
    read_back: dict[str, tuple[list[int], list[str | None]]], live_versions: dict[str, dict[int, int]]
) -> dict[str, dict[str, Any]]:
    """Each table's ``(ids, notes)`` as read back against the model: every live key exactly once,
    carrying the ``note`` of its last version. Counts missing, unexpected, duplicate and stale rows."""
    out: dict[str, dict[str, Any]] = {}
    for table, live in live_versions.items():
        ids, notes = read_back.get(table, ([], []))
        seen: dict[int, int] = {}
        stale = 0
        for key, note in zip(ids, notes, strict=True):
            seen[key] = seen.get(key, 0) + 1
            if key in live and note != tp.expected_note(key, live[key]):
                stale += 1
        missing = sum(1 for key in live if key not in seen)
        unexpected = sum(1 for key in seen if key not in live)
        duplicated = sum(1 for count in seen.values() if count > 1)
        out[table] = {
            "rows": len(ids),
            "expected_rows": len(live),
            "missing": missing,
            "unexpected": unexpected,
            "duplicated": duplicated,
            "stale": stale,
            "exact": missing == unexpected == duplicated == stale == 0 and table in read_back,
        }
    return out


def read_tables(warehouse: Path, tables: Sequence[str]) -> dict[str, tuple[list[int], list[str | None]]]:
    """``(ids, notes)`` of each table in the warehouse, scanned with pyiceberg (deletes applied)."""
    from pyiceberg.exceptions import NoSuchTableError

    catalog = iceberg_catalog(warehouse)
    out: dict[str, tuple[list[int], list[str | None]]] = {}
    for table in tables:
        with contextlib.suppress(NoSuchTableError):  # a table the sink did not create is reported missing
            rows = (
                catalog.load_table(f"{tp.DATABASE}.{table}").scan(selected_fields=("id", "note")).to_arrow()
            )
            out[table] = (rows["id"].to_pylist(), rows["note"].to_pylist())
    return out


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{report['events']:,} Debezium JSON events ({report['shape']}) over {report['tables']} tables × "
        f"{report['partitions']} partitions; {report['ops']['c']:,} inserts, {report['ops']['u']:,} updates, "
        f"{report['ops']['d']:,} deletes; {report['schema_changes']} schema changes; ferry → Iceberg, "
        f"checkpoint.interval {report['checkpoint_interval']}; load average {report['load_before']} before, "
        f"{report['load_after']} after",
        "",
        f"whole run {report['run_s']:.1f} s, {report['events_per_s']:,.0f} events/s over the read, "
        f"{report['cpu_us_per_event']:.1f} CPU µs/event, peak RSS {report['peak_rss_mib']:.0f} MiB, "
        f"{report['checkpoints']} checkpoints, exit code {report['exit_code']}",
        "",
        f"{'segment to':>12} {'events/s':>9} {'CPU µs/ev':>9} {'ckpts':>5} {'ckpt mean s':>11} "
        f"{'ckpt max s':>10} {'peak RSS MiB':>12}",
    ]
    for s in report["segments"]:
        mean = "–" if s["checkpoint_mean_s"] is None else f"{s['checkpoint_mean_s']:.2f}"
        top = "–" if s["checkpoint_max_s"] is None else f"{s['checkpoint_max_s']:.2f}"
        lines.append(
            f"{s['to_event']:>12,} {s['events_per_s']:>9,.0f} {s['cpu_us_per_event']:>9.1f} "
            f"{s['checkpoints']:>5} {mean:>11} {top:>10} {s['peak_rss_mib']:>12.0f}"
        )
    lines += ["", "targets (last segment against the first):"]
    names = {
        "throughput": ("events/s", "no more than 20 % slower (≥ 0.80×)", "{:,.0f}"),
        "checkpoint": ("mean checkpoint duration", "flat (≤ +20 %)", "{:.2f} s"),
        "rss": ("peak RSS", "flat (≤ +20 %)", "{:.0f} MiB"),
    }
    for key, (label, target, form) in names.items():
        found = report["targets"].get(key)
        if found is None:
            lines.append(f"  {label}: not measured")
            continue
        lines.append(
            f"  {label} {form.format(found['first'])} → {form.format(found['last'])} "
            f"({found['ratio']:.2f}×), {target}: {'met' if found['met'] else 'NOT met'}"
        )
    lines += ["", "read back with pyiceberg against the model of the final state:"]
    for table, facts in report["verification"].items():
        lines.append(
            f"  {table}: {facts['rows']:,} rows ({facts['expected_rows']:,} keys live), missing {facts['missing']}, "
            f"unexpected {facts['unexpected']}, duplicated {facts['duplicated']}, stale {facts['stale']}: "
            f"{'exact' if facts['exact'] else 'NOT EXACT'}"
        )
    lines.append(f"verified: {'yes' if report['verified'] else 'NO'}")
    return "\n".join(lines)


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


@contextlib.contextmanager
def broker_at(bootstrap: str | None, work_dir: Path) -> Iterator[str]:
    """``bootstrap`` when given, else a local broker (``ferry.local.kafka_broker``) for the run."""
    if bootstrap:
        yield bootstrap
        return
    from ferry.local.kafka_broker import KafkaBroker

    log("starting a Kafka broker ...")
    with KafkaBroker(data_root=work_dir / "kafka") as broker:
        log(f"broker ready at {broker.bootstrap_servers}")
        yield broker.bootstrap_servers


def run_long(args: argparse.Namespace, bootstrap: str, work_dir: Path) -> dict[str, Any]:
    workload = tp.Workload(
        events=args.events,
        tables=args.tables,
        partitions=args.partitions,
        change_every=args.change_every,
        with_schema=not args.no_schema,
        seed=args.seed,
        server=f"long{uuid.uuid4().hex[:6]}",
        mix=args.mix_shares,
    )
    load_before = load_average()
    log(f"producing {workload.events:,} events over {workload.tables} tables ...")
    produced = tp.produce_workload(bootstrap, workload)
    log(
        f"produced {produced.events:,} events ({produced.bytes / 2**20:,.0f} MiB) in {produced.seconds:.1f} s"
    )
    name = f"long-{uuid.uuid4().hex[:8]}"
    warehouse = work_dir / f"{name}-warehouse"
    warehouse.mkdir(parents=True)
    job = iceberg_job(
        name=name,
        bootstrap=bootstrap,
        topics=workload.topics(),
        work_dir=work_dir,
        warehouse=warehouse,
        checkpoint_interval=args.checkpoint_interval,
        bounded=True,
    )
    pipeline = PipelineProcess(job, name, work_dir, work_dir / f"{name}-state.db")
    with pipeline:
        deadline = time.monotonic() + args.timeout
        last = 0.0
        while pipeline.running() and time.monotonic() < deadline:
            time.sleep(0.5)
            if pipeline.samples and time.monotonic() - last >= 10:
                last = time.monotonic()
                s = pipeline.samples[-1]
                log(
                    f"  ferry → Iceberg: {s.records_read:,}/{workload.events:,} events, RSS {s.rss_mib:.0f} MiB"
                )
        if pipeline.running():
            log(f"the pipeline did not finish within {args.timeout:.0f} s: stopping it")
    if pipeline.exit_code != 0:
        log(pipeline.output_tail())
    status = pipeline.status() or {"metrics": {}}
    metrics = status["metrics"]
    segments = segment_report(pipeline.samples, pipeline.checkpoints, workload.events, args.segments)
    log("reading the tables back ...")
    read_back = read_tables(warehouse, tp.table_names(workload.tables))
    verification = verify_tables(read_back, produced.live_versions)
    first_read = next((s for s in pipeline.samples if s.records_read > 0), None)
    run_s = (pipeline.ended_at or time.time()) - pipeline.started_at
    read_s = (pipeline.ended_at or time.time()) - (first_read.at if first_read else pipeline.started_at)
    report = {
        "events": workload.events,
        "tables": workload.tables,
        "partitions": workload.partitions,
        "shape": "schema envelope" if workload.with_schema else "payload only",
        "mean_event_bytes": produced.bytes / max(1, produced.events),
        "ops": produced.ops,
        "schema_changes": len(produced.changes),
        "checkpoint_interval": args.checkpoint_interval,
        "load_before": load_before,
        "load_after": load_average(),
        "run_s": run_s,
        "events_per_s": workload.events / read_s if first_read is not None and read_s > 0 else 0.0,
        "cpu_us_per_event": (pipeline.cpu_s or 0.0) / workload.events * 1e6,
        "peak_rss_mib": pipeline.peak_rss_mib or 0.0,
        "checkpoints": int(metrics.get("checkpoints", 0)),
        "records_read": int(metrics.get("records_read", 0)),
        "bad_records": int(metrics.get("bad_records", 0)),
        "exit_code": pipeline.exit_code,
        "segments": segments,
        "checkpoint_samples": [asdict(c) for c in pipeline.checkpoints],
        "rss_samples": [
            (round(s.at - pipeline.started_at, 2), round(s.rss_mib, 1)) for s in pipeline.samples
        ],
        "targets": verdicts(segments),
        "verification": verification,
    }
    report["verified"] = (
        pipeline.exit_code == 0
        and report["bad_records"] == 0
        and bool(verification)
        and all(t["exact"] for t in verification.values())
    )
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/long_run.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--events", type=int, default=5_000_000, help="change events in all (default 5000000)"
    )
    parser.add_argument("--tables", type=int, default=4, help="tables, one topic each (default 4)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per topic (default 2)")
    parser.add_argument(
        "--change-every",
        type=int,
        default=0,
        help="events of one table between two of its schema changes (default 0: none)",
    )
    parser.add_argument("--no-schema", action="store_true", help="payload-only Debezium JSON")
    parser.add_argument(
        "--mix", default="70/25/5", help="shares of inserts/updates/deletes (default 70/25/5)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--segments", type=int, default=10, help="segments of the stream reported (default 10)"
    )
    parser.add_argument(
        "--checkpoint-interval", default="5s", help="the job's checkpoint.interval (default 5s)"
    )
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds allowed for the pipeline")
    parser.add_argument("--work-dir", help="where state and the warehouse go (default: a temp dir, removed)")
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (the table goes to stderr)"
    )
    args = parser.parse_args(argv)
    args.mix_shares = tp.parse_mix(parser, args.mix)
    if args.events < args.tables * args.segments:
        parser.error("--events must be at least --tables × --segments")
    return args


def run_reported(
    args: argparse.Namespace,
    prefix: str,
    run: Callable[[argparse.Namespace, str, Path], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """Run a mode in its work folder (a temporary one unless ``--work-dir``) against the broker,
    print its report (or JSON, the table then on stderr); 0 when the rows were verified."""
    work_dir = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix=prefix))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        with broker_at(args.bootstrap, work_dir) as bootstrap:
            report = run(args, bootstrap, work_dir)
    finally:
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    text = render(report)
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=str)
        print()
        log("\n" + text)
    else:
        print(text)
    return 0 if report["verified"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_reported(parse_args(argv), "ferry-long-", run_long, render)


if __name__ == "__main__":
    sys.exit(main())
