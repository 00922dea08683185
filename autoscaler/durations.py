"""Flink-style durations ("5 min", "30s", "1h", "PT5M", "500 ms", a bare number of ms).

Flink's ``TimeUtils.parseDuration`` treats a bare number as milliseconds; we keep that so values copied
from a Flink ``config.yaml`` mean the same thing here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["format_duration", "parse_duration", "to_ms", "utc_text"]

_UNITS: dict[str, float] = {}
for _names, _seconds in (
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-9),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 1e-6),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("m", "min", "mins", "minute", "minutes"), 60.0),
    (("h", "hour", "hours"), 3600.0),
    (("d", "day", "days"), 86400.0),
):
    for _n in _names:
        _UNITS[_n] = _seconds

_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)
_ISO = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration(value: object) -> timedelta:
    """Parse a duration the way Flink does; raise ValueError with the offending text otherwise."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return timedelta(milliseconds=float(value))
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r}")
    text = value.strip()
    iso = _ISO.match(text)
    if iso and text.upper() not in ("P", "PT"):
        parts = {k: float(v) if v else 0.0 for k, v in iso.groupdict().items()}
        return timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. '30 s', '5 min', '1 h')")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit == "":
        return timedelta(milliseconds=number)
    if unit not in _UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {value!r}")
    return timedelta(seconds=number * _UNITS[unit])


def to_ms(value: timedelta) -> int:
    """Whole milliseconds: the unit every clock reading and timestamp of a tick is in."""
    return round(value.total_seconds() * 1000)


def format_duration(value: timedelta) -> str:
    """Shortest exact Flink-style text for a duration (used in docs and events)."""
    ms = to_ms(value)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def utc_text(ms: int) -> str:
    """An instant (epoch milliseconds) as the events and details print it: ``2026-01-01T00:00:00Z``."""
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
