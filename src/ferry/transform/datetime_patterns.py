"""Java's date and time patterns (``yyyy-MM-dd HH:mm:ss``), as Flink's ``DATE_FORMAT``,
``TO_TIMESTAMP``, ``UNIX_TIMESTAMP`` and their kin read them, for formatting and parsing.

A pattern is split once into fields (a run of one letter: ``yyyy``, ``MM``, ``SSS``) and literals
(other characters, and text quoted with ``'``; ``''`` is a quote). :func:`formatter` and
:func:`parser` turn it into a function. Letters: ``G`` era, ``y``/``u``/``Y`` year (``yy``: two
digits), ``M``/``L`` month (``MMM`` Jan, ``MMMM`` January), ``d`` day, ``D`` day of year, ``E``
weekday name, ``e`` day of week (Monday 1), ``w`` ISO week, ``a`` AM/PM, ``H``
(0-23), ``k`` (1-24), ``K`` (0-11), ``h`` (1-12), ``m``, ``s``, ``S`` fraction of a second,
``n`` nanoseconds, ``z`` zone name, ``Z`` (+0800), ``X``/``x`` (+08, +0800, +08:00; ``X`` writes
``Z`` for UTC), ``VV`` zone id.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_LETTERS = frozenset("GyuYMLdDEewaHkKhmsSnzZXxV")

Temporal = dt.datetime | dt.date | dt.time


def _tokens(pattern: str) -> list[tuple[str, int] | str]:
    """Fields as ``(letter, count)``, literals as strings."""
    out: list[tuple[str, int] | str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:  # '' is a quote
                out.append("'")
                i += 2
                continue
            if end < 0:
                raise ValueError(f"the pattern {pattern!r} has a quote that is not closed")
            out.append(pattern[i + 1 : end].replace("''", "'"))
            i = end + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < n and pattern[j] == ch:
                j += 1
            if ch not in _LETTERS:
                raise ValueError(f"the pattern {pattern!r} has the unknown letter {ch!r}")
            out.append((ch, j - i))
            i = j
        else:
            out.append(ch)
            i += 1
    return out


def _offset(value: dt.datetime | dt.time, count: int, letter: str) -> str:
    delta = value.utcoffset()
    if delta is None:
        return ""
    if letter == "X" and not delta:
        return "Z"
    minutes = int(delta.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    if letter == "Z" and count < 4:
        return f"{sign}{hours:02d}{minutes:02d}"
    if count == 1:
        return f"{sign}{hours:02d}" + (f"{minutes:02d}" if minutes else "")
    if count == 2:
        return f"{sign}{hours:02d}{minutes:02d}"
    return f"{sign}{hours:02d}:{minutes:02d}"


def _field(letter: str, count: int) -> Callable[[Temporal], str]:
    def number(get: Callable[[Temporal], int]) -> Callable[[Temporal], str]:
        return lambda v: str(get(v)).zfill(count)

    if letter in "yuY":
        if count == 2:
            return lambda v: f"{v.year % 100:02d}"  # type: ignore[union-attr]
        return number(lambda v: v.year)  # type: ignore[union-attr]
    if letter in "ML":
        if count >= 4:
            return lambda v: _MONTHS[v.month - 1]  # type: ignore[union-attr]
        if count == 3:
            return lambda v: _MONTHS[v.month - 1][:3]  # type: ignore[union-attr]
        return number(lambda v: v.month)  # type: ignore[union-attr]
    simple: dict[str, Callable[[Temporal], int]] = {
        "d": lambda v: v.day,  # type: ignore[union-attr]
        "D": lambda v: v.timetuple().tm_yday,  # type: ignore[union-attr]
        "e": lambda v: v.isoweekday(),  # type: ignore[union-attr]
        "w": lambda v: v.isocalendar()[1],  # type: ignore[union-attr]
        "H": lambda v: v.hour,  # type: ignore[union-attr]
        "k": lambda v: v.hour or 24,  # type: ignore[union-attr]
        "K": lambda v: v.hour % 12,  # type: ignore[union-attr]
        "h": lambda v: v.hour % 12 or 12,  # type: ignore[union-attr]
        "m": lambda v: v.minute,  # type: ignore[union-attr]
        "s": lambda v: v.second,  # type: ignore[union-attr]
        "n": lambda v: v.microsecond * 1000,  # type: ignore[union-attr]
    }
    if letter in simple:
        return number(simple[letter])
    if letter == "E":
        return (lambda v: _DAYS[v.weekday()]) if count >= 4 else (lambda v: _DAYS[v.weekday()][:3])  # type: ignore[union-attr]
    if letter == "a":
        return lambda v: "AM" if v.hour < 12 else "PM"  # type: ignore[union-attr]
    if letter == "G":
        return lambda v: "AD"
    if letter == "S":
        return lambda v: f"{v.microsecond:06d}{'0' * max(0, count - 6)}"[:count]  # type: ignore[union-attr]
    if letter == "z":
        return lambda v: (v.tzname() or "") if isinstance(v, dt.datetime | dt.time) else ""
    if letter == "V":
        return lambda v: str(getattr(v, "tzinfo", None) or "")
    return lambda v: _offset(v, count, letter) if isinstance(v, dt.datetime | dt.time) else ""


#: Fields written as an attribute of the value, for :meth:`str.format` (a year of four digits or
#: more, padded numbers): most patterns are only these, and are then written in one call.
_TEMPLATE = {"y": "year", "u": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}
_DATE_LETTERS = frozenset("yuYMLdDEewG")
_TIME_LETTERS = frozenset("HkKhmsSna")
#: Letters of fields that show a time zone.
ZONE_LETTERS = frozenset("zZXxV")


def _template(tokens: list[tuple[str, int] | str]) -> str | None:
    """The :meth:`str.format` template of a pattern whose fields are all in :data:`_TEMPLATE`."""
    parts: list[str] = []
    for token in tokens:
        if isinstance(token, str):
            parts.append(token.replace("{", "{{").replace("}", "}}"))
        elif token[0] in _TEMPLATE and (token[0] not in "yu" or token[1] >= 4) and token[1] <= 9:
            parts.append(f"{{0.{_TEMPLATE[token[0]]}:0{token[1]}d}}")
        else:
            return None
    return "".join(parts)


#: Patterns that are ISO 8601's, by what :meth:`datetime.isoformat` writes for them (the fastest way).
_ISO = {
    "yyyy-MM-dd HH:mm:ss": (" ", "seconds"),
    "yyyy-MM-dd'T'HH:mm:ss": ("T", "seconds"),
    "yyyy-MM-dd HH:mm:ss.SSS": (" ", "milliseconds"),
    "yyyy-MM-dd HH:mm": (" ", "minutes"),
}


@lru_cache(maxsize=128)
def formatter(pattern: str) -> Callable[[Temporal], str]:
    """A function writing a date, time or timestamp in ``pattern``; raises :class:`ValueError`
    for a pattern that is not one."""
    tokens = _tokens(pattern)
    parts = [t if isinstance(t, str) else _field(*t) for t in tokens]
    if pattern in _ISO:
        sep, spec = _ISO[pattern]
        slow = _write(pattern, parts)
        return lambda v: v.isoformat(sep, spec) if type(v) is dt.datetime and v.tzinfo is None else slow(v)
    if pattern == "yyyy-MM-dd":
        slow = _write(pattern, parts)
        return lambda v: v.isoformat() if type(v) is dt.date else slow(v)
    template = _template(tokens)
    if template is None:
        return _write(pattern, parts)
    letters = {t[0] for t in tokens if isinstance(t, tuple)}
    long_way, quick = _write(pattern, parts), template.format
    if letters <= _DATE_LETTERS:
        return lambda v: quick(v) if isinstance(v, dt.date) else long_way(v)
    if letters <= _TIME_LETTERS:
        return lambda v: quick(v) if isinstance(v, dt.datetime | dt.time) else long_way(v)
    return lambda v: quick(v) if isinstance(v, dt.datetime) else long_way(v)


def _write(pattern: str, parts: list[Any]) -> Callable[[Temporal], str]:
    def write(value: Temporal) -> str:
        try:
            return "".join(p if isinstance(p, str) else p(value) for p in parts)
        except AttributeError:  # a time field of a date, a date field of a time
            kind = type(value).__name__
            raise ValueError(f"the pattern {pattern!r} asks a {kind} for what it does not have") from None

    return write


_ZONE = r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?|UTC|GMT|[A-Za-z]+(?:/[A-Za-z_]+)+)"


def _regex(letter: str, count: int, adjacent: bool) -> str:
    """The regular expression of one field; ``adjacent``: a number follows without a separator."""
    names = {"y": "year", "u": "year", "Y": "year", "M": "month", "L": "month", "d": "day"}
    names |= {"D": "yday", "H": "hour", "k": "hour", "K": "hour12", "h": "hour12", "m": "minute"}
    names |= {"s": "second", "S": "fraction", "n": "nanos"}
    if letter in "ML" and count >= 3:
        return r"(?P<mname>[A-Za-z]+)"
    if letter == "E":
        return r"[A-Za-z]+"
    if letter == "a":
        return r"(?P<ampm>[AaPp][Mm])"
    if letter == "G":
        return r"[A-Za-z]+"
    if letter in "zZXxV":
        return _ZONE
    if letter in "ew":
        return r"\d{1,2}"
    name = names[letter]
    if letter == "S" or adjacent or (letter in "yuY" and count == 2):
        width = f"{{{count}}}"
    else:
        width = f"{{{count},{max(count, 9 if letter in 'yuYSn' else 2)}}}"
    return rf"(?P<{name}>[+-]?\d{width})" if letter in "yuY" and count > 4 else rf"(?P<{name}>\d{width})"


def _zone(text: str) -> dt.tzinfo:
    if text in ("Z", "UTC", "GMT"):
        return dt.UTC
    if text[0] in "+-":
        digits = text[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
        delta = dt.timedelta(hours=hours, minutes=minutes)
        return dt.timezone(-delta if text[0] == "-" else delta)
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {text!r}") from None


@lru_cache(maxsize=128)
def parser(pattern: str) -> Callable[[str], dt.datetime]:
    """A function reading text written in ``pattern`` into a timestamp: naive, or zoned when the
    text gives a zone; fields the pattern lacks are the start of their range (1970-01-01 00:00).
    Text that does not match raises :class:`ValueError`."""
    tokens = _tokens(pattern)
    parts: list[str] = []
    for i, token in enumerate(tokens):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        adjacent = isinstance(following, tuple) and following[0] not in "EaGzZXxV"
        parts.append(_regex(*token, adjacent))
    regex = re.compile("".join(parts), re.IGNORECASE)

    def read(text: str) -> dt.datetime:
        match = regex.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} does not match the pattern {pattern!r}")
        g = {k: v for k, v in match.groupdict().items() if v is not None}
        year = int(g.get("year", 1970))
        if len(g.get("year", "")) == 2:
            year += 2000
        month = int(g["month"]) if "month" in g else 1
        if "mname" in g:
            names = [m[:3].lower() for m in _MONTHS]
            month = names.index(g["mname"][:3].lower()) + 1 if g["mname"][:3].lower() in names else 0
            if not month:
                raise ValueError(f"{g['mname']!r} is not a month")
        hour = int(g.get("hour", 0)) % 24 if "hour" in g else int(g.get("hour12", 0)) % 12
        if g.get("ampm", "").upper() == "PM":
            hour += 12
        fraction = g.get("fraction") or str(int(g.get("nanos", 0)) // 1000).zfill(6)
        micro = int((fraction + "000000")[:6])
        day = int(g.get("day", 1))
        value = dt.datetime(year, month, day, hour, int(g.get("minute", 0)), int(g.get("second", 0)), micro)
        if "yday" in g:
            value = value.replace(month=1, day=1) + dt.timedelta(days=int(g["yday"]) - 1)
        if "zone" in g:
            value = value.replace(tzinfo=_zone(g["zone"]))
        return value

    return read


def time_zone(text: str) -> dt.tzinfo:
    """A time zone named as Flink allows: an IANA id (``Asia/Shanghai``), ``UTC``, or an offset
    (``+08:00``, ``GMT+8``)."""
    text = text.strip()
    gmt = re.fullmatch(r"(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?", text)
    if gmt:
        return _zone(f"{gmt.group(1)}{int(gmt.group(2)):02d}:{gmt.group(3) or '00'}")
    return _zone(text)


#: A fixed offset as Java's ``ZoneId.of`` reads it: ``+h``, ``+hh``, ``+hh:mm``, ``+hhmm``,
#: ``+hh:mm:ss``, ``+hhmmss`` (or ``-``), alone or after ``UTC``, ``GMT`` or ``UT``.
_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(?:(\d)|(\d{2})(?:(:?)(\d{2})(?:\4(\d{2}))?)?)")
#: The largest offset Java's ``ZoneOffset`` takes.
_MAX_OFFSET = dt.timedelta(hours=18)


def zone_id(text: str) -> dt.tzinfo:
    """A time zone as Java's ``ZoneId.of`` reads it (Flink's ``local-time-zone``): an IANA id
    (``Asia/Shanghai``), ``Z``, ``UTC``, ``GMT``, ``UT``, an offset (``+8``, ``+08``, ``+08:00``,
    ``+0800``, ``+08:00:00``) or a prefixed one (``GMT+08:00``, ``UTC+8``, ``UT-05:30``); raises
    :class:`ValueError` for anything else."""
    text = text.strip()
    if text in ("Z", "UTC", "GMT", "UT"):
        return dt.UTC
    offset = _OFFSET.fullmatch(text)
    if offset is None and re.match(r"(?:UTC|GMT|UT)?[+-]", text):
        raise ValueError(f"{text!r} is not an offset as Java reads one (+8, +08, +08:00, +0800, +08:00:00)")
    if offset is None:
        return _zone(text)
    sign, hour, hours, _, minutes, seconds = offset.groups()
    parts = (int(hour or hours), int(minutes or 0), int(seconds or 0))
    delta = dt.timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])
    if parts[1] > 59 or parts[2] > 59 or delta > _MAX_OFFSET:
        raise ValueError(f"{text!r} is not an offset between -18:00 and +18:00")
    return dt.timezone(-delta if sign == "-" else delta)
