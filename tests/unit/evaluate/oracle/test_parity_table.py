"""Parity with the reference autoscaler, one hand-computed number per row.

Every row gives plain inputs and the value the reference formulas (flink-autoscaler.md §1.3-§1.10) give
for them, with the arithmetic in a comment and the rule in the row's id. Rows marked "ours" pin down
where we deliberately differ (docs/algorithm.md, "Where we differ from the reference and why").
Defaults unless a row says otherwise: utilization.target 0.7, boundary 0.3 (band [0.4, 1.0]),
restart.time 300 s, catch-up.duration 1800 s, scale-down.max-factor 0.6, scale-up.max-factor 1e5.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from formula_builders import agg

from autoscaler.collect import observed_true_processing_rate
from autoscaler.evaluate.history import (
    VertexScaling,
    restart_time_s,
    scalability_coefficient,
    trim_history,
)
from autoscaler.evaluate.oracle.formulas import (
    AverageParts,
    VertexAggregates,
    busy_time_avg,
    capacity,
    catch_up_rate,
    edge_output_ratio,
    evaluate_vertices,
    get_average,
    is_processing_backlog,
    processing_rates,
    propagate_rates,
    target_data_rate,
    thresholds,
    true_processing_rate,
)
from autoscaler.evaluate.scaler import (
    align_parallelism,
    clamp_scale_factor,
    compute_busy_time_parallelism,
    compute_target_parallelism,
    limit_parallelism,
)
from autoscaler.flink.metric_names import source_partitions
from autoscaler.model import Edge, JobRef, JobSample, JobTarget, JobTopology, VertexInfo, VertexSample
from autoscaler.settings import AlignmentMode, AutoscalerOptions, BusyTimeAggregator
from autoscaler.state import ScalingRecord

NAN = math.nan
INF = math.inf
H = 3_600_000


def same(got: float, expected: float) -> bool:
    """Equal to 1e-9 relative, NaN equal to NaN, infinities exact."""
    if math.isnan(expected):
        return math.isnan(got)
    return got == pytest.approx(expected, rel=1e-9)


def options(**overrides: Any) -> AutoscalerOptions:
    return AutoscalerOptions(**overrides)


def rates(*, lag_rate: float = 0.0, lag: float = 0.0, **measured: float) -> VertexAggregates:
    """A vertex's window reduced to exactly these averages and rates (no lag unless given)."""
    return agg(lag_rate=lag_rate, lag=lag, **measured)


def topology(
    parallelism: dict[str, int], edges: tuple[tuple[str, str, str], ...] = (), max_p: int = 128
) -> JobTopology:
    return JobTopology.build(
        [VertexInfo(v, v, p, max_p) for v, p in parallelism.items()], [Edge(a, b, s) for a, b, s in edges]
    )


def evaluate(
    topo: JobTopology,
    aggregates: dict[str, VertexAggregates],
    opts: AutoscalerOptions,
    history: tuple[ScalingRecord, ...] = (),
) -> dict[str, Any]:
    sample = JobSample(
        JobTarget(JobRef("c", "0" * 32, "j"), opts), 0, 0, topo, {v: VertexSample() for v in topo.vertices}
    )
    return evaluate_vertices(sample, aggregates, opts, None, history)[0]


# ---------------------------------------------------------------------------------------------- §1.5 rates
@pytest.mark.parametrize(
    ("in_rate", "lag_rate", "expected"),
    [
        pytest.param(1000.0, 0.0, 1000.0, id="§1.5 source TDR: max(0, 1000 + 0) = 1000"),
        pytest.param(1250.0, 750.0, 2000.0, id="§1.5 source TDR: lag growth adds, 1250 + 750 = 2000"),
        pytest.param(100.0, -300.0, 0.0, id="§1.5 source TDR: max(0, 100 - 300) = 0"),
    ],
)
def test_source_target_data_rate(in_rate: float, lag_rate: float, expected: float) -> None:
    assert same(target_data_rate(in_rate, lag_rate), expected)


# (shape, in(a), out(a), in(b), out(b), in(c), expected TDR of c). All sources read with lag flat at 0,
# so TDR(source) = in(source).
EDGE_SHAPES = {
    "chain": (("a", "c", "REBALANCE"),),  # a -> c
    "join": (("a", "c", "REBALANCE"), ("b", "c", "REBALANCE")),  # a, b -> c; b has one output
    "fan": (("a", "c", "REBALANCE"), ("b", "c", "REBALANCE"), ("b", "d", "REBALANCE")),  # b -> c, d
}


@pytest.mark.parametrize(
    ("shape", "in_a", "out_a", "in_b", "out_b", "in_c", "expected"),
    [
        # case 1, single input: edge = in(c) = 80; ratio 80/100 = 0.8; TDR(c) = 100 * 0.8 = 80 (ours:
        # edge = out(a) = 80, the same wherever no records pile up between a and c)
        pytest.param("chain", 100.0, 80.0, NAN, NAN, 80.0, 80.0, id="§1.5 edge case 1"),
        # ours: out(a) unmeasured -> the reference's case 1, in(c)
        pytest.param("chain", 100.0, NAN, NAN, NAN, 80.0, 80.0, id="§1.5 edge case 1, out(a) unknown"),
        # ours: a emits 100, c reads 80 (20/s wait in the network buffers): edge = out(a) = 100, ratio
        # 1, TDR(c) = 100 (the reference: in(c) = 80, so c is sized for what it already manages)
        pytest.param("chain", 100.0, 100.0, NAN, NAN, 80.0, 100.0, id="ours: edge of a sole output = out(a)"),
        # case 2: edge(a->c) = in(c) - out(b) = 100 - 30 = 70 (ratio 0.7); edge(b->c) = 100 - 70 = 30
        # (ratio 30/40 = 0.75); TDR(c) = 100*0.7 + 40*0.75 = 70 + 30 = 100 (ours: out(a) = 70 and
        # out(b) = 30, each a's and b's sole output: the same)
        pytest.param("join", 100.0, 70.0, 40.0, 30.0, 100.0, 100.0, id="§1.5 edge case 2"),
        # case 2 with a's out unmeasured (ours: then the reference's cases): edge(a->c) = 100 - 30 = 70
        # (ratio 0.7); edge(b->c) = out(b) = 30 (b's sole output; ratio 0.75); TDR(c) = 70 + 30 = 100
        pytest.param("join", 100.0, NAN, 40.0, 30.0, 100.0, 100.0, id="§1.5 edge case 2, out(a) unknown"),
        # case 3: b fans out, so edge(a->c) = out(a) = 55 (ratio 0.55); edge(b->c): a has one output,
        # so case 2: in(c) - out(a) = 100 - 55 = 45 (ratio 45/40 = 1.125); TDR(c) = 55 + 45 = 100
        pytest.param("fan", 100.0, 55.0, 40.0, 30.0, 100.0, 100.0, id="§1.5 edge case 3"),
        # FLINK-39925 fixed (ours): out(a) and in(c) unknown -> edge NaN -> ratio NaN -> TDR(c) NaN, never 0
        pytest.param("chain", 100.0, NAN, NAN, NAN, NAN, NAN, id="FLINK-39925 missing metric -> NaN"),
    ],
)
def test_propagated_target_data_rate(
    shape: str, in_a: float, out_a: float, in_b: float, out_b: float, in_c: float, expected: float
) -> None:
    edges = EDGE_SHAPES[shape]
    names = {v for e in edges for v in e[:2]}
    topo = topology({v: 1 for v in sorted(names)}, edges)
    aggs = {
        "a": rates(in_rate=in_a, out_rate=out_a),
        "b": rates(in_rate=in_b, out_rate=out_b),
        "c": rates(in_rate=in_c),
        "d": rates(in_rate=10.0),
    }
    tdr, _ = propagate_rates(topo, {v: aggs[v] for v in names}, 1800)
    assert same(tdr["c"], expected)


@pytest.mark.parametrize(
    ("source_in", "edge_rate", "expected"),
    [
        pytest.param(100.0, 50.0, 0.5, id="§1.5 output ratio: 50 / 100 = 0.5"),
        pytest.param(0.0, 50.0, 0.0, id="§1.5 output ratio: nothing read -> 0"),
        pytest.param(100.0, -5.0, 0.0, id="§1.5 output ratio: edge <= 0 -> 0"),
        pytest.param(NAN, 50.0, NAN, id="FLINK-39925 output ratio: unmeasured input -> NaN (ours)"),
    ],
)
def test_edge_output_ratio(source_in: float, edge_rate: float, expected: float) -> None:
    assert same(edge_output_ratio(source_in, edge_rate), expected)


@pytest.mark.parametrize(
    ("lag", "catch_up_s", "expected"),
    [
        pytest.param(3600.0, 1800, 2.0, id="§1.5 catch-up: 3600 / 1800 s = 2"),
        pytest.param(180_000.0, 1800, 100.0, id="§1.5 catch-up: 180000 / 1800 s = 100"),
        pytest.param(3600.0, 0, 0.0, id="§1.5 catch-up: duration 0 disables it"),
    ],
)
def test_catch_up_rate(lag: float, catch_up_s: int, expected: float) -> None:
    assert same(catch_up_rate(lag, catch_up_s), expected)


def test_catch_up_flows_through_the_output_ratio() -> None:
    """§1.5 non-source catch-up: 100 (= 180000/1800) * ratio 2000/1000 = 200."""
    topo = topology({"src": 1, "flat": 1}, (("src", "flat", "REBALANCE"),))
    aggs = {"src": rates(in_rate=1000.0, lag=180_000.0), "flat": rates(in_rate=2000.0)}
    assert propagate_rates(topo, aggs, 1800)[1]["flat"] == 200.0


# ---------------------------------------------------------------------------------------------- TPR
@pytest.mark.parametrize(
    ("in_per_s", "lag", "backpressure_ms", "expected"),
    [
        # lag 3000 >= 30 s * 100/s: catching up; 100 / (1 - 500/1000) = 200
        pytest.param(100.0, 3000.0, 500.0, 200.0, id="§1.3 observed TPR at the lag threshold"),
        pytest.param(100.0, 2999.0, 500.0, NAN, id="§1.3 observed TPR below the lag threshold: NaN"),
        pytest.param(0.0, 0.0, 0.0, INF, id="§1.3 observed TPR with no input: +inf"),
        pytest.param(100.0, 3000.0, 1000.0, NAN, id="§1.3 observed TPR always back-pressured: NaN"),
    ],
)
def test_observed_tpr(in_per_s: float, lag: float, backpressure_ms: float, expected: float) -> None:
    assert same(observed_true_processing_rate(in_per_s, lag, backpressure_ms, 30.0), expected)


@pytest.mark.parametrize(
    ("busy_ms", "input_rate", "observed", "expected"),
    [
        # busy TPR = 100 / 0.5 = 200 > 170 * 1.15 = 195.5 -> the observed 170
        pytest.param(500.0, 100.0, 170.0, 170.0, id="§1.5 TPR switch: busy above observed*1.15"),
        # 200 <= 180 * 1.15 = 207 -> busy 200
        pytest.param(500.0, 100.0, 180.0, 200.0, id="§1.5 TPR switch: busy within threshold"),
        pytest.param(500.0, 0.0, 150.0, 150.0, id="§1.5 TPR: busy infinite -> observed"),
        pytest.param(500.0, 100.0, NAN, 200.0, id="§1.5 TPR: no observed -> busy 100/0.5"),
    ],
)
def test_true_processing_rate(busy_ms: float, input_rate: float, observed: float, expected: float) -> None:
    assert same(true_processing_rate(busy_ms, input_rate, observed, 0.15), expected)


@pytest.mark.parametrize(
    ("observed_sum", "observed_n", "min_observations", "expected"),
    [
        pytest.param(6000.0, 2, 2, 3000.0, id="§1.5 observed TPR min-observations met: 6000/2"),
        pytest.param(6000.0, 2, 3, NAN, id="§1.5 observed TPR min-observations 3 not met: NaN"),
    ],
)
def test_observed_tpr_min_observations(
    observed_sum: float, observed_n: int, min_observations: int, expected: float
) -> None:
    agg = VertexAggregates(observed_tpr_sum=observed_sum, observed_tpr_count=observed_n)
    assert same(agg.observed_tpr_avg(min_observations), expected)


@pytest.mark.parametrize(
    ("aggregator", "gauge_ms", "acc_rate", "parallelism", "expected_busy_ms"),
    [
        # AVG: getRate(ACCUMULATED_BUSY_TIME) / p = 4000 / 4 = 1000 ms/s
        pytest.param("AVG", (900.0, 700.0), 4000.0, 4, 1000.0, id="§1.5 busy-time aggregator AVG"),
        # MAX: getAverage(LOAD) of the max-aggregated gauge samples (900 + 700) / 2 = 800
        pytest.param("MAX", (900.0, 700.0), 4000.0, 4, 800.0, id="§1.5 busy-time aggregator MAX"),
        # MIN: the same average over the min-aggregated gauge samples (200 + 400) / 2 = 300
        pytest.param("MIN", (200.0, 400.0), 4000.0, 4, 300.0, id="§1.5 busy-time aggregator MIN"),
    ],
)
def test_busy_time_aggregator(
    aggregator: str, gauge_ms: tuple[float, float], acc_rate: float, parallelism: int, expected_busy_ms: float
) -> None:
    agg = VertexAggregates(busy_sum=sum(gauge_ms), busy_count=len(gauge_ms), accumulated_busy_rate=acc_rate)
    assert same(busy_time_avg(agg, BusyTimeAggregator(aggregator), parallelism), expected_busy_ms)


@pytest.mark.parametrize(
    ("prefer_counters", "counter_busy_ms", "in_rate", "in_per_s", "gauge_ms", "expected_tpr"),
    [
        # ours: counter deltas, 1000 rec/s over 500 busy ms/s -> 1000 / 0.5 = 2000
        pytest.param(True, 500.0, 1000.0, 1500.0, 1000.0, 2000.0, id="ours counter-delta TPR"),
        # reference: FLINK-39306 meter 1500 over gauge 1000 ms/s -> 1500 / 1.0 = 1500
        pytest.param(False, 500.0, 1000.0, 1500.0, 1000.0, 1500.0, id="§1.5 meter path when disabled"),
        # ours, fallback: the busy counter is unknown -> reference path 1500 / 1.0
        pytest.param(True, NAN, 1000.0, 1500.0, 1000.0, 1500.0, id="ours counter missing -> meter path"),
    ],
)
def test_counter_delta_vs_meter_path(
    prefer_counters: bool,
    counter_busy_ms: float,
    in_rate: float,
    in_per_s: float,
    gauge_ms: float,
    expected_tpr: float,
) -> None:
    agg = rates(in_rate=in_rate, in_per_s=in_per_s, busy_ms=gauge_ms, counter_busy_ms=counter_busy_ms)
    r = processing_rates(agg, options(prefer_counter_rates=prefer_counters), 1)
    assert same(true_processing_rate(r.busy_ms_per_s, r.input_rate, NAN, 0.15), expected_tpr)


# ---------------------------------------------------------------------------------------------- backlog
@pytest.mark.parametrize(
    ("lag", "in_rate", "expected"),
    [
        pytest.param(301_000.0, 1000.0, True, id="§1.5 backlog: 301000/1000 = 301 s > 300 s"),
        pytest.param(300_000.0, 1000.0, False, id="§1.5 backlog: exactly 300 s is not > 300 s"),
    ],
)
def test_processing_backlog(lag: float, in_rate: float, expected: bool) -> None:
    assert is_processing_backlog(lag, in_rate, 300) is expected


# ---------------------------------------------------------------------------------------------- restart
@pytest.mark.parametrize(
    ("tracking", "limit_s", "durations_ms", "expected_s"),
    [
        pytest.param(False, 900, (90_500,), 300.0, id="§1.9 restart time fixed: restart.time 300 s"),
        pytest.param(True, 900, (90_500, 30_000), 90.0, id="§1.9 tracked: max(90.5, 30) -> 90 whole s"),
        pytest.param(True, 60, (90_500, 30_000), 60.0, id="§1.9 tracked, capped: min(90, limit 60)"),
        pytest.param(True, 900, (), 300.0, id="§1.9 tracked without measurements: restart.time"),
    ],
)
def test_restart_time(tracking: bool, limit_s: int, durations_ms: tuple[int, ...], expected_s: float) -> None:
    opts = options(
        restart_time_tracking_enabled=tracking, restart_time_tracking_limit=timedelta(seconds=limit_s)
    )
    history = [ScalingRecord(i, {"v": (1, 2)}, restart_duration_ms=d) for i, d in enumerate(durations_ms)]
    assert restart_time_s(history, opts) == expected_s


# ---------------------------------------------------------------------------------------------- capacity
@pytest.mark.parametrize(
    ("utilization", "with_restart", "restart_s", "catch_up_s", "expected"),
    [
        # round(0 + 1000*300/1800 + 1000/0.7) = round(166.67 + 1428.57) = round(1595.24) = 1595
        pytest.param(0.7, True, 300, 1800, 1595.0, id="§1.5 capacity with restart term"),
        # round(1000 / 0.7) = round(1428.57) = 1429
        pytest.param(0.7, False, 300, 1800, 1429.0, id="§1.5 capacity without restart term"),
        # catch-up 0 drops the restart term: round(1000 / 0.7) = 1429
        pytest.param(0.7, True, 300, 0, 1429.0, id="§1.5 capacity, catch-up 0: no restart term"),
        # tracked restart 90 s: round(1000*90/1800 + 1428.57) = round(1478.57) = 1479
        pytest.param(0.7, True, 90, 1800, 1479.0, id="§1.9 capacity with a tracked restart time"),
        pytest.param(0.0, True, 300, 1800, INF, id="§1.5 capacity at u = 0: +inf"),
    ],
)
def test_capacity(
    utilization: float, with_restart: bool, restart_s: float, catch_up_s: int, expected: float
) -> None:
    got = capacity(
        utilization,
        target_data_rate=1000.0,
        catch_up_data_rate=0.0,
        with_restart=with_restart,
        restart_s=restart_s,
        catch_up_s=catch_up_s,
    )
    assert same(got, expected)


@pytest.mark.parametrize(
    ("overrides", "backlog", "expected_up", "expected_down"),
    [
        # up: u 0.7+0.3 = 1.0 -> round(1000/1) = 1000; down: u 0.4 -> round(166.67 + 2500) = 2667
        pytest.param({}, False, 1000.0, 2667.0, id="§1.5 thresholds from target 0.7 +- boundary 0.3"),
        # boundary 0.2: up u 0.9 -> round(1111.1) = 1111; down u 0.5 -> round(166.67 + 2000) = 2167
        pytest.param(
            {"target_utilization_boundary": 0.2}, False, 1111.0, 2167.0, id="§1.5 thresholds, boundary 0.2"
        ),
        # utilization.max 0.8 -> round(1250) = 1250; utilization.min 0.5 -> 2167
        pytest.param(
            {"utilization_max": 0.8, "utilization_min": 0.5},
            False,
            1250.0,
            2167.0,
            id="§1.5 thresholds from utilization.max/min",
        ),
        # utilization.min 0 -> capacity(0) = +inf: never "too fast"
        pytest.param({"utilization_min": 0.0}, False, 1000.0, INF, id="§1.5 thresholds, utilization.min 0"),
        # backlog: bounds [0, 1]: up capacity(1) = 1000, down capacity(0) = +inf
        pytest.param({"utilization_max": 0.8}, True, 1000.0, INF, id="§1.5 backlog bounds [0, 1]"),
    ],
)
def test_thresholds(
    overrides: dict[str, float], backlog: bool, expected_up: float, expected_down: float
) -> None:
    up, down = thresholds(
        target_data_rate=1000.0,
        catch_up_data_rate=0.0,
        processing_backlog=backlog,
        options=options(**overrides),
        restart_s=300,
    )
    assert (same(up, expected_up), same(down, expected_down)) == (True, True)


# ---------------------------------------------------------------------------------------------- §1.6 scaling
@pytest.mark.parametrize(
    ("factor", "overrides", "expected"),
    [
        pytest.param(0.1, {}, 0.4, id="§1.6 clamp: 0.1 -> 1 - 0.6 = 0.4"),
        pytest.param(5e5, {}, 100001.0, id="§1.6 clamp: 5e5 -> 1 + 1e5"),
        pytest.param(3.0, {"scale_up_max_factor": 0.5}, 1.5, id="§1.6 clamp: 3 -> 1 + 0.5"),
    ],
)
def test_scale_factor_clamps(factor: float, overrides: dict[str, float], expected: float) -> None:
    assert same(clamp_scale_factor(factor, options(**overrides)), expected)


@pytest.mark.parametrize(
    ("raw", "current", "max_p", "vmin", "vmax", "expected"),
    [
        pytest.param(8, 4, 128, 1, 5, 5, id="§1.6 vertex.max-parallelism 5 caps 8"),
        pytest.param(8, 4, 6, 1, 200, 6, id="§1.6 max parallelism (key groups) 6 caps 8"),
        pytest.param(4, 10, 128, 5, 200, 5, id="§1.6 vertex.min-parallelism 5 floors 4"),
        pytest.param(1, 2, 128, 5, 200, 2, id="§1.6 lower limit min(current 2, min 5) = 2"),
    ],
)
def test_parallelism_limits(raw: int, current: int, max_p: int, vmin: int, vmax: int, expected: int) -> None:
    opts = options(vertex_min_parallelism=vmin, vertex_max_parallelism=vmax)
    assert limit_parallelism(raw, current=current, max_parallelism=max_p, options=opts)[0] == expected


@pytest.mark.parametrize(
    ("partitions", "max_p", "current", "target", "mode", "expected"),
    [
        # N = 128 key groups: 128//7 = 18 < 128//6 = 21 -> 7
        pytest.param(0, 128, 10, 6, "BALANCED", 7, id="§1.7 BALANCED key groups 10 -> 6 gives 7"),
        pytest.param(0, 128, 10, 6, "EVENLY_SPREAD", 8, id="§1.7 EVENLY_SPREAD 10 -> 6 gives 8"),
        pytest.param(0, 128, 10, 6, "OFF", 6, id="§1.7 OFF keeps 6"),
        pytest.param(720, 720, 4, 7, "EVENLY_SPREAD", 8, id="§1.7 EVENLY_SPREAD N=720 4 -> 7 gives 8"),
        # partitions N = 12: 8..11 neither divide nor lower 12//8 = 1; 12 divides
        pytest.param(12, 128, 4, 8, "BALANCED", 12, id="§1.7 BALANCED 12 partitions 4 -> 8 gives 12"),
        # scale-down region [9, min(10, 128)]: neither 9 nor 10 divides 128 -> keep 9
        pytest.param(0, 128, 10, 9, "EVENLY_SPREAD", 9, id="§1.7 EVENLY_SPREAD no divisor keeps 9"),
    ],
)
def test_alignment(partitions: int, max_p: int, current: int, target: int, mode: str, expected: int) -> None:
    got = align_parallelism(
        current=current,
        target=target,
        max_parallelism=max_p,
        upper_limit=max(current, 200),
        num_source_partitions=partitions,
        mode=AlignmentMode(mode),
    )
    assert got == expected


@pytest.mark.parametrize(
    ("parallelism", "tpr", "strategies", "expected_p", "expected_rate"),
    [
        # factor 1595/800 = 1.994 -> ceil(7.98) = 8; expected 800/4*8 = 1600
        pytest.param(4, 800.0, (), 8, 1600.0, id="§1.6 worked example p=4 -> 8, expected 1600"),
        # factor 1595/3000 = 0.532 -> ceil(5.32) = 6; expected 3000/10*6 = 1800
        pytest.param(10, 3000.0, (), 6, 1800.0, id="§1.6 worked example p=10 -> 6, expected 1800"),
        # HASH input: 6 aligned to 7 (BALANCED); expected after alignment 3000/10*7 = 2100
        pytest.param(10, 3000.0, ("HASH",), 7, 2100.0, id="FLINK-39743 expected rate after alignment"),
    ],
)
def test_target_parallelism_and_expected_rate(
    parallelism: int, tpr: float, strategies: tuple[str, ...], expected_p: int, expected_rate: float
) -> None:
    rec = compute_target_parallelism(
        parallelism=parallelism,
        max_parallelism=128,
        true_processing_rate=tpr,
        target_capacity=1595.0,
        scale_up_threshold=1000.0,
        scale_down_threshold=2667.0,
        options=options(),
        input_ship_strategies=strategies,
    )
    assert (rec.parallelism, same(rec.expected_processing_rate, expected_rate)) == (expected_p, True)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param(
            tuple(f"S.KafkaSourceReader.topic.orders.partition.{p}.currentOffset" for p in range(4)),
            4,
            id="§1.2 partitions: 4 Kafka partitions of one topic",
        ),
        pytest.param(
            (
                "S.kafkaCluster.east.KafkaSourceReader.topic.t.partition.0.currentOffset",
                "S.kafkaCluster.west.KafkaSourceReader.topic.t.partition.0.currentOffset",
            ),
            2,
            id="§1.2 partitions: same topic/partition on two clusters counts twice",
        ),
        pytest.param(
            tuple(f"S.PulsarConsumer.t-partition-{p}.c1.numMsgsReceived" for p in range(3)),
            3,
            id="§1.2 partitions: 3 Pulsar partitions",
        ),
        pytest.param(("busyTimeMsPerSecond",), 0, id="§1.2 partitions: neither Kafka nor Pulsar -> 0"),
    ],
)
def test_partition_counting(names: tuple[str, ...], expected: int) -> None:
    assert source_partitions(names) == expected


def test_partitions_flow_into_alignment() -> None:
    """§1.2 + §1.7: a source p=4 with TPR 800 wants 8; with 12 Kafka partitions BALANCED gives 12."""
    topo = topology({"src": 4})
    sample = JobSample(
        JobTarget(JobRef("c", "0" * 32, "j"), options()),
        0,
        0,
        topo,
        {"src": VertexSample()},
        num_source_partitions={"src": 12},
    )
    src = rates(in_rate=1000.0, out_rate=1000.0, busy_ms=1250.0, in_per_s=1000.0)  # TPR 1000/1.25 = 800
    assert evaluate_vertices(sample, {"src": src}, options())[0]["src"].target_parallelism == 12


# ---------------------------------------------------------------------------------------------- §1.8-§1.10
def scaled(before: int, after: int, tpr: float, expected: float) -> ScalingRecord:
    return ScalingRecord(0, {"src": (before, after)}, metrics={"src": (tpr, expected)})


@pytest.mark.parametrize(
    ("last", "detection", "expected_flag", "expected_p"),
    [
        # last 2 -> 4 expected TPR 400 -> 800; TPR now 420 at p=4 and 1595/420 wants 16 again:
        # gain (420 - 400) / (800 - 400) = 20/400 = 0.05 < 0.1 -> flagged (the event, always);
        # the scale-up is blocked (target stays 4) only with detection enabled
        pytest.param((2, 4, 400.0, 800.0), False, True, 16, id="§1.8 ineffective: flagged, not blocked"),
        pytest.param((2, 4, 400.0, 800.0), True, True, 4, id="§1.8 ineffective: blocked when enabled"),
        # expected 400 -> 500: gain 20 of 100 = 0.2 >= 0.1 -> effective; 1595/420 = 3.8 -> ceil(15.2) = 16
        pytest.param((2, 4, 400.0, 500.0), True, False, 16, id="§1.8 effective scale-up: scale on"),
        # the last scale-up went to 3, not to the current 4: not judged
        pytest.param((2, 3, 400.0, 800.0), True, False, 16, id="§1.8 last scale-up to another p"),
    ],
)
def test_ineffective_scale_up(
    last: tuple[int, int, float, float], detection: bool, expected_flag: bool, expected_p: int
) -> None:
    opts = options(scaling_effectiveness_detection_enabled=detection)
    src = rates(in_rate=1000.0, out_rate=1000.0, busy_ms=1000.0 * 1000 / 420, in_per_s=1000.0)  # TPR 420
    ev = evaluate(topology({"src": 4}), {"src": src}, opts, (scaled(*last),))["src"]
    assert (ev.ineffective_scale_up, ev.target_parallelism) == (expected_flag, expected_p)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        # (100 + 400 + 1600) / ((1 + 4 + 16) * 100) = 1
        pytest.param(((1, 100.0), (2, 200.0), (4, 400.0)), 1.0, id="§1.10 alpha linear = 1"),
        # (100 + 300 + 1000) / (21 * 100) = 0.6667 -> rounded up 0.67
        pytest.param(((1, 100.0), (2, 150.0), (4, 250.0)), 0.67, id="§1.10 alpha 0.6667 -> 0.67"),
        # (100 + 200 + 400) / 2100 = 0.333 -> clamped to coefficient-min 0.5
        pytest.param(((1, 100.0), (2, 100.0), (4, 100.0)), 0.5, id="§1.10 alpha clamped to min 0.5"),
        pytest.param(((1, 100.0), (2, 150.0)), 1.0, id="§1.10 fewer than min-observations 3: 1"),
    ],
)
def test_scalability_coefficient(points: tuple[tuple[int, float], ...], expected: float) -> None:
    entries = [VertexScaling(i, p, p * 2, r) for i, (p, r) in enumerate(points)]
    assert scalability_coefficient(entries, options(observed_scalability_enabled=True)) == expected


def test_scalability_coefficient_in_the_scale_factor() -> None:
    """§1.10: worked example p=4 TPR 800 with alpha 0.67: 1595/800/0.67 = 2.976 -> ceil(11.9) = 12."""
    history = (scaled(1, 2, 100.0, 200.0), scaled(2, 4, 150.0, 300.0), scaled(4, 8, 250.0, 500.0))
    src = rates(in_rate=1000.0, out_rate=1000.0, busy_ms=1250.0, in_per_s=1000.0)  # TPR 800
    ev = evaluate(topology({"src": 4}), {"src": src}, options(observed_scalability_enabled=True), history)
    assert ev["src"].target_parallelism == 12


@pytest.mark.parametrize(
    ("timestamps", "now_ms", "max_count", "max_age_h", "kept"),
    [
        # vertex v scaled 4 times, count 2: the newest two stay
        pytest.param((1, 2, 3, 4), 10, 2, 24, (3, 4), id="§1.9 trim: history.max.count 2 per vertex"),
        # age 1 h at now = H + 1: ts 0 is too old, ts H stays
        pytest.param((0, H), H + 1, 3, 1, (H,), id="§1.9 trim: history.max.age 1 h"),
        # everything too old: the newest record is always kept
        pytest.param((0, H), 5 * H, 3, 1, (H,), id="§1.9 trim: newest record always kept"),
    ],
)
def test_history_trimming(
    timestamps: tuple[int, ...], now_ms: int, max_count: int, max_age_h: int, kept: tuple[int, ...]
) -> None:
    history = [ScalingRecord(ts, {"v": (i + 1, i + 2)}) for i, ts in enumerate(timestamps)]
    opts = options(history_max_count=max_count, history_max_age=timedelta(hours=max_age_h))
    assert tuple(r.ts_ms for r in trim_history(history, now_ms, opts)) == kept


# ---------------------------------------------------------------------------------------------- unknown
@pytest.mark.parametrize(
    ("mid_in_rate", "mid_busy_ms", "expected_mid", "expected_sink"),
    [
        # mid's records-in unknown (and src's records-out, which would give mid's TDR alone, ours) ->
        # ratio NaN -> TDR NaN for mid and sink: both keep p=8 (ours)
        pytest.param(NAN, 1000.0, 8, 8, id="FLINK-39925 missing records-in -> unknown, no change"),
        # known: mid TDR 1000, TPR 1000/1.0 = 1000 at p=8; capacity 1595 -> ceil(8*1.595) = 13;
        # sink TDR 1000 (ratio 1), TPR 1000/0.1 = 10000 -> factor 0.1595 -> 0.4 floor -> ceil(3.2) = 4
        pytest.param(1000.0, 1000.0, 13, 4, id="§1.6 known rates scale mid 8 -> 13, sink 8 -> 4"),
    ],
)
def test_missing_metric_is_unknown(
    mid_in_rate: float, mid_busy_ms: float, expected_mid: int, expected_sink: int
) -> None:
    topo = topology({"src": 2, "mid": 8, "sink": 8}, (("src", "mid", "FORWARD"), ("mid", "sink", "FORWARD")))
    aggs = {
        "src": rates(in_rate=1000.0, out_rate=NAN, busy_ms=250.0, in_per_s=1000.0),
        "mid": rates(in_rate=mid_in_rate, out_rate=1000.0, busy_ms=mid_busy_ms, in_per_s=1000.0),
        "sink": rates(in_rate=1000.0, busy_ms=100.0, in_per_s=1000.0),
    }
    ev = evaluate(topo, aggs, options())
    assert (ev["mid"].target_parallelism, ev["sink"].target_parallelism) == (expected_mid, expected_sink)


# ------------------------------------------------------------------------------------------- busy-time only
@pytest.mark.parametrize(
    ("load", "expected_p", "outside"),
    [
        # ours: factor = load / 0.7; 10 * 0.35 / 0.7 = 5; 0.35 < lower 0.4 -> outside
        pytest.param(0.35, 5, True, id="ours busy-time-only: load 0.35 -> 5"),
        # 10 * 0.5 / 0.7 = 7.14 -> 8; inside [0.4, 1.0]
        pytest.param(0.5, 8, False, id="ours busy-time-only: load 0.5 -> 8, in band"),
        # 10 * 1.0 / 0.7 = 14.29 -> 15; saturated counts as outside
        pytest.param(1.0, 15, True, id="ours busy-time-only: saturated -> 15"),
        pytest.param(NAN, 10, False, id="ours busy-time-only: unknown load -> no change"),
    ],
)
def test_busy_time_only(load: float, expected_p: int, outside: bool) -> None:
    rec = compute_busy_time_parallelism(
        parallelism=10,
        max_parallelism=128,
        load=load,
        true_processing_rate=100.0,
        band=(1.0, 0.4),
        options=options(busy_time_only_enabled=True),
    )
    assert (rec.parallelism, rec.outside_band) == (expected_p, outside)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param((1.0, INF, 3.0, NAN), 2.0, id="§1.4 getAverage skips NaN and inf: (1+3)/2"),
        pytest.param((INF, INF), INF, id="§1.4 getAverage of only infinite samples: +inf"),
    ],
)
def test_get_average(values: tuple[float, ...], expected: float) -> None:
    assert same(get_average(AverageParts.of(values)), expected)
