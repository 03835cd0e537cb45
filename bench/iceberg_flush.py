"""The CPU and wall time of one Iceberg checkpoint of many tables, in one process, without Kafka.

Creates ``--tables`` tables in a SQLite catalog, then ``--rounds`` times writes ``--rows`` changes
into every table (half of them updates of the previous round's keys) and flushes the sink: one
checkpoint of every table. Prints each flush's wall and CPU seconds; the tables are read back
with pyiceberg's own SQL catalog at the end and checked (every key once, with its last version).

    .venv/bin/python bench/iceberg_flush.py                  # 128 tables, 400 rows, 3 rounds
    .venv/bin/python bench/iceberg_flush.py --tables 16 --rows 5000 --profile flush.prof
"""

from __future__ import annotations

import argparse
import cProfile
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from ferry.model.events import CreateTable, DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import BIGINT, DOUBLE, INT, STRING
from ferry.sinks.iceberg.config import IcebergSinkConfig
from ferry.sinks.iceberg.sink import IcebergSink

SCHEMA = Schema.of(
    [
        Column("id", BIGINT().not_null()),
        Column("note", STRING()),
        Column("qty", INT()),
        Column("amount", DOUBLE()),
    ],
    ["id"],
)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=128)
    parser.add_argument("--rows", type=int, default=400, help="changes per table per checkpoint")
    parser.add_argument("--rounds", type=int, default=3, help="checkpoints")
    parser.add_argument("--profile", help="cProfile the last flush into this file")
    args = parser.parse_args(argv)
    warehouse = Path(tempfile.mkdtemp(prefix="ferry-flush-")) / "warehouse"
    config = IcebergSinkConfig.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": str(warehouse)}
    )
    sink = IcebergSink(config, pipeline="bench")
    tables = [TableId(None, "shop", f"t{i}") for i in range(args.tables)]
    last: dict[int, int] = {}
    try:
        for table_id in tables:
            sink.apply_schema_change(CreateTable(table_id, SCHEMA), SCHEMA)
        profiler = cProfile.Profile() if args.profile else None
        for round_ in range(args.rounds):
            for table_id in tables:
                changes = []
                for k in range(args.rows):
                    key = round_ * args.rows // 2 + k  # the first half updates the last round's keys
                    row = {"id": key, "note": f"n{key}.{round_}", "qty": k, "amount": k / 3}
                    changes.append(DataChange(table_id, Op.INSERT, None, row))
                    last[key] = round_
                sink.write(table_id, SCHEMA, changes)
            wall, cpu = time.perf_counter(), cpu_seconds()
            if profiler is not None and round_ == args.rounds - 1:
                profiler.enable()
            sink.flush({("bench", 0): (round_ + 1) * args.rows})
            if profiler is not None and round_ == args.rounds - 1:
                profiler.disable()
                profiler.dump_stats(args.profile)
            print(
                f"flush {round_ + 1}: {args.tables} tables, {time.perf_counter() - wall:.2f} s wall, "
                f"{cpu_seconds() - cpu:.2f} s CPU",
                flush=True,
            )
    finally:
        sink.close()
    reader = SqlCatalog(
        "ferry",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=warehouse.as_uri(),
        init_catalog_tables="false",
    )
    try:
        wrong = 0
        for table_id in tables:
            rows = reader.load_table(f"shop.{table_id.table_name}").scan().to_arrow().to_pylist()
            held = {row["id"]: row["note"] for row in rows}
            wrong += len(rows) != len(last) or any(held.get(k) != f"n{k}.{r}" for k, r in last.items())
    finally:
        reader.engine.dispose()
    print(f"read back: {args.tables - wrong} of {args.tables} tables exact")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
