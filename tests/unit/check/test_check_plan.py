"""The operator plan: stable ids, one entry per aggregate call, join inputs pruned as Flink prunes them."""

from __future__ import annotations

from ferry.check import plan_sql
from ferry.sql.model import Plan

TABLES = """
CREATE TABLE t (a INT, b BIGINT, c STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen');
CREATE TABLE u (k INT, v STRING, w DOUBLE) WITH ('connector' = 'datagen');
CREATE TABLE sink_t (a INT, s BIGINT) WITH ('connector' = 'print');
"""


def ids(plan: Plan) -> list[str]:
    return [op.id for op in plan.operators]


def test_the_plan_lists_sources_aggregate_calls_and_sinks() -> None:
    plan = plan_sql(TABLES + "INSERT INTO sink_t SELECT a, SUM(b) FROM t WHERE c <> 'x' GROUP BY a;")

    assert ids(plan) == [
        "source t",
        "sink_t/aggregate[t]",
        "sink_t/aggregate[t]/SUM(b)",
        "sink_t/calc",
        "sink_t/sink",
    ]
    aggregate = plan.operator("sink_t/aggregate[t]")
    assert aggregate is not None and aggregate.stateful
    group_keys = aggregate.aspect("group keys")
    assert group_keys is not None and group_keys.value == "t.a:INT"
    filters = aggregate.aspect("filter")
    assert filters is not None and filters.display == "c <> 'x'"
    call = plan.operator("sink_t/aggregate[t]/SUM(b)")
    assert call is not None and call.parent == "sink_t/aggregate[t]" and call.fingerprint == "SUM(t.b:BIGINT)"
    assert plan.sources["t"].used_columns == ("a", "b", "c")


def test_operator_ids_do_not_depend_on_column_order_aliases_or_stateless_steps() -> None:
    first = plan_sql(TABLES + "SELECT a, SUM(b) FROM t GROUP BY a;")
    second = plan_sql(
        TABLES.replace("a INT, b BIGINT", "b BIGINT, a INT")
        + "SELECT x, SUM(y) AS total FROM (SELECT a AS x, b AS y FROM t WHERE b > 0) GROUP BY x;"
    )

    def stateful(plan: Plan) -> list[str]:
        return [op.id for op in plan.operators if op.stateful and op.parent is None]

    def fingerprints(plan: Plan) -> list[str]:
        return [op.fingerprint for op in plan.operators if op.parent is not None]

    assert stateful(first) == stateful(second) == ["query#1/aggregate[t]"]
    # A call is named as written (SUM(b), SUM(y)) and matched by what it computes.
    assert fingerprints(first) == fingerprints(second) == ["SUM(t.b:BIGINT)"]


def test_a_join_keeps_only_the_columns_used_above_it_or_in_its_condition() -> None:
    plan = plan_sql(TABLES + "SELECT t.a, u.v FROM t JOIN u ON t.a = u.k;")

    join = plan.operator("query#1/join[t, u]")
    assert join is not None
    left = join.aspect("left input schema")
    right = join.aspect("right input schema")
    assert left is not None and left.display == "a INT"
    assert right is not None and right.display == "k INT, v STRING"


def test_an_unused_aggregate_call_is_pruned() -> None:
    plan = plan_sql(
        TABLES + "SELECT a FROM (SELECT a, SUM(b) AS s, MAX(c) AS m FROM t GROUP BY a) WHERE a > 1;"
    )

    assert [op.label for op in plan.operators if op.kind == "aggregate-call"] == []


def test_calls_are_listed_under_their_aggregate_in_query_order() -> None:
    plan = plan_sql(TABLES + "SELECT a, MAX(c), SUM(b), COUNT(*) FROM t GROUP BY a;")

    assert [op.label for op in plan.operators if op.parent == "query#1/aggregate[t]"] == [
        "MAX(c)",
        "SUM(b)",
        "COUNT(*)",
    ]


def test_statements_into_the_same_sink_are_numbered() -> None:
    plan = plan_sql(
        TABLES
        + "INSERT INTO sink_t SELECT a, b FROM t;\n"
        + "INSERT INTO sink_t SELECT a, COUNT(*) FROM t GROUP BY a;\n"
        + "SELECT k FROM u;"
    )

    assert plan.statements == ("sink_t", "sink_t#2", "query#1")
    assert "sink_t#2/aggregate[t]" in ids(plan)


def test_ctes_and_views_plan_like_subqueries() -> None:
    plan = plan_sql(
        TABLES
        + "CREATE VIEW per_a AS SELECT a, SUM(b) AS s FROM t GROUP BY a;\n"
        + "WITH big AS (SELECT * FROM per_a WHERE s > 10) SELECT a FROM big;"
    )

    aggregate = plan.operator("query#1/aggregate[t]")
    assert aggregate is not None
    assert [op.label for op in plan.operators if op.kind == "aggregate-call"] == ["SUM(b)"]


def test_a_table_defined_outside_the_script_is_read_with_an_unknown_schema() -> None:
    plan = plan_sql("SELECT region, COUNT(*) FROM paimon_catalog.db.orders GROUP BY region;")

    source = plan.sources["paimon_catalog.db.orders"]
    assert not source.defined
    assert source.used_columns == ("region",)
    aggregate = plan.operator("query#1/aggregate[paimon_catalog.db.orders]")
    assert aggregate is not None
    keys = aggregate.aspect("group keys")
    assert keys is not None and keys.value == "paimon_catalog.db.orders.region"
