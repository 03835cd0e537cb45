"""The stateless classifier: carrying offsets over refuses a job that keeps operator state."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.check import StatelessReport, is_stateless
from ferry.check.load import load_plan

TABLES = """
CREATE TABLE orders (
  id BIGINT, customer STRING, amount BIGINT, tags ARRAY<STRING>, ts TIMESTAMP(3), proc AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE customers (cid STRING, name STRING, PRIMARY KEY (cid) NOT ENFORCED)
  WITH ('connector' = 'jdbc', 'table-name' = 'customers');
CREATE TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'mysql-cdc', 'table-name' = 'users');
CREATE TABLE ev (k STRING, v INT, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'ev', 'key.format' = 'json', 'value.format' = 'json');
CREATE TABLE out_any (a STRING, b STRING) WITH ('connector' = 'print');
CREATE TABLE users_by_id (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'jdbc');
CREATE TABLE users_by_name (name STRING, id BIGINT, PRIMARY KEY (name) NOT ENFORCED)
  WITH ('connector' = 'jdbc');
"""


def report(statement: str) -> StatelessReport:
    return is_stateless(TABLES + statement)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO out_any SELECT customer, CAST(amount * 2 AS STRING) FROM orders WHERE amount > 10;",
        "INSERT INTO out_any SELECT UPPER(customer), 'x' "
        "FROM orders /*+ OPTIONS('scan.startup.mode'='latest-offset') */;",
        "INSERT INTO out_any SELECT customer, 'a' FROM orders UNION ALL SELECT name, 'b' FROM customers;",
        "INSERT INTO out_any SELECT customer, tag FROM orders CROSS JOIN UNNEST(tags) AS t (tag);",
        "INSERT INTO out_any SELECT o.customer, c.name FROM orders AS o "
        "JOIN customers FOR SYSTEM_TIME AS OF o.proc AS c ON o.customer = c.cid;",
        "INSERT INTO users_by_id SELECT id, name FROM users;",
        "INSERT INTO out_any SELECT name, 'x' FROM users;",
    ],
    ids=[
        "projection-filter",
        "hint",
        "union-all",
        "unnest",
        "lookup-join",
        "cdc-to-same-key",
        "cdc-to-append",
    ],
)
def test_stateless_statements(statement: str) -> None:
    result = report(statement)

    assert result.stateless, result.stateful_operators
    assert result.stateful_operators == ()
    assert result.describe().startswith("stateless")


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        (
            "INSERT INTO out_any SELECT customer, CAST(SUM(amount) AS STRING) FROM orders GROUP BY customer;",
            "aggregate",
        ),
        ("INSERT INTO out_any SELECT customer, CAST(COUNT(*) AS STRING) FROM orders;", "aggregate"),
        ("INSERT INTO out_any SELECT DISTINCT customer, 'x' FROM orders;", "aggregate"),
        (
            "INSERT INTO out_any SELECT customer, "
            "CAST(LAG(amount) OVER (PARTITION BY customer ORDER BY ts) AS STRING) "
            "FROM orders;",
            "over",
        ),
        (
            "INSERT INTO out_any SELECT customer, CAST(window_start AS STRING) "
            "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
            "GROUP BY window_start, window_end, customer;",
            "aggregate",
        ),
        (
            "INSERT INTO out_any SELECT customer, CAST(window_start AS STRING) "
            "FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE));",
            "window",
        ),
        (
            "INSERT INTO out_any SELECT customer, 'x' FROM orders "
            "GROUP BY SESSION(ts, INTERVAL '10' MINUTE), customer;",
            "aggregate",
        ),
        (
            "INSERT INTO out_any SELECT customer, 'x' FROM orders MATCH_RECOGNIZE (PARTITION BY customer "
            "ORDER BY ts MEASURES A.amount AS a1 PATTERN (A B) DEFINE B AS B.amount > A.amount) AS T;",
            "match-recognize",
        ),
        (
            "INSERT INTO out_any SELECT o.customer, c.name "
            "FROM orders AS o JOIN customers AS c ON o.customer = c.cid;",
            "join",
        ),
        (
            "INSERT INTO out_any SELECT a.customer, b.customer FROM orders AS a, orders AS b "
            "WHERE a.id = b.id AND a.ts BETWEEN b.ts - INTERVAL '1' HOUR AND b.ts;",
            "join",
        ),
        ("INSERT INTO users_by_name SELECT name, id FROM users;", "upsert-materializer"),
        ("INSERT INTO out_any SELECT k, CAST(v AS STRING) FROM ev;", "changelog-normalize"),
        (
            "INSERT INTO out_any SELECT customer, 'x' FROM "
            "(SELECT *, ROW_NUMBER() OVER (PARTITION BY customer ORDER BY ts DESC) AS rn FROM orders) "
            "WHERE rn = 1;",
            "rank",
        ),
        ("INSERT INTO out_any SELECT customer, 'x' FROM orders ORDER BY ts LIMIT 10;", "sort"),
        ("INSERT INTO out_any SELECT customer, 'x' FROM orders WHERE id IN (SELECT id FROM users);", "join"),
    ],
    ids=[
        "group-aggregate",
        "global-aggregate",
        "distinct",
        "lag",
        "window-aggregate",
        "window-tvf",
        "group-window",
        "match-recognize",
        "regular-join",
        "interval-join",
        "upsert-materializer",
        "upsert-source",
        "deduplication",
        "sort-limit",
        "in-subquery",
    ],
)
def test_stateful_statements(statement: str, kind: str) -> None:
    result = report(statement)

    assert not result.stateless
    kinds = [op.kind for op in result.stateful_operators]
    assert kind in kinds
    assert all(op.reason for op in result.stateful_operators)
    assert result.describe() == "stateful: " + ", ".join(sorted(set(kinds)))


def test_one_stateful_statement_makes_the_job_stateful() -> None:
    result = report(
        "INSERT INTO out_any SELECT customer, 'x' FROM orders;\n"
        "INSERT INTO out_any SELECT customer, CAST(COUNT(*) AS STRING) FROM orders GROUP BY customer;"
    )

    assert not result.stateless
    assert [op.id for op in result.stateful_operators] == ["out_any#2/aggregate[orders]"]


def test_forcing_upsert_materialization_makes_a_same_key_copy_stateful() -> None:
    statement = "INSERT INTO users_by_id SELECT id, name FROM users;"

    assert report(statement).stateless
    forced = is_stateless("SET 'table.exec.sink.upsert-materialize' = 'FORCE';\n" + TABLES + statement)
    assert [op.kind for op in forced.stateful_operators] == ["upsert-materializer"]


def test_a_pipeline_of_projections_and_filters_is_stateless(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "source:\n"
        "  type: mysql\n"
        "  hostname: db\n"
        "  tables: app.\\.*\n"
        "sink:\n"
        "  type: paimon\n"
        "transform:\n"
        "  - source-table: app.orders\n"
        "    projection: id, UPPER(name) AS name, price * 2 AS p\n"
        "    filter: price > 0\n"
        "  - source-table: app.users\n"
        "    projection: \\*\n",
        encoding="utf-8",
    )

    plan = load_plan(pipeline)

    assert plan.stateless_report().stateless
    assert [op.label for op in plan.operators if op.kind == "calc"] == [
        "SELECT id, UPPER(name) AS name, price * 2 AS p WHERE price > 0",
        "SELECT *",
    ]
    assert set(plan.sources) == {"app.orders", "app.users"}
