"""The expected final state of each table, read from the source database itself, and the comparison
of a sink's tables with it.

Values are compared after a normalisation chosen by the source column's type, so that the
representations a sink or a converter setting may choose compare equal when they mean the same
value, and only then:

- integers: Python ``int``;
- DECIMAL/NUMERIC(p, s): ``Decimal`` rounded to the column's scale (from a ``Decimal``, the text
  ``decimal.handling.mode=string`` gives, or the float ``decimal.handling.mode=double`` gives);
- floating point: ``float``;
- text: ``str``;
- BOOLEAN (PostgreSQL's; MariaDB's is a TINYINT): ``bool``;
- DATE: ``date``; a ``datetime`` at midnight is taken as its date (a sink may store dates as
  timestamps: Hologres's ``broaden`` strategy does);
- DATETIME/TIMESTAMP: a naive UTC ``datetime`` (aware ones are converted to UTC; ISO-8601 text, as
  Debezium's ``ZonedTimestamp`` is, is parsed);
- TIME: a ``timedelta`` since midnight (a ``datetime.time`` is converted);
- BOOLEAN: ``bool``;
- BYTEA: ``bytes`` (a ``memoryview`` or ``bytearray`` is converted);
- JSON/JSONB: the parsed document (the text a sink stores is parsed; PostgreSQL's own ``jsonb``
  orders keys and spaces its text its own way, so texts are not compared).

A value of another Python type (a date written as a number of days, say) is a difference.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
DECIMAL_TYPES = {"decimal", "numeric"}
FLOAT_TYPES = {"double", "float", "real", "double precision"}
TEXT_TYPES = {
    "varchar",
    "char",
    "text",
    "tinytext",
    "mediumtext",
    "longtext",
    "character varying",
    "character",
}
DATETIME_TYPES = {"datetime", "timestamp", "timestamp without time zone", "timestamp with time zone"}
TIME_TYPES = {"time", "time without time zone"}
BOOLEAN_TYPES = {"boolean"}
BINARY_TYPES = {"bytea"}
JSON_TYPES = {"json", "jsonb"}

#: How many differences a comparison lists (all are counted).
LISTED_DIFFERENCES = 25


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str
    scale: int | None


@dataclass
class SourceTable:
    """A table's columns (in order), primary key and rows by key, as the source database has them."""

    schema: str
    name: str
    columns: list[SourceColumn]
    key: tuple[str, ...]
    rows: dict[tuple[Any, ...], dict[str, Any]]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


# --------------------------------------------------------------------------------------------------
# Reading the source's final state
# --------------------------------------------------------------------------------------------------


def mariadb_state(
    connection: Any, database: str, only: Iterable[str] | None = None
) -> dict[str, SourceTable]:
    """Every base table of ``database`` (or ``only`` those) with its rows (a pymysql connection in
    UTC); the connection's transaction is committed."""
    wanted = None if only is None else set(only)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type, numeric_scale FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (database,),
        )
        described = cursor.fetchall()
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.key_column_usage "
            "WHERE table_schema = %s AND constraint_name = 'PRIMARY' ORDER BY table_name, ordinal_position",
            (database,),
        )
        keys = cursor.fetchall()
        tables = _tables(database, described, keys)
        if wanted is not None:
            tables = {name: table for name, table in tables.items() if name in wanted}
        for table in tables.values():
            names = ", ".join(f"`{c.name}`" for c in table.columns)
            cursor.execute(f"SELECT {names} FROM `{database}`.`{table.name}`")
            _fill(table, cursor.fetchall())
    connection.commit()
    return tables


def postgres_state(connection: Any, schema: str, only: Iterable[str] | None = None) -> dict[str, SourceTable]:
    """Every base table of ``schema`` (or ``only`` those) with its rows (a psycopg connection); the
    connection's transaction is committed."""
    described = connection.execute(
        "SELECT c.table_name, c.column_name, c.data_type, c.numeric_scale FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position",
        (schema,),
    ).fetchall()
    keys = connection.execute(
        "SELECT k.table_name, k.column_name FROM information_schema.key_column_usage k "
        "JOIN information_schema.table_constraints c ON c.constraint_name = k.constraint_name "
        "AND c.table_schema = k.table_schema WHERE k.table_schema = %s AND c.constraint_type = 'PRIMARY KEY' "
        "ORDER BY k.table_name, k.ordinal_position",
        (schema,),
    ).fetchall()
    tables = _tables(schema, described, keys)
    if only is not None:
        wanted = set(only)
        tables = {name: table for name, table in tables.items() if name in wanted}
    for table in tables.values():
        names = ", ".join(f'"{c.name}"' for c in table.columns)
        _fill(table, connection.execute(f'SELECT {names} FROM "{schema}"."{table.name}"').fetchall())
    connection.commit()
    return tables


def _tables(
    schema: str, described: Iterable[tuple[Any, ...]], keys: Iterable[tuple[Any, ...]]
) -> dict[str, SourceTable]:
    tables: dict[str, SourceTable] = {}
    for table_name, column, data_type, scale in described:
        table = tables.setdefault(table_name, SourceTable(schema, table_name, [], (), {}))
        table.columns.append(
            SourceColumn(column, str(data_type).lower(), None if scale is None else int(scale))
        )
    for table_name, column in keys:
        tables[table_name].key += (column,)
    for table in tables.values():
        if not table.key:
            raise AssertionError(f"source table {table.qualified} has no primary key to compare rows by")
    return tables


def _fill(table: SourceTable, rows: Iterable[tuple[Any, ...]]) -> None:
    names = [c.name for c in table.columns]
    for values in rows:
        row = dict(zip(names, values, strict=True))
        table.rows[tuple(row[k] for k in table.key)] = row


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------


class IncomparableValueError(ValueError):
    """A sink value whose type cannot stand for the source column's type."""


def normalise(column: SourceColumn, value: Any) -> Any:
    """The value in the form it is compared in (see the module's documentation)."""
    if value is None:
        return None
    kind = column.data_type
    if kind in INTEGER_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for integer column {column.name}"
            )
        return value
    if kind in DECIMAL_TYPES:
        if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, str)):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for decimal column {column.name}"
            )
        try:
            number = Decimal(repr(value) if isinstance(value, float) else str(value))
        except InvalidOperation:
            raise IncomparableValueError(
                f"{value!r} is not a number, for decimal column {column.name}"
            ) from None
        return number if column.scale is None else number.quantize(Decimal(1).scaleb(-column.scale))
    if kind in FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for floating-point column {column.name}"
            )
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for boolean column {column.name}"
            )
        return value
    if kind in TEXT_TYPES:
        if not isinstance(value, str):
            raise IncomparableValueError(f"{value!r} ({type(value).__name__}) for text column {column.name}")
        return value
    if kind == "date":
        if isinstance(value, datetime):
            if value.time() != time(0) or value.tzinfo is not None:
                raise IncomparableValueError(f"{value!r} is not a day, for date column {column.name}")
            return value.date()
        if not isinstance(value, date):
            raise IncomparableValueError(f"{value!r} ({type(value).__name__}) for date column {column.name}")
        return value
    if kind in DATETIME_TYPES:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise IncomparableValueError(
                    f"{value!r} is no ISO-8601 timestamp, for column {column.name}"
                ) from None
        if not isinstance(value, datetime):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for timestamp column {column.name}"
            )
        return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
    if kind in TIME_TYPES:
        if isinstance(value, time):
            return timedelta(
                hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond
            )
        if not isinstance(value, timedelta):
            raise IncomparableValueError(f"{value!r} ({type(value).__name__}) for time column {column.name}")
        return value
    if kind in BOOLEAN_TYPES:
        if not isinstance(value, bool):
            raise IncomparableValueError(
                f"{value!r} ({type(value).__name__}) for boolean column {column.name}"
            )
        return value
    if kind in BINARY_TYPES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise IncomparableValueError(
                f"{value!r:.80} ({type(value).__name__}) for bytea column {column.name}"
            )
        return bytes(value)
    if kind in JSON_TYPES:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise IncomparableValueError(f"{value!r:.80} is not JSON, for column {column.name}") from None
        if not isinstance(value, (dict, list, int, float, bool)):
            raise IncomparableValueError(
                f"{value!r:.80} ({type(value).__name__}) for JSON column {column.name}"
            )
        return value
    raise AssertionError(f"no normalisation for source type {kind!r} of column {column.name}")


# --------------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------------


@dataclass
class TableComparison:
    """The outcome of comparing one sink table with the source's."""

    table: str
    rows_compared: int = 0
    cells_compared: int = 0
    differences: int = 0
    listed: list[str] = field(default_factory=list)
    #: The differences in a column's values, by column.
    by_column: Counter[str] = field(default_factory=Counter)

    def differ(self, text: str, column: str | None = None) -> None:
        self.differences += 1
        if column is not None:
            self.by_column[column] += 1
        if len(self.listed) < LISTED_DIFFERENCES:
            self.listed.append(text)


@dataclass
class SinkComparison:
    """The outcome of comparing every table of a sink with the source's final state."""

    target: str
    tables: list[TableComparison] = field(default_factory=list)
    #: The sink's declared outcomes the expectation took into account.
    notes: list[str] = field(default_factory=list)

    @property
    def rows_compared(self) -> int:
        return sum(t.rows_compared for t in self.tables)

    @property
    def cells_compared(self) -> int:
        return sum(t.cells_compared for t in self.tables)

    @property
    def differences(self) -> int:
        return sum(t.differences for t in self.tables)

    def report(self) -> str:
        lines = [
            f"{self.target}: {self.rows_compared} rows and {self.cells_compared} cells compared, "
            f"{self.differences} differences"
        ]
        lines += [f"  (declared: {note})" for note in self.notes]
        for table in self.tables:
            lines.append(
                f"  {table.table}: {table.rows_compared} rows, {table.cells_compared} cells, "
                f"{table.differences} differences"
                + (
                    " (values by column: "
                    + ", ".join(f"{c} {n}" for c, n in table.by_column.most_common())
                    + ")"
                    if table.by_column
                    else ""
                )
            )
            lines += [f"    - {text}" for text in table.listed]
            if table.differences > len(table.listed):
                lines.append(f"    ... and {table.differences - len(table.listed)} more")
        return "\n".join(lines)


def compare_table(
    source: SourceTable,
    sink: tuple[list[str], list[dict[str, Any]]] | None,
    *,
    ignored_prefixes: tuple[str, ...] = (),
    kept_columns: Collection[str] = (),
    stale_nulls: Collection[str] = (),
    read: Callable[[Mapping[str, Any]], Mapping[str, Any]] = lambda row: row,
) -> TableComparison:
    """Compare one sink table (its columns and rows) with the source table, row by row by key.

    Sink columns starting with one of ``ignored_prefixes`` are left out, ``kept_columns`` must be
    there but are not compared, nor are the cells of ``stale_nulls`` where the source has NULL;
    ``read`` gives a sink row as the source's columns."""
    comparison = TableComparison(source.qualified)
    if sink is None:
        comparison.differ(f"missing from the sink (the source has {len(source.rows)} rows)")
        return comparison
    sink_columns, raw_rows = sink
    sink_rows = [read(row) for row in raw_rows]
    missing_kept = [c for c in kept_columns if c not in sink_columns]
    if missing_kept:
        comparison.differ(f"columns {missing_kept} should have stayed in the sink; it has {sink_columns}")
    kept = [
        c
        for c in sink_columns
        if not (ignored_prefixes and c.startswith(ignored_prefixes)) and c not in kept_columns
    ]
    source_names = [c.name for c in source.columns]
    missing = [c for c in source_names if c not in kept]
    extra = [c for c in kept if c not in source_names]
    if missing or extra:
        comparison.differ(
            f"columns differ: the sink has {kept}, the source {source_names} "
            f"(missing {missing}, extra {extra})"
        )
    by_key: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for row in sink_rows:
        try:
            key = tuple(normalise(c, row.get(c.name)) for c in source.columns if c.name in source.key)
        except IncomparableValueError as exc:
            comparison.differ(f"a row's key cannot be read: {exc}")
            continue
        if key in by_key:
            comparison.differ(f"key {key} is in the sink twice: {_row(by_key[key])} and {_row(row)}")
        by_key[key] = row
    for key, expected in sorted(source.rows.items(), key=lambda item: str(item[0])):
        actual = by_key.pop(
            tuple(normalise(c, expected[c.name]) for c in source.columns if c.name in source.key), None
        )
        if actual is None:
            comparison.differ(f"key {key}: missing from the sink; the source has {_row(expected)}")
            continue
        comparison.rows_compared += 1
        for column in source.columns:
            if column.name not in kept:
                continue
            if expected[column.name] is None and column.name in stale_nulls:
                continue
            want = normalise(column, expected[column.name])
            comparison.cells_compared += 1
            try:
                got = normalise(column, actual.get(column.name))
            except IncomparableValueError as exc:
                comparison.differ(
                    f"key {key}, column {column.name}: {exc}; the source has {_shown(want)}", column.name
                )
                continue
            if got != want:
                comparison.differ(
                    f"key {key}, column {column.name}: the sink has {_shown(got)}, the source {_shown(want)}",
                    column.name,
                )
    for key, row in by_key.items():
        comparison.differ(f"key {key}: in the sink but not in the source: {_row(row)}")
    return comparison


def _shown(value: Any) -> str:
    """A value in a difference, long ones cut (a TOASTed value is kilobytes)."""
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:100]}... ({len(text)} characters)"


def _row(row: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{name!r}: {_shown(value)}" for name, value in row.items()) + "}"
