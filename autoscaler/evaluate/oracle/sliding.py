"""Window aggregates kept up to date as the window slides, equal to :func:`aggregate_window` exactly.

A daemon's tick re-aggregates each job's window from scratch (90 samples of 10 vertices for a 15 min
window at 10 s): cheap once, but a backtest replays millions of ticks, and there the re-aggregation was
half of a replayed tick's time. Each tick changes the window by one sample in and about one out, so
this keeps, per job and vertex, what :func:`aggregate_window` computes and updates it with just those:

- the getAverage parts: the count of finite values, of infinite ones, and their **exact** sum, held as
  a list of non-overlapping floats (each sum and difference of two floats is itself exact as two
  floats: Knuth's two-sum), rounded once when read. ``AverageParts.of`` sums with ``math.fsum``, which
  is the same correctly rounded exact sum, so the two agree to the last bit;
- the getRate points: the non-NaN points of each counter in the window, first and last at hand.

When the new window is not the old one with samples dropped at the front and appended at the back
(a new epoch, a stored window folded in, samples out of order), the job's state is rebuilt from its
window, which is what the oracle does every time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

from autoscaler.evaluate.aggregates import AverageParts, RatePoints, VertexAggregates, assemble
from autoscaler.evaluate.javamath import java_max
from autoscaler.model import JobSample, VertexId, VertexSample

__all__ = ["ExactSum", "SlidingWindows"]

_INFINITE = (math.inf, -math.inf)


class ExactSum:
    """A sum of finite floats kept exactly, to which values are added and from which they are taken."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[float] = []  # non-overlapping, increasing magnitude; their sum is exact

    def add(self, x: float) -> None:
        kept = 0
        parts = self._parts
        for y in parts:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)  # what the float sum rounded away: exact, since |x| >= |y|
            if low:
                parts[kept] = low
                kept += 1
            x = high
        del parts[kept:]
        parts.append(x)

    def remove(self, x: float) -> None:
        self.add(-x)

    def value(self) -> float:
        """The exact sum, rounded once (``math.fsum`` of the values added less those removed)."""
        return math.fsum(self._parts)


class _Average:
    """getAverage parts of one metric over the window."""

    __slots__ = ("count", "infinite", "total")

    def __init__(self) -> None:
        self.total, self.count, self.infinite = ExactSum(), 0, 0

    def add(self, v: float, sign: int) -> None:
        if v != v:
            return
        if v in _INFINITE:
            self.infinite += sign
        else:
            (self.total.add if sign > 0 else self.total.remove)(v)
            self.count += sign

    def parts(self) -> AverageParts:
        return AverageParts(self.total.value() if self.count else 0.0, self.count, self.infinite)


class _Vertex:
    """One vertex's aggregates over the window, updated a sample at a time."""

    __slots__ = ("averages", "points")

    def __init__(self) -> None:
        self.averages = [
            _Average() for _ in range(4)
        ]  # LOAD, OBSERVED_TPR, NUM_RECORDS_IN_PER_S, BACKPRESSURE
        # Non-NaN points of: the two busy-time counters, records in, records out, LAG
        self.points: list[deque[tuple[float, float]]] = [deque() for _ in range(5)]

    def add(self, ts: int, s: VertexSample) -> None:
        for average, v in zip(self.averages, _average_values(s), strict=True):
            average.add(v, 1)
        for points, v in zip(self.points, _counter_values(s), strict=True):
            if v == v:
                points.append((float(ts), v))

    def drop(self, s: VertexSample) -> None:
        """Take out the window's oldest sample."""
        for average, v in zip(self.averages, _average_values(s), strict=True):
            average.add(v, -1)
        for points, v in zip(self.points, _counter_values(s), strict=True):
            if v == v:
                points.popleft()

    def aggregates(self, samples: int) -> VertexAggregates:
        load, tpr, records_in_per_s, backpressure = (a.parts() for a in self.averages)
        busy, busy_agg, records_in, records_out, lag = (_rate_points(p) for p in self.points)
        return assemble(
            samples,
            averages=(load, tpr, records_in_per_s, backpressure),
            counters=(busy, busy_agg, records_in, records_out, lag),
        )


def _average_values(s: VertexSample) -> tuple[float, float, float, float]:
    busy = s.busy_time_ms_per_s
    load = busy if busy != busy else java_max(0.0, busy)
    return load, s.observed_tpr, s.num_records_in_per_s, s.backpressured_ms_per_s


def _counter_values(s: VertexSample) -> tuple[float, float, float, float, float]:
    return (
        s.accumulated_busy_time_ms,
        s.accumulated_busy_time_agg_ms,
        s.num_records_in,
        s.num_records_out,
        s.pending_records,
    )


def _rate_points(points: deque[tuple[float, float]]) -> RatePoints:
    if not points:
        return RatePoints()
    (first_ts, first), (last_ts, last) = points[0], points[-1]
    return RatePoints(len(points), first_ts, first, last_ts, last)


class _Job:
    __slots__ = ("samples", "vertices")

    def __init__(self) -> None:
        self.samples: deque[JobSample] = deque()
        self.vertices: dict[VertexId, _Vertex] = {}


class SlidingWindows:
    """Every job's window aggregates, slid from tick to tick."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    def aggregates(
        self, key: str, window: Sequence[JobSample], vertices: Iterable[VertexId]
    ) -> dict[VertexId, VertexAggregates]:
        """The aggregates of ``window`` (the job's samples, oldest first) for each of ``vertices``:
        equal to ``aggregate_window`` of each vertex's ``(ts_ms, sample)`` points."""
        wanted = list(vertices)
        job = self._jobs.get(key)
        if job is None or not self._slide(job, window, wanted):
            job = self._jobs[key] = self._rebuilt(window, wanted)
        return {vid: job.vertices[vid].aggregates(len(window)) for vid in wanted}

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._jobs.pop(key, None)

    @staticmethod
    def _rebuilt(window: Sequence[JobSample], wanted: list[VertexId]) -> _Job:
        job = _Job()
        ordered = sorted(window, key=lambda s: s.ts_ms)
        job.vertices = {vid: _Vertex() for vid in wanted}
        for sample in ordered:
            job.samples.append(sample)
            for vid, state in job.vertices.items():
                state.add(sample.ts_ms, sample.vertices[vid])
        return job

    @staticmethod
    def _slide(job: _Job, window: Sequence[JobSample], wanted: list[VertexId]) -> bool:
        """Drop what left the front and add what joined at the back; False when the new window is not
        such a slide of the old one (then it is rebuilt)."""
        if set(job.vertices) != set(wanted) or not window:
            return False
        held = job.samples
        first = window[0]
        gone = next((i for i, s in enumerate(held) if s is first), None)
        if gone is None:
            return False
        kept = len(held) - gone
        if kept > len(window) or any(window[i] is not held[gone + i] for i in range(kept)):
            return False
        joined = window[kept:]
        last_ts = held[-1].ts_ms if held else None
        for sample in joined:
            if last_ts is not None and sample.ts_ms < last_ts:
                return False  # out of order: the oracle sorts, a rebuild does too
            last_ts = sample.ts_ms
        for _ in range(gone):
            old = held.popleft()
            for vid, state in job.vertices.items():
                state.drop(old.vertices[vid])
        for sample in joined:
            held.append(sample)
            for vid, state in job.vertices.items():
                state.add(sample.ts_ms, sample.vertices[vid])
        return True
