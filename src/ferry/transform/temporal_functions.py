"""Temporal functions of transforms, with Flink CDC's semantics and the session time zone.

Values are what the decoders produce: ``date``, ``time``, a naive ``datetime`` for ``TIMESTAMP``
and a UTC ``datetime`` for ``TIMESTAMP_LTZ``. A ``TIMESTAMP_LTZ`` is shown, extracted from and
floored in the session time zone (``pipeline.local-time-zone``, the system's when unset); a
``TIMESTAMP`` is a wall clock and needs no zone, except where it meets an instant
(``TIMESTAMPDIFF`` of both kinds, ``UNIX_TIMESTAMP``, ``FROM_UNIXTIME``). ``NOW()`` and its kin are
read per row, to the millisecond. Formats are Java's patterns (:mod:`ferry.transform.datetime_patterns`).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ferry.model.types import (
    BIGINT,
    CHARACTER,
    DATE,
    INT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TIMESTAMPS,
    DataType,
    TypeRoot,
)
from ferry.transform.compiled import Compiled, CompileError, Session, call, constant_value
from ferry.transform.datetime_patterns import ZONE_LETTERS, formatter, parser, time_zone
from ferry.transform.sqlvalues import to_text, to_timestamp

if TYPE_CHECKING:
    from ferry.transform.compiled import ExpressionCompiler

Handler = Callable[["ExpressionCompiler", Any], Compiled]

DEFAULT_DATE = "yyyy-MM-dd"
DEFAULT_TIMESTAMP = "yyyy-MM-dd HH:mm:ss"
_UNITS = ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND")
_FIXED = {
    "WEEK": dt.timedelta(weeks=1),
    "DAY": dt.timedelta(days=1),
    "HOUR": dt.timedelta(hours=1),
    "MINUTE": dt.timedelta(minutes=1),
    "SECOND": dt.timedelta(seconds=1),
    "MILLISECOND": dt.timedelta(milliseconds=1),
}
_MONTHS = {"YEAR": 12, "QUARTER": 3, "MONTH": 1}


def _unit(node: exp.Expr | None, what: str) -> str:
    name = (node.name if node is not None else "").upper()
    name = {"DAYS": "DAY", "HOURS": "HOUR", "MINUTES": "MINUTE", "SECONDS": "SECOND"}.get(name, name)
    name = {"YEARS": "YEAR", "MONTHS": "MONTH", "WEEKS": "WEEK", "FRAC_SECOND": "MICROSECOND"}.get(name, name)
    if name not in (*_UNITS, "MICROSECOND"):
        raise CompileError(f"{what}: {name or '?'} is not a time unit (one of {', '.join(_UNITS)})")
    return name


def _temporal(c: ExpressionCompiler, node: exp.Expr) -> Compiled:
    """An operand that must be a date, time or timestamp (text is read as a timestamp)."""
    compiled = c.compile(node)
    t = compiled.type
    if t is None or t.root in (TypeRoot.DATE, TypeRoot.TIME, *TIMESTAMPS):
        return compiled
    if t.root in CHARACTER:
        return c.fold(compiled, to_timestamp, TIMESTAMP(3))
    raise CompileError(f"{node.sql()} is a {t}, not a date, time or timestamp")


def add_months(value: Any, months: int) -> Any:
    """A date or timestamp ``months`` later, its day kept within the month (Jan 31 + 1 = Feb 29)."""
    if isinstance(value, dt.time):
        return value
    index = value.year * 12 + value.month - 1 + months
    year, month = divmod(index, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


def add_duration(value: Any, delta: dt.timedelta) -> Any:
    if isinstance(value, dt.datetime):
        return value + delta
    if isinstance(value, dt.date):  # only whole days move a date
        days = int(delta / dt.timedelta(days=1))
        return value + dt.timedelta(days=days)
    moved = dt.datetime.combine(dt.date(2000, 1, 1), value) + delta
    return moved.time()


# --------------------------------------------------------------------------------------------------
# The clock


def _clock(kind: str) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.Expr) -> Compiled:
        session = c.session
        now, local = session.now, session.local
        fn: Callable[[Any], Any]
        if kind == "instant":
            fn, type_ = (lambda row: now()), TIMESTAMP_LTZ(3).not_null()
        elif kind == "timestamp":
            fn, type_ = (lambda row: local(now())), TIMESTAMP(3).not_null()
        elif kind == "time":
            fn, type_ = (lambda row: local(now()).time().replace(microsecond=0)), TIME(0).not_null()
        elif kind == "date":
            fn, type_ = (lambda row: local(now()).date()), DATE().not_null()
        else:
            fn, type_ = (lambda row: int(now().timestamp())), BIGINT().not_null()
        return Compiled(fn, type_)

    return handler


# --------------------------------------------------------------------------------------------------
# Parts of dates and times


def _extract_part(unit: str, session: Session) -> Callable[[Any], int]:
    name, local = unit.lower(), session.local

    def part(value: Any) -> int:
        if isinstance(value, dt.datetime):
            value = local(value)
        if isinstance(value, dt.time):
            if unit not in ("HOUR", "MINUTE", "SECOND"):
                raise ValueError(f"EXTRACT({unit}) of a TIME")
            return int(getattr(value, name))
        if unit in ("HOUR", "MINUTE", "SECOND"):
            return int(getattr(value, name)) if isinstance(value, dt.datetime) else 0
        if unit == "QUARTER":
            return int((value.month - 1) // 3 + 1)
        if unit == "WEEK":
            return int(value.isocalendar()[1])
        if unit == "DOY":
            return int(value.timetuple().tm_yday)
        if unit == "DOW":  # Sunday is 1
            return int(value.isoweekday() % 7 + 1)
        return int(getattr(value, name))

    if unit not in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"):
        return part

    def field(value: Any) -> int:  # a timestamp's field, the common case, in one step
        if type(value) is dt.datetime:
            return int(getattr(local(value), name))
        return part(value)

    return field


def extract(c: ExpressionCompiler, node: exp.Extract) -> Compiled:
    unit = node.this.name.upper()
    unit = {"DAYOFWEEK": "DOW", "DAYOFYEAR": "DOY", "DAYOFMONTH": "DAY"}.get(unit, unit)
    if unit not in ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOY", "DOW", "HOUR", "MINUTE", "SECOND"):
        raise CompileError(
            f"EXTRACT({unit} FROM ...): the units are YEAR, QUARTER, MONTH, WEEK, DAY, "
            "DOY, DOW, HOUR, MINUTE and SECOND"
        )
    operand = _temporal(c, node.expression)
    return c.fold(operand, _extract_part(unit, c.session), BIGINT())


def _part(unit: str) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.Func) -> Compiled:
        return c.fold(_temporal(c, node.this), _extract_part(unit, c.session), BIGINT())

    return handler


# --------------------------------------------------------------------------------------------------
# Intervals


def interval(node: exp.Interval) -> tuple[int, dt.timedelta]:
    """An interval literal as months and a duration: ``INTERVAL '1-2' YEAR TO MONTH`` is 14 months,
    ``INTERVAL '1 02:03:04' DAY TO SECOND`` a day and 2:03:04."""
    text = str(node.this.name if node.this is not None else "").strip()
    unit = node.args.get("unit")
    if isinstance(unit, exp.IntervalSpan):
        first, last = unit.this.name.upper(), unit.expression.name.upper()
    else:
        first = last = _unit(unit, f"INTERVAL {text!r}")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    if first in ("YEAR", "MONTH") and last in ("YEAR", "MONTH"):
        if first == "YEAR" and last == "MONTH":
            years, _, months = text.partition("-")
            return sign * (int(years) * 12 + int(months or 0)), dt.timedelta()
        return sign * int(text) * _MONTHS[first], dt.timedelta()
    if first == last and first in _MONTHS:
        return sign * int(text) * _MONTHS[first], dt.timedelta()
    if first == last:
        return 0, sign * float(text) * _FIXED[first] if first in _FIXED else dt.timedelta(
            microseconds=sign * int(text)
        )
    order = ["DAY", "HOUR", "MINUTE", "SECOND"]
    if first not in order or last not in order or order.index(first) >= order.index(last):
        raise CompileError(f"INTERVAL {first} TO {last} is not an interval")
    fields = re.split(r"[ :]", text)
    units = order[order.index(first) : order.index(last) + 1]
    if len(fields) != len(units):
        raise CompileError(f"INTERVAL {text!r} {first} TO {last} does not have {len(units)} fields")
    total = sum((float(v) * _FIXED[u] for v, u in zip(fields, units, strict=True)), dt.timedelta())
    return 0, sign * total


def interval_arithmetic(c: ExpressionCompiler, node: exp.Add | exp.Sub) -> Compiled:
    """``temporal + INTERVAL ...``, ``INTERVAL ... + temporal``, ``temporal - INTERVAL ...``."""
    left, right = node.this, node.expression
    if isinstance(left, exp.Interval):
        if isinstance(node, exp.Sub):
            raise CompileError(f"{node.sql()}: an interval cannot have a date or time taken from it")
        left, right = right, left
    if not isinstance(right, exp.Interval) or isinstance(left, exp.Interval):
        raise CompileError(f"{node.sql()}: an interval is added to a date, time or timestamp")
    months, delta = interval(right)
    if isinstance(node, exp.Sub):
        months, delta = -months, -delta
    operand = _temporal(c, left)

    def shift(value: Any) -> Any:
        if months:
            value = add_months(value, months)
        return add_duration(value, delta) if delta else value

    return c.fold(operand, shift, None if operand.type is None else operand.type.with_nullable(True))


# --------------------------------------------------------------------------------------------------
# Formatting and parsing


def _pattern(c: ExpressionCompiler, node: exp.Expr | None, default: str, what: str) -> str:
    if node is None:
        return default
    value = constant_value(c.compile(node), f"the format of {what}")
    if not isinstance(value, str):
        raise CompileError(f"the format of {what} is a string")
    try:
        formatter(value)
        parser(value)
    except ValueError as e:
        raise CompileError(f"{what}: {e}") from None
    return value


def _args(node: exp.Anonymous, low: int, high: int) -> list[exp.Expr]:
    args = list(node.expressions)
    if not low <= len(args) <= high:
        count = str(low) if low == high else f"{low} to {high}"
        raise CompileError(f"{node.name.upper()} takes {count} arguments, not {len(args)}")
    return args


def date_format(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``DATE_FORMAT(temporal, format)``: a timestamp with local time zone in the session's."""
    value, fmt = _args(node, 2, 2)
    pattern = _pattern(c, fmt, DEFAULT_TIMESTAMP, "DATE_FORMAT")
    write = formatter(pattern)
    # a wall clock is written as it is; with a zone field it is read in the session's zone
    show = c.session.zoned if ZONE_LETTERS & set(pattern) else c.session.local
    return c.fold(
        _temporal(c, value),
        lambda v: write(show(v) if type(v) is dt.datetime else v),
        STRING(),
    )


def date_format_tz(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``DATE_FORMAT_TZ(timestamp[, format], zone)``: a timestamp in ``zone``; one without a zone is
    a wall clock in it."""
    args = _args(node, 2, 3)
    fmt = _pattern(c, args[1] if len(args) == 3 else None, DEFAULT_TIMESTAMP, "DATE_FORMAT_TZ")
    write = formatter(fmt)

    def in_zone(value: Any, zone: Any) -> str:
        tz = time_zone(to_text(zone))
        if isinstance(value, dt.datetime):
            value = value.astimezone(tz) if value.tzinfo is not None else value.replace(tzinfo=tz)
        return write(value)

    return call(in_zone, [_temporal(c, args[0]), c.compile(args[-1])], STRING())


def _read(session: Session, fmt: str) -> Callable[[Any], dt.datetime]:
    """Text in ``fmt`` as the session's wall clock (a zone in the text converted to the session's)."""
    read = parser(fmt)

    def wall_clock(text: Any) -> dt.datetime:
        value = read(to_text(text))
        return session.local(value) if value.tzinfo is not None else value

    return wall_clock


def to_date(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``TO_DATE(text[, format])`` (NULL when it does not parse) or ``TO_DATE(timestamp)``."""
    args = _args(node, 1, 2)
    operand = c.compile(args[0])
    if operand.type is not None and operand.type.root not in CHARACTER:
        if len(args) == 2:
            raise CompileError("TO_DATE(timestamp) takes no format")
        return c.fold(_temporal(c, args[0]), lambda v: v.date() if isinstance(v, dt.datetime) else v, DATE())
    read = _read(c.session, _pattern(c, args[1] if len(args) == 2 else None, DEFAULT_DATE, "TO_DATE"))

    def date(text: Any) -> dt.date | None:
        try:
            return read(text).date()
        except ValueError:
            return None

    return c.fold(operand, date, DATE())


def to_timestamp_(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``TO_TIMESTAMP(text[, format])``: a timestamp without time zone."""
    args = _args(node, 1, 2)
    fmt = _pattern(c, args[1] if len(args) == 2 else None, DEFAULT_TIMESTAMP, "TO_TIMESTAMP")
    return c.fold(c.compile(args[0]), _read(c.session, fmt), TIMESTAMP(3))


def to_timestamp_ltz(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``TO_TIMESTAMP_LTZ(epoch[, 0 | 3])`` (seconds or milliseconds) or
    ``TO_TIMESTAMP_LTZ(text[, format[, zone]])`` (the session's zone unless the text has one)."""
    args = _args(node, 1, 3)
    operand = c.compile(args[0])
    if operand.type is not None and operand.type.root not in CHARACTER:
        precision = (
            constant_value(c.compile(args[1]), "the precision of TO_TIMESTAMP_LTZ") if len(args) > 1 else 3
        )
        if precision not in (0, 3):
            raise CompileError("the precision of TO_TIMESTAMP_LTZ(epoch, precision) is 0 or 3")
        scale = 1 if precision == 0 else 1000
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return c.fold(
            c.numeric(args[0]), lambda n: epoch + dt.timedelta(seconds=float(n) / scale), TIMESTAMP_LTZ(3)
        )
    fmt = _pattern(c, args[1] if len(args) > 1 else None, "yyyy-MM-dd HH:mm:ss.SSS", "TO_TIMESTAMP_LTZ")
    read, session = parser(fmt), c.session
    default_read = parser(DEFAULT_TIMESTAMP) if len(args) == 1 else None

    def instant(text: Any, zone: Any = None) -> dt.datetime:
        try:
            value = read(to_text(text))
        except ValueError:
            if default_read is None:
                raise
            value = default_read(to_text(text))
        if value.tzinfo is None and zone is not None:
            value = value.replace(tzinfo=time_zone(to_text(zone)))
        return session.instant(value)

    return call(instant, [operand, *([c.compile(args[2])] if len(args) == 3 else [])], TIMESTAMP_LTZ(3))


def from_unixtime(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``FROM_UNIXTIME(seconds[, format])``: the instant as text in the session time zone."""
    args = _args(node, 1, 2)
    write = formatter(_pattern(c, args[1] if len(args) == 2 else None, DEFAULT_TIMESTAMP, "FROM_UNIXTIME"))
    epoch, zoned = dt.datetime(1970, 1, 1, tzinfo=dt.UTC), c.session.zoned
    return c.fold(c.numeric(args[0]), lambda n: write(zoned(epoch + dt.timedelta(seconds=int(n)))), STRING())


def unix_timestamp(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``UNIX_TIMESTAMP()`` (now) or ``UNIX_TIMESTAMP(text[, format])``: seconds since 1970 of the
    text read in the session time zone (its own zone if it has one); NULL when it does not parse."""
    args = _args(node, 0, 2)
    if not args:
        return _clock("epoch")(c, node)
    read = parser(_pattern(c, args[1] if len(args) == 2 else None, DEFAULT_TIMESTAMP, "UNIX_TIMESTAMP"))
    session = c.session

    def seconds(text: Any) -> int | None:
        try:
            return int(session.instant(read(to_text(text))).timestamp())
        except ValueError:
            return None

    return c.fold(c.compile(args[0]), seconds, BIGINT())


# --------------------------------------------------------------------------------------------------
# Arithmetic on timestamps


def _shift(unit: str, amount: int, value: Any) -> Any:
    if unit in _MONTHS:
        return add_months(value, amount * _MONTHS[unit])
    delta = amount * (_FIXED[unit] if unit in _FIXED else dt.timedelta(microseconds=1))
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime) and unit not in ("DAY", "WEEK"):
        value = to_timestamp(value)
    return add_duration(value, delta)


def timestampadd(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``TIMESTAMPADD(unit, n, temporal)``: a DATE stays one for whole days, months and years."""
    unit_node, amount, value = _args(node, 3, 3)
    unit = _unit(unit_node, "TIMESTAMPADD")
    operand = _temporal(c, value)
    t = operand.type
    result: DataType | None = None if t is None else t.with_nullable(True)
    if t is not None and t.root is TypeRoot.DATE and unit not in ("DAY", "WEEK", *_MONTHS):
        result = TIMESTAMP(0)
    return call(lambda n, v: _shift(unit, int(n), v), [c.numeric(amount), operand], result)


def _months_between(a: dt.datetime, b: dt.datetime) -> int:
    """Whole months from ``a`` to ``b`` (a month is complete when its day and time are reached)."""
    months = (b.year - a.year) * 12 + b.month - a.month
    rest_a = (a.day, a.time())
    rest_b = (b.day, b.time())
    if months > 0 and rest_b < rest_a:
        months -= 1
    elif months < 0 and rest_b > rest_a:
        months += 1
    return months


def timestampdiff(c: ExpressionCompiler, node: exp.Anonymous) -> Compiled:
    """``TIMESTAMPDIFF(unit, from, to)`` (``TIMESTAMP_DIFF``): whole units from ``from`` to ``to``,
    signed; an instant and a wall clock meet in the session time zone."""
    unit_node, start, end = _args(node, 3, 3)
    unit = _unit(unit_node, node.name.upper())
    session = c.session

    def between(a: Any, b: Any) -> int:
        a, b = to_timestamp(a), to_timestamp(b)
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = session.instant(a), session.instant(b)
        if unit in _MONTHS:
            if a.tzinfo is not None:
                a, b = session.local(a), session.local(b)
            return int(_months_between(a, b) / _MONTHS[unit])
        step = _FIXED[unit] if unit in _FIXED else dt.timedelta(microseconds=1)
        return int((b - a) / step)

    return call(between, [_temporal(c, start), _temporal(c, end)], INT())


def _date_shift(sign: int) -> Handler:
    def handler(c: ExpressionCompiler, node: exp.DateAdd | exp.DateSub) -> Compiled:
        """``DATE_ADD(date, n)`` / ``DATE_SUB(date, n)``: the day ``n`` days later / earlier, as
        ``yyyy-MM-dd`` text (Flink CDC's; a timestamp counts by its date, in the session's zone)."""
        if node.args.get("unit") is not None and node.args["unit"].name.upper() not in ("DAY", ""):
            raise CompileError(f"{node.sql()}: DATE_ADD and DATE_SUB count days")
        session = c.session

        def shift(value: Any, days: Any) -> str:
            if isinstance(value, str):
                text = value.strip()
                if len(text) not in (10, 19):
                    raise ValueError(f"{text!r} is not yyyy-MM-dd or yyyy-MM-dd HH:mm:ss")
                value = to_timestamp(text)
            if isinstance(value, dt.datetime):
                value = session.local(value).date()
            day: dt.date = value + dt.timedelta(days=sign * int(days))
            return day.isoformat()

        return call(shift, [c.compile(node.this), c.numeric(node.expression)], STRING())

    return handler


def floor_to(c: ExpressionCompiler, node: exp.Floor | exp.Ceil) -> Compiled:
    """``FLOOR(temporal TO unit)`` and ``CEIL(temporal TO unit)``; an instant in the session's zone."""
    unit = _unit(node.args["to"], f"{node.key.upper()}(... TO unit)")
    operand = _temporal(c, node.this)
    up, session = isinstance(node, exp.Ceil), c.session

    def floor(value: dt.datetime) -> dt.datetime:
        if unit in _MONTHS:
            month = (value.month - 1) // _MONTHS[unit] * _MONTHS[unit] + 1
            return value.replace(month=month, day=1, hour=0, minute=0, second=0, microsecond=0)
        if unit == "WEEK":  # weeks start on Sunday, as in Flink
            start = value - dt.timedelta(days=value.isoweekday() % 7)
            return start.replace(hour=0, minute=0, second=0, microsecond=0)
        step = _FIXED[unit] if unit in _FIXED else dt.timedelta(microseconds=1)
        midnight = value.replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight + (value - midnight) // step * step

    def ceil(value: dt.datetime) -> dt.datetime:
        low = floor(value)
        if low == value:
            return low
        return _shift(unit, 1, low) if unit != "WEEK" else low + dt.timedelta(weeks=1)

    rounding = ceil if up else floor

    def apply(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                return rounding(value)
            return session.instant(rounding(session.local(value)))
        if isinstance(value, dt.date):
            return rounding(to_timestamp(value)).date()
        moved = rounding(dt.datetime.combine(dt.date(2000, 1, 1), value))
        return moved.time()

    return c.fold(operand, apply, None if operand.type is None else operand.type.with_nullable(True))


NODE_HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.Localtime: _clock("time"),
    exp.CurrentTime: _clock("time"),
    exp.Localtimestamp: _clock("timestamp"),
    exp.CurrentDate: _clock("date"),
    exp.CurrentTimestamp: _clock("instant"),
    exp.Extract: extract,
    exp.Year: _part("YEAR"),
    exp.Quarter: _part("QUARTER"),
    exp.Month: _part("MONTH"),
    exp.Week: _part("WEEK"),
    exp.DayOfYear: _part("DOY"),
    exp.DayOfMonth: _part("DAY"),
    exp.DayOfWeek: _part("DOW"),
    exp.Hour: _part("HOUR"),
    exp.Minute: _part("MINUTE"),
    exp.Second: _part("SECOND"),
    exp.DateAdd: _date_shift(1),
    exp.DateSub: _date_shift(-1),
}
#: Functions sqlglot leaves as calls by name (``exp.Anonymous``).
NAMED_HANDLERS: dict[str, Handler] = {
    "NOW": _clock("instant"),
    "DATE_FORMAT": date_format,
    "DATE_FORMAT_TZ": date_format_tz,
    "TO_DATE": to_date,
    "TO_TIMESTAMP": to_timestamp_,
    "TO_TIMESTAMP_LTZ": to_timestamp_ltz,
    "FROM_UNIXTIME": from_unixtime,
    "UNIX_TIMESTAMP": unix_timestamp,
    "TIMESTAMPADD": timestampadd,
    "TIMESTAMPDIFF": timestampdiff,
    "TIMESTAMP_DIFF": timestampdiff,
}
