"""Reading a ferry pipeline YAML file as a job that ``ferry check`` can plan.

A pipeline reads the tables of its ``source`` (whose keys are the source's options, ``type`` its
connector) and applies, per ``transform`` item, a projection and a filter to one ``source-table``.
Each transform becomes ``SELECT projection FROM source-table WHERE filter``: a stateless
projection/filter operator. ``primary-keys`` of a transform declare the table's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from sqlglot import exp

from ferry.sql.exceptions import SqlError, SqlParseError
from ferry.sql.parser import InsertDef, Script, TableDef, parse_expression, parse_script

__all__ = ["TRANSFORM_META_KEY", "parse_pipeline"]

TRANSFORM_META_KEY = "ferry_transform"
"""Marks the query of a pipeline transform: it is a projection/filter operator even when trivial."""


def _position(node: Any, key: str) -> tuple[int, int]:
    """The 1-based line and column of the value of ``key`` in a ruamel mapping."""
    try:
        line, column = node.lc.value(key)
    except (AttributeError, KeyError, TypeError):
        return 1, 1
    return int(line) + 1, int(column) + 1


def _relocated(error: SqlParseError, node: Any, key: str, prefix: int, path: str | None) -> SqlParseError:
    line, column = _position(node, key)
    if error.line == 1:
        return SqlParseError(error.message, line, column + max(0, error.column - 1 - prefix), path)
    return SqlParseError(error.message, line + error.line - 1, error.column, path)


def _options(source: Mapping[str, Any]) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in source.items():
        if key == "type":
            options["connector"] = str(value)
        elif isinstance(value, bool):
            options[str(key)] = "true" if value else "false"
        elif value is not None and not isinstance(value, Mapping | list):
            options[str(key)] = str(value)
    return options


def _projection(text: str, node: Any, path: str | None) -> list[exp.Expr]:
    # YAML reads a bare ``*`` as an alias, so pipeline files write ``\*``.
    text = text.replace("\\*", "*")
    prefix = "SELECT "
    try:
        script = parse_script(f"{prefix}{text}")
    except SqlParseError as error:
        raise _relocated(error, node, "projection", len(prefix), path) from error
    query = script.statements[0].query if script.statements else None
    if not isinstance(query, exp.Select):
        line, column = _position(node, "projection")
        raise SqlParseError("projection must be a list of expressions", line, column, path)
    return list(query.expressions)


def _filter(text: str, node: Any, path: str | None) -> exp.Expr:
    try:
        return parse_expression(text)
    except SqlParseError as error:
        raise _relocated(error, node, "filter", len("SELECT "), path) from error


def parse_pipeline(text: str, path: str | None = None) -> Script:
    """Read a pipeline YAML document as a script of one statement per transform."""
    try:
        document = YAML(typ="rt").load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        column = mark.column + 1 if mark is not None else 1
        raise SqlParseError(f"invalid YAML: {error.problem or error}", line, column, path) from error
    if not isinstance(document, Mapping):
        raise SqlParseError("a pipeline file is a mapping with source, sink and transform", 1, 1, path)
    source = document.get("source")
    if not isinstance(source, Mapping) or "type" not in source:
        raise SqlParseError("the pipeline has no source with a type", 1, 1, path)
    options = _options(source)
    sink = document.get("sink")
    sink_name = str(sink.get("type", "sink")) if isinstance(sink, Mapping) else "sink"
    transforms = document.get("transform") or []
    if not isinstance(transforms, list):
        line, column = _position(document, "transform")
        raise SqlParseError("transform must be a list", line, column, path)
    if not transforms:
        transforms = [{"source-table": str(source.get("tables", "*"))}]
    tables: dict[str, TableDef] = {}
    statements: list[InsertDef] = []
    for item in transforms:
        if not isinstance(item, Mapping) or "source-table" not in item:
            raise SqlError("every transform needs a source-table")
        name = str(item["source-table"])
        keys = tuple(k.strip() for k in str(item.get("primary-keys") or "").split(",") if k.strip())
        table = tables.get(name)
        if table is None or (keys and not table.primary_key):
            tables[name] = TableDef(name=name, columns=(), primary_key=keys, watermarks=(), options=options)
        projection = item.get("projection")
        expressions = _projection(str(projection), item, path) if projection else [exp.Star()]
        query = exp.Select(expressions=expressions).from_(
            exp.Table(this=exp.to_identifier(name, quoted=True))
        )
        query.meta[TRANSFORM_META_KEY] = True
        condition = item.get("filter")
        if condition:
            query = query.where(_filter(str(condition), item, path))
        statements.append(InsertDef(target=sink_name, query=query))
    return Script(tables=tables, views={}, settings={}, statements=tuple(statements), path=path)
