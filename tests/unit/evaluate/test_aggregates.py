"""Window math (flink-autoscaler.md §1.3-§1.4): getAverage, getRate and the per-vertex aggregation oracle."""

from __future__ import annotations

import math

import pytest
from formula_builders import INF

from autoscaler.evaluate.aggregates import (
    AverageParts,
    RatePoints,
    aggregate_window,
    get_average,
    get_rate,
)
from autoscaler.model import (
    NAN,
    VertexSample,
)


@pytest.mark.parametrize(
    ("values", "min_elements", "expected"),
    [
        ([], 1, NAN),  # getAverage: nothing measured
        ([NAN, NAN], 1, NAN),  # NaN samples are skipped
        ([INF, INF], 1, INF),  # only infinite samples: +inf
        ([INF, INF], 2, INF),  # ... even below min elements (the reference checks n == 0 first)
        ([1.0, INF, 3.0, NAN], 1, 2.0),  # infinite samples do not count into the mean
        ([5.0], 2, NAN),  # fewer than min elements (observed TPR min-observations)
        ([5.0, 7.0], 2, 6.0),
    ],
)
def test_get_average(values: list[float], min_elements: int, expected: float) -> None:
    assert get_average(AverageParts.of(values), min_elements) == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([], NAN),  # getRate: fewer than 2 non-NaN points
        ([(0, 5.0), (1000, NAN)], NAN),
        ([(0, NAN), (1000, 10.0), (2000, NAN), (5000, 50.0), (6000, NAN)], 10.0),  # first/last non-NaN
        ([(0, 0.0), (10_000, 1000.0)], 100.0),
        ([(7, 0.0), (7, 3.0)], 3000.0),  # same timestamp: denominator max(1, 0) ms
        ([(0, 100.0), (10_000, 50.0)], -5.0),  # a falling counter gives a negative rate (LAG shrinking)
    ],
)
def test_get_rate(points: list[tuple[int, float]], expected: float) -> None:
    assert get_rate(RatePoints.of(points)) == pytest.approx(expected, nan_ok=True)


def test_aggregate_window_oracle() -> None:
    """§1.3/§1.4: LOAD = max(0, busy); rates over first/last non-NaN; lag = latest non-NaN; any ts order."""
    window = [
        (20_000, VertexSample(busy_time_ms_per_s=-5.0, num_records_in=3000.0, pending_records=NAN)),
        (
            0,
            VertexSample(
                busy_time_ms_per_s=600.0, num_records_in=1000.0, pending_records=10.0, observed_tpr=INF
            ),
        ),
        (
            10_000,
            VertexSample(busy_time_ms_per_s=NAN, num_records_in=NAN, pending_records=40.0, observed_tpr=7.0),
        ),
    ]
    a = aggregate_window(window)
    assert (a.samples, a.busy_sum, a.busy_count, a.busy_infinite) == (3, 600.0, 2, 0)
    assert a.records_in_rate == pytest.approx(100.0)
    assert (a.lag_latest, a.lag_rate) == (40.0, pytest.approx(3.0))
    assert (a.observed_tpr_sum, a.observed_tpr_count, a.observed_tpr_infinite) == (7.0, 1, 1)
    assert math.isnan(a.records_out_rate) and math.isnan(a.backpressure_avg)
    assert math.isnan(a.accumulated_busy_rate) and math.isnan(a.records_in_per_s_avg)
    assert math.isnan(a.accumulated_busy_agg_rate)


def test_aggregate_window_counter_busy_rate() -> None:
    """The aggregated accumulateBusyTimeMs counter goes through getRate like every counter."""
    window = [
        (0, VertexSample(accumulated_busy_time_agg_ms=1_000.0)),
        (10_000, VertexSample(accumulated_busy_time_agg_ms=NAN)),
        (20_000, VertexSample(accumulated_busy_time_agg_ms=15_000.0)),
    ]
    assert aggregate_window(window).accumulated_busy_agg_rate == pytest.approx(700.0)  # 14000 ms / 20 s


def test_aggregate_window_empty_is_unknown() -> None:
    a = aggregate_window([])
    assert a.samples == 0 and math.isnan(a.records_in_rate) and math.isnan(get_average(a.busy))
