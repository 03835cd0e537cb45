"""A projection's names as Flink CDC's TransformParser gives them: items in order, ``*`` standing
for the source's columns, an item with a name an earlier one has replacing it in the earlier one's
place. A projection that validates binds to the table and gives the model's columns and values."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.config.loader import load_job_text
from ferry.model import types as T
from ferry.model.events import DataChange, Op, SourcePosition
from ferry.model.schema import Column, Schema, TableId
from ferry.transform.blocks import TableTransforms, unsupported_reason

ORDERS = TableId.parse("shop.orders")
SCHEMA = Schema.of(
    [Column("id", T.INT().not_null()), Column("name", T.STRING()), Column("region", T.STRING())], ["id"]
)
ROW = {"id": 1, "name": "Ada", "region": "eu"}
JOB = """\
source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:9, topic: shop.shop.orders}
sink: {type: memory}
transform:
  - source-table: shop.orders
    projection: "%s"
"""

ITEMS = st.one_of(
    st.just(("*",)),
    st.sampled_from(["id", "name", "region"]).map(lambda c: ("column", c)),
    st.tuples(
        st.just("upper"), st.sampled_from(["name", "region"]), st.sampled_from(["name", "region", "n"])
    ),
)


def text(item: tuple[str, ...]) -> str:
    if item[0] == "*":
        return "*"
    if item[0] == "column":
        return item[1]
    return f"UPPER({item[1]}) AS {item[2]}"


def model(items: list[tuple[str, ...]]) -> dict[str, Any]:
    """Flink CDC's rule: a name given again replaces the earlier item where it stands."""
    out: dict[str, Any] = {}
    for item in items:
        if item[0] == "*":
            out.update(ROW)  # a name already there keeps its place
        elif item[0] == "column":
            out[item[1]] = ROW[item[1]]
        else:
            out[item[2]] = ROW[item[1]].upper()
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=6))
def test_a_projection_that_validates_binds_with_flink_cdc_names(items: list[tuple[str, ...]]) -> None:
    if not any(i[0] == "*" or i == ("column", "id") for i in items):
        items = [("column", "id"), *items]  # the key is kept (else primary-keys is needed)
    projection = ", ".join(text(i) for i in items)
    job = load_job_text(JOB % projection, env={})
    assert unsupported_reason(job) is None
    transforms = TableTransforms(job.transform)
    expected = model(items)
    assert transforms.schema(ORDERS, SCHEMA).names == tuple(expected)
    change = DataChange(ORDERS, Op.INSERT, None, dict(ROW), SourcePosition("t", 0, 0))
    [projected] = transforms.rows(ORDERS, SCHEMA, [change], lambda c, reason: None)
    assert projected.after == expected
