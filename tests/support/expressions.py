"""Evaluating one transform expression on one row, for the tests of the function families."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

from ferry.model.schema import Column, Schema, TableId
from ferry.model.types import parse
from ferry.transform.compiled import Compiled, Session
from ferry.transform.expressions import DIALECT, Compiler
from ferry.transform.function_catalog import EXAMPLE_COLUMNS
from ferry.transform.udf import UserFunction

#: The columns of :data:`ferry.transform.function_catalog.EXAMPLE_COLUMNS`, typed.
SCHEMA = Schema(tuple(Column(name, parse(text)) for name, text in EXAMPLE_COLUMNS), (), ())
#: A fixed clock: 2024-02-29 23:30:00.123456 UTC.
NOW = dt.datetime(2024, 2, 29, 23, 30, 0, 123456, tzinfo=dt.UTC)


def compiled(
    text: str,
    *,
    zone: str | None = "UTC",
    functions: Mapping[str, UserFunction] | None = None,
    schema: Schema = SCHEMA,
) -> Compiled:
    session = Session(None if zone is None else ZoneInfo(zone), clock=lambda: NOW)
    compiler = Compiler(TableId.parse("db.t"), schema, session=session, functions=functions)
    return compiler.compile(DIALECT.parse("SELECT " + text)[0].expressions[0])


def value(text: str, row: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """``text`` evaluated on ``row`` (columns it lacks are NULL)."""
    return compiled(text, **options).fn(dict(row or {}))
