"""Excluded periods: Quartz cron, daily ranges and ``&&``, evaluated at a given second (UTC by default)."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.calendar import (
    CronExpression,
    DailyRange,
    PeriodError,
    excluded_period_at,
    parse_period,
)


def at(text: str) -> datetime:
    """'2026-11-23 10:15:30' (a Monday) as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def ms(text: str) -> int:
    return int(at(text).timestamp() * 1000)


def holds(expression: str, when: str) -> bool:
    return parse_period(expression).matches(at(when))


# 2026-11-23 is a Monday; 2026-11-28 a Saturday; 2026-11-30 the last day of November (a Monday).
@pytest.mark.parametrize(
    ("expression", "when", "expected"),
    [
        # working hours on weekdays
        ("* * 9-17 ? * MON-FRI", "2026-11-23 09:00:00", True),
        ("* * 9-17 ? * MON-FRI", "2026-11-23 17:59:59", True),
        ("* * 9-17 ? * MON-FRI", "2026-11-23 18:00:00", False),
        ("* * 9-17 ? * MON-FRI", "2026-11-28 12:00:00", False),  # Saturday
        ("* * 9-17 ? * 2-6", "2026-11-27 12:00:00", True),  # numeric weekdays: 2 = MON ... 6 = FRI
        # a fixed second matches only that second
        ("0 0 9 ? * MON", "2026-11-23 09:00:00", True),
        ("0 0 9 ? * MON", "2026-11-23 09:00:01", False),
        # steps and lists
        ("0/15 * * * * ?", "2026-11-23 10:15:45", True),
        ("0/15 * * * * ?", "2026-11-23 10:15:46", False),
        ("*/20 * * * * ?", "2026-11-23 10:15:40", True),
        ("* 10-40/10 * * * ?", "2026-11-23 10:30:00", True),
        ("* 10-40/10 * * * ?", "2026-11-23 10:35:00", False),
        ("* * 1,3,5 * * ?", "2026-11-23 03:00:00", True),
        ("* * 1,3,5 * * ?", "2026-11-23 04:00:00", False),
        # wrapping ranges
        ("* * 22-2 * * ?", "2026-11-23 23:30:00", True),
        ("* * 22-2 * * ?", "2026-11-23 01:30:00", True),
        ("* * 22-2 * * ?", "2026-11-23 12:00:00", False),
        ("* * * ? * FRI-MON", "2026-11-29 12:00:00", True),  # Sunday
        ("* * * ? * FRI-MON", "2026-11-25 12:00:00", False),  # Wednesday
        # months and years
        ("* * * * DEC ?", "2026-12-01 00:00:00", True),
        ("* * * * NOV-DEC ?", "2026-10-31 23:59:59", False),
        ("* * * * * ? 2026", "2026-11-23 00:00:00", True),
        ("* * * * * ? 2027-2030", "2026-11-23 00:00:00", False),
        ("* * * * * ? *", "2026-11-23 00:00:00", True),
        # day of month
        ("* * * 23 * ?", "2026-11-23 10:00:00", True),
        ("* * * L * ?", "2026-11-30 10:00:00", True),
        ("* * * L * ?", "2026-11-29 10:00:00", False),
        ("* * * L * ?", "2028-02-29 10:00:00", True),  # leap year
        ("* * * L-2 * ?", "2026-11-28 10:00:00", True),
        ("* * * LW * ?", "2026-10-30 10:00:00", True),  # Oct 31 2026 is a Saturday
        ("* * * LW * ?", "2026-10-31 10:00:00", False),
        ("* * * 15W * ?", "2026-11-16 10:00:00", True),  # the 15th is a Sunday: Monday the 16th
        ("* * * 15W * ?", "2026-11-15 10:00:00", False),
        ("* * * 1W * ?", "2026-08-03 10:00:00", True),  # Aug 1 2026 is a Saturday: Monday the 3rd
        ("* * * 31W * ?", "2026-11-30 10:00:00", False),  # no 31st in November: never
        # day of week
        ("* * * ? * L", "2026-11-28 10:00:00", True),  # 'L' alone is SAT
        ("* * * ? * 6L", "2026-11-27 10:00:00", True),  # last Friday of November 2026
        ("* * * ? * FRIL", "2026-11-20 10:00:00", False),
        ("* * * ? * 2#1", "2026-11-02 10:00:00", True),  # first Monday
        ("* * * ? * MON#4", "2026-11-23 10:00:00", True),
        ("* * * ? * MON#3", "2026-11-23 10:00:00", False),
        # names are case-insensitive
        ("* * 9-17 ? * mon-fri", "2026-11-23 10:00:00", True),
        # daily ranges
        ("09:00:00-17:00:00", "2026-11-23 09:00:00", True),
        ("09:00:00-17:00:00", "2026-11-23 17:00:00", True),  # both ends included
        ("09:00:00-17:00:00", "2026-11-23 17:00:01", False),
        ("09:00:00-17:00:00", "2026-11-23 08:59:59", False),
        ("9:00-17:30", "2026-11-23 17:29:59", True),
        ("22:00:00-06:00:00", "2026-11-23 23:00:00", True),  # wraps midnight
        ("22:00:00-06:00:00", "2026-11-23 05:59:59", True),
        ("22:00:00-06:00:00", "2026-11-23 06:00:01", False),
        ("22:00:00-06:00:00", "2026-11-23 21:59:59", False),
        ("09:00:00 - 17:00:00", "2026-11-23 10:00:00", True),
        # && : every part must hold
        ("09:00-17:00 && * * * ? * MON-FRI", "2026-11-23 10:00:00", True),
        ("09:00-17:00 && * * * ? * MON-FRI", "2026-11-28 10:00:00", False),
        ("09:00-17:00 && * * * ? * MON-FRI", "2026-11-23 18:00:00", False),
        ("22:00-06:00 && * * * ? * SAT,SUN", "2026-11-29 02:00:00", True),
    ],
)
def test_expression_at_a_second(expression, when, expected):
    assert holds(expression, when) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("weekends", "6 or 7 fields"),
        ("* * * * *", "Unix cron"),
        ("* * * * * * * *", "got 8 fields"),
        ("* * * * * *", "exactly one of day-of-month and day-of-week must be '?'"),
        ("* * * ? * ?", "exactly one of day-of-month and day-of-week must be '?'"),
        ("? * * * * ?", "second: '?' is only allowed"),
        ("60 * * * * ?", "second: 60 is outside 0-59"),
        ("* 60 * * * ?", "minute: 60 is outside 0-59"),
        ("* * 24 * * ?", "hour: 24 is outside 0-23"),
        ("* * * 0 * ?", "day-of-month: 0 is outside 1-31"),
        ("* * * 32 * ?", "day-of-month: 32 is outside 1-31"),
        ("* * * * 13 ?", "month: 13 is outside 1-12"),
        ("* * * * JANUARY ?", "month: 'JANUARY' is not a number or a name JAN-DEC"),
        ("* * * ? * 8", "day-of-week: 8 is outside 1-7"),
        ("* * * ? * MON-FRX", "day-of-week: 'FRX' is not a number or a name SUN-SAT"),
        ("* * * * * ? 1969", "year: 1969 is outside 1970-2099"),
        ("*/0 * * * * ?", "step '0'"),
        ("*/x * * * * ?", "step 'x'"),
        ("*/61 * * * * ?", "exceeds the field's range"),
        ("1- * * * * ?", "incomplete range"),
        ("1,,2 * * * * ?", "empty item"),
        ("/5 * * * * ?", "lacks a start value"),
        ("* * * L,15 * ?", "must stand alone"),
        ("* * * L-31 * ?", "at most 30"),
        ("* * * ? * 6L,2", "must stand alone"),
        ("* * * ? * 2#6", "the occurrence after '#' must be 1-5"),
        ("* * * ? * 2#1,3#1", "must stand alone"),
        ("25:00-26:00", "25:00 is not a time of day"),
        ("09:60-10:00", "09:60 is not a time of day"),
        ("09:00-09:00", "starts and ends at the same time"),
        ("9-17", "6 or 7 fields"),
        ("09:00", "not a daily range"),
        ("09:00-17:00 &&", "empty part around '&&'"),
        ("&& * * * ? * MON", "empty part around '&&'"),
        ("09:00-17:00 && * * 25 ? * MON", "hour: 25 is outside 0-23 in '* * 25 ? * MON'"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression, message):
    with pytest.raises(PeriodError) as err:
        parse_period(expression)
    assert message in str(err.value)
    if expression.strip():
        assert repr(expression.strip()) in str(err.value)  # the message names the expression


def test_cron_parses_to_sets():
    cron = CronExpression.parse("0/20 5-7 22-1 ? JAN,DEC SAT")
    assert cron.seconds == {0, 20, 40}
    assert cron.minutes == {5, 6, 7}
    assert cron.hours == {22, 23, 0, 1}
    assert cron.months == {1, 12}
    assert cron.years is None


def test_daily_range_parses_to_seconds_of_day():
    r = DailyRange.parse("22:30-06:00:15")
    assert (r.start_s, r.end_s) == (22 * 3600 + 1800, 6 * 3600 + 15)


def test_first_matching_expression_is_returned():
    periods = ("* * 0-5 ? * *", "* * 9-17 ? * MON-FRI")
    assert excluded_period_at(periods, ms("2026-11-23 10:00:00")).text == "* * 9-17 ? * MON-FRI"
    assert excluded_period_at(periods, ms("2026-11-23 20:00:00")) is None
    assert excluded_period_at((), ms("2026-11-23 10:00:00")) is None


def test_now_is_truncated_to_the_second():
    assert excluded_period_at(("0 0 9 ? * MON",), ms("2026-11-23 09:00:00") + 999) is not None
    assert excluded_period_at(("0 0 9 ? * MON",), ms("2026-11-23 09:00:00") + 1000) is None


def test_utc_by_default_and_another_zone_on_request():
    now = ms("2026-11-23 08:30:00")  # 09:30 in UTC+1
    plus_one = timezone(timedelta(hours=1))
    assert excluded_period_at(("09:00-17:00",), now) is None
    assert excluded_period_at(("09:00-17:00",), now, plus_one) is not None


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@given(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2099, 12, 30)),
    st.integers(0, 86399),
    st.integers(0, 86399),
)
def test_daily_range_agrees_with_a_plain_interval_check(day, start, end):
    if start == end:
        return
    text = f"{_hms(start)}-{_hms(end)}"
    t = day.hour * 3600 + day.minute * 60 + day.second
    inside = start <= t <= end if start < end else (t >= start or t <= end)
    assert DailyRange.parse(text).matches(day.replace(tzinfo=UTC)) is inside


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2099, 12, 30)))
def test_special_days_agree_with_the_calendar(day):
    day = day.replace(tzinfo=UTC)
    length = calendar.monthrange(day.year, day.month)[1]
    quartz_weekday = day.isoweekday() % 7 + 1  # SUN=1 ... SAT=7
    assert CronExpression.parse("* * * L * ?").matches(day) is (day.day == length)
    assert CronExpression.parse(f"* * * ? * {quartz_weekday}L").matches(day) is (day.day > length - 7)
    nth = (day.day - 1) // 7 + 1
    assert CronExpression.parse(f"* * * ? * {quartz_weekday}#{nth}").matches(day)
    assert CronExpression.parse("* * * ? * MON-FRI").matches(day) is (day.weekday() < 5)
