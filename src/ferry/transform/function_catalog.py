"""The built-in functions of Flink CDC's transforms, as its documentation lists them, and how
ferry reads expressions that call them.

:data:`FLINK_CDC_FUNCTIONS` is the documentation's list (``docs/content/docs/core-concept/
transform.md``), family by family, each with an expression that uses it over
:data:`EXAMPLE_COLUMNS`; an entry without one is not evaluated, and says why. The table in
``docs/transforms.md`` (written by :mod:`ferry.docgen`) and a test that compiles every example are
made from it. :class:`TransformDialect` is Flink's SQL
as ``ferry check`` reads it, with ``TIMESTAMPDIFF(unit, from, to)`` kept in Flink's argument order
and ``LOCATE``/``INSTR`` kept by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from ferry.sql.dialect import Flink, FlinkParser


def _call(name: str) -> Any:
    return lambda args: exp.Anonymous(this=name, expressions=args)


def _parse_position(parser: Any) -> exp.StrPosition:
    """``POSITION(seek IN s [FROM start])``, Flink's form (sqlglot's lacks ``FROM``)."""
    seek = parser._parse_bitwise()
    if not parser._match(TokenType.IN):
        parser.raise_error("POSITION is written POSITION(seek IN string [FROM start])")
    haystack = parser._parse_bitwise()
    start = parser._parse_bitwise() if parser._match(TokenType.FROM) else None
    return exp.StrPosition(this=haystack, substr=seek, position=start)


def _when_values(parser: Any) -> list[exp.Expr]:
    """The values of one ``WHEN`` of a simple ``CASE``: one, or several separated by commas."""
    values: list[exp.Expr] = parser._parse_csv(parser._parse_disjunction)
    return values


class _TransformParser(FlinkParser):
    FUNCTION_PARSERS: ClassVar = {**FlinkParser.FUNCTION_PARSERS, "POSITION": _parse_position}

    FUNCTIONS: ClassVar = {
        **FlinkParser.FUNCTIONS,
        "TIMESTAMPDIFF": _call("TIMESTAMPDIFF"),
        "TIMESTAMP_DIFF": _call("TIMESTAMP_DIFF"),
        # their arguments are checked against Flink's signatures, not sqlglot's
        "LOCATE": _call("LOCATE"),
        "INSTR": _call("INSTR"),
        "PARSE_JSON": _call("PARSE_JSON"),
        "TRY_PARSE_JSON": _call("TRY_PARSE_JSON"),
    }

    def _parse_case(self) -> exp.Expr | None:
        """Flink's ``CASE value WHEN v1 [, v2]* THEN r ... END`` as well as sqlglot's forms: a
        ``WHEN`` of several values is ``value IN (v1, v2, ...)`` (the whole CASE becomes the
        searched form, each other ``WHEN v`` ``value = v``)."""
        if self._match(TokenType.DOT, advance=False):
            return super()._parse_case()
        comments = self._prev_comments
        operand = self._parse_disjunction()
        if operand is None:
            # the searched form, CASE WHEN condition THEN ...: nothing read yet
            return super()._parse_case()
        branches: list[tuple[list[exp.Expr], exp.Expr | None]] = []
        while self._match(TokenType.WHEN):
            values = _when_values(self)
            self._match(TokenType.THEN)
            branches.append((values, self._parse_disjunction()))
        default = self._parse_disjunction() if self._match(TokenType.ELSE) else None
        if not self._match(TokenType.END):
            self.raise_error("Expected END after CASE", self._prev)
        if all(len(values) == 1 for values, _ in branches):
            ifs = [exp.If(this=values[0], true=then) for values, then in branches]
            return self.expression(exp.Case(this=operand, ifs=ifs, default=default), comments=comments)
        searched = [
            exp.If(
                this=exp.EQ(this=operand.copy(), expression=values[0])
                if len(values) == 1
                else exp.In(this=operand.copy(), expressions=values),
                true=then,
            )
            for values, then in branches
        ]
        return self.expression(exp.Case(ifs=searched, default=default), comments=comments)


class TransformDialect(Flink):
    """Flink SQL as transforms read it."""

    Parser = _TransformParser


@lru_cache(maxsize=32)
def dialect_for(functions: tuple[str, ...] = ()) -> TransformDialect:
    """The dialect that reads calls to ``functions`` (user-defined) as calls by name, whatever
    sqlglot would otherwise make of them (``format(...)``, ``md5(...)``)."""
    if not functions:
        return _DIALECT
    names = {name.upper(): _call(name) for name in functions}
    parser = type(
        "_UserFunctionsParser", (_TransformParser,), {"FUNCTIONS": {**_TransformParser.FUNCTIONS, **names}}
    )
    dialect: type[TransformDialect] = type("_UserFunctionsDialect", (TransformDialect,), {"Parser": parser})
    return dialect()


_DIALECT = TransformDialect()

#: The names of the functions transforms have built in; a user-defined function takes another.
BUILT_IN_NAMES = frozenset(
    [
        "ABS",
        "CEIL",
        "CEILING",
        "FLOOR",
        "ROUND",
        "UUID",
        "CHAR_LENGTH",
        "CHARACTER_LENGTH",
        "UPPER",
        "LOWER",
        "TRIM",
        "LTRIM",
        "RTRIM",
        "BTRIM",
        "REGEXP_REPLACE",
        "REGEXP_EXTRACT",
        "REGEXP_EXTRACT_ALL",
        "REGEXP_COUNT",
        "REGEXP_INSTR",
        "REGEXP_SUBSTR",
        "SUBSTR",
        "SUBSTRING",
        "OVERLAY",
        "POSITION",
        "LOCATE",
        "INSTR",
        "CONCAT",
        "CONCAT_WS",
        "LPAD",
        "RPAD",
        "REPLACE",
        "REPEAT",
        "LEFT",
        "RIGHT",
        "STARTSWITH",
        "ENDSWITH",
        "TO_BASE64",
        "FROM_BASE64",
        "FROM_BASE64_BINARY",
        "NOW",
        "EXTRACT",
        "YEAR",
        "QUARTER",
        "MONTH",
        "WEEK",
        "DAYOFYEAR",
        "DAYOFMONTH",
        "DAYOFWEEK",
        "HOUR",
        "MINUTE",
        "SECOND",
        "DATE_FORMAT",
        "DATE_FORMAT_TZ",
        "TIMESTAMPADD",
        "TIMESTAMPDIFF",
        "TIMESTAMP_DIFF",
        "TO_DATE",
        "TO_TIMESTAMP",
        "TO_TIMESTAMP_LTZ",
        "FROM_UNIXTIME",
        "UNIX_TIMESTAMP",
        "DATE_ADD",
        "DATE_SUB",
        "COALESCE",
        "IF",
        "IFNULL",
        "NULLIF",
        "CAST",
        "TRY_CAST",
        "PARSE_JSON",
        "TRY_PARSE_JSON",
        "ARRAY",
        "MAP",
        "ROW",
        "CARDINALITY",
        "ARRAY_CONTAINS",
        "ARRAY_POSITION",
        "ELEMENT",
        "TRUNCATE",
        "INITCAP",
        "MOD",
    ]
)


@dataclass(frozen=True, slots=True)
class Function:
    """One row of Flink CDC's function tables: its family, its syntax as documented, and an
    expression over :data:`EXAMPLE_COLUMNS` that ferry evaluates (None: not supported, ``why``)."""

    family: str
    syntax: str
    example: str | None
    why: str = ""


#: The columns the examples use, as ``name TYPE`` pairs.
EXAMPLE_COLUMNS = (
    ("s", "STRING"),
    ("u", "STRING"),
    ("n", "INT"),
    ("x", "DECIMAL(10, 2)"),
    ("f", "DOUBLE"),
    ("b", "BOOLEAN"),
    ("ts", "TIMESTAMP(3)"),
    ("ltz", "TIMESTAMP_LTZ(3)"),
    ("day", "DATE"),
    ("tm", "TIME(0)"),
    ("bin", "BYTES"),
    ("arr", "ARRAY<INT>"),
    ("m", "MAP<STRING, INT>"),
    ("r", "ROW<`a` INT, `c` STRING>"),
    ("v", "VARIANT"),
)


def _family(family: str, *rows: tuple[str, str | None] | tuple[str, str | None, str]) -> list[Function]:
    return [Function(family, *row) for row in rows]


FLINK_CDC_FUNCTIONS: tuple[Function, ...] = (
    *_family(
        "comparison",
        ("value1 = value2", "n = 1"),
        ("value1 <> value2", "n <> 1"),
        ("value1 > value2", "n > 1"),
        ("value1 >= value2", "n >= 1"),
        ("value1 < value2", "n < 1"),
        ("value1 <= value2", "n <= 1"),
        ("value IS NULL", "s IS NULL"),
        ("value IS NOT NULL", "s IS NOT NULL"),
        ("value1 IS DISTINCT FROM value2", "s IS DISTINCT FROM u"),
        ("value1 IS NOT DISTINCT FROM value2", "s IS NOT DISTINCT FROM u"),
        ("value1 BETWEEN value2 AND value3", "n BETWEEN 1 AND 3"),
        ("value1 NOT BETWEEN value2 AND value3", "n NOT BETWEEN 1 AND 3"),
        ("string1 LIKE string2", "s LIKE 'a%'"),
        ("string1 NOT LIKE string2", "s NOT LIKE 'a%'"),
        ("string1 LIKE string2 ESCAPE string3", "s LIKE 'a!%%' ESCAPE '!'"),
        ("string1 NOT LIKE string2 ESCAPE string3", "s NOT LIKE 'a!%%' ESCAPE '!'"),
        ("string1 SIMILAR TO string2", "s SIMILAR TO '(a|b)%'"),
        ("string1 NOT SIMILAR TO string2", "s NOT SIMILAR TO '(a|b)%'"),
        ("string1 SIMILAR TO string2 ESCAPE string3", "s SIMILAR TO 'a!%%' ESCAPE '!'"),
        ("string1 NOT SIMILAR TO string2 ESCAPE string3", "s NOT SIMILAR TO 'a!%%' ESCAPE '!'"),
        ("value1 IN (value2 [, value3]* )", "n IN (1, 2)"),
        ("value1 NOT IN (value2 [, value3]* )", "n NOT IN (1, 2)"),
    ),
    *_family(
        "logical",
        ("boolean1 OR boolean2", "b OR n > 1"),
        ("boolean1 AND boolean2", "b AND n > 1"),
        ("NOT boolean", "NOT b"),
        ("boolean IS FALSE", "b IS FALSE"),
        ("boolean IS NOT FALSE", "b IS NOT FALSE"),
        ("boolean IS TRUE", "b IS TRUE"),
        ("boolean IS NOT TRUE", "b IS NOT TRUE"),
        ("boolean IS UNKNOWN", "b IS UNKNOWN"),
        ("boolean IS NOT UNKNOWN", "b IS NOT UNKNOWN"),
    ),
    *_family(
        "arithmetic",
        ("numeric1 + numeric2", "n + 1"),
        ("numeric1 - numeric2", "n - 1"),
        ("numeric1 * numeric2", "n * 2"),
        ("numeric1 / numeric2", "n / 2"),
        ("numeric1 % numeric2", "n % 2"),
        ("ABS(numeric)", "ABS(x)"),
        ("CEIL(numeric), CEILING(numeric)", "CEILING(x)"),
        ("FLOOR(numeric)", "FLOOR(x)"),
        ("ROUND(numeric, int)", "ROUND(x, 1)"),
        ("UUID()", "UUID()"),
    ),
    *_family(
        "string",
        ("string1 || string2", "s || u"),
        ("CHAR_LENGTH(string)", "CHAR_LENGTH(s)"),
        ("UPPER(string)", "UPPER(s)"),
        ("LOWER(string)", "LOWER(s)"),
        ("TRIM(string1)", "TRIM(s)"),
        ("LTRIM(string[, trimString])", "LTRIM(s, 'x')"),
        ("RTRIM(string[, trimString])", "RTRIM(s, 'x')"),
        ("BTRIM(string[, trimString])", "BTRIM(s, 'x')"),
        ("REGEXP_REPLACE(string1, string2, string3)", "REGEXP_REPLACE(s, '(o+)', '<$1>')"),
        ("REGEXP_EXTRACT(string, regex[, extractIndex])", "REGEXP_EXTRACT(s, '(\\d+)-(\\d+)', 2)"),
        ("REGEXP_EXTRACT_ALL(string, regex[, extractIndex])", "REGEXP_EXTRACT_ALL(s, '(\\d)')"),
        ("REGEXP_COUNT(string, regex)", "REGEXP_COUNT(s, 'o')"),
        ("REGEXP_INSTR(string, regex)", "REGEXP_INSTR(s, 'o')"),
        ("REGEXP_SUBSTR(string, regex)", "REGEXP_SUBSTR(s, 'o+')"),
        ("SUBSTR(string, integer1[, integer2])", "SUBSTR(s, 2, 3)"),
        ("SUBSTRING(string FROM integer1 [ FOR integer2 ])", "SUBSTRING(s FROM 2 FOR 3)"),
        (
            "OVERLAY(string1 PLACING string2 FROM integer1 [FOR integer2])",
            "OVERLAY(s PLACING 'xy' FROM 2 FOR 1)",
        ),
        ("POSITION(string1 IN string2 [ FROM integer ])", "POSITION('o' IN s FROM 3)"),
        ("LOCATE(string1, string2[, integer])", "LOCATE('o', s, 3)"),
        ("INSTR(string1, string2)", "INSTR(s, 'o')"),
        ("CONCAT(string1, string2, ...)", "CONCAT(s, '-', u)"),
        ("CONCAT_WS(separator, string1, string2, ...)", "CONCAT_WS('-', s, u)"),
        ("LPAD(string1, integer, string2)", "LPAD(s, 8, '*')"),
        ("RPAD(string1, integer, string2)", "RPAD(s, 8, '*')"),
        ("REPLACE(string1, string2, string3)", "REPLACE(s, 'o', '0')"),
        ("REPEAT(string, integer)", "REPEAT(s, 2)"),
        ("LEFT(string, integer)", "LEFT(s, 2)"),
        ("RIGHT(string, integer)", "RIGHT(s, 2)"),
        ("STARTSWITH(string1, string2)", "STARTSWITH(s, 'fo')"),
        ("ENDSWITH(string1, string2)", "ENDSWITH(s, 'o')"),
        ("TO_BASE64(string | binary)", "TO_BASE64(s)"),
        ("FROM_BASE64(string)", "FROM_BASE64('Zm9v')"),
        ("FROM_BASE64_BINARY(string)", "FROM_BASE64_BINARY('Zm9v')"),
    ),
    *_family(
        "temporal",
        ("LOCALTIME", "LOCALTIME"),
        ("LOCALTIMESTAMP", "LOCALTIMESTAMP"),
        ("CURRENT_TIME", "CURRENT_TIME"),
        ("CURRENT_DATE", "CURRENT_DATE"),
        ("CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP"),
        ("NOW()", "NOW()"),
        ("EXTRACT(timeintervalunit FROM temporal)", "EXTRACT(DOW FROM ts)"),
        ("YEAR / QUARTER / MONTH / WEEK(temporal)", "YEAR(ts) + QUARTER(ts) + MONTH(day) + WEEK(ltz)"),
        ("DAYOFYEAR / DAYOFMONTH / DAYOFWEEK(temporal)", "DAYOFYEAR(ts) + DAYOFMONTH(ts) + DAYOFWEEK(day)"),
        ("HOUR / MINUTE / SECOND(temporal)", "HOUR(ts) + MINUTE(tm) + SECOND(ltz)"),
        ("temporal +/- INTERVAL 'value' unit", "ts + INTERVAL '1 02:03:04' DAY TO SECOND"),
        ("DATE_FORMAT(timestamp, string)", "DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm')"),
        ("DATE_FORMAT(date, string)", "DATE_FORMAT(day, 'yyyyMMdd')"),
        ("DATE_FORMAT(time, string)", "DATE_FORMAT(tm, 'HH-mm')"),
        (
            "DATE_FORMAT_TZ(timestamp, format, timezone)",
            "DATE_FORMAT_TZ(ltz, 'yyyy-MM-dd HH:mm', 'Asia/Shanghai')",
        ),
        ("TIMESTAMPADD(timeintervalunit, interval, timepoint)", "TIMESTAMPADD(MONTH, 1, ts)"),
        ("TIMESTAMPDIFF(timepointunit, timepoint1, timepoint2)", "TIMESTAMPDIFF(DAY, ts, ltz)"),
        ("TO_DATE(string1[, string2])", "TO_DATE(s, 'yyyyMMdd')"),
        ("TO_DATE(timestamp)", "TO_DATE(ts)"),
        ("TO_TIMESTAMP(string1[, string2])", "TO_TIMESTAMP(s, 'yyyy/MM/dd HH:mm')"),
        ("TO_TIMESTAMP_LTZ(string1[, string2])", "TO_TIMESTAMP_LTZ(s, 'yyyy-MM-dd HH:mm')"),
        ("FROM_UNIXTIME(numeric[, string])", "FROM_UNIXTIME(n, 'yyyy-MM-dd')"),
        ("UNIX_TIMESTAMP()", "UNIX_TIMESTAMP()"),
        ("UNIX_TIMESTAMP(string1[, string2])", "UNIX_TIMESTAMP(s, 'yyyy-MM-dd HH:mm:ss')"),
        ("DATE_ADD(date, int)", "DATE_ADD(day, 1)"),
    ),
    *_family(
        "conditional",
        (
            "CASE value WHEN value1_1 [, value1_2]* THEN result1 ... [ELSE result_z] END",
            "CASE n WHEN 1, 2 THEN 'a' WHEN 3 THEN 'b' ELSE 'c' END",
        ),
        ("CASE WHEN condition1 THEN result1 ... [ELSE result_z] END", "CASE WHEN n > 1 THEN 'a' END"),
        ("COALESCE(value1 [, value2]*)", "COALESCE(s, u, 'x')"),
        ("IF(condition, true_value, false_value)", "IF(n > 1, s, u)"),
        ("IFNULL(value, replacement)", "IFNULL(s, 'x')"),
        ("NULLIF(value1, value2)", "NULLIF(n, 0)"),
    ),
    *_family(
        "casting",
        ("CAST(expr AS type)", "CAST(n AS STRING)"),
        ("TRY_CAST(expr AS type)", "TRY_CAST(s AS INT)"),
    ),
    *_family(
        "variant",
        ("PARSE_JSON(string[, allowDuplicateKeys])", "PARSE_JSON(s)"),
        ("TRY_PARSE_JSON(string[, allowDuplicateKeys])", "TRY_PARSE_JSON(s, TRUE)"),
    ),
    *_family(
        "struct",
        ("ARRAY[value, ...]", "ARRAY[n, 2]"),
        ("MAP[key, value, ...]", "MAP['k', n]"),
        ("ROW(value, ...)", "ROW(n, s)"),
        ("CARDINALITY(arrayOrMap)", "CARDINALITY(arr)"),
        ("ARRAY_CONTAINS(array, value)", "ARRAY_CONTAINS(arr, 1)"),
        ("ARRAY_POSITION(array, value)", "ARRAY_POSITION(arr, 1)"),
        ("ELEMENT(array)", "ELEMENT(arr)"),
        ("array[index]", "arr[1]"),
        ("map[key]", "m['k']"),
        ("row[index]", "r[2]"),
        ("variant[index]", "v[1]"),
        ("variant[key]", "v['k']"),
    ),
)

#: Functions beyond Flink CDC's documented list that transforms evaluate too: Flink SQL's, and
#: forms Flink CDC's runtime has without a row of their own in its documentation.
FLINK_SQL_EXTRAS: tuple[Function, ...] = (
    *_family(
        "more",
        ("DATE_SUB(date, int)", "DATE_SUB(day, 1)"),
        ("FLOOR(temporal TO unit), CEIL(temporal TO unit)", "FLOOR(ts TO HOUR)"),
        ("TRUNCATE(numeric[, int])", "TRUNCATE(x, 1)"),
        ("INITCAP(string)", "INITCAP(s)"),
        ("MOD(numeric1, numeric2)", "MOD(n, 3)"),
        ("TIMESTAMP_DIFF(unit, timepoint1, timepoint2)", "TIMESTAMP_DIFF(HOUR, ts, ts)"),
        ("DATE_FORMAT_TZ(timestamp, timezone)", "DATE_FORMAT_TZ(ltz, '+08:00')"),
        ("TO_TIMESTAMP_LTZ(numeric[, 0 | 3])", "TO_TIMESTAMP_LTZ(n, 0)"),
    ),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The table of Flink CDC's functions and ferry's status for each."""
    lines = ["| family | function | in ferry |", "|---|---|---|"]
    for f in (*FLINK_CDC_FUNCTIONS, *FLINK_SQL_EXTRAS):
        status = f"yes: `{_cell(f.example)}`" if f.example is not None else f"no: {f.why}"
        lines.append(f"| {f.family} | `{_cell(f.syntax)}` | {status} |")
    supported = sum(1 for f in FLINK_CDC_FUNCTIONS if f.example is not None)
    lines += [
        "",
        f"{supported} of the {len(FLINK_CDC_FUNCTIONS)} functions Flink CDC documents are evaluated; the "
        "rows marked more are beyond its list (Flink SQL's, and forms Flink CDC's runtime has).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
