"""``ferry check``: can a changed job restart from the state of the old one?

The library functions the CLI is a shell over:

- :func:`check_compatibility` compares two Flink SQL scripts and returns a :class:`Verdict`
  (fully compatible, partially compatible naming the operators that lose state, or incompatible,
  with the reasons and the limitations that apply);
- :func:`is_stateless` and :func:`plan_sql`, of the Flink SQL front end (:mod:`ferry.sql`) it reads
  scripts with: whether a script keeps operator state, and its operator plan with stable ids.
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
from ferry.sql import (
    Operator,
    Plan,
    SqlError,
    SqlParseError,
    StatefulOperator,
    StatelessReport,
    is_stateless,
    plan_sql,
)

__all__ = [
    "ColumnChange",
    "Compatibility",
    "Limitation",
    "Operator",
    "OperatorVerdict",
    "OptionChange",
    "Plan",
    "SqlError",
    "SqlParseError",
    "StatefulOperator",
    "StatelessReport",
    "Verdict",
    "check_compatibility",
    "classify",
    "is_stateless",
    "plan_sql",
]


def check_compatibility(old_sql: str, new_sql: str) -> Verdict:
    """Whether the job written as ``new_sql`` can restart from the state of ``old_sql``."""
    return classify(plan_sql(old_sql), plan_sql(new_sql))
