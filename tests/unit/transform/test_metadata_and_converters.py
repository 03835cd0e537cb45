"""``__data_event_type__``, ``converter-after-transform: SOFT_DELETE`` and ``table-options``."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from ferry.config.job import TransformConfig
from ferry.config.loader import read_job_text
from ferry.pipeline.compiled import Session
from ferry.pipeline.events import DataChange, Op
from ferry.pipeline.schema import Column, Schema, TableId
from ferry.pipeline.transform import TableTransforms
from ferry.pipeline.types import BIGINT, INT, STRING

TABLE = TableId.parse("db.orders")
SOURCE = Schema((Column("id", INT().not_null()), Column("name", STRING())), ("id",), (), "orders")
CHANGES = [
    DataChange(TABLE, Op.INSERT, None, {"id": 1, "name": "a"}, 0, 0),
    DataChange(TABLE, Op.UPDATE, {"id": 1, "name": "a"}, {"id": 1, "name": "b"}, 1, 0),
    DataChange(TABLE, Op.DELETE, {"id": 1, "name": "b"}, None, 2, 0),
]


def transforms(**block: Any) -> TableTransforms:
    return TableTransforms([TransformConfig.model_validate({"source-table": r"db.orders", **block})])


def run(t: TableTransforms) -> list[tuple[Op, Any, Any]]:
    errors: list[str] = []
    out = t.rows(TABLE, SOURCE, CHANGES, lambda change, why: errors.append(why))
    assert errors == []
    return [(c.op, c.before, c.after) for c in out]


def test_the_event_type_column_names_each_image() -> None:
    t = transforms(projection="\\*, __data_event_type__ AS op_type")
    assert t.schema(TABLE, SOURCE).columns[-1] == Column("op_type", STRING())
    assert run(t) == [
        (Op.INSERT, None, {"id": 1, "name": "a", "op_type": "+I"}),
        (Op.UPDATE, {"id": 1, "name": "a", "op_type": "-U"}, {"id": 1, "name": "b", "op_type": "+U"}),
        (Op.DELETE, {"id": 1, "name": "b", "op_type": "-D"}, None),
    ]


def test_a_filter_may_read_the_event_type() -> None:
    t = transforms(projection="id, name", filter="__data_event_type__ <> '-D'")
    assert [op for op, _, _ in run(t)] == [Op.INSERT, Op.UPDATE]


def test_soft_delete_writes_a_delete_as_the_insert_of_its_row() -> None:
    t = transforms(
        projection="\\*, __data_event_type__ AS op_type", **{"converter-after-transform": "soft_delete"}
    )
    assert run(t)[-1] == (Op.INSERT, None, {"id": 1, "name": "b", "op_type": "-D"})
    plain = transforms(**{"converter-after-transform": "SOFT_DELETE"})
    assert run(plain)[-1] == (Op.INSERT, None, {"id": 1, "name": "b"})
    assert run(transforms(projection="\\*"))[-1][0] is Op.DELETE


def test_table_options_give_the_comment_and_warn_of_the_rest() -> None:
    t = transforms(**{"table-options": "comment=web order;bucket=4", "table-options.delimiter": ";"})
    assert t.schema(TABLE, SOURCE).comment == "web order"
    assert transforms().schema(TABLE, SOURCE).comment == "orders"
    text = (
        "source:\n  type: kafka\n  properties.bootstrap.servers: 127.0.0.1:9092\n  topic: t\n"
        "sink:\n  type: memory\n"
        "transform:\n  - source-table: db.orders\n    table-options: comment=x,sequence.field=ts\n"
    )
    _, warnings = read_job_text(text, file="job.yaml")
    assert [(w.line, w.key_path) for w in warnings] == [(9, "transform[0].table-options")]
    assert "'sequence.field' is accepted and not applied" in warnings[0].message


def test_op_ts_is_the_changes_time_at_the_source_unless_a_column_has_the_name() -> None:
    t = TableTransforms(
        [
            TransformConfig.model_validate(
                {
                    "source-table": r"db.orders",
                    "projection": "id, op_ts AS opts, DATE_FORMAT(TO_TIMESTAMP_LTZ(op_ts), 'yyyy-MM-dd') AS d",
                }
            )
        ],
        session=Session(ZoneInfo("Asia/Shanghai")),
    )
    change = DataChange(TABLE, Op.INSERT, None, {"id": 1, "name": "a"}, 0, 1709236800000)
    [out] = t.rows(TABLE, SOURCE, [change], lambda c, why: None)
    assert out.after == {"id": 1, "opts": 1709236800000, "d": "2024-03-01"}
    assert t.schema(TABLE, SOURCE).column("opts").type == BIGINT()
    own = Schema((*SOURCE.columns, Column("op_ts", STRING())), ("id",), ())
    plain = transforms(projection="id, op_ts AS opts")
    [mine] = plain.rows(TABLE, own, [change._replace(after={"id": 1, "op_ts": "mine"})], lambda c, why: None)
    assert mine.after == {"id": 1, "opts": "mine"}
