"""One vertex's rates and capacities from its aggregates: the reference's per-vertex formulas.

Target data rate, catch-up rate, busy time, true processing rate, backlog, target capacity and the
scale-up/scale-down thresholds (flink-autoscaler.md §1.5), each a pure function of floats so the
graph evaluation (:mod:`autoscaler.evaluate.oracle.formulas`) only has to wire them together. NaN means
"unknown", never zero; division follows Java doubles (:mod:`autoscaler.evaluate.javamath`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.evaluate.aggregates import VertexAggregates, get_average
from autoscaler.evaluate.javamath import java_div, java_max, java_round, whole_seconds
from autoscaler.model import NAN
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator

__all__ = [
    "ProcessingRates",
    "busy_time_avg",
    "busy_time_bounds",
    "busy_time_thresholds",
    "capacity",
    "catch_up_rate",
    "is_processing_backlog",
    "processing_rates",
    "target_data_rate",
    "thresholds",
    "tpr_input_rate",
    "true_processing_rate",
]


def target_data_rate(records_in_rate: float, lag_rate: float) -> float:
    """Reference §1.5 source TDR = max(0, getRate(NUM_RECORDS_IN) + getRate(LAG)); NaN stays NaN."""
    return java_max(0.0, records_in_rate + lag_rate)


def catch_up_rate(lag_latest: float, catch_up_s: float) -> float:
    """Reference §1.5 source CATCH_UP_DATA_RATE = lag / catch-up.duration, 0 when the duration is 0."""
    return 0.0 if catch_up_s == 0 else lag_latest / catch_up_s


def busy_time_avg(agg: VertexAggregates, aggregator: BusyTimeAggregator, parallelism: int) -> float:
    """Reference §1.5 busyTimeAvg (ms/s): AVG uses getRate(ACCUMULATED_BUSY_TIME)/p, else getAverage(LOAD)."""
    if aggregator is BusyTimeAggregator.AVG:
        return agg.accumulated_busy_rate / parallelism
    return get_average(agg.busy)


def tpr_input_rate(agg: VertexAggregates, aggregator: BusyTimeAggregator) -> float:
    """Reference FLINK-39306: the TPR numerator matches the busy-time denominator's aggregation.

    With MAX/MIN the busy time is Flink's 60 s TimerGauge, so the numerator is the 60 s meter too:
    both lag a load change alike. Both also restart after a rescale (the meter ramps for a minute),
    which the stabilization interval has to cover.
    """
    if aggregator is BusyTimeAggregator.AVG:
        return agg.records_in_rate
    avg = agg.records_in_per_s_avg
    return agg.records_in_rate if math.isnan(avg) or math.isinf(avg) else avg


@dataclass(frozen=True, slots=True)
class ProcessingRates:
    """The TPR's numerator and denominator, always from the same kind of source (FLINK-39306)."""

    busy_ms_per_s: float  # busy time per second of the vertex as the aggregator sees it
    input_rate: float  # records per second in
    from_counters: bool  # both are counter deltas over the window (else Flink's gauge and meter)

    @property
    def load(self) -> float:
        return self.busy_ms_per_s / 1000.0


def processing_rates(agg: VertexAggregates, options: AutoscalerOptions, parallelism: int) -> ProcessingRates:
    """Counter deltas when ``metrics.prefer-counter-rates`` (ours) and both counters were measured.

    Flink's ``*PerSecond`` meters and the busy-time TimerGauge each cover their own trailing 60 s and
    restart (the meter ramping up) after every rescale, so a TPR built from them disagrees with itself
    whenever the load changes. The deltas of two counters over the same window cannot: busy ms/s =
    getRate(accumulateBusyTimeMs aggregated by the busy-time aggregator) and input rate =
    getRate(NUM_RECORDS_IN). When either counter is missing (NaN: not listed, legacy source, fewer
    than two points) the reference path is used: getAverage(LOAD) or the AVG accumulated rate, with
    the FLINK-39306 input rate.
    """
    if options.prefer_counter_rates:
        busy, rate = agg.accumulated_busy_agg_rate, agg.records_in_rate
        if _counter_rate(busy) and _counter_rate(rate):
            return ProcessingRates(busy, rate, True)
    aggregator = options.busy_time_aggregator
    return ProcessingRates(
        busy_time_avg(agg, aggregator, parallelism), tpr_input_rate(agg, aggregator), False
    )


def _counter_rate(rate: float) -> bool:
    """A counter's rate is usable when finite and not negative (a falling counter means a reset)."""
    return math.isfinite(rate) and rate >= 0


def true_processing_rate(
    busy_time_avg_ms: float, input_rate: float, observed_tpr_avg: float, switch_threshold: float
) -> float:
    """Reference §1.5 TRUE_PROCESSING_RATE: busy-time TPR unless the observed TPR is known and better.

    busyTpr = in / (busy/1000), +inf with no input. Observed wins when busyTpr is NaN/inf or exceeds
    observed * (1 + switch-threshold).
    """
    busy_tpr = math.inf if input_rate == 0 else java_div(input_rate, busy_time_avg_ms / 1000.0)
    if math.isnan(observed_tpr_avg):
        return busy_tpr
    if math.isnan(busy_tpr) or math.isinf(busy_tpr):
        return observed_tpr_avg
    if busy_tpr > observed_tpr_avg * (1.0 + switch_threshold):
        return observed_tpr_avg
    return busy_tpr


def is_processing_backlog(lag_latest: float, records_in_rate: float, threshold_s: float) -> bool:
    """Reference §1.5 backlog flag for one source: lag / getRate(NUM_RECORDS_IN) > lag-threshold seconds."""
    if math.isnan(records_in_rate):
        return False
    return java_div(lag_latest, records_in_rate) > threshold_s


def capacity(
    utilization: float,
    *,
    target_data_rate: float,
    catch_up_data_rate: float,
    with_restart: bool,
    restart_s: float,
    catch_up_s: float,
) -> float:
    """Reference §1.5 getTargetProcessingCapacity: round(catchUp + restart catch-up + TDR / clamp(u, 0, 1)).

    u == 0 gives +inf (never "too fast"); any NaN input gives NaN.
    """
    if math.isnan(catch_up_data_rate) or math.isnan(target_data_rate) or math.isnan(utilization):
        return NAN
    u = min(1.0, max(0.0, utilization))
    if u == 0:
        return math.inf
    restart_rate = target_data_rate * restart_s / catch_up_s if with_restart and catch_up_s > 0 else 0.0
    return java_round(catch_up_data_rate + restart_rate + target_data_rate / u)


def thresholds(
    *,
    target_data_rate: float,
    catch_up_data_rate: float,
    processing_backlog: bool,
    options: AutoscalerOptions,
    restart_s: float,
) -> tuple[float, float]:
    """Reference §1.5 (SCALE_UP_RATE_THRESHOLD, SCALE_DOWN_RATE_THRESHOLD); bounds [1, 0] while in backlog."""
    upper, lower = (
        (1.0, 0.0) if processing_backlog else (options.utilization_upper, options.utilization_lower)
    )
    common = {
        "target_data_rate": target_data_rate,
        "catch_up_data_rate": catch_up_data_rate,
        "restart_s": restart_s,
        "catch_up_s": whole_seconds(options.catch_up_duration),
    }
    return capacity(upper, with_restart=False, **common), capacity(lower, with_restart=True, **common)


def busy_time_thresholds(
    input_rate: float, processing_backlog: bool, options: AutoscalerOptions
) -> tuple[float, float]:
    """Busy-time-only mode: the TPRs at which the load crosses the band, in / upper and in / lower.

    Bounds are clamped to [0, 1] like the reference's capacity() and become [0, 1] while the job
    processes backlog, as in §1.5. They are reported for dashboards; the band test itself is on the load.
    """
    upper, lower = busy_time_bounds(processing_backlog, options)
    return java_div(input_rate, upper), java_div(input_rate, lower)


def busy_time_bounds(processing_backlog: bool, options: AutoscalerOptions) -> tuple[float, float]:
    """(upper, lower) utilization for busy-time-only mode, each within [0, 1]."""
    if processing_backlog:
        return 1.0, 0.0

    def unit(u: float) -> float:
        return min(1.0, max(0.0, u))

    return unit(options.utilization_upper), unit(options.utilization_lower)
