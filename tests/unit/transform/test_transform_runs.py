"""A Flink CDC transform with its new functions, run by the pipeline runner: Debezium records
decoded, projected in the job's time zone, a Python function called, deletes kept as soft ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ferry.config.checks import accepted_schema_changes, check_supported
from ferry.config.loader import load_job, load_job_text
from ferry.connectors.formats import decoder_for
from ferry.connectors.memory import MemoryDeadLetter, MemorySource
from ferry.connectors.record import Record
from ferry.local import debezium as dbz
from ferry.model.events import DataChange, Op
from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import INT, STRING, TIMESTAMP_LTZ
from ferry.pipeline.route import TableRouter
from ferry.pipeline.router import SchemaChangeRouter
from ferry.pipeline.runner import PipelineRunner
from ferry.pipeline.settings import RunnerSettings
from ferry.sinks.memory import MemorySink
from ferry.state import StateStore
from ferry.transform.blocks import TableTransforms
from ferry.transform.compiled import Session

JOB = r"""
source:
  type: kafka
  properties.bootstrap.servers: 127.0.0.1:9
  topic: shop.inventory.orders
sink:
  type: memory
pipeline:
  name: soft deletes in Shanghai time
  local-time-zone: Asia/Shanghai
  user-defined-function:
    - name: shout
      python-code: |
        def eval(s: str, times: int) -> str:
            return None if s is None else s.upper() + "!" * times
transform:
  - source-table: inventory.orders
    projection: >-
      \*, DATE_FORMAT(paid, 'yyyy-MM-dd HH:mm') AS paid_local, shout(item, 2) AS loud,
      REGEXP_EXTRACT(code, '(\d+)', 1) AS code_digits, __data_event_type__ AS op_type
    filter: LOCATE('x', item) = 0
    converter-after-transform: SOFT_DELETE
"""


def test_a_flink_cdc_transform_runs_with_its_functions(tmp_path: Path) -> None:
    orders = dbz.DebeziumTable(
        "shop",
        "inventory",
        "orders",
        [
            dbz.ConnectColumn("id", dbz.INT32, optional=False),
            dbz.ConnectColumn("item", dbz.STRING),
            dbz.ConnectColumn("code", dbz.STRING),
            dbz.ConnectColumn(
                "paid", {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
            ),
        ],
    )
    rows = [
        {"id": 1, "item": "apple", "code": "A-17", "paid": "2024-02-29T20:00:00Z"},
        {"id": 2, "item": "xigua", "code": "B-2", "paid": "2024-02-29T01:00:00Z"},  # filtered out
    ]
    records = [orders.insert(rows[0]), orders.insert(rows[1]), orders.delete(rows[0])]
    job = load_job_text(JOB, env={})
    check_supported(job)
    sink = MemorySink()
    PipelineRunner(
        settings=RunnerSettings(name=job.pipeline.name, tune_gc=False, checkpoint_interval_s=0.05),
        source=MemorySource([Record(orders.topic, 0, i, key=k, value=v) for i, (k, v) in enumerate(records)]),
        decode=decoder_for("debezium-json").decode,
        sink=sink,
        state=StateStore(f"sqlite:///{tmp_path}/state.db"),
        router=SchemaChangeRouter(
            sink, job.pipeline.schema_change_behavior, accepted_schema_changes(None, ())
        ),
        tables=TableRouter(),
        dead_letter=MemoryDeadLetter(),
        transforms=TableTransforms(
            job.transform, session=Session(job.pipeline.time_zone), functions=job.user_functions()
        ),
    ).run()

    [row] = sink.rows(TableId.parse("inventory.orders"))
    # the delete is kept: the row it removed, written again with its kind
    assert {k: row[k] for k in ("id", "paid_local", "loud", "code_digits", "op_type")} == {
        "id": 1,
        "paid_local": "2024-03-01 04:00",
        "loud": "APPLE!!",
        "code_digits": "17",
        "op_type": "-D",
    }


def test_the_example_job_with_transforms_computes_its_columns() -> None:

    job = load_job(Path(__file__).resolve().parents[3] / "configs" / "transforms-to-iceberg.yaml", env={})
    transforms = TableTransforms(
        job.transform, session=Session(job.pipeline.time_zone), functions=job.user_functions()
    )
    table = TableId.parse("app_db.orders")
    source = Schema(
        (
            Column("id", INT().not_null()),
            Column("created_at", TIMESTAMP_LTZ(3)),
            Column("sku", STRING()),
            Column("email", STRING()),
        ),
        ("id",),
        (),
    )
    created = dt.datetime(2024, 2, 29, 20, 0, tzinfo=dt.UTC)
    rows = [
        {"id": 1, "created_at": created, "sku": "AB-12", "email": " Ada@Shop.example "},
        {"id": 2, "created_at": created, "sku": "AB-13", "email": "test@shop.example"},  # filtered out
    ]
    changes = [DataChange(table, Op.INSERT, None, r, i, 0) for i, r in enumerate(rows)]
    [out] = transforms.rows(table, source, changes, lambda c, why: None)
    assert out.after is not None
    assert {k: out.after[k] for k in ("order_day", "sku_family", "email_norm", "op_type")} == {
        "order_day": "2024-03-01",
        "sku_family": "AB",
        "email_norm": "ada@shop.example",
        "op_type": "+I",
    }
    assert out.after["age_hours"] > 0
    assert transforms.schema(table, source).comment == "orders, deletes kept as -D rows"
