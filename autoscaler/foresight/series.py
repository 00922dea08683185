"""A job's offered load as a series of closed time buckets: the memory a forecast reads.

One value per bucket (the mean offered rate of the samples in it), NaN where no sample was: a gap. The
buckets are fixed in time (bucket ``i`` covers ``[i * bucket_ms + phase_ms, (i + 1) * bucket_ms +
phase_ms)``), so the same time one period ago is always a whole number of buckets back, whatever tick
interval or restart came in between. The phase is the job's own (``ForecastParams.of``): a fleet's
buckets close spread over the ticks of a bucket, not all on one.

The rates are kept as 4-byte floats in an immutable ``bytes``: three weeks of 5-minute buckets is 6,048
values, 24 KB per job, where a tuple of Python floats would take ten times that; 7 significant digits
are far more than a forecast of a noisy load can use. Appending copies the bytes (microseconds), once
per closed bucket, and keeps the value frozen.
"""

from __future__ import annotations

import math
import sys
from array import array
from dataclasses import dataclass

__all__ = ["LoadSeries"]


@dataclass(frozen=True, slots=True)
class LoadSeries:
    """Closed buckets ``first .. first + len - 1`` of ``bucket_ms`` each, and their rates (NaN: a gap)."""

    bucket_ms: int
    first: int = 0  # the oldest kept bucket's index
    data: bytes = b""  # float32 rates, native byte order (``to_bytes`` / ``from_bytes`` store them LE)
    phase_ms: int = 0  # bucket i starts at i * bucket_ms + phase_ms

    def __post_init__(self) -> None:
        if self.bucket_ms <= 0:
            raise ValueError(f"a bucket must last more than 0 ms, not {self.bucket_ms}")
        if not 0 <= self.phase_ms < self.bucket_ms:
            raise ValueError(f"a bucket's phase is within [0, {self.bucket_ms}), not {self.phase_ms}")
        if len(self.data) % 4:
            raise ValueError("a load series holds whole 4-byte floats")

    def index_of(self, ts_ms: int) -> int:
        """The bucket an instant falls in."""
        return (ts_ms - self.phase_ms) // self.bucket_ms

    def start_ms(self, index: int) -> int:
        """When bucket ``index`` begins."""
        return index * self.bucket_ms + self.phase_ms

    def __len__(self) -> int:
        return len(self.data) // 4

    @property
    def end(self) -> int:
        """The index after the newest closed bucket (``first`` when empty)."""
        return self.first + len(self)

    @property
    def last(self) -> int:
        """The newest closed bucket's index (``first - 1`` when empty)."""
        return self.end - 1

    def rates(self, start: int, stop: int) -> list[float]:
        """The rates of buckets ``start .. stop - 1``; NaN for the ones not kept (before ``first``, after
        the newest) as for gaps."""
        lo, hi = max(start, self.first), min(stop, self.end)
        if lo >= hi:
            return [math.nan] * max(0, stop - start)
        kept = memoryview(self.data).cast("f")[lo - self.first : hi - self.first].tolist()
        return [math.nan] * (lo - start) + kept + [math.nan] * (stop - hi)

    def at(self, index: int) -> float:
        """One bucket's rate (NaN: a gap, or not kept)."""
        if not self.first <= index < self.end:
            return math.nan
        return memoryview(self.data).cast("f")[index - self.first]

    def extended(self, index: int, rate: float, capacity: int) -> LoadSeries:
        """The series with bucket ``index`` closed at ``rate`` (the buckets between the newest and it
        closed as gaps), keeping at most the ``capacity`` newest. A bucket at or before the newest
        changes nothing: time does not run back."""
        if len(self) and index <= self.last:
            return self
        if not len(self) or index - self.last > capacity:  # nothing kept reaches this far
            return LoadSeries(self.bucket_ms, index, array("f", [rate]).tobytes(), self.phase_ms)
        gaps = index - self.end
        tail = array("f", [math.nan] * gaps + [rate]).tobytes()
        data = self.data + tail
        drop = max(0, len(data) // 4 - capacity)
        return LoadSeries(self.bucket_ms, self.first + drop, data[drop * 4 :], self.phase_ms)

    def to_bytes(self) -> bytes:
        """The rates as little-endian float32, whatever this machine's order (how they are stored)."""
        if sys.byteorder == "little":
            return self.data
        values = array("f", self.data)
        values.byteswap()
        return values.tobytes()

    @classmethod
    def from_bytes(cls, bucket_ms: int, first: int, stored: bytes, phase_ms: int = 0) -> LoadSeries:
        """The series ``to_bytes`` stored (a trailing partial float is dropped, not trusted)."""
        values = array("f", stored[: len(stored) - len(stored) % 4])
        if sys.byteorder != "little":
            values.byteswap()
        return cls.trusted(bucket_ms, first, values, phase_ms)

    @classmethod
    def trusted(cls, bucket_ms: int, first: int, values: array[float], phase_ms: int = 0) -> LoadSeries:
        """The series of these rates, what cannot be a rate (infinite, negative) read as a gap: bad
        stored data never enters a forecast."""
        if not all(math.isfinite(v) and v >= 0 for v in values if v == v):
            values = array("f", [v if math.isfinite(v) and v >= 0 else math.nan for v in values])
        return cls(bucket_ms, first, values.tobytes(), phase_ms)
