"""Hand-computed cases for the graph evaluation (flink-autoscaler.md §1.5-§1.10); each names its rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from formula_builders import DEFAULTS, INF, agg, job_sample, source, topology

from autoscaler.evaluate.oracle.formulas import (
    VertexAggregates,
    evaluate_vertices,
)
from autoscaler.model import (
    NAN,
    JobTopology,
)
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import ScalingRecord


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
    from autoscaler.model import JobEvaluation
    from autoscaler.reasons import Reason
    from autoscaler.state import JobState
    from autoscaler.tick.decide import decide

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
    """FLINK-39925 fixed: NaN records-in of `mid` -> NaN ratio -> NaN TDR for mid and sink, no change.

    The source's records-out is unmeasured too: measured, it alone would give mid's TDR (ours, the edge
    carries all the source emits), and only the sink, behind mid's unknown ratio, would be unknown.
    """
    topo = topology({"src": 2, "mid": 8, "sink": 8}, [("src", "mid"), ("mid", "sink")])
    aggs = {
        "src": replace(source(1000.0, tpr=4000.0), records_out_rate=NAN),
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
        "src": replace(source(1000.0, lag=180_000.0, tpr=10_000.0), records_out_rate=2000.0),
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


def test_with_counter_rates_the_observed_tpr_only_stands_in_for_an_unknown_busy_tpr() -> None:
    """Ours: a back-pressured source right after a step up. Its counters say 1250 rec/s at 12.5 ms/s
    busy (TPR 100000); the observed TPR divides the ramping 60 s meter by the ramping back-pressure
    gauge and reads ~2000. With counter rates the busy TPR stands; with meters the reference rule."""
    topo = topology({"src": 1})
    backpressured = {"in_rate": 1250.0, "lag_rate": 2000.0, "lag": 0.0, "in_per_s": 1000.0}
    a = agg(**backpressured, counter_busy_ms=12.5, busy_ms=500.0, observed=(4000.0, 2))
    assert evaluate(topo, {"src": a})[0]["src"].true_processing_rate == pytest.approx(100000.0)
    meters = AutoscalerOptions(prefer_counter_rates=False)
    assert evaluate(topo, {"src": a}, meters)[0]["src"].true_processing_rate == 2000.0
    unknown = agg(**{**backpressured, "in_rate": 0.0}, counter_busy_ms=0.0, observed=(4000.0, 2))
    assert evaluate(topo, {"src": unknown})[0]["src"].true_processing_rate == 2000.0  # busy TPR inf


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
        "src": replace(source(1000.0, tpr=4000.0), records_out_rate=10.0),  # it emits 1 in 100
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
    assert flagged.scale_up_gain == (400.0, 20.0)  # (expected, actual) increase: what the event states
    on = AutoscalerOptions(scaling_effectiveness_detection_enabled=True)
    blocked = evaluate_vertices(job_sample(topo, on), {"src": a}, on, None, history)[0]["src"]
    assert blocked.ineffective_scale_up and blocked.target_parallelism == 4
    assert blocked.expected_processing_rate == 420.0 and blocked.outside_band
    effective = [scaled(2, 4, 400.0, 500.0)]  # promised +100, got +20: 0.2 >= 0.1
    ok = evaluate_vertices(job_sample(topo, on), {"src": a}, on, None, effective)[0]["src"]
    assert not ok.ineffective_scale_up and ok.target_parallelism == 16 and ok.scale_up_gain is None


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
