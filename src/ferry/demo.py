"""``make demo``: Debezium change events with schema changes, from a local Kafka into Iceberg.

Starts a single-node Kafka broker (fetched from Maven Central on first use), produces a sample
Debezium stream for two tables of a shop database (inserts, updates, deletes, an added column, a
widened type, a renamed column announced on Debezium's schema-change topic), runs the job in
``configs/demo.yaml`` as a ferry worker until it has read everything, then prints the Iceberg
tables and the schema-change history.
"""

from __future__ import annotations

import decimal
import os
import shutil
import sys
from pathlib import Path

from ferry.local import debezium as dbz
from ferry.local.kafka_broker import KafkaBroker, create_topic, produce, wait_for_group_coordinator

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "configs" / "demo.yaml"
VAR = Path("var/demo")


def sample_stream(bootstrap: str) -> int:
    """Produce the sample stream; returns how many change events were written."""
    orders = dbz.DebeziumTable(
        "shop",
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("customer_id", dbz.INT32),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("qty", dbz.INT32),
        ],
    )
    customers = dbz.DebeziumTable(
        "shop",
        "inventory",
        "customers",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("name", dbz.STRING),
            dbz.ConnectColumn("email", dbz.STRING),
        ],
    )
    for topic in (orders.topic, customers.topic, "shop"):
        create_topic(bootstrap, topic, partitions=1, exist_ok=True)

    order_events = [
        orders.insert({"id": i, "customer_id": i % 3 + 1, "item": f"item-{i}", "qty": i})
        for i in range(1, 11)
    ]
    order_events.append(
        orders.update(
            {"id": 2, "customer_id": 3, "item": "item-2", "qty": 2},
            {"id": 2, "customer_id": 3, "item": "item-2", "qty": 5},
        )
    )
    order_events.append(orders.delete({"id": 7, "customer_id": 2, "item": "item-7", "qty": 7}))
    # a new column, placed after `item`
    ddl_add = orders.add_column("price", dbz.DECIMAL(10, 2), after="item")
    order_events += [
        orders.insert(
            {"id": i, "customer_id": 1, "item": f"item-{i}", "price": decimal.Decimal(i) / 4, "qty": i}
        )
        for i in range(11, 14)
    ]
    # a type widening: qty INT -> BIGINT
    ddl_widen = orders.change_type("qty", dbz.INT64)
    order_events.append(
        orders.insert(
            {
                "id": 14,
                "customer_id": 2,
                "item": "item-14",
                "price": decimal.Decimal("9.99"),
                "qty": 10_000_000_000,
            }
        )
    )
    # a rename, which only the DDL on the schema-change topic can tell from a drop plus an add
    ddl_rename = orders.rename_column("qty", "quantity")
    order_events += [
        orders.insert(
            {"id": i, "customer_id": 3, "item": f"item-{i}", "price": decimal.Decimal("1.50"), "quantity": i}
        )
        for i in range(15, 18)
    ]
    order_events.append(
        orders.update(
            {"id": 15, "customer_id": 3, "item": "item-15", "price": decimal.Decimal("1.50"), "quantity": 15},
            {"id": 15, "customer_id": 3, "item": "item-15", "price": decimal.Decimal("1.75"), "quantity": 16},
        )
    )

    customer_events = [
        customers.insert({"id": i, "name": n, "email": f"{n.lower()}@example.com"})
        for i, n in enumerate(["Ada", "Grace", "Edsger"], start=1)
    ]
    ddl_customer = customers.add_column("country", dbz.STRING)
    customer_events.append(
        customers.update(
            {"id": 2, "name": "Grace", "email": "grace@example.com"},
            {"id": 2, "name": "Grace", "email": "grace@example.com", "country": "US"},
        )
    )

    schema_changes = [orders.schema_change(d) for d in (ddl_add, ddl_widen, ddl_rename)]
    schema_changes.append(customers.schema_change(ddl_customer))
    # Debezium writes a DDL to the schema-change topic before the rows that follow it
    produce(bootstrap, "shop", [v for _, v in schema_changes], keys=[k for k, _ in schema_changes])
    produce(bootstrap, orders.topic, [v for _, v in order_events], keys=[k for k, _ in order_events])
    produce(bootstrap, customers.topic, [v for _, v in customer_events], keys=[k for k, _ in customer_events])
    return len(order_events) + len(customer_events)


def show_tables(warehouse: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog  # noqa: PLC0415

    catalog = SqlCatalog("ferry", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    for name in ("inventory.orders", "inventory.customers"):
        table = catalog.load_table(name)
        print(f"\n== Iceberg table {name} ==")
        print(table.schema())
        rows = table.scan().to_arrow().sort_by("id").to_pylist()
        for row in rows:
            print("  ", row)
        print(f"  ({len(rows)} rows, {len(table.snapshots())} snapshots)")


def main() -> int:
    from ferry.cli.output import render_status  # noqa: PLC0415
    from ferry.config.loader import load_job  # noqa: PLC0415
    from ferry.logs import configure  # noqa: PLC0415
    from ferry.state import StateStore  # noqa: PLC0415
    from ferry.worker import FerryWorker  # noqa: PLC0415

    # warnings and errors (librdkafka's among them) as ferry's log lines, as `ferry run` writes them
    configure("WARNING")
    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    print("starting a local Kafka broker (the first run fetches it from Maven Central) ...", flush=True)
    with KafkaBroker() as broker:
        bootstrap = broker.bootstrap_servers
        print(f"broker at {bootstrap}; producing a Debezium stream with schema changes ...", flush=True)
        count = sample_stream(bootstrap)
        wait_for_group_coordinator(bootstrap, "shop")
        print(f"{count} change events produced; running {JOB.relative_to(ROOT)} ...", flush=True)
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "FERRY_VAR": str(VAR.resolve())}
        job = load_job(JOB, env=env)
        worker = FerryWorker(job)
        code = worker.run()
        if worker.error is not None:
            print(f"pipeline failed: {worker.error}", file=sys.stderr)
            return 1
        show_tables(VAR.resolve() / "warehouse")
        print()
        print(render_status(StateStore(job.pipeline.state_url), [job.pipeline.name], "text"))
    return code


if __name__ == "__main__":
    sys.exit(main())
