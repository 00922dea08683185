"""Each vectorised formula (:mod:`autoscaler.evaluate.fleet.vector_formulas`) equals its plain-Python twin.

Bit for bit, element by element, on random inputs that include NaN, both infinities, both zeros,
negative, tiny and huge values: the Spark backend's driver side is built from these functions, and the
plain-Python oracle from the twins, so any difference here would be a difference between the two.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import autoscaler.evaluate.fleet.vector_formulas as vf
from autoscaler.evaluate.aggregates import AverageParts, VertexAggregates, get_average
from autoscaler.evaluate.javamath import java_max, java_round
from autoscaler.evaluate.oracle.propagation import edge_output_ratio
from autoscaler.evaluate.oracle.rates import (
    capacity,
    catch_up_rate,
    is_processing_backlog,
    processing_rates,
    target_data_rate,
    true_processing_rate,
)
from autoscaler.evaluate.scaler import clamp_scale_factor, limit_parallelism
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator

FAST = settings(max_examples=200, deadline=None)
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-300, 1e300, -1e300]

# Any double, with the special values drawn often.
doubles = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e7, 1e7),
    st.integers(-(10**6), 10**6).map(lambda i: i / 8),  # ties of Math.round: x.5
)
columns = st.lists(doubles, min_size=1, max_size=40)


def same(actual: Any, expected: list[float]) -> bool:
    """Element by element equal as doubles: NaN equals NaN, and 0.0 is not -0.0."""
    got = np.asarray(actual, dtype=np.float64).tolist()
    return len(got) == len(expected) and all(
        (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        for a, b in zip(got, expected, strict=True)
    )


def pairs(draw: st.DrawFn, n: int, values: st.SearchStrategy[Any] = doubles) -> np.ndarray:
    return np.array([draw(values) for _ in range(n)], dtype=np.float64)


@FAST
@given(columns)
def test_java_round(xs: list[float]) -> None:
    assert same(vf.java_round(np.array(xs)), [java_round(x) for x in xs])


@FAST
@given(columns)
def test_java_max_with_zero(xs: list[float]) -> None:
    assert same(vf.java_max_zero(np.array(xs)), [java_max(0.0, x) for x in xs])


@FAST
@given(st.data(), st.integers(1, 30), st.integers(0, 4))
def test_get_average(data: st.DataObject, n: int, min_elements: int) -> None:
    totals = pairs(data.draw, n)
    counts = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype=np.int64)
    infinite = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
    want = [
        get_average(AverageParts(t, int(c), int(i)), min_elements)
        for t, c, i in zip(totals.tolist(), counts, infinite, strict=True)
    ]
    assert same(vf.get_average(totals, counts, infinite, min_elements), want)


@FAST
@given(st.data(), st.integers(1, 30))
def test_source_rates(data: st.DataObject, n: int) -> None:
    records_in, lag_rate, lag = pairs(data.draw, n), pairs(data.draw, n), pairs(data.draw, n)
    catch_up_s = np.array(data.draw(st.lists(st.sampled_from([0, 1, 7, 1800]), min_size=n, max_size=n)))
    assert same(
        vf.target_data_rate(records_in, lag_rate),
        [target_data_rate(a, b) for a, b in zip(records_in.tolist(), lag_rate.tolist(), strict=True)],
    )
    assert same(
        vf.catch_up_rate(lag, catch_up_s),
        [catch_up_rate(x, int(c)) for x, c in zip(lag.tolist(), catch_up_s, strict=True)],
    )


@FAST
@given(st.data(), st.integers(1, 30))
def test_edge_output_ratio_and_backlog(data: st.DataObject, n: int) -> None:
    source_in, edge, lag = pairs(data.draw, n), pairs(data.draw, n), pairs(data.draw, n)
    threshold = data.draw(st.sampled_from([0, 1, 300]))
    assert same(
        vf.edge_output_ratio(source_in, edge),
        [edge_output_ratio(a, b) for a, b in zip(source_in.tolist(), edge.tolist(), strict=True)],
    )
    backlog = vf.is_processing_backlog(lag, source_in, threshold).tolist()
    assert backlog == [
        is_processing_backlog(a, b, threshold) for a, b in zip(lag.tolist(), source_in.tolist(), strict=True)
    ]


@FAST
@given(st.data(), st.integers(1, 30), st.sampled_from([0.0, 0.15, math.inf]))
def test_true_processing_rate(data: st.DataObject, n: int, switch: float) -> None:
    busy, rate, observed = pairs(data.draw, n), pairs(data.draw, n), pairs(data.draw, n)
    want = [
        true_processing_rate(b, r, o, switch)
        for b, r, o in zip(busy.tolist(), rate.tolist(), observed.tolist(), strict=True)
    ]
    assert same(vf.true_processing_rate(busy, rate, observed, switch), want)


@FAST
@given(
    st.data(),
    st.integers(1, 20),
    st.booleans(),
    st.sampled_from(list(BusyTimeAggregator)),
)
def test_processing_rates(data: st.DataObject, n: int, prefer: bool, aggregator: BusyTimeAggregator) -> None:
    options = AutoscalerOptions(prefer_counter_rates=prefer, busy_time_aggregator=aggregator)
    aggs = [
        VertexAggregates(
            busy_sum=data.draw(doubles),
            busy_count=data.draw(st.integers(0, 3)),
            busy_infinite=data.draw(st.integers(0, 1)),
            accumulated_busy_rate=data.draw(doubles),
            accumulated_busy_agg_rate=data.draw(doubles),
            records_in_rate=data.draw(doubles),
            records_in_per_s_avg=data.draw(doubles),
        )
        for _ in range(n)
    ]
    parallelism = np.array(data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)), dtype=np.int64)
    want = [processing_rates(a, options, int(p)) for a, p in zip(aggs, parallelism, strict=True)]

    def col(name: str) -> np.ndarray:
        return np.array([getattr(a, name) for a in aggs], dtype=np.float64)

    busy_average = vf.get_average(
        col("busy_sum"),
        np.array([a.busy_count for a in aggs], dtype=np.int64),
        np.array([a.busy_infinite for a in aggs], dtype=np.int64),
    )
    busy, rate, counters = vf.busy_tpr_inputs(
        prefer_counters=np.full(n, prefer),
        average_aggregator=np.full(n, aggregator is BusyTimeAggregator.AVG),
        parallelism=parallelism,
        accumulated_busy_rate=col("accumulated_busy_rate"),
        accumulated_busy_agg_rate=col("accumulated_busy_agg_rate"),
        records_in_rate=col("records_in_rate"),
        records_in_per_s_avg=col("records_in_per_s_avg"),
        busy_average=busy_average,
    )
    assert same(busy, [w.busy_ms_per_s for w in want])
    assert same(rate, [w.input_rate for w in want])
    assert counters.tolist() == [w.from_counters for w in want]


@FAST
@given(
    st.data(),
    st.integers(1, 20),
    st.sampled_from([0.0, 0.3, 0.7, 1.0, 1.5, -0.2, math.nan]),
    st.booleans(),
    st.sampled_from([0, 1, 1800]),
)
def test_capacity(
    data: st.DataObject, n: int, utilization: float, with_restart: bool, catch_up_s: int
) -> None:
    tdr, catch_up, restart = pairs(data.draw, n), pairs(data.draw, n), pairs(data.draw, n, st.floats(0, 1e4))
    want = [
        capacity(
            utilization,
            target_data_rate=t,
            catch_up_data_rate=c,
            with_restart=with_restart,
            restart_s=r,
            catch_up_s=catch_up_s,
        )
        for t, c, r in zip(tdr.tolist(), catch_up.tolist(), restart.tolist(), strict=True)
    ]
    got = vf.capacity(
        np.full(n, utilization),
        target_data_rate=tdr,
        catch_up_data_rate=catch_up,
        with_restart=with_restart,
        restart_s=restart,
        catch_up_s=np.full(n, catch_up_s, dtype=np.int64),
    )
    assert same(got, want)


@FAST
@given(
    st.data(),
    st.integers(1, 20),
    st.sampled_from([0.0, 0.6, 1.0, 5.0]),
    st.sampled_from([0.0, 0.5, 100000.0]),
    st.integers(1, 300),
    st.integers(1, 300),
)
def test_scale_factor_to_limited_parallelism(
    data: st.DataObject, n: int, down: float, up: float, vertex_min: int, vertex_max: int
) -> None:
    """``scaler.scale_by_factor`` from the clamp to the limits, on every kind of factor."""
    options = AutoscalerOptions(
        scale_down_max_factor=down,
        scale_up_max_factor=up,
        vertex_min_parallelism=vertex_min,
        vertex_max_parallelism=vertex_max,
    )
    factors = pairs(data.draw, n)
    current = np.array(data.draw(st.lists(st.integers(1, 500), min_size=n, max_size=n)), dtype=np.int64)
    max_p = np.array(data.draw(st.lists(st.integers(1, 1024), min_size=n, max_size=n)), dtype=np.int64)
    clamped, raw = vf.scaled_parallelism(factors, current, 1.0 - down, 1.0 + up)
    limited, lower, upper = vf.limit_parallelism(
        raw, current=current, max_parallelism=max_p, vertex_min=vertex_min, vertex_max=vertex_max
    )
    for i, factor in enumerate(factors.tolist()):
        if math.isnan(factor):
            continue  # no change: the caller keeps the parallelism
        f = clamp_scale_factor(factor, options)
        scaled = f * int(current[i])
        raw_i = vf.INT_MAX if not math.isfinite(scaled) else min(math.ceil(scaled), vf.INT_MAX)
        want = limit_parallelism(
            raw_i, current=int(current[i]), max_parallelism=int(max_p[i]), options=options
        )
        assert same([clamped[i]], [f])
        assert (int(limited[i]), int(lower[i]), int(upper[i])) == want
