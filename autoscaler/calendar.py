"""``job.autoscaler.excluded.periods``: when the autoscaler must not execute a scaling.

Each period is one expression, as in the reference (``CalendarUtils``):

- a Quartz cron expression of 6 or 7 fields, ``second minute hour day-of-month month day-of-week [year]``;
- a daily range ``HH:mm:ss-HH:mm:ss`` (``HH:mm`` also accepted), which may wrap midnight
  (``22:00:00-06:00:00``); both ends are included;
- or several of these joined by ``&&``: the period holds only when every part does.

``now`` is in an excluded period when any expression holds for the current second. A cron expression
describes a *set of seconds*, so a cron alone excludes every second it matches:
``* * 9-17 ? * MON-FRI`` excludes working hours, while ``0 0 9 ? * MON`` excludes the single second
09:00:00 and in practice never blocks a tick. Write periods with ``*`` in the second and minute fields,
or combine a daily range with a cron for the days: ``09:00-17:30 && * * * ? * MON-FRI``.

Times are evaluated in UTC unless a ``tz`` is passed (the reference uses the JVM's default zone; a
daemon watching clusters in several zones needs one explicit zone, so ours is UTC).

Quartz syntax supported: ``*``, ``?`` (exactly one of day-of-month / day-of-week must be ``?``, as
Quartz requires), lists ``,``, ranges ``-`` (wrapping ranges such as ``22-2`` or ``FRI-MON`` too), steps
``/``, month names ``JAN``-``DEC`` and weekday names ``SUN``-``SAT`` (Quartz numbers weekdays 1 = SUN
to 7 = SAT), and the special day forms ``L``, ``L-n``, ``LW``, ``nW`` (day-of-month), ``L``, ``nL``,
``n#k`` (day-of-week). A special day form must stand alone in its field.

Everything here is pure: parsing is cached by expression text and evaluation takes ``now`` as input.
"""

from __future__ import annotations

import calendar as _cal
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache

__all__ = [
    "CronExpression",
    "DailyRange",
    "ExcludedPeriod",
    "PeriodError",
    "excluded_period_at",
    "parse_period",
    "parse_periods",
]


class PeriodError(ValueError):
    """An excluded-period expression that cannot be parsed; the message says what is wrong and where."""


# --------------------------------------------------------------------------------------------- fields
@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] means low + i

    def value(self, token: str) -> int:
        upper = token.upper()
        if upper in self.names:
            return self.low + self.names.index(upper)
        if not (token.isascii() and token.isdigit()):
            allowed = f" or a name {self.names[0]}-{self.names[-1]}" if self.names else ""
            raise PeriodError(f"{self.name}: {token!r} is not a number{allowed}")
        number = int(token)
        if not self.low <= number <= self.high:
            raise PeriodError(f"{self.name}: {number} is outside {self.low}-{self.high}")
        return number


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
SECOND = _Field("second", 0, 59)
MINUTE = _Field("minute", 0, 59)
HOUR = _Field("hour", 0, 23)
DAY_OF_MONTH = _Field("day-of-month", 1, 31)
MONTH = _Field("month", 1, 12, _MONTHS)
DAY_OF_WEEK = _Field("day-of-week", 1, 7, _DAYS)
YEAR = _Field("year", 1970, 2099)


def _values(text: str, field: _Field) -> frozenset[int]:
    """A comma list of ``*``, ``n``, ``a-b`` (wrapping when a > b) and ``x/step`` items."""
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise PeriodError(f"{field.name}: empty item in list {text!r}")
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) < 1:
                raise PeriodError(f"{field.name}: step {step_text!r} in {item!r} must be a positive number")
            step = int(step_text)
            if step > field.high - field.low + 1:
                raise PeriodError(f"{field.name}: step {step} in {item!r} exceeds the field's range")
        if base == "*":
            first, last = field.low, field.high
        elif "-" in base:
            a, _, b = base.partition("-")
            if not a or not b:
                raise PeriodError(f"{field.name}: incomplete range {item!r}")
            first, last = field.value(a), field.value(b)
        elif base:
            first = field.value(base)
            last = field.high if slash else first  # Quartz: "5/15" means 5, 20, 35, ...
        else:
            raise PeriodError(f"{field.name}: {item!r} lacks a start value")
        span = (
            range(first, last + 1)
            if first <= last
            else [*range(first, field.high + 1), *range(field.low, last + 1)]
        )
        out.update(list(span)[::step])
    return frozenset(out)


# --------------------------------------------------------------------------------------------- day rules
@dataclass(frozen=True, slots=True)
class _DaySet:
    days: frozenset[int]  # day-of-month 1-31, or Quartz weekday 1 (SUN) - 7 (SAT)
    weekday: bool

    def matches(self, d: datetime) -> bool:
        return (_quartz_weekday(d) if self.weekday else d.day) in self.days


@dataclass(frozen=True, slots=True)
class _LastDay:
    """``L`` / ``L-n``: the last day of the month, or n days before it."""

    offset: int

    def matches(self, d: datetime) -> bool:
        return d.day == _month_length(d) - self.offset


@dataclass(frozen=True, slots=True)
class _LastWeekdayOfMonth:
    """``LW``: the last Monday-to-Friday day of the month."""

    def matches(self, d: datetime) -> bool:
        last = _month_length(d)
        while _cal.weekday(d.year, d.month, last) >= 5:
            last -= 1
        return d.day == last


@dataclass(frozen=True, slots=True)
class _NearestWeekday:
    """``nW``: the Monday-to-Friday day nearest to day n, never leaving the month (Quartz semantics)."""

    day: int

    def matches(self, d: datetime) -> bool:
        last = _month_length(d)
        if self.day > last:
            return False
        target = self.day
        weekday = _cal.weekday(d.year, d.month, target)
        if weekday == 5:  # Saturday: the Friday before, or Monday the 3rd when the 1st is a Saturday
            target = target - 1 if target > 1 else target + 2
        elif weekday == 6:  # Sunday: the Monday after, or the Friday before when it is the last day
            target = target + 1 if target < last else target - 2
        return d.day == target


@dataclass(frozen=True, slots=True)
class _LastWeekdayNamed:
    """``nL`` in day-of-week: the last given weekday of the month (``6L`` = last Friday)."""

    weekday: int

    def matches(self, d: datetime) -> bool:
        return _quartz_weekday(d) == self.weekday and d.day + 7 > _month_length(d)


@dataclass(frozen=True, slots=True)
class _NthWeekday:
    """``n#k`` in day-of-week: the k-th given weekday of the month (``2#1`` = first Monday)."""

    weekday: int
    nth: int

    def matches(self, d: datetime) -> bool:
        return _quartz_weekday(d) == self.weekday and (d.day - 1) // 7 + 1 == self.nth


_DayRule = _DaySet | _LastDay | _LastWeekdayOfMonth | _NearestWeekday | _LastWeekdayNamed | _NthWeekday


def _quartz_weekday(d: datetime) -> int:
    return (d.weekday() + 1) % 7 + 1  # Python Monday=0 ... Sunday=6 -> Quartz SUN=1 ... SAT=7


def _month_length(d: datetime) -> int:
    return _cal.monthrange(d.year, d.month)[1]


def _day_of_month(text: str) -> _DayRule:
    upper = text.upper()
    if upper == "L":
        return _LastDay(0)
    if upper == "LW":
        return _LastWeekdayOfMonth()
    if m := re.fullmatch(r"L-([0-9]{1,2})", upper):
        offset = int(m.group(1))
        if offset > 30:
            raise PeriodError(f"day-of-month: offset in {text!r} must be at most 30")
        return _LastDay(offset)
    if m := re.fullmatch(r"([0-9]{1,2})W", upper):
        return _NearestWeekday(DAY_OF_MONTH.value(m.group(1)))
    if "L" in upper or "W" in upper:
        raise PeriodError(
            f"day-of-month: {text!r} is not supported; 'L', 'L-n', 'LW' and 'nW' must stand alone"
        )
    return _DaySet(_values(text, DAY_OF_MONTH), weekday=False)


def _day_of_week(text: str) -> _DayRule:
    upper = text.upper()
    if upper == "L":
        return _DaySet(frozenset({7}), weekday=True)  # Quartz: 'L' alone in day-of-week is SAT
    if m := re.fullmatch(r"([A-Z]{3}|[0-9])L", upper):
        return _LastWeekdayNamed(DAY_OF_WEEK.value(m.group(1)))
    if m := re.fullmatch(r"([A-Z]{3}|[0-9])#([0-9])", upper):
        nth = int(m.group(2))
        if not 1 <= nth <= 5:
            raise PeriodError(f"day-of-week: {text!r}: the occurrence after '#' must be 1-5")
        return _NthWeekday(DAY_OF_WEEK.value(m.group(1)), nth)
    if "L" in upper or "#" in upper:
        raise PeriodError(f"day-of-week: {text!r} is not supported; 'L', 'nL' and 'n#k' must stand alone")
    return _DaySet(_values(text, DAY_OF_WEEK), weekday=True)


# --------------------------------------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed Quartz cron expression; :meth:`matches` tests one second."""

    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int] | None  # None: every year
    day: _DayRule  # the day-of-month rule, or the day-of-week rule when day-of-month is '?'

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        fields = text.split()
        if len(fields) not in (6, 7):
            hint = " (a Unix cron? Quartz starts with a seconds field)" if len(fields) == 5 else ""
            raise PeriodError(
                "expected a Quartz cron expression of 6 or 7 fields (second minute hour day-of-month "
                f"month day-of-week [year]) or a daily range HH:mm:ss-HH:mm:ss, got {len(fields)} "
                f"field{'s' if len(fields) != 1 else ''}{hint}"
            )
        sec, minute, hour, dom, month, dow = fields[:6]
        for name, value in (("second", sec), ("minute", minute), ("hour", hour), ("month", month)):
            if "?" in value:
                raise PeriodError(f"{name}: '?' is only allowed in day-of-month or day-of-week")
        if (dom == "?") == (dow == "?"):
            raise PeriodError(
                "exactly one of day-of-month and day-of-week must be '?' "
                f"(got {dom!r} and {dow!r}; e.g. '* * 9-17 ? * MON-FRI')"
            )
        years = None
        if len(fields) == 7 and fields[6] != "*":
            years = _values(fields[6], YEAR)
        return cls(
            text=" ".join(fields),
            seconds=_values(sec, SECOND),
            minutes=_values(minute, MINUTE),
            hours=_values(hour, HOUR),
            months=_values(month, MONTH),
            years=years,
            day=_day_of_week(dow) if dom == "?" else _day_of_month(dom),
        )

    def matches(self, at: datetime) -> bool:
        return (
            at.second in self.seconds
            and at.minute in self.minutes
            and at.hour in self.hours
            and at.month in self.months
            and (self.years is None or at.year in self.years)
            and self.day.matches(at)
        )


_TIME = r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?"
_DAILY = re.compile(rf"{_TIME}\s*-\s*{_TIME}")


@dataclass(frozen=True, slots=True)
class DailyRange:
    """Seconds of the day from ``start_s`` to ``end_s``, both included; wraps midnight when start > end."""

    text: str
    start_s: int
    end_s: int

    @classmethod
    def parse(cls, text: str) -> DailyRange:
        m = _DAILY.fullmatch(text.strip())
        if m is None:
            raise PeriodError("not a daily range HH:mm:ss-HH:mm:ss")
        start = _seconds_of_day(*m.groups()[:3])
        end = _seconds_of_day(*m.groups()[3:])
        if start == end:
            raise PeriodError("the daily range starts and ends at the same time")
        return cls(text.strip(), start, end)

    def matches(self, at: datetime) -> bool:
        t = at.hour * 3600 + at.minute * 60 + at.second
        if self.start_s <= self.end_s:
            return self.start_s <= t <= self.end_s
        return t >= self.start_s or t <= self.end_s


def _seconds_of_day(hh: str, mm: str, ss: str | None) -> int:
    h, m, s = int(hh), int(mm), int(ss or 0)
    if h > 23 or m > 59 or s > 59:
        raise PeriodError(f"{hh}:{mm}{':' + ss if ss else ''} is not a time of day")
    return h * 3600 + m * 60 + s


@dataclass(frozen=True, slots=True)
class ExcludedPeriod:
    """One ``excluded.periods`` entry: cron and/or daily-range parts that must all hold."""

    text: str
    parts: tuple[CronExpression | DailyRange, ...]

    def matches(self, at: datetime) -> bool:
        return all(part.matches(at) for part in self.parts)


@lru_cache(maxsize=256)
def parse_period(text: str) -> ExcludedPeriod:
    """Parse one expression; raise :class:`PeriodError` naming the expression and the problem."""
    if not text.strip():
        raise PeriodError("empty expression")
    parts: list[CronExpression | DailyRange] = []
    for raw in text.split("&&"):
        part = raw.strip()
        try:
            if not part:
                raise PeriodError("empty part around '&&'")
            # A cron expression never holds ':', a time of day always does.
            parts.append(DailyRange.parse(part) if ":" in part else CronExpression.parse(part))
        except PeriodError as exc:
            where = f" in {part!r}" if part != text.strip() and part else ""
            raise PeriodError(f"{text.strip()!r}: {exc}{where}") from None
    return ExcludedPeriod(text.strip(), tuple(parts))


def parse_periods(texts: Iterable[str]) -> tuple[ExcludedPeriod, ...]:
    return tuple(parse_period(t) for t in texts)


def excluded_period_at(texts: Sequence[str], now_ms: int, tz: tzinfo = UTC) -> ExcludedPeriod | None:
    """The first expression that holds at ``now_ms`` (truncated to the second, in ``tz``), else None."""
    if not texts:
        return None
    at = datetime.fromtimestamp(now_ms // 1000, tz)
    return next((p for p in parse_periods(texts) if p.matches(at)), None)
