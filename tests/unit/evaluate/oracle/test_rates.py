"""One vertex's rate formulas (flink-autoscaler.md §1.5-§1.6); each case names its rule."""

from __future__ import annotations

import math
from typing import Any

import pytest
from formula_builders import DEFAULTS, INF, agg

from autoscaler.evaluate.oracle.rates import (
    ProcessingRates,
    busy_time_avg,
    capacity,
    catch_up_rate,
    is_processing_backlog,
    processing_rates,
    target_data_rate,
    thresholds,
    tpr_input_rate,
    true_processing_rate,
)
from autoscaler.model import (
    NAN,
)
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator


@pytest.mark.parametrize(
    ("in_rate", "lag_rate", "expected"),
    [(1000.0, 0.0, 1000.0), (1250.0, 750.0, 2000.0), (100.0, -300.0, 0.0), (NAN, 0.0, NAN), (10.0, NAN, NAN)],
)
def test_source_target_data_rate(in_rate: float, lag_rate: float, expected: float) -> None:
    """§1.5 TDR = max(0, getRate(IN) + getRate(LAG)); NaN is not clamped to 0 (Java Math.max)."""
    assert target_data_rate(in_rate, lag_rate) == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize(
    ("lag", "catch_up_s", "expected"), [(3600.0, 1800, 2.0), (3600.0, 0, 0.0), (NAN, 0, 0.0)]
)
def test_catch_up_rate(lag: float, catch_up_s: int, expected: float) -> None:
    """§1.5 CATCH_UP_DATA_RATE = lag / catch-up.duration, 0 when the duration is 0."""
    assert catch_up_rate(lag, catch_up_s) == expected


@pytest.mark.parametrize(
    ("busy_ms", "input_rate", "observed", "expected"),
    [
        (500.0, 100.0, NAN, 200.0),  # busy-time TPR = in / (busy/1000)
        (500.0, 0.0, NAN, INF),  # nothing comes in: infinite capacity (allows scale-down)
        (0.0, 100.0, NAN, INF),  # idle but reading: Java x/0 = inf
        (NAN, 100.0, NAN, NAN),
        (500.0, 0.0, 150.0, 150.0),  # busy TPR infinite -> observed
        (NAN, 100.0, 150.0, 150.0),  # busy TPR NaN -> observed
        (500.0, 100.0, 170.0, 170.0),  # 200 > 170 * 1.15 = 195.5 -> observed
        (500.0, 100.0, 180.0, 200.0),  # 200 <= 180 * 1.15 = 207 -> busy
    ],
)
def test_true_processing_rate_selection(
    busy_ms: float, input_rate: float, observed: float, expected: float
) -> None:
    """§1.5 TRUE_PROCESSING_RATE selection with switch-threshold 0.15."""
    assert true_processing_rate(busy_ms, input_rate, observed, 0.15) == pytest.approx(expected, nan_ok=True)


def test_tpr_input_rate_follows_aggregator() -> None:
    """FLINK-39306: AVG pairs getRate(IN) with accumulated busy; MAX/MIN pair the averaged meter."""
    a = agg(in_rate=100.0, in_per_s=80.0, acc_busy_rate=2000.0, busy_ms=900.0)
    assert tpr_input_rate(a, BusyTimeAggregator.AVG) == 100.0
    assert tpr_input_rate(a, BusyTimeAggregator.MAX) == 80.0
    assert tpr_input_rate(agg(in_rate=100.0, in_per_s=NAN), BusyTimeAggregator.MAX) == 100.0  # fallback
    assert tpr_input_rate(agg(in_rate=100.0, in_per_s=INF), BusyTimeAggregator.MIN) == 100.0  # fallback
    assert busy_time_avg(a, BusyTimeAggregator.AVG, 4) == 500.0  # accumulated rate / parallelism
    assert busy_time_avg(a, BusyTimeAggregator.MAX, 4) == 900.0  # getAverage(LOAD)


@pytest.mark.parametrize(
    ("lag", "in_rate", "expected"),
    [
        (301_000.0, 1000.0, True),
        (300_000.0, 1000.0, False),
        (5.0, 0.0, True),
        (0.0, 0.0, False),
        (1e9, NAN, False),
    ],
)
def test_processing_backlog(lag: float, in_rate: float, expected: bool) -> None:
    """§1.5 backlog: lag / getRate(IN) > 300 s (strictly)."""
    assert is_processing_backlog(lag, in_rate, 300) is expected


def test_capacity_worked_example() -> None:
    """§1.6 worked example: TDR 1000, no lag, restart 300 s, catch-up 1800 s."""
    kw: dict[str, Any] = {
        "target_data_rate": 1000.0,
        "catch_up_data_rate": 0.0,
        "restart_s": 300,
        "catch_up_s": 1800,
    }
    assert capacity(1.0, with_restart=False, **kw) == 1000  # scale-up threshold
    assert capacity(0.4, with_restart=True, **kw) == 2667  # scale-down threshold
    assert capacity(0.7, with_restart=True, **kw) == 1595  # target capacity
    assert capacity(0.0, with_restart=True, **kw) == INF  # u == 0: never "too fast"
    assert capacity(1.5, with_restart=False, **kw) == 1000  # u clamped to 1
    assert capacity(0.7, with_restart=True, **{**kw, "catch_up_s": 0}) == 1429  # no restart term
    assert math.isnan(capacity(0.7, with_restart=True, **{**kw, "catch_up_data_rate": NAN}))
    assert math.isnan(capacity(0.7, with_restart=True, **{**kw, "target_data_rate": NAN}))


def test_thresholds_backlog_bounds() -> None:
    """§1.5: while processing backlog the bounds become [0, 1]: up at u=1, down at u=0 (= +inf)."""
    kw: dict[str, Any] = {"target_data_rate": 1000.0, "catch_up_data_rate": 100.0, "options": DEFAULTS}
    assert thresholds(processing_backlog=False, restart_s=300, **kw) == (1100, 2767)
    assert thresholds(processing_backlog=True, restart_s=300, **kw) == (1100, INF)
    narrow = AutoscalerOptions(utilization_max=0.8, utilization_min=0.5)
    assert thresholds(processing_backlog=False, restart_s=300, **{**kw, "options": narrow}) == (1350, 2267)


def test_processing_rates_prefer_counters_and_fall_back_to_the_reference_path() -> None:
    """Ours: with both counters measured, busy ms/s and input rate are counter deltas (FLINK-39306 kept)."""
    both = agg(in_rate=1000.0, in_per_s=600.0, busy_ms=900.0, counter_busy_ms=500.0)
    assert processing_rates(both, DEFAULTS, 2) == ProcessingRates(500.0, 1000.0, True)
    meters = AutoscalerOptions(prefer_counter_rates=False)
    assert processing_rates(both, meters, 2) == ProcessingRates(900.0, 600.0, False)  # reference exactly
    no_counter = agg(in_rate=1000.0, in_per_s=600.0, busy_ms=900.0)
    assert processing_rates(no_counter, DEFAULTS, 2) == ProcessingRates(900.0, 600.0, False)
    no_input = agg(in_rate=NAN, in_per_s=600.0, busy_ms=900.0, counter_busy_ms=500.0)
    assert processing_rates(no_input, DEFAULTS, 2) == ProcessingRates(900.0, 600.0, False)
    reset = agg(in_rate=1000.0, in_per_s=600.0, busy_ms=900.0, counter_busy_ms=-5.0)  # counter went down
    assert not processing_rates(reset, DEFAULTS, 2).from_counters
    avg = AutoscalerOptions(busy_time_aggregator="AVG", prefer_counter_rates=False)
    assert processing_rates(agg(in_rate=1000.0, acc_busy_rate=1600.0), avg, 2).busy_ms_per_s == 800.0
