"""Settings values: Flink durations (the ``Duration`` option type) parse and format like Flink's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 min", 300),
        ("30s", 30),
        ("1h", 3600),
        ("PT5M", 300),
        ("500 ms", 0.5),
        (1500, 1.5),
        ("2 d", 172800),
        ("1.5 min", 90),
    ],
)
def test_flink_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["soon", "5 parsecs", "", True])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration_round_trips():
    for text in ("15 min", "1 h", "30 s", "250 ms", "1 d"):
        assert format_duration(parse_duration(text)) == text
