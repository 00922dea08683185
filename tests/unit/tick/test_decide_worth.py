"""The "worth a restart" gate (``cost.enabled``): a change the band asks for is made only when it costs
less than waiting (``autoscaler/foresight/worth.py``), and the decision says both costs."""

from __future__ import annotations

import math
from datetime import timedelta

from autoscaler.foresight.forecast import Forecast
from autoscaler.model import JobEvaluation, VertexEvaluation
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState
from autoscaler.state.model import DelayedScaleDown, Recommendation
from autoscaler.testing import make_sample, make_topology, vertex_eval
from autoscaler.tick.decide import decide, queue_of

HOUR_MS = 3_600_000


def evaluation(work: VertexEvaluation, options: AutoscalerOptions, src_rate: float = 2000.0) -> JobEvaluation:
    """src (2 subtasks, never the bottleneck) -> work, offered ``src_rate`` rec/s."""
    src = vertex_eval("src", 2, tpr=10 * src_rate, tdr=src_rate)
    topology = make_topology({"src": 2, "work": work.parallelism}, [("src", "work", "HASH")])
    sample = make_sample(topology, options=options)
    return JobEvaluation(sample, {"src": src, "work": work}, False, 10, True, restart_time_s=10.0)


def options(**kwargs: object) -> AutoscalerOptions:
    """No scale-down delay: a scale-down is decided on its first tick."""
    return AutoscalerOptions(enabled=True, scale_down_interval=timedelta(0), **kwargs)  # type: ignore[arg-type]


def test_the_queue_is_the_bottleneck_now_and_at_the_targets() -> None:
    e = evaluation(vertex_eval("work", 2, 3, tpr=2500, tdr=2000), options())
    q = queue_of(e, {"work": 3})
    assert q is not None
    assert (q.rate, q.capacity_now, q.capacity_then) == (2000, 2500, 3750)
    assert (q.slots_now, q.slots_then) == (2, 3)


def test_off_by_default_the_band_decides_as_before() -> None:
    e = evaluation(vertex_eval("work", 2, 3, tpr=2500, tdr=2000), options())
    d = decide(e, JobState(), e.sample.target.options, HOUR_MS)
    assert d.outcome is Reason.SCALING and "pays for itself" not in d.detail


def test_a_scale_up_that_buys_nothing_is_held_as_not_worth_it_with_both_costs() -> None:
    opts = options(cost_enabled=True)
    e = evaluation(vertex_eval("work", 2, 3, tpr=2500, tdr=2000), opts)
    d = decide(e, JobState(), opts, HOUR_MS)
    assert d.outcome is Reason.NOT_WORTH_IT
    assert d.changes == {}
    assert "does not pay for itself" in d.detail
    assert "changing now costs" in d.detail and "waiting costs" in d.detail


def test_a_scale_up_for_a_job_behind_its_input_is_made_and_says_why() -> None:
    opts = options(cost_enabled=True)
    e = evaluation(vertex_eval("work", 2, 3, tpr=1800, tdr=2000), opts)
    d = decide(e, JobState(), opts, HOUR_MS)
    assert d.outcome is Reason.SCALING and d.changes["work"].target == 3
    assert "pays for itself" in d.detail and "waiting costs" in d.detail


def test_a_scale_down_pays_over_a_long_horizon_and_not_over_a_short_one() -> None:
    work = vertex_eval("work", 4, 2, tpr=10_000, tdr=2000)
    long = options(cost_enabled=True, cost_horizon=timedelta(minutes=30))
    assert decide(evaluation(work, long), JobState(), long, HOUR_MS).outcome is Reason.SCALING
    short = options(cost_enabled=True, cost_horizon=timedelta(minutes=2))
    assert decide(evaluation(work, short), JobState(), short, HOUR_MS).outcome is Reason.NOT_WORTH_IT


def test_the_horizon_lasts_at_least_until_the_next_rescale_could_be_made() -> None:
    """Two minutes of horizon would not pay for the scale-down; scaling-interval.min of an hour makes the
    change's savings last that long."""
    work = vertex_eval("work", 4, 2, tpr=10_000, tdr=2000)
    opts = options(
        cost_enabled=True, cost_horizon=timedelta(minutes=2), scaling_interval_min=timedelta(hours=1)
    )
    assert decide(evaluation(work, opts), JobState(), opts, 2 * HOUR_MS).outcome is Reason.SCALING


def test_a_change_forced_by_the_max_interval_is_not_weighed() -> None:
    opts = options(cost_enabled=True, scaling_interval_max=timedelta(minutes=10))
    work = vertex_eval("work", 2, 3, outside_band=False, tpr=2500, tdr=2000)
    d = decide(evaluation(work, opts), JobState(), opts, HOUR_MS)
    assert d.outcome is Reason.SCALING and d.forced


def test_a_job_whose_rates_cannot_be_priced_is_not_held_for_it() -> None:
    """Known enough for the band, but no vertex with both a capacity and a load: the gate stands aside."""
    opts = options(cost_enabled=True)
    work = vertex_eval("work", 2, 3, tpr=math.nan, tdr=2000)
    e = evaluation(work, opts)
    e = JobEvaluation(
        e.sample,
        {"src": vertex_eval("src", 2, tpr=math.nan, tdr=2000), "work": work},
        False,
        10,
        True,
        restart_time_s=10.0,
    )
    assert queue_of(e, {"work": 3}) is None
    assert decide(e, JobState(), opts, HOUR_MS).outcome is not Reason.NOT_WORTH_IT


def _forecast(now_ms: int, peak_in_ms: int, factor: float = 2.0) -> Forecast:
    """A daily forecast made now: a peak ``factor`` times the level of 2,000 rec/s, ``peak_in_ms`` ahead."""
    return Forecast(2000.0 * factor, 2000.0, now_ms, now_ms + peak_in_ms, 3_600_000, 0.95, "daily")


def test_a_foreseen_peak_sizes_an_in_band_job_ahead_of_it_when_it_is_near() -> None:
    """Work keeps up now (in band, nothing proposed) but not at twice the load: sized for the peak that
    is here; the decision says it was sized ahead, for which peak."""
    opts = options(cost_enabled=True)
    work = vertex_eval("work", 2, tpr=3000, tdr=2000)  # 0.67 busy: in band
    e = evaluation(work, opts)
    assert decide(e, JobState(), opts, HOUR_MS).outcome is Reason.IN_BAND
    d = decide(e, JobState(), opts, HOUR_MS, forecast=_forecast(HOUR_MS, 0))
    assert d.outcome is Reason.SCALING
    assert d.changes["work"].target > 2  # 4,000 rec/s at utilization 0.7 of 1,500 per subtask: 4
    assert "sized ahead for the forecast peak of 4000 rec/s (daily, confidence 0.95)" in d.detail
    assert d.forecast is not None


def test_a_load_partway_up_a_foreseen_rise_is_sized_for_the_peak_not_beyond_it() -> None:
    """The forecast rose from a level of 2,000 rec/s to a peak of 4,000; the load is already at 3,000
    (the level, the newest closed buckets' median, is behind it). Work is sized as the band sizes it at
    4,000 rec/s, the rate the forecast foresees (6 subtasks), not for 3,000 x 2 = 6,000 (8)."""
    opts = options(cost_enabled=True)
    work = vertex_eval("work", 3, tpr=3600, tdr=3000)  # 0.83 busy: in band
    e = evaluation(work, opts, src_rate=3000.0)
    d = decide(e, JobState(), opts, HOUR_MS, forecast=_forecast(HOUR_MS, 0))
    at_peak = evaluation(vertex_eval("work", 3, 6, tpr=3600, tdr=4000), opts, src_rate=4000.0)
    assert decide(at_peak, JobState(), opts, HOUR_MS).changes["work"].target == 6
    assert d.outcome is Reason.SCALING and d.changes["work"].target == 6, d.detail
    above = decide(e, JobState(), opts, HOUR_MS, forecast=_forecast(HOUR_MS, 0, factor=1.4))
    assert above.outcome is Reason.IN_BAND, "a peak of 2,800 below the load now asks for nothing"


def test_a_foreseen_peak_far_ahead_is_waited_for() -> None:
    opts = options(cost_enabled=True)
    e = evaluation(vertex_eval("work", 2, tpr=3000, tdr=2000), opts)
    d = decide(e, JobState(), opts, HOUR_MS, forecast=_forecast(HOUR_MS, 25 * 60_000))
    assert d.outcome is Reason.NOT_WORTH_IT and "changing now costs" in d.detail


def test_a_forecast_never_scales_a_job_down_and_is_not_read_without_cost_enabled() -> None:
    off = options()
    e = evaluation(vertex_eval("work", 2, tpr=3000, tdr=2000), off)
    assert decide(e, JobState(), off, HOUR_MS, forecast=_forecast(HOUR_MS, 0)).outcome is Reason.IN_BAND
    on = options(cost_enabled=True)
    falling = Forecast(1000.0, 2000.0, HOUR_MS, HOUR_MS, 3_600_000, 0.95, "daily")  # a "decline"
    e = evaluation(vertex_eval("work", 2, tpr=3000, tdr=2000), on)
    assert decide(e, JobState(), on, HOUR_MS, forecast=falling).outcome is Reason.IN_BAND


def test_the_decision_carries_both_costs_as_values_for_explain() -> None:
    """Held or made, a weighed change's decision carries the weighing itself (explain shows its fields,
    not its text); a forced change and the gate switched off carry none."""
    opts = options(cost_enabled=True)
    held = decide(evaluation(vertex_eval("work", 2, 3, tpr=2500, tdr=2000), opts), JobState(), opts, HOUR_MS)
    assert held.weighing is not None and not held.weighing.worth_it
    assert held.weighing.change.total >= held.weighing.wait.total and held.weighing.change.restarts == 1
    assert held.weighing.text() in held.detail
    made = decide(evaluation(vertex_eval("work", 2, 3, tpr=1800, tdr=2000), opts), JobState(), opts, HOUR_MS)
    assert made.weighing is not None and made.weighing.worth_it and made.weighing.wait.lag_seconds > 0
    off = options()
    plain = decide(evaluation(vertex_eval("work", 2, 3, tpr=1800, tdr=2000), off), JobState(), off, HOUR_MS)
    assert plain.outcome is Reason.SCALING and plain.weighing is None


def _lower_since(minutes_ago: int, now_ms: int, target: int = 3) -> JobState:
    """Work's scale-down to ``target`` asked for since ``minutes_ago`` (its delay long over)."""
    since = now_ms - minutes_ago * 60_000
    pending = DelayedScaleDown(since, (Recommendation(since, target, True),))
    return JobState(delayed_scale_down={"work": pending})


def _dropped() -> tuple[AutoscalerOptions, JobEvaluation, int]:
    """A 5-min cost.horizon, and Work at 4 recommended 3 (a slot saved) at 2,000 rec/s, two hours in."""
    opts = AutoscalerOptions(
        enabled=True,
        cost_enabled=True,
        cost_horizon=timedelta(minutes=5),
        scale_down_interval=timedelta(minutes=1),
    )
    return opts, evaluation(vertex_eval("work", 4, 3, tpr=10_000, tdr=2000), opts), 2 * HOUR_MS


def test_a_scale_down_held_while_the_drop_is_new_pays_once_the_lower_load_has_lasted() -> None:
    """One slot saved does not repay a restart over 5 minutes; a load that has stayed low for 40
    minutes is priced as lasting 45 (cost.horizon + how long it has lasted), and the slot pays."""
    opts, e, now = _dropped()
    new = decide(e, _lower_since(2, now), opts, now)
    assert new.outcome is Reason.NOT_WORTH_IT and "over 7 min" in new.detail
    lasted = decide(e, _lower_since(40, now), opts, now)
    assert lasted.outcome is Reason.SCALING and lasted.changes["work"].target == 3
    assert "over 45 min" in lasted.detail


def test_a_foreseen_rise_keeps_a_lasting_lower_load_priced_over_the_horizon_alone() -> None:
    """The history foresees the load coming back: however long it has been low, the scale-down is
    priced over cost.horizon (with the rise), not as a load that will last."""
    opts, e, now = _dropped()
    rise = _forecast(now, 4 * 60_000, factor=1.2)
    d = decide(e, _lower_since(40, now), opts, now, forecast=rise)
    assert d.outcome is Reason.NOT_WORTH_IT and "over 5 min" in d.detail
