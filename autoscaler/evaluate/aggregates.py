"""A vertex's metric window reduced to one value: what both evaluator backends produce.

The reference's getAverage and getRate (flink-autoscaler.md §1.3-§1.4) over a window, as plain
Python. Spark reduces the window to the same :class:`VertexAggregates` in one batched query
(:mod:`autoscaler.evaluate.spark.frames`); :func:`aggregate_window` here is its oracle. The custom
evaluators see these values too (:mod:`autoscaler.evaluate.custom`), which is why they live apart from
the graph formulas: both use them, neither owns them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.evaluate.javamath import java_max
from autoscaler.model import NAN, VertexId, VertexSample

__all__ = [
    "EMPTY_AGGREGATES",
    "AverageParts",
    "CustomAggregate",
    "RatePoints",
    "VertexAggregates",
    "aggregate_custom_window",
    "aggregate_window",
    "aggregates_of",
    "assemble",
    "get_average",
    "get_rate",
    "load_sample",
]


@dataclass(frozen=True, slots=True)
class AverageParts:
    """What getAverage needs from a window: sum and count of finite samples, count of infinite ones."""

    total: float = 0.0
    count: int = 0
    infinite: int = 0

    @classmethod
    def of(cls, values: Iterable[float]) -> AverageParts:
        """The parts of ``values``; the total is their exact sum rounded once (``math.fsum``), whatever
        their order: so a window aggregated incrementally (``autoscaler.evaluate.oracle.sliding``) agrees with
        this to the last bit."""
        finite: list[float] = []
        infinite = 0
        for v in values:
            if math.isnan(v):
                continue
            if math.isinf(v):
                infinite += 1
            else:
                finite.append(v)
        return cls(math.fsum(finite), len(finite), infinite)


def get_average(parts: AverageParts, min_elements: int = 1) -> float:
    """Reference getAverage: mean of finite samples; +inf if only infinite ones; NaN below min elements."""
    if parts.count == 0:
        return math.inf if parts.infinite > 0 else NAN
    if parts.count < min_elements:
        return NAN
    return parts.total / parts.count


@dataclass(frozen=True, slots=True)
class RatePoints:
    """First and last non-NaN point of a cumulative counter in the window, and how many there were."""

    count: int = 0
    first_ts_ms: float = NAN
    first: float = NAN
    last_ts_ms: float = NAN
    last: float = NAN

    @classmethod
    def of(cls, points: Iterable[tuple[int, float]]) -> RatePoints:
        """Points must come in timestamp order."""
        count, first, last = 0, (NAN, NAN), (NAN, NAN)
        for ts, v in points:
            if math.isnan(v):
                continue
            if count == 0:
                first = (float(ts), v)
            last = (float(ts), v)
            count += 1
        return cls(count, first[0], first[1], last[0], last[1])


def get_rate(points: RatePoints) -> float:
    """Reference getRate: 1000*(last-first)/max(1, t_last-t_first ms) over non-NaN points; NaN below 2."""
    if points.count < 2:
        return NAN
    return 1000.0 * (points.last - points.first) / max(1.0, points.last_ts_ms - points.first_ts_ms)


@dataclass(frozen=True, slots=True)
class VertexAggregates:
    """One vertex's window reduced to what the formulas need; both backends produce exactly this.

    ``busy_*`` are the getAverage parts of the per-sample LOAD (``max(0, busyTimeMsPerSecond)``, in ms/s)
    and ``observed_tpr_*`` those of OBSERVED_TPR, so the driver applies min-observations itself.
    """

    samples: int = 0
    busy_sum: float = 0.0
    busy_count: int = 0
    busy_infinite: int = 0
    accumulated_busy_rate: float = NAN  # getRate(ACCUMULATED_BUSY_TIME), ms/s summed over subtasks
    accumulated_busy_agg_rate: float = NAN  # getRate(accumulateBusyTimeMs by the aggregator), ms/s
    records_in_rate: float = NAN  # getRate(NUM_RECORDS_IN)
    records_out_rate: float = NAN  # getRate(NUM_RECORDS_OUT)
    lag_rate: float = NAN  # getRate(LAG)
    lag_latest: float = NAN  # latest non-NaN pending_records
    records_in_per_s_avg: float = NAN  # getAverage(NUM_RECORDS_IN_PER_SECOND)
    observed_tpr_sum: float = 0.0
    observed_tpr_count: int = 0
    observed_tpr_infinite: int = 0
    backpressure_avg: float = NAN  # getAverage(backPressuredTimeMsPerSecond)

    @property
    def busy(self) -> AverageParts:
        return AverageParts(self.busy_sum, self.busy_count, self.busy_infinite)

    @property
    def observed_tpr(self) -> AverageParts:
        return AverageParts(self.observed_tpr_sum, self.observed_tpr_count, self.observed_tpr_infinite)

    def observed_tpr_avg(self, min_observations: int) -> float:
        """Reference §1.5: getAverage(OBSERVED_TPR, min-observations)."""
        return get_average(self.observed_tpr, min_observations)


EMPTY_AGGREGATES = VertexAggregates()


def aggregates_of(aggregates: Mapping[VertexId, VertexAggregates], vid: VertexId) -> VertexAggregates:
    """A vertex's aggregates, or the all-unknown ones when its window holds no sample."""
    return aggregates.get(vid, EMPTY_AGGREGATES)


def load_sample(busy_time_ms_per_s: float) -> float:
    """Reference §1.3 LOAD = max(0, busy) (kept in ms/s here; /1000 happens on the average)."""
    return java_max(0.0, busy_time_ms_per_s)


def aggregate_window(samples: Sequence[tuple[int, VertexSample]]) -> VertexAggregates:
    """The plain-Python oracle of the Spark aggregation: one vertex's ``(ts_ms, sample)`` window."""
    ordered = sorted(samples, key=lambda item: item[0])
    return assemble(
        len(ordered),
        averages=(
            AverageParts.of(load_sample(s.busy_time_ms_per_s) for _, s in ordered),
            AverageParts.of(s.observed_tpr for _, s in ordered),
            AverageParts.of(s.num_records_in_per_s for _, s in ordered),
            AverageParts.of(s.backpressured_ms_per_s for _, s in ordered),
        ),
        counters=(
            RatePoints.of((ts, s.accumulated_busy_time_ms) for ts, s in ordered),
            RatePoints.of((ts, s.accumulated_busy_time_agg_ms) for ts, s in ordered),
            RatePoints.of((ts, s.num_records_in) for ts, s in ordered),
            RatePoints.of((ts, s.num_records_out) for ts, s in ordered),
            RatePoints.of((ts, s.pending_records) for ts, s in ordered),
        ),
    )


def assemble(
    samples: int,
    *,
    averages: tuple[AverageParts, AverageParts, AverageParts, AverageParts],
    counters: tuple[RatePoints, RatePoints, RatePoints, RatePoints, RatePoints],
) -> VertexAggregates:
    """A window's aggregates from its getAverage parts (LOAD, OBSERVED_TPR, NUM_RECORDS_IN_PER_SECOND,
    backpressure) and getRate points (the busy-time counter summed and aggregated, records in, records
    out, LAG): what the oracle and the slid window (``autoscaler.evaluate.oracle.sliding``) both end with."""
    busy, tpr, rin, backpressure = averages
    acc_busy, acc_busy_agg, records_in, records_out, lag = counters
    return VertexAggregates(
        samples=samples,
        busy_sum=busy.total,
        busy_count=busy.count,
        busy_infinite=busy.infinite,
        accumulated_busy_rate=get_rate(acc_busy),
        accumulated_busy_agg_rate=get_rate(acc_busy_agg),
        records_in_rate=get_rate(records_in),
        records_out_rate=get_rate(records_out),
        lag_rate=get_rate(lag),
        lag_latest=lag.last,
        records_in_per_s_avg=get_average(rin),
        observed_tpr_sum=tpr.total,
        observed_tpr_count=tpr.count,
        observed_tpr_infinite=tpr.infinite,
        backpressure_avg=get_average(backpressure),
    )


@dataclass(frozen=True, slots=True)
class CustomAggregate:
    """One custom metric's window: its latest measured value and getAverage of its values.

    Windowed like the standard metrics (same rows, same bounds), so a plugin gets a smoothed value and
    the moment's value from one consistent window instead of a single snapshot of its own.
    """

    points: int = 0  # measured (non-NaN) points in the window
    current: float = NAN  # the latest non-NaN value
    average: float = NAN  # getAverage: mean of the finite values, +inf if only infinite ones

    @property
    def pair(self) -> tuple[float, float]:
        return self.current, self.average


def aggregate_custom_window(points: Sequence[tuple[int, float]]) -> CustomAggregate:
    """The plain-Python oracle of the Spark custom-metric aggregation: one ``(ts_ms, value)`` series."""
    ordered = [(ts, v) for ts, v in sorted(points, key=lambda item: item[0]) if not math.isnan(v)]
    return CustomAggregate(
        points=len(ordered),
        current=ordered[-1][1] if ordered else NAN,
        average=get_average(AverageParts.of(v for _, v in ordered)),
    )
