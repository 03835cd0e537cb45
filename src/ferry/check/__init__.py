"""``ferry check``: can a changed job restart from the state of the old one?

The library functions the CLI is a shell over:

- :func:`check_compatibility` compares two Flink SQL scripts and returns a :class:`Verdict`
  (fully compatible, partially compatible naming the operators that lose state, or incompatible,
  with the reasons and the limitations that apply);
- :func:`is_stateless` tells whether a script keeps operator state (aggregates, ``LAG``, windows,
  pattern matching, joins, upsert materialisation), which carrying offsets over requires it not to;
- :func:`plan_sql` gives the operator plan with stable operator ids.
"""

from __future__ import annotations

from ferry.check.classify import (
    ColumnChange,
    Compatibility,
    Limitation,
    OperatorVerdict,
    OptionChange,
    Verdict,
    classify,
)
from ferry.check.exceptions import CheckError, CheckParseError
from ferry.check.model import Operator, Plan, StatefulOperator, StatelessReport
from ferry.check.parser import parse_script
from ferry.check.plan import build_plan

__all__ = [
    "CheckError",
    "CheckParseError",
    "ColumnChange",
    "Compatibility",
    "Limitation",
    "Operator",
    "OperatorVerdict",
    "OptionChange",
    "Plan",
    "StatefulOperator",
    "StatelessReport",
    "Verdict",
    "check_compatibility",
    "classify",
    "is_stateless",
    "plan_sql",
]


def plan_sql(sql: str, path: str | None = None) -> Plan:
    """The operator plan of a Flink SQL script; ``path`` only locates errors."""
    return build_plan(parse_script(sql, path))


def check_compatibility(old_sql: str, new_sql: str) -> Verdict:
    """Whether the job written as ``new_sql`` can restart from the state of ``old_sql``."""
    return classify(plan_sql(old_sql), plan_sql(new_sql))


def is_stateless(sql: str) -> StatelessReport:
    """Whether a Flink SQL script keeps no operator state, and which operators do."""
    return plan_sql(sql).stateless_report()
