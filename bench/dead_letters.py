"""What a dead letter costs: the same pipeline over N good rows and over N rows that do not fit.

Produces two streams of ``--records`` Debezium JSON inserts to a single-node Apache Kafka broker:
in the first every row is written; in the second the sink table's ``qty`` column stayed INT
when the source widened it to BIGINT (the memory sink refuses the type change, as a sink that
cannot alter a column's type does), and every row carries a value out of INT's range, so every
row goes to the real dead-letter topic (``<pipeline>.dlq``) with its reason. Each lane runs ferry
to the end of its topic (``build_runner(...).run()``) and reports records/s and CPU µs per record
over the whole run; the dead-letter lane also checks that the topic holds one record per row.

    .venv/bin/python bench/dead_letters.py                  # 10,000 records per lane
    .venv/bin/python bench/dead_letters.py --records 50000 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ferry.config.loader import load_job_text
from ferry.local import debezium as dbz
from ferry.local.kafka_broker import KafkaBroker, create_topic, produce
from ferry.sinks.memory import MemorySink
from ferry.worker import build_runner


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stream(records: int, dead: bool) -> list[tuple[bytes | None, bytes]]:
    table = dbz.DebeziumTable(
        "bench",
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )
    out = [table.insert({"id": 0, "item": "first", "qty": 0})]  # the table is made with qty INT
    table.change_type("qty", dbz.INT64)
    qty = 2**40 if dead else 7  # out of INT's range in the dead-letter lane
    out += [table.insert({"id": i, "item": f"item-{i}", "qty": qty}) for i in range(1, records + 1)]
    return out


def job(bootstrap: str, topic: str, directory: Path, name: str) -> str:
    return f"""
source:
  type: kafka
  properties.bootstrap.servers: {bootstrap}
  topic: {topic}
  value.format: debezium-json
  scan.startup.mode: earliest-offset
  scan.bounded.mode: latest-offset
sink:
  type: memory
pipeline:
  name: {name}
  state.url: sqlite:///{directory}/state.db
  schema.change.behavior: TRY_EVOLVE
"""


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def lane(bootstrap: str, records: int, dead: bool, directory: Path) -> dict[str, Any]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    rows = stream(records, dead)
    produce(bootstrap, topic, [v for _, v in rows], keys=[k for k, _ in rows])
    name = f"bench-{uuid.uuid4().hex[:8]}"
    (directory / name).mkdir()
    sink = MemorySink()
    sink.refuse_tags = {"alter.column.type"}
    runner = build_runner(load_job_text(job(bootstrap, topic, directory / name, name)), sink=sink)
    wall, cpu = time.perf_counter(), cpu_seconds()
    runner.run()
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    letters = end_offset(bootstrap, f"{name}.dlq") if dead else 0
    expected = records if dead else 0
    if runner.metrics.bad_records != expected or letters != expected:
        raise SystemExit(
            f"expected {expected} dead letters, found {runner.metrics.bad_records} ({letters} stored)"
        )
    return {
        "lane": "dead letters" if dead else "good rows",
        "records": records,
        "seconds": round(wall, 3),
        "records_per_s": round(records / wall),
        "cpu_us_per_record": round(cpu / records * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--bootstrap", help="an existing broker (none is started)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        directory = Path(work)
        if args.bootstrap:
            results = [lane(args.bootstrap, args.records, dead, directory) for dead in (False, True)]
        else:
            with KafkaBroker(data_root=directory / "kafka") as broker:
                bootstrap = broker.bootstrap_servers
                results = [lane(bootstrap, args.records, dead, directory) for dead in (False, True)]
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        print(f"{'lane':<14}{'records':>9}{'seconds':>9}{'records/s':>11}{'CPU µs/record':>15}")
        for r in results:
            print(
                f"{r['lane']:<14}{r['records']:>9}{r['seconds']:>9}{r['records_per_s']:>11}"
                f"{r['cpu_us_per_record']:>15}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
