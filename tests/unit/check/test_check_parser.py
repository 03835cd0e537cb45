"""The Flink SQL front end: what it reads, and where it says reading stopped."""

from __future__ import annotations

import pytest

from ferry.check import SqlParseError
from ferry.check.pipeline import parse_pipeline
from ferry.sql.parser import InsertDef, QueryDef, parse_script

DDL = """
SET 'table.exec.mini-batch.enabled' = 'true';
SET table.exec.state.ttl = 1 h;
CREATE TEMPORARY TABLE IF NOT EXISTS `cat`.`db`.orders (
  id BIGINT NOT NULL,
  payload ROW<a INT, b STRING>,
  attrs MAP<STRING, INT>,
  tags ARRAY<STRING>,
  bag MULTISET<INT>,
  amount DECIMAL(10, 2),
  ts TIMESTAMP(3),
  ltz TIMESTAMP(3) WITH LOCAL TIME ZONE,
  kafka_ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `partition` BIGINT METADATA VIRTUAL,
  doubled AS amount * 2,
  proc AS PROCTIME(),
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) COMMENT 'orders' PARTITIONED BY (id) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'format' = 'debezium-json'
);
CREATE TABLE orders_copy WITH ('topic' = 'copy') LIKE `cat`.`db`.orders (EXCLUDING GENERATED);
ADD JAR '/opt/udf.jar';
CREATE TEMPORARY SYSTEM FUNCTION my_udf AS 'com.example.Udf' LANGUAGE JAVA;
"""


def test_create_table_with_everything_flink_writes() -> None:
    script = parse_script(DDL)

    table = script.tables["cat.db.orders"]
    assert table.connector == "kafka"
    assert dict(table.options) == {"connector": "kafka", "topic": "orders", "format": "debezium-json"}
    assert table.primary_key == ("id",)
    assert [(w.column, w.expression) for w in table.watermarks] == [("ts", "ts - INTERVAL '5' SECOND")]
    kinds = {c.name: (c.kind, c.type) for c in table.columns}
    assert kinds["payload"] == ("physical", "ROW<a INT, b STRING>")
    assert kinds["attrs"] == ("physical", "MAP<STRING, INT>")
    assert kinds["bag"] == ("physical", "MULTISET<INT>")
    assert kinds["ltz"] == ("physical", "TIMESTAMP_LTZ(3)")
    assert kinds["kafka_ts"] == ("metadata", "TIMESTAMP_LTZ(3)")
    assert kinds["partition"] == ("metadata", "BIGINT")
    assert kinds["doubled"] == ("computed", None)
    assert table.column("doubled") is not None and table.column("doubled").expression_sql == "amount * 2"  # type: ignore[union-attr]
    assert table.column("id") is not None and not table.column("id").nullable  # type: ignore[union-attr]
    assert script.settings == {"table.exec.mini-batch.enabled": "true", "table.exec.state.ttl": "1 h"}


def test_create_table_like_merges_columns_and_options() -> None:
    copy = parse_script(DDL).tables["orders_copy"]

    assert [c.name for c in copy.columns if c.kind == "computed"] == []
    assert copy.options["topic"] == "copy"
    assert copy.options["format"] == "debezium-json"
    assert copy.primary_key == ("id",)


def test_statement_sets_hints_views_and_queries() -> None:
    script = parse_script(
        DDL
        + """
        CREATE TEMPORARY VIEW v (i, a) AS SELECT id, amount FROM `cat`.`db`.orders;
        EXECUTE STATEMENT SET BEGIN
          INSERT INTO orders_copy /*+ OPTIONS('sink.parallelism' = '2') */ SELECT * FROM `cat`.`db`.orders;
          INSERT INTO orders_copy (id) SELECT i FROM v;
        END;
        BEGIN STATEMENT SET;
          INSERT INTO orders_copy
          SELECT * FROM orders_copy /*+ OPTIONS('scan.startup.mode' = 'latest-offset') */;
        END;
        SELECT * FROM v;
        """
    )

    inserts = [s for s in script.statements if isinstance(s, InsertDef)]
    assert [s.target for s in inserts] == ["orders_copy"] * 3
    assert inserts[0].hint_options == {"sink.parallelism": "2"}
    assert inserts[1].columns == ("id",)
    assert isinstance(script.statements[-1], QueryDef)
    assert script.views["v"].column_names == ("i", "a")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT window_start, SUM(amount) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES)) "
        "GROUP BY window_start, window_end",
        "SELECT * FROM TABLE(HOP(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SLIDE => INTERVAL '1' MINUTE, "
        "SIZE => INTERVAL '5' MINUTES))",
        "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY (id, amount), DESCRIPTOR(ts), "
        "INTERVAL '5' MINUTES))",
        "SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))",
        "SELECT id, LAG(amount, 1) OVER (PARTITION BY id ORDER BY ts "
        "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY id ORDER BY ts MEASURES FIRST(A.amount) AS f, "
        "LAST(B.amount) AS l ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C?) "
        "DEFINE B AS B.amount > A.amount) AS m",
        "SELECT a.id FROM t AS a LEFT JOIN t FOR SYSTEM_TIME AS OF a.proc AS b ON a.id = b.id",
        "SELECT id FROM t UNION ALL SELECT id FROM t",
        "SELECT x FROM t, LATERAL TABLE(my_split(s)) AS T(x)",
        "SELECT COUNT(DISTINCT id) FILTER (WHERE amount > 1) FROM t GROUP BY HOP(ts, INTERVAL '1' MINUTE, "
        "INTERVAL '1' HOUR)",
    ],
    ids=[
        "tumble",
        "hop-named",
        "session",
        "cumulate",
        "over",
        "match-recognize",
        "temporal",
        "union",
        "lateral",
        "agg",
    ],
)
def test_queries_parse(query: str) -> None:
    script = parse_script(query + ";")

    assert len(script.statements) == 1


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("SELECT a FROM t;\nSELECT 'unterminated FROM t;", 2, 8, "unterminated string literal"),
        ("SELECT a\nFROM t /* open comment", 2, 8, "unterminated comment"),
        ("CREATE TABLE t (\n  a INT,\n  b INT WATERMARK\n) WITH ('connector' = 'x');", 4, 1, "syntax error"),
        ("SELECT a FROM t /*+ OPTIONS('k' = ) */;", 1, 15, "Invalid table hint"),
        ("SELECT a FROM\n\n   WHERE a = 1;", 3, 4, "syntax error near 'WHERE'"),
    ],
    ids=["string", "comment", "watermark", "hint", "missing-table"],
)
def test_errors_carry_line_and_column(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(SqlParseError) as caught:
        parse_script(text, "job.sql")

    error = caught.value
    assert (error.path, error.line, error.column) == ("job.sql", line, column)
    assert message in error.message
    assert str(error).startswith(f"job.sql:{line}:{column}: ")


def test_pipeline_yaml_errors_point_into_the_yaml_file() -> None:
    text = (
        "source:\n  type: mysql\nsink:\n  type: print\ntransform:\n  - source-table: db.t\n    filter: a >\n"
    )

    with pytest.raises(SqlParseError) as caught:
        parse_pipeline(text, "p.yaml")

    assert (caught.value.path, caught.value.line) == ("p.yaml", 7)


def test_invalid_yaml_is_a_parse_error() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse_pipeline("source: [unclosed\n", "p.yaml")

    assert caught.value.line == 2
