"""``__data_event_type__``, ``converter-after-transform: SOFT_DELETE`` and ``table-options``."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ferry.config import ConfigError
from ferry.config.job import TransformConfig
from ferry.config.loader import read_job_text
from ferry.model.events import DataChange, Op
from ferry.model.schema import Column, Schema, TableId, schema_from_dict, schema_to_dict
from ferry.model.types import BIGINT, INT, STRING
from ferry.transform.blocks import TableTransforms
from ferry.transform.compiled import Session

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


def test_table_options_give_the_comment_and_the_options_of_the_table() -> None:
    # transform.md: "sequence.field=gxsj,jjsj;file-index.bloom-filter.columns=jjdbh" with delimiter ";"
    t = transforms(
        **{
            "table-options": "comment=web order;sequence.field=gxsj,jjsj;file-index.bloom-filter.columns=jjdbh",
            "table-options.delimiter": ";",
        }
    )
    schema = t.schema(TABLE, SOURCE)
    assert schema.comment == "web order"
    assert schema.options == (("sequence.field", "gxsj,jjsj"), ("file-index.bloom-filter.columns", "jjdbh"))
    assert schema_from_dict(schema_to_dict(schema)) == schema
    plain = transforms().schema(TABLE, SOURCE)
    assert (plain.comment, plain.options) == ("orders", ())


def job_with_table_options(sink: str, options: str) -> str:
    return (
        "source:\n  type: kafka\n  properties.bootstrap.servers: 127.0.0.1:9092\n  topic: t\n"
        f"sink:\n  type: {sink}\n"
        f"transform:\n  - source-table: db.orders\n    table-options: {options}\n"
    )


def test_table_options_a_sink_cannot_apply_are_refused_at_their_line() -> None:
    with pytest.raises(ConfigError) as e:
        read_job_text(job_with_table_options("memory", "comment=x,sequence.field=ts"), file="job.yaml")
    [problem] = e.value.problems
    assert (problem.line, problem.key_path) == (9, "transform[0].table-options")
    assert "sequence.field=ts: the memory sink has no table options" in problem.message
    # a comment alone every sink takes; Paimon takes Paimon's options, without a warning
    assert read_job_text(job_with_table_options("memory", "comment=x"), file="job.yaml")[1] == []
    job, warnings = read_job_text(
        job_with_table_options("paimon", "comment=x,sequence.field=ts"), file="job.yaml"
    )
    assert warnings == [] and job.transform[0].table_option_map["sequence.field"] == "ts"
    with pytest.raises(ConfigError) as e:
        read_job_text(job_with_table_options("paimon", "primary-key=id"), file="job.yaml")
    assert "primary-key=id: the table's primary key is the transform's primary-keys" in str(e.value)
    with pytest.raises(ConfigError) as e:
        read_job_text(job_with_table_options("iceberg", "write.format.default=orc"), file="job.yaml")
    [problem] = e.value.problems
    assert problem.line == 9 and "pyiceberg writes Parquet data files only, not orc" in problem.message
    read_job_text(job_with_table_options("iceberg", "write.format.default=parquet"), file="job.yaml")


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
