"""End-to-end latency of ferry → Iceberg at a fixed offered load: from produce to visible in the table.

A producer thread paces Debezium JSON inserts onto a real Apache Kafka broker (5,000 events/s for
60 s by default), each new key stamped with the time it was produced (``produced_us``, microseconds
since the epoch, set just before ``Producer.produce``). ``ferry run`` reads the topic into an
Iceberg table store with ``checkpoint.interval`` 1 s, as its own process. A reader polls the table
with pyiceberg (every ``--poll`` s): each new snapshot's added data files are read, and each key is
stamped with the time it was first seen there (*visible*) and with its snapshot's commit time.

Reported: p50/p99/max latency produce → visible (and produce → commit, which leaves out the
reader's polling), against the target p99 ≤ 2 × checkpoint.interval + 1 s. Verified: every
record became visible, none appeared twice (outside a compaction's rewrite), and the final table,
scanned with deletes applied, holds every key exactly once with the stamp it was produced with.
See ``bench/README.md``.

    .venv/bin/python bench/latency.py                        # 5,000 events/s for 60 s
    .venv/bin/python bench/latency.py --rate 2000 --seconds 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import long_run as lr

DATABASE = "shop"
TABLE = "events"
#: The first key; keys are FIRST_KEY, FIRST_KEY + 1, ... in produce order.
FIRST_KEY = 1


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def target_p99_s(checkpoint_interval_s: float) -> float:
    return 2 * checkpoint_interval_s + 1.0


# --------------------------------------------------------------------------------------------------
# The producer
# --------------------------------------------------------------------------------------------------


@dataclass
class PacedProducer:
    """Produces ``rate`` inserts per second for ``seconds`` s on a thread; keeps each key's stamp."""

    bootstrap: str
    topic_server: str
    rate: float
    seconds: float
    stamps: list[int] = field(default_factory=list)
    """``produced_us`` of key ``FIRST_KEY + i`` at index i."""
    error: str | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    last_produced_at: float = 0.0
    behind_max_s: float = 0.0
    """The most the producer fell behind its schedule (the offered load not kept up)."""

    def __post_init__(self) -> None:
        from ferry.local import debezium as dbz

        self.table = dbz.DebeziumTable(
            self.topic_server,
            DATABASE,
            TABLE,
            [
                dbz.ConnectColumn("id", dbz.INT64, optional=False),
                dbz.ConnectColumn("produced_us", dbz.INT64),
                dbz.ConnectColumn("note", dbz.STRING),
            ],
            with_schema=False,
        )
        self.thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    @property
    def topic(self) -> str:
        return self.table.topic

    @property
    def total(self) -> int:
        return int(self.rate * self.seconds)

    def _run(self) -> None:
        from confluent_kafka import Producer

        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None and len(failures) < 10:
                failures.append(str(error))

        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "on_delivery": delivered, "acks": "all"}
        )
        insert, produce, total = self.table.insert, producer.produce, self.total
        self.started_at = start = time.time()
        sent = 0
        try:
            while sent < total:
                due = min(total, int((time.time() - start) * self.rate) + 1)
                self.behind_max_s = max(self.behind_max_s, (due - sent) / self.rate)
                while sent < due:
                    stamp = time.time_ns() // 1000
                    key, value = insert({"id": FIRST_KEY + sent, "produced_us": stamp, "note": f"n{sent}"})
                    produce(self.topic, value, key)
                    self.stamps.append(stamp)
                    sent += 1
                self.last_produced_at = time.time()
                producer.poll(0)
                time.sleep(0.001)
            left = producer.flush(60)
            if left or failures:
                self.error = f"{left} records not delivered; {'; '.join(failures)}"
        except Exception as e:  # reported with the results
            self.error = f"{type(e).__name__}: {e}"
        self.ended_at = time.time()


# --------------------------------------------------------------------------------------------------
# The reader
# --------------------------------------------------------------------------------------------------


@dataclass
class Sighting:
    visible_at: float
    committed_at: float
    produced_us: int


@dataclass
class VisibilityReader:
    """Polls the Iceberg table; records when each key first appeared in an added data file."""

    catalog: Any
    identifier: str = f"{DATABASE}.{TABLE}"
    first_seen: dict[int, Sighting] = field(default_factory=dict)
    duplicates: dict[int, int] = field(default_factory=dict)
    """Keys that appeared again in a snapshot that rewrote no data (a record delivered twice)."""
    snapshots_seen: set[int] = field(default_factory=set)
    rewrites: int = 0
    polls: int = 0
    poll_s_max: float = 0.0

    def __post_init__(self) -> None:
        self.table: Any = None

    def poll(self) -> int:
        """Look once; returns how many keys became visible."""
        import pyarrow.parquet as pq
        from pyiceberg.exceptions import NoSuchTableError
        from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

        started = time.time()
        if self.table is None:
            try:
                self.table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                return 0
        else:
            self.table = self.table.refresh()
        self.polls += 1
        now, new = time.time(), 0
        io = self.table.io
        for snapshot in sorted(self.table.metadata.snapshots, key=lambda s: s.sequence_number or 0):
            if snapshot.snapshot_id in self.snapshots_seen:
                continue
            self.snapshots_seen.add(snapshot.snapshot_id)
            summary = snapshot.summary
            operation = str(summary.operation.value) if summary is not None else ""
            props = summary.additional_properties if summary is not None else {}
            rewrite = operation == "replace" or int(props.get("deleted-data-files", 0) or 0) > 0
            self.rewrites += rewrite
            for manifest in snapshot.manifests(io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in manifest.fetch_manifest_entry(io):
                    data = entry.data_file
                    if entry.status != ManifestEntryStatus.ADDED or data.content != DataFileContent.DATA:
                        continue
                    with io.new_input(data.file_path).open() as stream:
                        rows = pq.read_table(stream, columns=["id", "produced_us"])
                    for key, stamp in zip(
                        rows["id"].to_pylist(), rows["produced_us"].to_pylist(), strict=True
                    ):
                        if key not in self.first_seen:
                            self.first_seen[key] = Sighting(now, snapshot.timestamp_ms / 1000, stamp)
                            new += 1
                        elif not rewrite:
                            self.duplicates[key] = self.duplicates.get(key, 0) + 1
        self.poll_s_max = max(self.poll_s_max, time.time() - started)
        return new

    def final_rows(self) -> tuple[list[int], list[int]]:
        """Every row of the table as it is now (a pyiceberg scan, deletes applied)."""
        if self.table is None:
            return [], []
        rows = self.table.refresh().scan(selected_fields=("id", "produced_us")).to_arrow()
        return rows["id"].to_pylist(), rows["produced_us"].to_pylist()


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def rank(share: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]

    return {
        "p50_s": rank(0.50),
        "p99_s": rank(0.99),
        "max_s": ordered[-1],
        "mean_s": statistics.fmean(ordered),
    }


def verify(
    stamps: Sequence[int],
    first_seen: dict[int, Sighting],
    duplicates: dict[int, int],
    final: tuple[Sequence[int], Sequence[int]],
) -> dict[str, Any]:
    """Every produced key visible, none twice, and in the final table exactly once with its stamp."""
    expected = {FIRST_KEY + i: stamp for i, stamp in enumerate(stamps)}
    never_visible = sum(1 for key in expected if key not in first_seen)
    wrong_stamp = sum(
        1 for key, seen in first_seen.items() if key in expected and seen.produced_us != expected[key]
    )
    ids, final_stamps = final
    counts: dict[int, int] = {}
    for key in ids:
        counts[key] = counts.get(key, 0) + 1
    final_missing = sum(1 for key in expected if key not in counts)
    final_duplicated = sum(1 for count in counts.values() if count > 1)
    unexpected = sum(1 for key in counts if key not in expected) + sum(
        1 for key in first_seen if key not in expected
    )
    final_wrong = sum(
        1 for key, stamp in zip(ids, final_stamps, strict=True) if key in expected and stamp != expected[key]
    )
    problems = {
        "never_visible": never_visible,
        "seen_twice": len(duplicates),
        "wrong_stamp": wrong_stamp + final_wrong,
        "missing_in_final_table": final_missing,
        "duplicated_in_final_table": final_duplicated,
        "unexpected": unexpected,
    }
    return {
        "produced": len(expected),
        "visible": len(first_seen),
        "final_rows": len(ids),
        **problems,
        "exactly_once": not any(problems.values()),
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"offered load {report['rate']:,.0f} events/s for {report['seconds']:.0f} s ({report['produced']:,} "
        f"Debezium JSON inserts, payload only, {report['partitions']} partitions), achieved "
        f"{report['achieved_rate']:,.0f} events/s (at most {report['producer_behind_max_s']:.2f} s behind "
        f"schedule); ferry → Iceberg, checkpoint.interval {report['checkpoint_interval_s']:g} s; reader polls "
        f"every {report['poll_s']:g} s (longest poll {report['reader_poll_max_s']:.2f} s); load average "
        f"{report['load_before']} before, {report['load_after']} after",
        "",
        f"{'latency':<22} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'mean s':>7}",
    ]
    for label, key in (("produce → visible", "visible"), ("produce → commit", "commit")):
        figures = report["latency"].get(key)
        if figures is None:
            lines.append(f"{label:<22} no record became visible")
            continue
        lines.append(
            f"{label:<22} {figures['p50_s']:>7.2f} {figures['p99_s']:>7.2f} {figures['max_s']:>7.2f} "
            f"{figures['mean_s']:>7.2f}"
        )
    visible = report["latency"].get("visible")
    target = report["target_p99_s"]
    if visible is None:
        lines.append(f"\ntarget p99 ≤ {target:.1f} s: NOT met (nothing visible)")
    else:
        verdict = "met" if visible["p99_s"] <= target else "NOT met"
        lines.append(
            f"\ntarget p99 produce → visible ≤ 2 × checkpoint.interval + 1 s = {target:.1f} s: "
            f"{visible['p99_s']:.2f} s, {verdict}"
        )
    v = report["verification"]
    lines.append(
        f"\nverification: {v['produced']:,} produced, {v['visible']:,} became visible, {v['final_rows']:,} rows in "
        f"the final table; never visible {v['never_visible']}, seen twice {v['seen_twice']}, wrong stamp "
        f"{v['wrong_stamp']}, missing in the final table {v['missing_in_final_table']}, duplicated there "
        f"{v['duplicated_in_final_table']}, unexpected {v['unexpected']}: "
        f"{'every record visible exactly once' if v['exactly_once'] else 'NOT exactly once'}"
    )
    lines.append(
        f"{report['snapshots']} snapshots ({report['rewrites']} rewrites), {report['checkpoints']} checkpoints, "
        f"pipeline exit code {report['exit_code']}"
    )
    timed = report.get("checkpoint_s")
    if timed is not None:
        lines.append(
            f"checkpoint duration (from the status, {len(report.get('checkpoint_samples', []))} timed): "
            f"p50 {timed['p50_s']:.2f} s, p99 {timed['p99_s']:.2f} s, max {timed['max_s']:.2f} s"
        )
    lines.append(f"verified: {'yes' if report['verified'] else 'NO'}")
    return "\n".join(lines)


def run_latency(args: argparse.Namespace, bootstrap: str, work_dir: Path) -> dict[str, Any]:
    from ferry.local.kafka_broker import create_topic

    load_before = lr.load_average()
    producer = PacedProducer(bootstrap, f"lat{uuid.uuid4().hex[:6]}", args.rate, args.seconds)
    create_topic(bootstrap, producer.topic, partitions=args.partitions)
    name = f"latency-{uuid.uuid4().hex[:8]}"
    warehouse = work_dir / f"{name}-warehouse"
    warehouse.mkdir(parents=True)
    interval_s = args.checkpoint_interval
    job = lr.iceberg_job(
        name=name,
        bootstrap=bootstrap,
        topics=[producer.topic],
        work_dir=work_dir,
        warehouse=warehouse,
        checkpoint_interval=f"{interval_s:g}s",
        bounded=False,
        batch_size=args.batch_size,
    )
    pipeline = lr.PipelineProcess(job, name, work_dir, work_dir / f"{name}-state.db")
    reader = VisibilityReader(lr.iceberg_catalog(warehouse))
    with pipeline:
        deadline = time.monotonic() + args.startup_timeout
        while time.monotonic() < deadline and pipeline.running():
            status = pipeline.status()
            if status is not None and status["metrics"].get("assigned"):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(
                f"the pipeline did not get its partitions within {args.startup_timeout:.0f} s:\n"
                + pipeline.output_tail()
            )
        log(f"pipeline running; producing {producer.total:,} inserts at {args.rate:,.0f}/s ...")
        producer.thread.start()
        last_report = time.monotonic()
        drain_deadline: float | None = None
        while pipeline.running():
            reader.poll()
            if time.monotonic() - last_report >= 5:
                last_report = time.monotonic()
                log(f"  {len(producer.stamps):,} produced, {len(reader.first_seen):,} visible")
            if not producer.thread.is_alive():
                if drain_deadline is None:
                    drain_deadline = time.monotonic() + args.drain_timeout
                if len(reader.first_seen) >= len(producer.stamps) or time.monotonic() > drain_deadline:
                    break
            time.sleep(args.poll)
        producer.thread.join()
    # the pipeline stopped with a final checkpoint: look once more, then scan the whole table
    reader.poll()
    final = reader.final_rows()
    status = pipeline.status() or {"metrics": {}}
    visible = [s.visible_at - s.produced_us / 1e6 for s in reader.first_seen.values()]
    committed = [s.committed_at - s.produced_us / 1e6 for s in reader.first_seen.values()]
    verification = verify(producer.stamps, reader.first_seen, reader.duplicates, final)
    produced_s = max(1e-9, producer.last_produced_at - producer.started_at)
    report = {
        "rate": args.rate,
        "seconds": args.seconds,
        "partitions": args.partitions,
        "produced": len(producer.stamps),
        "achieved_rate": len(producer.stamps) / produced_s,
        "producer_behind_max_s": producer.behind_max_s,
        "producer_error": producer.error,
        "checkpoint_interval_s": interval_s,
        "poll_s": args.poll,
        "reader_poll_max_s": reader.poll_s_max,
        "load_before": load_before,
        "load_after": lr.load_average(),
        "latency": {"visible": percentiles(visible), "commit": percentiles(committed)},
        "target_p99_s": target_p99_s(interval_s),
        "snapshots": len(reader.snapshots_seen),
        "rewrites": reader.rewrites,
        "checkpoints": int(status["metrics"].get("checkpoints", 0)),
        "checkpoint_samples": [c.duration_ms for c in pipeline.checkpoints],
        "checkpoint_s": percentiles([c.duration_ms / 1000 for c in pipeline.checkpoints]),
        "exit_code": pipeline.exit_code,
        "verification": verification,
    }
    report["verified"] = producer.error is None and verification["exactly_once"] and pipeline.exit_code == 0
    if pipeline.exit_code != 0:
        log(pipeline.output_tail())
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/latency.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=5000.0, help="events per second offered (default 5000)")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long the load is offered (default 60)"
    )
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic (default 2)")
    parser.add_argument(
        "--checkpoint-interval",
        type=float,
        default=1.0,
        help="the job's checkpoint.interval in s (default 1)",
    )
    parser.add_argument("--batch-size", type=int, default=10_000, help="the job's batch.size (default 10000)")
    parser.add_argument(
        "--poll", type=float, default=0.1, help="seconds between the reader's looks (default 0.1)"
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="seconds to wait, after the last produce, for every record to become visible (default 120)",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=180.0, help="seconds for the pipeline to start"
    )
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--work-dir", help="where state and the warehouse go (default: a temp dir, removed)")
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (the table goes to stderr)"
    )
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0 or args.rate * args.seconds < 1:
        parser.error("--rate × --seconds must be at least one event")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return lr.run_reported(parse_args(argv), "ferry-latency-", run_latency, render)


if __name__ == "__main__":
    sys.exit(main())
