"""The bucket series: gaps, the bound, time that runs back, and what comes back from storage."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.foresight.series import LoadSeries


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True)
    )


def test_buckets_close_in_order_with_gaps_between() -> None:
    s = LoadSeries(1000).extended(10, 1.5, 100).extended(11, 2.5, 100).extended(14, 4.0, 100)
    assert (s.first, s.last, s.end, len(s)) == (10, 14, 15, 5)
    assert same(s.rates(8, 16), [math.nan, math.nan, 1.5, 2.5, math.nan, math.nan, 4.0, math.nan])
    assert s.at(11) == 2.5 and math.isnan(s.at(12)) and math.isnan(s.at(99)) and math.isnan(s.at(0))
    assert s.extended(14, 9.0, 100) is s and s.extended(3, 9.0, 100) is s, "time does not run back"
    assert s.rates(20, 18) == [] and same(s.rates(20, 22), [math.nan, math.nan])


def test_the_newest_capacity_buckets_are_kept() -> None:
    s = LoadSeries(1000)
    for i in range(10):
        s = s.extended(i, float(i), 4)
    assert (s.first, len(s)) == (6, 4) and s.rates(6, 10) == [6.0, 7.0, 8.0, 9.0]
    far = s.extended(100, 1.0, 4)
    assert (far.first, len(far)) == (100, 1), "nothing kept reaches a bucket that far: starts again"


def test_it_is_a_value() -> None:
    with pytest.raises(ValueError, match="more than 0 ms"):
        LoadSeries(0)
    with pytest.raises(ValueError, match="phase"):
        LoadSeries(1000, phase_ms=1000)
    phased = LoadSeries(1000, phase_ms=300)
    assert phased.index_of(300) == 0 and phased.index_of(299) == -1 and phased.start_ms(2) == 2300
    with pytest.raises(ValueError, match="whole"):
        LoadSeries(1000, 0, b"abc")
    assert LoadSeries(1000, 5, struct.pack("=ff", 1, 2)) == LoadSeries(1000, 5, struct.pack("=ff", 1, 2))


@given(st.lists(st.floats(0, 1e9, width=32) | st.just(math.nan), max_size=50), st.integers(0, 10**9))
def test_stored_bytes_round_trip(rates: list[float], first: int) -> None:
    s = LoadSeries(60_000, first, struct.pack(f"={len(rates)}f", *rates))
    back = LoadSeries.from_bytes(60_000, first, s.to_bytes())
    assert back.first == first and same(back.rates(first, first + len(rates)), rates)
    assert s.to_bytes() == struct.pack(f"<{len(rates)}f", *rates), "stored little-endian"


def test_what_cannot_be_a_rate_is_not_read_back() -> None:
    stored = struct.pack("<4f", 1.0, math.inf, -3.0, 2.0) + b"\x01\x02"
    back = LoadSeries.from_bytes(1000, 0, stored)
    assert same(back.rates(0, 4), [1.0, math.nan, math.nan, 2.0])
