"""The Flink SQL front end that ``ferry check`` and transforms share: a Flink dialect for sqlglot,
scripts parsed into tables, views and inserts, column lineage, and operator plans with stable ids.

- :func:`plan_sql` gives a script's operator plan;
- :func:`is_stateless` tells whether a script keeps operator state (aggregates, ``LAG``, windows,
  pattern matching, joins, upsert materialisation), which carrying offsets over requires it not to.

It imports sqlglot only: no I/O, nothing else of ferry.
"""

from __future__ import annotations

from ferry.sql.exceptions import SqlError, SqlParseError
from ferry.sql.model import Operator, Plan, StatefulOperator, StatelessReport
from ferry.sql.parser import parse_script
from ferry.sql.plan import build_plan

__all__ = [
    "Operator",
    "Plan",
    "SqlError",
    "SqlParseError",
    "StatefulOperator",
    "StatelessReport",
    "is_stateless",
    "plan_sql",
]


def plan_sql(sql: str, path: str | None = None) -> Plan:
    """The operator plan of a Flink SQL script; ``path`` only locates errors."""
    return build_plan(parse_script(sql, path))


def is_stateless(sql: str) -> StatelessReport:
    """Whether a Flink SQL script keeps no operator state, and which operators do."""
    return plan_sql(sql).stateless_report()
