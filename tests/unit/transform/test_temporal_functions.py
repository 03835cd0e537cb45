"""Temporal functions: Flink CDC's results, NULL in NULL out, and the session time zone."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from tests.support.expressions import NOW, compiled, value

from ferry.model.types import BIGINT, DATE, INT, STRING, TIME, TIMESTAMP, TIMESTAMP_LTZ
from ferry.transform.compiled import CompileError
from ferry.transform.datetime_patterns import formatter
from ferry.transform.sqlvalues import ROW_ERRORS

TS = dt.datetime(2024, 2, 29, 13, 45, 10, 123456)
#: 2024-02-29 20:00 UTC: 2024-03-01 04:00 in Shanghai, 15:00 in New York.
LTZ = dt.datetime(2024, 2, 29, 20, 0, tzinfo=dt.UTC)
ROW = {"ts": TS, "ltz": LTZ, "day": dt.date(2024, 2, 29), "tm": dt.time(9, 5, 7), "n": 1709236800}


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("CURRENT_TIMESTAMP", "UTC", NOW.replace(microsecond=123000)),
        ("NOW()", "Asia/Shanghai", NOW.replace(microsecond=123000)),  # an instant: no zone in it
        ("LOCALTIMESTAMP", "Asia/Shanghai", dt.datetime(2024, 3, 1, 7, 30, 0, 123000)),
        ("LOCALTIMESTAMP", "America/New_York", dt.datetime(2024, 2, 29, 18, 30, 0, 123000)),
        ("CURRENT_DATE", "Asia/Shanghai", dt.date(2024, 3, 1)),
        ("CURRENT_DATE", "UTC", dt.date(2024, 2, 29)),
        ("CURRENT_TIME", "Asia/Shanghai", dt.time(7, 30)),
        ("LOCALTIME", "UTC", dt.time(23, 30)),
        ("UNIX_TIMESTAMP()", "Asia/Shanghai", int(NOW.timestamp())),
    ],
)
def test_the_clock_reads_the_session_time_zone(text: str, zone: str, expected: Any) -> None:
    assert value(text, zone=zone) == expected


def test_the_clock_is_read_per_row_and_typed() -> None:
    assert compiled("NOW()").type == TIMESTAMP_LTZ(3).not_null()
    assert compiled("LOCALTIMESTAMP").type == TIMESTAMP(3).not_null()
    assert compiled("CURRENT_DATE").type == DATE().not_null()
    assert compiled("CURRENT_TIME").type == TIME(0).not_null()
    assert not compiled("NOW()").constant


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("EXTRACT(YEAR FROM ts)", "UTC", 2024),
        ("EXTRACT(DOW FROM ts)", "UTC", 5),  # a Thursday; Sunday is 1
        ("EXTRACT(DOY FROM day)", "UTC", 60),
        ("QUARTER(ts)", "UTC", 1),
        ("WEEK(day)", "UTC", 9),
        ("DAYOFWEEK(day)", "UTC", 5),
        ("DAYOFMONTH(ts)", "UTC", 29),
        ("HOUR(tm)", "UTC", 9),
        ("HOUR(day)", "UTC", 0),
        ("SECOND(ts)", "UTC", 10),
        # a timestamp with local time zone is read in the session's
        ("DAYOFMONTH(ltz)", "Asia/Shanghai", 1),
        ("HOUR(ltz)", "Asia/Shanghai", 4),
        ("HOUR(ltz)", "America/New_York", 15),
        ("HOUR(ts)", "Asia/Shanghai", 13),  # a wall clock is not moved
    ],
)
def test_parts_of_dates_and_times(text: str, zone: str, expected: int) -> None:
    assert value(text, ROW, zone=zone) == expected
    assert compiled(text).type == BIGINT()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ts + INTERVAL '1' DAY", dt.datetime(2024, 3, 1, 13, 45, 10, 123456)),
        ("ts - INTERVAL '2' HOUR", dt.datetime(2024, 2, 29, 11, 45, 10, 123456)),
        ("ts + INTERVAL '1' MONTH", dt.datetime(2024, 3, 29, 13, 45, 10, 123456)),
        ("ts + INTERVAL '1' YEAR", dt.datetime(2025, 2, 28, 13, 45, 10, 123456)),  # the day is kept in Feb
        ("INTERVAL '1-2' YEAR TO MONTH + day", dt.date(2025, 4, 29)),
        ("ts + INTERVAL '1 02:03:04' DAY TO SECOND", dt.datetime(2024, 3, 1, 15, 48, 14, 123456)),
        ("day + INTERVAL '36' HOUR", dt.date(2024, 3, 1)),  # whole days only
        ("tm + INTERVAL '15' HOUR", dt.time(0, 5, 7)),
        ("tm + INTERVAL '1' MONTH", dt.time(9, 5, 7)),
        ("ltz + INTERVAL '30' MINUTE", dt.datetime(2024, 2, 29, 20, 30, tzinfo=dt.UTC)),
    ],
)
def test_interval_arithmetic(text: str, expected: Any) -> None:
    assert value(text, ROW) == expected


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')", "UTC", "2024-02-29 13:45:10"),
        ("DATE_FORMAT(ts, 'yyyyMMdd HH:mm:ss.SSS')", "UTC", "20240229 13:45:10.123"),
        ("DATE_FORMAT(ts, 'EEE, d MMM yy hh:mm a')", "UTC", "Thu, 29 Feb 24 01:45 PM"),
        ("DATE_FORMAT(ts, '''at'' HH''h''')", "UTC", "at 13h"),
        ("DATE_FORMAT(day, 'yyyy/MM/dd')", "UTC", "2024/02/29"),
        ("DATE_FORMAT(tm, 'HH-mm-ss')", "UTC", "09-05-07"),
        ("DATE_FORMAT(ltz, 'yyyy-MM-dd HH:mm')", "Asia/Shanghai", "2024-03-01 04:00"),
        ("DATE_FORMAT(ltz, 'yyyy-MM-dd HH:mm XXX')", "America/New_York", "2024-02-29 15:00 -05:00"),
        ("DATE_FORMAT('2024-01-02 03:04:05', 'MM/dd')", "UTC", "01/02"),
        ("DATE_FORMAT_TZ(ltz, 'yyyy-MM-dd HH:mm', 'Asia/Shanghai')", "UTC", "2024-03-01 04:00"),
        ("DATE_FORMAT_TZ(ltz, 'HH:mm Z', '+05:30')", "UTC", "01:30 +0530"),
        ("DATE_FORMAT_TZ(ts, 'HH:mm XXX', 'Asia/Shanghai')", "UTC", "13:45 +08:00"),
        ("DATE_FORMAT_TZ(ltz, 'Asia/Tokyo')", "UTC", "2024-03-01 05:00:00"),
    ],
)
def test_date_format(text: str, zone: str, expected: str) -> None:
    assert value(text, ROW, zone=zone) == expected


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("TO_DATE('2024-02-29')", "UTC", dt.date(2024, 2, 29)),
        ("TO_DATE('29.02.2024', 'dd.MM.yyyy')", "UTC", dt.date(2024, 2, 29)),
        ("TO_DATE('not a date')", "UTC", None),  # Flink CDC: NULL when it does not parse
        ("TO_DATE(ts)", "UTC", dt.date(2024, 2, 29)),
        ("TO_TIMESTAMP('2024-02-29 13:45:10')", "UTC", dt.datetime(2024, 2, 29, 13, 45, 10)),
        ("TO_TIMESTAMP('2024/2/9 3:04', 'yyyy/M/d H:mm')", "UTC", dt.datetime(2024, 2, 9, 3, 4)),
        (
            "TO_TIMESTAMP('20240229134510123', 'yyyyMMddHHmmssSSS')",
            "UTC",
            dt.datetime(2024, 2, 29, 13, 45, 10, 123000),
        ),
        # a zone in the text is converted to the session's wall clock
        (
            "TO_TIMESTAMP('2024-02-29 12:00:00 +00:00', 'yyyy-MM-dd HH:mm:ss XXX')",
            "Asia/Shanghai",
            dt.datetime(2024, 2, 29, 20, 0),
        ),
        ("TO_TIMESTAMP_LTZ('2024-03-01 04:00:00.000')", "Asia/Shanghai", LTZ),
        ("TO_TIMESTAMP_LTZ('2024-03-01 04:00:00')", "Asia/Shanghai", LTZ),
        ("TO_TIMESTAMP_LTZ('01/03/2024 04:00', 'dd/MM/yyyy HH:mm', 'Asia/Shanghai')", "UTC", LTZ),
        ("TO_TIMESTAMP_LTZ(1709236800, 0)", "Asia/Shanghai", LTZ),
        ("TO_TIMESTAMP_LTZ(1709236800000)", "UTC", LTZ),
        ("FROM_UNIXTIME(n)", "Asia/Shanghai", "2024-03-01 04:00:00"),
        ("FROM_UNIXTIME(n, 'yyyy-MM-dd')", "America/New_York", "2024-02-29"),
        ("UNIX_TIMESTAMP('2024-03-01 04:00:00')", "Asia/Shanghai", 1709236800),
        ("UNIX_TIMESTAMP('2024-02-29 20:00:00')", "UTC", 1709236800),
        ("UNIX_TIMESTAMP('2024-03-01', 'yyyy-MM-dd')", "UTC", 1709251200),
        ("UNIX_TIMESTAMP('garbage')", "UTC", None),
    ],
)
def test_parsing_and_epochs(text: str, zone: str, expected: Any) -> None:
    assert value(text, ROW, zone=zone) == expected


def test_a_pattern_asking_a_date_for_its_hour_fails_the_row() -> None:
    with pytest.raises(ROW_ERRORS, match="asks a date for what it does not have"):
        compiled("DATE_FORMAT(day, 'yyyy HH')").fn(ROW)
    with pytest.raises(ROW_ERRORS, match="asks a time for what it does not have"):
        compiled("DATE_FORMAT(tm, 'yyyy')").fn(ROW)


def test_to_timestamp_that_does_not_parse_fails_the_row() -> None:
    fn = compiled("TO_TIMESTAMP(s)").fn
    with pytest.raises(ROW_ERRORS, match="does not match the pattern"):  # a dead letter, with why
        fn({"s": "yesterday"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TIMESTAMPADD(DAY, 1, ts)", dt.datetime(2024, 3, 1, 13, 45, 10, 123456)),
        ("TIMESTAMPADD(MONTH, -1, day)", dt.date(2024, 1, 29)),
        ("TIMESTAMPADD(YEAR, 1, day)", dt.date(2025, 2, 28)),
        ("TIMESTAMPADD(HOUR, 2, day)", dt.datetime(2024, 2, 29, 2, 0)),
        ("TIMESTAMPADD(WEEK, 1, ltz)", dt.datetime(2024, 3, 7, 20, 0, tzinfo=dt.UTC)),
        ("TIMESTAMPDIFF(DAY, TIMESTAMP '2024-02-01 00:00:00', ts)", 28),
        ("TIMESTAMPDIFF(HOUR, ts, TIMESTAMP '2024-02-29 10:00:00')", -3),
        ("TIMESTAMPDIFF(MONTH, DATE '2024-01-31', DATE '2024-02-29')", 0),  # not a whole month
        ("TIMESTAMPDIFF(MONTH, DATE '2024-01-29', DATE '2024-02-29')", 1),
        ("TIMESTAMPDIFF(YEAR, DATE '2023-03-01', day)", 0),
        ("TIMESTAMPDIFF(QUARTER, DATE '2023-02-28', day)", 4),
        ("TIMESTAMP_DIFF(MINUTE, ts, ts + INTERVAL '90' SECOND)", 1),
    ],
)
def test_timestamp_arithmetic(text: str, expected: Any) -> None:
    assert value(text, ROW) == expected


@pytest.mark.parametrize(("zone", "expected"), [("UTC", 6), ("Asia/Shanghai", 14), ("America/New_York", 1)])
def test_timestampdiff_of_an_instant_and_a_wall_clock_meets_in_the_session_zone(
    zone: str, expected: int
) -> None:
    # ts is 13:45 on the session's clock, ltz 20:00 UTC
    assert value("TIMESTAMPDIFF(HOUR, ts, ltz)", ROW, zone=zone) == expected
    assert compiled("TIMESTAMPDIFF(HOUR, ts, ltz)").type == INT()


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("DATE_ADD(day, 1)", "UTC", "2024-03-01"),
        ("DATE_ADD('2024-02-28', 1)", "UTC", "2024-02-29"),
        ("DATE_ADD('2024-02-28 23:00:00', 2)", "UTC", "2024-03-01"),
        ("DATE_ADD(ltz, 0)", "Asia/Shanghai", "2024-03-01"),
        ("DATE_SUB(day, 29)", "UTC", "2024-01-31"),
    ],
)
def test_date_add_and_sub_give_text(text: str, zone: str, expected: str) -> None:
    assert value(text, ROW, zone=zone) == expected
    assert compiled(text).type == STRING()


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("FLOOR(ts TO HOUR)", "UTC", dt.datetime(2024, 2, 29, 13, 0)),
        ("CEIL(ts TO HOUR)", "UTC", dt.datetime(2024, 2, 29, 14, 0)),
        ("FLOOR(ts TO MONTH)", "UTC", dt.datetime(2024, 2, 1)),
        ("CEIL(ts TO YEAR)", "UTC", dt.datetime(2025, 1, 1)),
        ("FLOOR(ts TO WEEK)", "UTC", dt.datetime(2024, 2, 25)),  # a Sunday
        ("FLOOR(day TO MONTH)", "UTC", dt.date(2024, 2, 1)),
        # an instant is floored on the session's clock: 04:00 in Shanghai is that day
        ("FLOOR(ltz TO DAY)", "Asia/Shanghai", dt.datetime(2024, 2, 29, 16, 0, tzinfo=dt.UTC)),
        ("FLOOR(ltz TO DAY)", "UTC", dt.datetime(2024, 2, 29, 0, 0, tzinfo=dt.UTC)),
    ],
)
def test_floor_and_ceil_to_a_unit(text: str, zone: str, expected: Any) -> None:
    assert value(text, ROW, zone=zone) == expected


@pytest.mark.parametrize(
    "text",
    [
        "DATE_FORMAT(ts, 'yyyy')",
        "EXTRACT(YEAR FROM ts)",
        "ts + INTERVAL '1' DAY",
        "TIMESTAMPADD(DAY, 1, ts)",
        "TIMESTAMPDIFF(DAY, ts, ltz)",
        "TO_DATE(s)",
        "TO_TIMESTAMP(s)",
        "UNIX_TIMESTAMP(s)",
        "FROM_UNIXTIME(n)",
        "DATE_ADD(day, n)",
        "FLOOR(ts TO DAY)",
        "DATE_FORMAT_TZ(ts, 'yyyy', s)",
    ],
)
def test_null_in_null_out(text: str) -> None:
    assert value(text, {}) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DATE_FORMAT(ts, 'yyyy-qq')", "unknown letter 'q'"),
        ("DATE_FORMAT(ts, s)", "must be a constant"),
        ("TIMESTAMPADD(FORTNIGHT, 1, ts)", "FORTNIGHT is not a time unit"),
        ("EXTRACT(CENTURY FROM ts)", "the units are"),
        ("DATE_FORMAT(n, 'yyyy')", "not a date, time or timestamp"),
        ("TO_TIMESTAMP_LTZ(n, 6)", "0 or 3"),
        ("DATE_FORMAT(ts)", "takes 2 arguments"),
    ],
)
def test_what_cannot_be_compiled_says_why(text: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        compiled(text)


def test_without_a_session_zone_the_system_zone_is_used() -> None:
    local = NOW.astimezone().replace(tzinfo=None, microsecond=123000)
    assert value("LOCALTIMESTAMP", zone=None) == local


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("yyyy-MM-dd HH:mm:ss", dt.datetime(999, 1, 2, 3, 4, 5), "0999-01-02 03:04:05"),
        ("yyyy-MM-dd HH:mm:ss.SSS", dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05.000"),
        ("yyyy-MM-dd HH:mm", dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04"),
        ("yyyy-MM-dd", dt.date(24, 1, 2), "0024-01-02"),
        ("yyyy-MM-dd", dt.datetime(2024, 1, 2, 3, 4), "2024-01-02"),
        ("yyyy/M/d H:m:s", dt.datetime(2024, 1, 2, 3, 4, 5), "2024/1/2 3:4:5"),
        ("yyyy {MM}", dt.date(2024, 1, 2), "2024 {01}"),
        ("HH:mm", dt.time(7, 8), "07:08"),
    ],
)
def test_every_way_of_writing_a_pattern_gives_javas_text(pattern: str, value: Any, expected: str) -> None:
    # the short ways (ISO text, a template of fields) and the long one agree
    assert formatter(pattern)(value) == expected
