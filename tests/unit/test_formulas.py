"""Hand-computed cases for the reference formulas (flink-autoscaler.md §1.3-§1.6); each names its rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from autoscaler.evaluate.formulas import (
    AverageParts,
    ProcessingRates,
    RatePoints,
    VertexAggregates,
    aggregate_window,
    busy_time_avg,
    capacity,
    catch_up_rate,
    edge_data_rate,
    edge_output_ratio,
    evaluate_vertices,
    get_average,
    get_rate,
    is_processing_backlog,
    java_round,
    processing_rates,
    target_data_rate,
    thresholds,
    tpr_input_rate,
    true_processing_rate,
)
from autoscaler.model import (
    NAN,
    Edge,
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    VertexInfo,
    VertexSample,
)
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator
from autoscaler.state import ScalingRecord

INF = math.inf
DEFAULTS = AutoscalerOptions()


# ---------------------------------------------------------------------------------------------- builders
def topology(
    parallelism: Mapping[str, int], edges: list[tuple[str, str]] | None = None, max_p: int = 128, **ship: str
) -> JobTopology:
    vertices = [VertexInfo(v, v, p, max_p) for v, p in parallelism.items()]
    return JobTopology.build(
        vertices, [Edge(a, b, ship.get(f"{a}_{b}", "REBALANCE")) for a, b in edges or []]
    )


def job_sample(topo: JobTopology, options: AutoscalerOptions = DEFAULTS, **partitions: int) -> JobSample:
    target = JobTarget(JobRef("c1", "0" * 32, "job"), options)
    return JobSample(
        target, 0, 0, topo, {v: VertexSample() for v in topo.vertices}, num_source_partitions=partitions
    )


def agg(
    *,
    in_rate: float = NAN,
    out_rate: float = NAN,
    lag_rate: float = NAN,
    lag: float = NAN,
    busy_ms: float = NAN,
    in_per_s: float = NAN,
    observed: tuple[float, int] = (0.0, 0),
    acc_busy_rate: float = NAN,
    counter_busy_ms: float = NAN,
) -> VertexAggregates:
    """Aggregates whose window averages are exactly the given values."""
    busy = (0.0, 0) if math.isnan(busy_ms) else (busy_ms, 1)
    return VertexAggregates(
        samples=2,
        busy_sum=busy[0],
        busy_count=busy[1],
        accumulated_busy_rate=acc_busy_rate,
        accumulated_busy_agg_rate=counter_busy_ms,
        records_in_rate=in_rate,
        records_out_rate=out_rate,
        lag_rate=lag_rate,
        lag_latest=lag,
        records_in_per_s_avg=in_per_s,
        observed_tpr_sum=observed[0],
        observed_tpr_count=observed[1],
    )


def source(rate: float, *, lag_rate: float = 0.0, lag: float = 0.0, tpr: float = NAN) -> VertexAggregates:
    """A source with input `rate`; its busy time makes the busy-time TPR equal `tpr`."""
    busy = NAN if math.isnan(tpr) else 1000.0 * rate / tpr
    return agg(in_rate=rate, out_rate=rate, lag_rate=lag_rate, lag=lag, busy_ms=busy, in_per_s=rate)


# ---------------------------------------------------------------------------------------------- window math
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


# ---------------------------------------------------------------------------------------------- rates
@pytest.mark.parametrize(
    ("x", "expected"), [(2.5, 3.0), (-2.5, -2.0), (1595.238, 1595.0), (0.49999999999999994, 0.0), (INF, INF)]
)
def test_java_round(x: float, expected: float) -> None:
    """AutoScalerUtils uses Math.round: ties go towards +inf."""
    assert java_round(x) == expected


@pytest.mark.parametrize(
    ("in_rate", "lag_rate", "expected"),
    [(1000.0, 0.0, 1000.0), (1250.0, 750.0, 2000.0), (100.0, -300.0, 0.0), (NAN, 0.0, NAN), (10.0, NAN, NAN)],
)
def test_source_target_data_rate(in_rate: float, lag_rate: float, expected: float) -> None:
    """§1.5 TDR = max(0, getRate(IN) + getRate(LAG)); NaN is not clamped to 0 (Java Math.max)."""
    assert target_data_rate(in_rate, lag_rate) == pytest.approx(expected, nan_ok=True)


def test_edge_rate_case_1_single_input_uses_downstream_records_in() -> None:
    topo = topology({"a": 1, "b": 1}, [("a", "b")])
    aggs = {"a": agg(in_rate=100, out_rate=90), "b": agg(in_rate=80)}
    assert edge_data_rate(topo, aggs, "a", "b") == 80


def test_edge_rate_case_2_other_inputs_single_output_subtract() -> None:
    topo = topology({"a": 1, "b": 1, "c": 1}, [("a", "c"), ("b", "c")])
    aggs = {"a": agg(out_rate=999), "b": agg(out_rate=30), "c": agg(in_rate=100)}
    assert edge_data_rate(topo, aggs, "a", "c") == 70  # in(c) - out(b)


def test_edge_rate_case_3_other_input_fans_out_falls_back_to_records_out() -> None:
    topo = topology({"a": 1, "b": 1, "c": 1, "d": 1}, [("a", "c"), ("b", "c"), ("b", "d")])
    aggs = {"a": agg(out_rate=55), "b": agg(out_rate=30), "c": agg(in_rate=100)}
    assert edge_data_rate(topo, aggs, "a", "c") == 55  # out(a)


@pytest.mark.parametrize(
    ("in_rate", "edge_rate", "expected"),
    [
        (100.0, 50.0, 0.5),
        (0.0, 50.0, 0.0),  # nothing read: flatten the ratio
        (100.0, -5.0, 0.0),  # case 2 can go negative
        (NAN, 50.0, NAN),  # FLINK-39925 fixed: missing metric means unknown, not 0
        (100.0, NAN, NAN),
        (0.0, NAN, NAN),
    ],
)
def test_edge_output_ratio(in_rate: float, edge_rate: float, expected: float) -> None:
    assert edge_output_ratio(in_rate, edge_rate) == pytest.approx(expected, nan_ok=True)


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


# ---------------------------------------------------------------------------------------------- the graph
def evaluate(
    topo: JobTopology,
    aggs: Mapping[str, VertexAggregates],
    options: AutoscalerOptions = DEFAULTS,
    restart_s: float | None = None,
    **partitions: int,
) -> tuple[dict[str, Any], bool]:
    return evaluate_vertices(job_sample(topo, options, **partitions), aggs, options, restart_s)


@pytest.mark.parametrize(
    ("p", "tpr", "target", "expected_rate", "outside"),
    [(4, 800.0, 8, 1600.0, True), (10, 3000.0, 6, 1800.0, True), (2, 2000.0, 2, 2000.0, False)],
)
def test_worked_example(p: int, tpr: float, target: int, expected_rate: float, outside: bool) -> None:
    """§1.6 worked example: one source, 1000 rec/s, flat lag 0, defaults (no HASH input: no alignment)."""
    evs, backlog = evaluate(topology({"src": p}), {"src": source(1000.0, tpr=tpr)})
    ev = evs["src"]
    assert not backlog
    assert (ev.target_data_rate, ev.scale_up_threshold, ev.scale_down_threshold) == (1000, 1000, 2667)
    assert ev.true_processing_rate == pytest.approx(tpr)
    assert (ev.target_parallelism, ev.outside_band) == (target, outside)
    assert ev.expected_processing_rate == pytest.approx(expected_rate)


def test_worked_example_scale_down_applies_only_after_the_scale_down_interval() -> None:
    """§1.6 + §1.8 with defaults: p=10, TPR 3000 -> recommended 6, held for scale-down.interval (1 h)."""
    from autoscaler.decide import decide
    from autoscaler.model import JobEvaluation
    from autoscaler.reasons import Reason
    from autoscaler.state import JobState

    options = AutoscalerOptions(enabled=True)
    topo = topology({"src": 10})
    state, outcomes = JobState(), []
    for minute in (0, 30, 59, 60):
        now_ms = minute * 60_000
        sample = job_sample(topo, options)
        evs, backlog = evaluate_vertices(sample, {"src": source(1000.0, tpr=3000.0)}, options, None)
        decision = decide(JobEvaluation(sample, evs, backlog, 10, True), state, options, now_ms)
        state = decision.state
        outcomes.append((decision.outcome, {v: c.target for v, c in decision.changes.items()}))
    held = (Reason.SCALE_DOWN_DELAYED, {})
    assert outcomes == [held, held, held, (Reason.SCALING, {"src": 6})]


def test_integration_case_source_lag_growing() -> None:
    """Work does 1250 rec/s at p=1; the source reads 1250/s while lag grows 750/s: TDR 2000 -> p=3."""
    topo = topology({"src": 1, "work": 1}, [("src", "work")])  # REBALANCE: no alignment
    aggs = {
        "src": source(1250.0, lag_rate=750.0, lag=45_000.0, tpr=5000.0),
        "work": agg(in_rate=1250.0, out_rate=1250.0, busy_ms=1000.0, in_per_s=1250.0),
    }
    evs, backlog = evaluate(topo, aggs)
    work = evs["work"]
    assert not backlog  # 45000 / 1250 = 36 s of lag
    assert work.target_data_rate == pytest.approx(2000.0)
    assert work.catch_up_data_rate == pytest.approx(25.0)  # 45000 / 1800 through ratio 1
    assert work.true_processing_rate == pytest.approx(1250.0)
    assert work.scale_up_threshold == 2025  # round(25 + 2000/1.0)
    assert work.target_parallelism == 3  # ceil(round(25 + 333.3 + 2857.1) / 1250 = 2.572)
    assert work.outside_band


def test_missing_input_metric_makes_vertex_and_downstream_unknown() -> None:
    """FLINK-39925 fixed: NaN records-in of `mid` -> NaN ratio -> NaN TDR for mid and sink, no change."""
    topo = topology({"src": 2, "mid": 8, "sink": 8}, [("src", "mid"), ("mid", "sink")])
    aggs = {
        "src": source(1000.0, tpr=4000.0),
        "mid": agg(in_rate=NAN, out_rate=1000.0, busy_ms=1000.0, in_per_s=1000.0),  # 100% busy
        "sink": agg(in_rate=1000.0, busy_ms=100.0, in_per_s=1000.0),
    }
    evs, _ = evaluate(topo, aggs)
    assert evs["src"].target_data_rate == 1000.0
    for vid in ("mid", "sink"):
        ev = evs[vid]
        assert ev.unknown and math.isnan(ev.target_data_rate)
        assert (ev.target_parallelism, ev.outside_band) == (8, False)


def test_missing_vertex_aggregates_is_unknown() -> None:
    evs, _ = evaluate(topology({"src": 3}), {})
    assert evs["src"].unknown and evs["src"].target_parallelism == 3 and not evs["src"].outside_band


def test_zero_input_scales_down_by_the_max_factor() -> None:
    """§1.5: no input gives TPR = +inf, which is above any threshold: scale down by the 0.4 floor."""
    topo = topology({"src": 10})
    ev = evaluate(topo, {"src": agg(in_rate=0.0, lag_rate=0.0, lag=0.0, busy_ms=0.0, in_per_s=0.0)})[0]["src"]
    assert (ev.true_processing_rate, ev.target_data_rate, ev.outside_band) == (INF, 0.0, True)
    assert ev.target_parallelism == 4


def test_catch_up_rate_raises_target_capacity_downstream() -> None:
    """§1.5: catch-up flows downstream through the output ratio (here 2 records out per record in)."""
    topo = topology({"src": 1, "flat": 1}, [("src", "flat")])
    aggs = {
        "src": source(1000.0, lag=180_000.0, tpr=10_000.0),
        "flat": agg(in_rate=2000.0, busy_ms=500.0, in_per_s=2000.0),
    }
    evs, backlog = evaluate(topo, aggs)
    assert not backlog  # 180 s of lag < 300 s
    assert evs["src"].catch_up_data_rate == 100.0
    flat = evs["flat"]
    assert (flat.target_data_rate, flat.catch_up_data_rate) == (2000.0, 200.0)
    # target capacity round(200 + 2000*300/1800 + 2000/0.7) = 3390; TPR 4000 -> ceil(0.8475) = 1
    assert flat.scale_up_threshold == 2200 and flat.true_processing_rate == 4000.0
    assert flat.target_parallelism == 1


def test_backlog_flag_relaxes_bounds_for_every_vertex() -> None:
    """§1.5: a source with lag > 300 s of input puts the whole job in backlog: bounds [0, 1]."""
    topo = topology({"src": 2, "work": 2}, [("src", "work")])
    aggs = {
        "src": source(100.0, lag=60_000.0, tpr=1000.0),  # 600 s of lag
        "work": agg(in_rate=100.0, busy_ms=50.0, in_per_s=100.0),  # TPR 2000, far above the TDR
    }
    evs, backlog = evaluate(topo, aggs)
    assert backlog
    work = evs["work"]
    assert work.scale_down_threshold == INF and not work.outside_band  # never "too fast" in backlog
    assert work.scale_up_threshold == round(100 + 60_000 / 1800)


def test_observed_tpr_switch_at_vertex_level() -> None:
    """§1.5: the observed TPR (min 2 observations) replaces a busy-time TPR more than 15% above it."""
    topo = topology({"src": 1})
    base = {
        "in_rate": 1000.0,
        "lag_rate": 0.0,
        "lag": 0.0,
        "busy_ms": 250.0,
        "in_per_s": 1000.0,
    }  # busy TPR 4000
    assert evaluate(topo, {"src": agg(**base, observed=(3000.0, 1))})[0]["src"].true_processing_rate == 4000
    assert evaluate(topo, {"src": agg(**base, observed=(6000.0, 2))})[0]["src"].true_processing_rate == 3000
    min3 = AutoscalerOptions(observed_tpr_min_observations=3)
    assert (
        evaluate(topo, {"src": agg(**base, observed=(6000.0, 2))}, min3)[0]["src"].true_processing_rate
        == 4000
    )


def test_restart_time_override_and_avg_aggregator() -> None:
    """§1.9: a tracked restart time replaces restart.time in the restart catch-up term."""
    topo = topology({"src": 4})
    a = source(1000.0, tpr=800.0)
    assert evaluate(topo, {"src": a}, restart_s=0)[0]["src"].scale_down_threshold == 2500
    avg = AutoscalerOptions(busy_time_aggregator="AVG")
    ev = evaluate(topo, {"src": agg(in_rate=1000.0, lag_rate=0, lag=0, acc_busy_rate=4000.0)}, avg)[0]["src"]
    assert (ev.load, ev.true_processing_rate) == (1.0, 1000.0)  # 4000 ms/s over 4 subtasks = 100% busy


def test_alignment_uses_partitions_and_hash_inputs() -> None:
    """§1.7 BALANCED: N=128 key groups for a HASH input; a source with partitions aligns to them."""
    topo = topology({"src": 4, "agg": 10}, [("src", "agg")], max_p=128, src_agg="HASH")
    aggs = {
        "src": source(1000.0, tpr=800.0),  # p=4 -> target 8; N=12 partitions: 8..11 fail, 12 divides
        "agg": agg(in_rate=1000.0, busy_ms=1000 / 3, in_per_s=1000.0),  # TPR 3000 at p=10 -> target 6 -> 7
    }
    evs, _ = evaluate(topo, aggs, src=12)
    assert evs["agg"].target_parallelism == 7
    assert evs["agg"].expected_processing_rate == pytest.approx(3000.0 / 10 * 7)  # after alignment
    assert evs["src"].target_parallelism == 12
    off = AutoscalerOptions(parallelism_alignment_mode="OFF")
    evs, _ = evaluate(topo, aggs, off, src=12)
    assert (evs["src"].target_parallelism, evs["agg"].target_parallelism) == (8, 6)


# ---------------------------------------------------------------------------------------------- counter rates
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


def test_counter_path_stays_consistent_when_the_meter_lags_a_load_change() -> None:
    """The load doubled 30 s ago: the 60 s meter shows 1500 but the gauge already 1.0 busy.

    Meter path: TPR = 1500 / 1.0 = 1500 (the gauge has caught up, the meter has not): an under-estimate.
    Counter path over the same window: 1000 rec/s in at 500 ms/s busy -> TPR 2000, the real capacity.
    """
    topo = topology({"src": 1})
    a = agg(in_rate=1000.0, lag_rate=0.0, lag=0.0, busy_ms=1000.0, in_per_s=1500.0, counter_busy_ms=500.0)
    counters = evaluate(topo, {"src": a})[0]["src"]
    assert (counters.true_processing_rate, counters.load, counters.rates_from_counters) == (2000.0, 0.5, True)
    meters = evaluate(topo, {"src": a}, AutoscalerOptions(prefer_counter_rates=False))[0]["src"]
    assert (meters.true_processing_rate, meters.load, meters.rates_from_counters) == (1500.0, 1.0, False)


# ------------------------------------------------------------------------------------------- busy-time only
def test_busy_time_only_ignores_a_misleading_output_ratio() -> None:
    """FLINK-38538: `mid` is 100% busy but reads little of what the source reads (ratio 0.01).

    Reference: TDR(mid) = 1000 * 0.01 = 10; TPR = 10 / 1.0 = 10; capacity round(10*300/1800 + 10/0.7)
    = round(1.67 + 14.29) = 16 -> factor 1.6 -> 8 * 1.6 = 12.8 -> 13. Busy-time only: factor 1.0 / 0.7
    = 1.4286 -> ceil(11.43) = 12, sized on its own load and input rate whatever the ratio says.
    With the ratio 0 (nothing seen downstream) the reference would scale mid down; busy-time only not.
    """
    topo = topology({"src": 2, "mid": 8}, [("src", "mid")])
    aggs = {
        "src": source(1000.0, tpr=4000.0),
        "mid": agg(in_rate=10.0, out_rate=10.0, busy_ms=1000.0, in_per_s=10.0),
    }
    only = AutoscalerOptions(busy_time_only_enabled=True)
    mid = evaluate(topo, aggs, only)[0]["mid"]
    assert (mid.target_parallelism, mid.outside_band, mid.load) == (12, True, 1.0)
    assert (mid.target_data_rate, mid.catch_up_data_rate) == (10.0, 0.0)  # its own input, no catch-up
    assert (mid.scale_up_threshold, mid.scale_down_threshold) == (10.0, pytest.approx(25.0))  # 10/1, 10/0.4
    reference = evaluate(topo, aggs)[0]["mid"]
    assert (reference.target_parallelism, reference.outside_band) == (13, False)  # TPR 10 == threshold 10
    zero = {**aggs, "mid": agg(in_rate=0.0, out_rate=0.0, busy_ms=1000.0, in_per_s=0.0)}
    assert evaluate(topo, zero)[0]["mid"].target_parallelism == 4  # reference: TPR inf -> 0.4 floor
    assert evaluate(topo, zero, only)[0]["mid"].target_parallelism == 12


@pytest.mark.parametrize(
    ("busy_ms", "target", "outside"),
    [
        (350.0, 5, True),  # load 0.35 < 0.4: 10 * 0.35/0.7 = 5
        (500.0, 8, False),  # 10 * 0.714 = 7.14 -> 8, inside [0.4, 1.0]
        (700.0, 10, False),  # exactly on target
        (1000.0, 15, True),  # saturated counts as outside even with upper 1.0: ceil(14.29) = 15
        (NAN, 10, False),  # unknown load: no change
    ],
)
def test_busy_time_only_band_and_factor(busy_ms: float, target: int, outside: bool) -> None:
    only = AutoscalerOptions(busy_time_only_enabled=True)
    ev = evaluate(
        topology({"v": 10}), {"v": agg(in_rate=100.0, lag_rate=0.0, lag=0.0, busy_ms=busy_ms)}, only
    )
    v = ev[0]["v"]
    assert (v.target_parallelism, v.outside_band) == (target, outside)


def test_busy_time_only_backlog_bounds() -> None:
    """While the job processes backlog the band is [0, 1] here too: a quiet vertex is not 'too fast'."""
    topo = topology({"src": 2, "work": 10}, [("src", "work")])
    aggs = {
        "src": source(100.0, lag=60_000.0, tpr=1000.0),  # 600 s of lag: backlog
        "work": agg(in_rate=100.0, busy_ms=100.0, in_per_s=100.0),
    }
    work = evaluate(topo, aggs, AutoscalerOptions(busy_time_only_enabled=True))[0]["work"]
    assert not work.outside_band and work.scale_down_threshold == INF
    assert work.target_parallelism == 4  # 10 * 0.1/0.7 = 1.43 -> factor clamped to 0.4


# ---------------------------------------------------------------------------------------------- history rules
def scaled(before: int, after: int, tpr: float, expected: float, vid: str = "src") -> ScalingRecord:
    return ScalingRecord(0, {vid: (before, after)}, metrics={vid: (tpr, expected)})


def test_ineffective_scale_up_is_flagged_and_blocked_only_when_enabled() -> None:
    """§1.8: p 2 -> 4 promised TPR 400 -> 800; now 420 at p=4 and still short: 20/400 = 0.05 < 0.1."""
    topo = topology({"src": 4})
    a = source(1000.0, tpr=420.0)  # target capacity 1595 -> factor 3.8 -> 16: another scale-up
    history = [scaled(2, 4, 400.0, 800.0)]
    flagged = evaluate_vertices(job_sample(topo), {"src": a}, DEFAULTS, None, history)[0]["src"]
    assert flagged.ineffective_scale_up and flagged.target_parallelism == 16  # reported, not blocked
    on = AutoscalerOptions(scaling_effectiveness_detection_enabled=True)
    blocked = evaluate_vertices(job_sample(topo, on), {"src": a}, on, None, history)[0]["src"]
    assert blocked.ineffective_scale_up and blocked.target_parallelism == 4
    assert blocked.expected_processing_rate == 420.0 and blocked.outside_band
    effective = [scaled(2, 4, 400.0, 500.0)]  # promised +100, got +20: 0.2 >= 0.1
    ok = evaluate_vertices(job_sample(topo, on), {"src": a}, on, None, effective)[0]["src"]
    assert not ok.ineffective_scale_up and ok.target_parallelism == 16


def test_ineffective_check_only_guards_further_scale_ups() -> None:
    """A scale-down recommendation after an ineffective scale-up is not flagged (reference order)."""
    topo = topology({"src": 4})
    history = [scaled(2, 4, 400.0, 800.0)]
    on = AutoscalerOptions(scaling_effectiveness_detection_enabled=True)
    down = evaluate_vertices(job_sample(topo, on), {"src": source(1000.0, tpr=3000.0)}, on, None, history)
    assert not down[0]["src"].ineffective_scale_up and down[0]["src"].target_parallelism == 3


def test_scalability_coefficient_divides_the_scale_factor() -> None:
    """§1.10: alpha 0.67 from history; factor 1595/800 = 1.994 / 0.67 = 2.976 -> ceil(11.9) = 12 (not 8)."""
    topo = topology({"src": 4})
    history = [scaled(1, 2, 100.0, 200.0), scaled(2, 4, 150.0, 300.0), scaled(4, 8, 250.0, 500.0)]
    on = AutoscalerOptions(observed_scalability_enabled=True)
    ev = evaluate_vertices(job_sample(topo, on), {"src": source(1000.0, tpr=800.0)}, on, None, history)
    assert (ev[0]["src"].scalability_coefficient, ev[0]["src"].target_parallelism) == (0.67, 12)
    off = evaluate_vertices(job_sample(topo), {"src": source(1000.0, tpr=800.0)}, DEFAULTS, None, history)
    assert (off[0]["src"].scalability_coefficient, off[0]["src"].target_parallelism) == (1.0, 8)
