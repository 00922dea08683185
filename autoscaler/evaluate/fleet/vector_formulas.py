"""The per-vertex formulas over numpy arrays: one call computes a rule for every vertex of a tick.

Each function here is the twin of one scalar function of the plain-Python oracle (named in its
docstring), applied element-wise to float64 arrays. It exists because the scalar functions, called
once per vertex, cost more than Spark's whole aggregation at 10,000 jobs x 10 vertices (issue 13): the
driver spent seconds in Python calls and dataclasses per tick. The oracle stays as it is and remains
what tests compare against (``tests/unit/evaluate/fleet/test_vector_formulas.py`` holds every function
here to its twin on random inputs, NaN, infinities, zeros, negative and huge values included).

Why the twins agree bit for bit: numpy's float64 arithmetic is the IEEE arithmetic Python floats and
Java doubles use, so ``+ - * /`` give identical results, and IEEE division already is Java's (``x/0``
is ``±inf``, ``0/0`` NaN) where Python would raise, so :func:`~autoscaler.evaluate.javamath.java_div`
needs no branch here. NaN compares false in both, so a guard like ``x < t`` selects the same elements.
What Python does by branching, these functions do with ``np.where``, computing both sides and keeping
one; the discarded side may divide by zero, which is why each function silences numpy's warnings.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "INT_MAX",
    "Bools",
    "Floats",
    "Ints",
    "busy_tpr_inputs",
    "capacity",
    "catch_up_rate",
    "edge_output_ratio",
    "get_average",
    "is_processing_backlog",
    "java_max_zero",
    "java_round",
    "limit_parallelism",
    "scaled_parallelism",
    "target_data_rate",
    "true_processing_rate",
]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
FloatLike = Floats | float
IntLike = Ints | int

INT_MAX = 2**31 - 1  # Java Integer.MAX_VALUE caps the raw parallelism (scaler._INT_MAX)
_INF = np.inf
_NAN = np.nan


def _quiet() -> np.errstate:
    """Division by zero and NaN comparisons are expected (module doc): no warnings for them."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


# ---------------------------------------------------------------------------------------------- javamath
def java_round(x: Floats) -> Floats:
    """``javamath.java_round``: Java ``Math.round`` (ties towards +inf), NaN and infinities unchanged.

    ``+ 0.0`` turns the ``-0.0`` that ``floor(-0.0)`` keeps into the ``0.0`` Python's int gives.
    """
    with _quiet():
        floor = np.floor(x)
        rounded = np.where(x - floor >= 0.5, floor + 1.0, floor) + 0.0
    return np.where(np.isfinite(x), rounded, x)


def java_max_zero(x: Floats) -> Floats:
    """``javamath.java_max(0.0, x)``: NaN wins, and ``0.0`` wins a tie with ``-0.0`` as ``a >= b`` does."""
    with _quiet():
        return np.where(x <= 0.0, 0.0, x)  # NaN compares false: x, i.e. NaN, is kept


# ---------------------------------------------------------------------------------------------- aggregates
def get_average(total: Floats, count: Ints, infinite: Ints, min_elements: IntLike = 1) -> Floats:
    """``aggregates.get_average``: mean of the finite samples, +inf if only infinite ones, NaN below
    ``min_elements`` (or with no sample at all)."""
    with _quiet():
        mean = total / count
    empty = np.where(infinite > 0, _INF, _NAN)
    return np.where(count == 0, empty, np.where(count < min_elements, _NAN, mean))


# ---------------------------------------------------------------------------------------------- rates
def target_data_rate(records_in_rate: Floats, lag_rate: Floats) -> Floats:
    """``rates.target_data_rate``: a source's TDR, ``max(0, in-rate + lag-rate)``; NaN stays NaN."""
    with _quiet():
        return java_max_zero(records_in_rate + lag_rate)


def catch_up_rate(lag_latest: Floats, catch_up_s: Ints) -> Floats:
    """``rates.catch_up_rate``: lag / catch-up.duration, 0 when the duration is 0."""
    with _quiet():
        return np.where(catch_up_s == 0, 0.0, lag_latest / catch_up_s)


def busy_tpr_inputs(
    *,
    prefer_counters: Bools,
    average_aggregator: Bools,
    parallelism: Ints,
    accumulated_busy_rate: Floats,
    accumulated_busy_agg_rate: Floats,
    records_in_rate: Floats,
    records_in_per_s_avg: Floats,
    busy_average: Floats,
) -> tuple[Floats, Floats, Bools]:
    """``rates.processing_rates``: (busy ms/s, input rate, from counters) of every vertex.

    Counter deltas where preferred and both are finite and not negative; else the reference path:
    the AVG aggregator's accumulated busy rate / p with the counter input rate, or the busy-time
    gauge's average with the 60 s meter (the counter rate where the meter is NaN or infinite).
    """
    counters = (
        prefer_counters
        & np.isfinite(accumulated_busy_agg_rate)
        & (accumulated_busy_agg_rate >= 0)
        & np.isfinite(records_in_rate)
        & (records_in_rate >= 0)
    )
    meter_unusable = np.isnan(records_in_per_s_avg) | np.isinf(records_in_per_s_avg)
    with _quiet():
        busy = np.where(average_aggregator, accumulated_busy_rate / parallelism, busy_average)
    rate = np.where(average_aggregator | meter_unusable, records_in_rate, records_in_per_s_avg)
    return (
        np.where(counters, accumulated_busy_agg_rate, busy),
        np.where(counters, records_in_rate, rate),
        counters,
    )


def true_processing_rate(
    busy_time_avg_ms: Floats, input_rate: Floats, observed_tpr_avg: Floats, switch_threshold: FloatLike
) -> Floats:
    """``rates.true_processing_rate``: the busy-time TPR unless the observed one is known and better."""
    with _quiet():
        busy_tpr = np.where(input_rate == 0, _INF, input_rate / (busy_time_avg_ms / 1000.0))
        better = busy_tpr > observed_tpr_avg * (1.0 + switch_threshold)
    use_observed = ~np.isnan(observed_tpr_avg) & (np.isnan(busy_tpr) | np.isinf(busy_tpr) | better)
    return np.where(use_observed, observed_tpr_avg, busy_tpr)


def is_processing_backlog(lag_latest: Floats, records_in_rate: Floats, threshold_s: IntLike) -> Bools:
    """``rates.is_processing_backlog``: lag / in-rate above the threshold; never with an unknown rate."""
    with _quiet():
        return ~np.isnan(records_in_rate) & (lag_latest / records_in_rate > threshold_s)


def capacity(
    utilization: FloatLike,
    *,
    target_data_rate: Floats,
    catch_up_data_rate: Floats,
    with_restart: bool,
    restart_s: FloatLike,
    catch_up_s: IntLike,
) -> Floats:
    """``rates.capacity``: round(catch-up + restart catch-up + TDR / clamp(u, 0, 1)).

    ``u == 0`` gives +inf; a NaN rate or utilization gives NaN.
    """
    with _quiet():
        unit = np.minimum(1.0, np.maximum(0.0, utilization))
        restart = target_data_rate * restart_s / catch_up_s
        restart_rate = np.where(np.asarray(catch_up_s) > 0, restart, 0.0) if with_restart else 0.0
        value = java_round(catch_up_data_rate + restart_rate + target_data_rate / unit)
    value = np.where(unit == 0, _INF, value)
    unknown = np.isnan(catch_up_data_rate) | np.isnan(target_data_rate) | np.isnan(utilization)
    return np.where(unknown, _NAN, value)


# ---------------------------------------------------------------------------------------------- propagation
def edge_output_ratio(source_records_in_rate: Floats, edge_rate: Floats) -> Floats:
    """``propagation.edge_output_ratio``: NaN if unmeasured, 0 if either rate is <= 0, else the ratio."""
    with _quiet():
        ratio = np.where(
            (source_records_in_rate <= 0) | (edge_rate <= 0), 0.0, edge_rate / source_records_in_rate
        )
    return np.where(np.isnan(source_records_in_rate) | np.isnan(edge_rate), _NAN, ratio)


# ---------------------------------------------------------------------------------------------- scaler
def scaled_parallelism(
    factor: Floats, parallelism: Ints, low: FloatLike, high: FloatLike
) -> tuple[Floats, Ints]:
    """``scaler.scale_by_factor`` up to the limits: (clamped factor, raw parallelism).

    The factor is clamped to ``[low, high]`` (``clamp_scale_factor``), then ``ceil(factor * p)``, capped
    at ``INT_MAX``; a product that is not finite gives ``INT_MAX``, as there. NaN factors (no change)
    come back NaN with a raw parallelism the caller discards. The raw value is floored at ``-INT_MAX``
    to fit int64; the lower limit (>= 1) makes any value below 1 the same.
    """
    with _quiet():
        clamped = np.where(factor < low, low, np.where(factor > high, high, factor))
        scaled = clamped * parallelism
        ceiled = np.clip(np.ceil(scaled), -INT_MAX, INT_MAX)
    raw = np.where(np.isfinite(scaled), ceiled, INT_MAX).astype(np.int64)
    return clamped, raw


def limit_parallelism(
    raw: Ints, *, current: Ints, max_parallelism: Ints, vertex_min: IntLike, vertex_max: IntLike
) -> tuple[Ints, Ints, Ints]:
    """``scaler.limit_parallelism``: (newP, lower limit, upper limit); the limits never force a change."""
    lower = np.minimum(current, vertex_min)
    upper = np.maximum(current, vertex_max)
    return np.minimum(np.maximum(lower, raw), np.minimum(max_parallelism, upper)), lower, upper
