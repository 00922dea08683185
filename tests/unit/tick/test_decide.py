"""The decision stage on plain values and a moving `now` (no clock, no I/O)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autoscaler.model import HEAP_USAGE_RATIO, TaskManagerSample, VertexChange
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import DelayedScaleDown, JobState, PendingRescale, ScalingRecord
from autoscaler.testing import make_evaluation, vertex_eval
from autoscaler.tick.decide import decide

MIN = 60_000
OPTS = AutoscalerOptions(enabled=True)


def outcome(evaluation, state=None, options=OPTS, now_ms=0):
    d = decide(evaluation, state or JobState(), options, now_ms)
    return d.outcome, {vid: (c.current, c.target) for vid, c in d.changes.items()}


def test_scale_up_is_applied_at_once():
    ev = make_evaluation([vertex_eval("src", 1), vertex_eval("work", 1, 3)])
    assert outcome(ev) == (Reason.SCALING, {"work": (1, 3)})


def test_nothing_changes_while_every_vertex_is_in_band():
    # Reference ScalingExecutor: a recommendation inside the band is dropped when no vertex is outside.
    ev = make_evaluation([vertex_eval("work", 4, 5, outside_band=False)])
    assert outcome(ev) == (Reason.IN_BAND, {})


def test_vertex_outside_band_at_its_limit_does_not_open_the_gate_for_others():
    # The source runs at p=1 with far more capacity than needed (outside its band, cannot go lower):
    # Work's in-band recommendation must not be applied because of it.
    at_limit = vertex_eval("src", 1, 1, outside_band=True)
    ev = make_evaluation([at_limit, vertex_eval("work", 3, 4, outside_band=False)])
    assert outcome(ev) == (Reason.IN_BAND, {})


def test_in_band_vertex_changes_along_with_one_outside():
    ev = make_evaluation(
        [vertex_eval("a", 4, 5, outside_band=False), vertex_eval("b", 1, 2, outside_band=True)]
    )
    assert outcome(ev) == (Reason.SCALING, {"a": (4, 5), "b": (1, 2)})


@pytest.mark.parametrize("reason", [Reason.STABILIZING, Reason.WINDOW_NOT_FULL])
def test_not_ready_evaluation_never_scales(reason):
    ev = make_evaluation([vertex_eval("work", 1, 3)], not_ready=reason)
    assert outcome(ev) == (reason, {})


def test_pending_rescale_blocks_new_decisions():
    state = JobState(pending=PendingRescale("j", 0, {"work": 3}, {"work": 1}))
    assert outcome(make_evaluation([vertex_eval("work", 1, 3)]), state) == (Reason.RESCALE_IN_FLIGHT, {})


def test_unknown_vertex_is_never_changed():
    # A NaN true processing rate means "unknown": no decision for that vertex (FLINK-39925 done right).
    unknown = replace(vertex_eval("work", 4, 2), true_processing_rate=math.nan)
    assert outcome(make_evaluation([unknown, vertex_eval("b", 1, 2)])) == (Reason.SCALING, {"b": (1, 2)})


def test_excluded_vertex_is_skipped_but_others_scale():
    opts = AutoscalerOptions(enabled=True, vertex_exclude_ids=("work",))
    ev = make_evaluation([vertex_eval("work", 1, 3), vertex_eval("sink", 1, 2)], options=opts)
    assert outcome(ev, options=opts) == (Reason.SCALING, {"sink": (1, 2)})


def test_advisor_mode_reports_but_does_not_apply():
    opts = AutoscalerOptions(enabled=True, scaling_enabled=False)
    d = decide(make_evaluation([vertex_eval("work", 1, 3)], options=opts), JobState(), opts, 0)
    assert d.outcome is Reason.ADVISOR_MODE and not d.applies
    assert d.changes == {"work": VertexChange("work", 1, 3)}


class TestScaleDownInterval:
    """Reference DelayedScaleDown: wait scale-down.interval, then use the window's highest recommendation."""

    opts = AutoscalerOptions(enabled=True, scale_down_interval="10 min")

    def run(self, steps):
        state, results = JobState(), []
        for minute, target in steps:
            ev = make_evaluation([vertex_eval("work", 10, target)], options=self.opts)
            d = decide(ev, state, self.opts, minute * MIN)
            state = d.state
            results.append((d.outcome, {k: c.target for k, c in d.changes.items()}))
        return results

    def test_held_until_the_interval_has_passed(self):
        res = self.run([(0, 6), (5, 6), (9, 6), (10, 6)])
        assert [r[0] for r in res[:3]] == [Reason.SCALE_DOWN_DELAYED] * 3
        assert res[3] == (Reason.SCALING, {"work": 6})

    def test_uses_the_highest_recommendation_within_the_window(self):
        res = self.run([(0, 5), (4, 8), (8, 6), (10, 6)])
        assert res[3] == (Reason.SCALING, {"work": 8})

    def test_recommendations_older_than_the_interval_drop_out(self):
        res = self.run([(0, 8), (5, 6), (12, 6)])
        assert res[2] == (Reason.SCALING, {"work": 6})

    def test_recommendation_at_or_above_current_clears_the_delay(self):
        opts = self.opts
        state = JobState()
        for minute, target, outside in [(0, 6, True), (5, 10, False), (8, 6, True)]:
            ev = make_evaluation([vertex_eval("work", 10, target, outside_band=outside)], options=opts)
            d = decide(ev, state, opts, minute * MIN)
            state = d.state
        assert state.delayed_scale_down["work"].first_trigger_ms == 8 * MIN

    def flagged(self, steps, state=None):
        """Like ``run``, with each tick's band flag: (minute, target, outside band)."""
        state, results = state or JobState(), []
        for minute, target, outside in steps:
            ev = make_evaluation([vertex_eval("work", 10, target, outside_band=outside)], options=self.opts)
            d = decide(ev, state, self.opts, minute * MIN)
            state = d.state
            results.append((d.outcome, {k: c.target for k, c in d.changes.items()}))
        return results

    def test_the_gate_uses_the_flag_of_the_recommendation_it_applies(self):
        """Reference DelayedScaleDown: the window maximum (8, recommended in band) is applied, so it is
        its flag that counts: this tick's outside-band 6 does not open the gate for an in-band 8."""
        res = self.flagged([(0, 8, False), (5, 6, True), (10, 6, True)])
        assert res[2] == (Reason.IN_BAND, {})
        # Once the in-band 8 has left the window, the outside-band 6 is the maximum and applies.
        assert self.flagged([(0, 8, False), (5, 6, True), (10, 6, True), (11, 6, True)])[3] == (
            Reason.SCALING,
            {"work": 6},
        )

    def test_a_maximum_recommended_outside_the_band_applies_though_this_tick_is_inside(self):
        res = self.flagged([(0, 6, True), (10, 5, False)])
        assert res[1] == (Reason.SCALING, {"work": 6})

    @pytest.mark.parametrize(("outside_now", "expected"), [(True, Reason.SCALING), (False, Reason.IN_BAND)])
    def test_a_recommendation_from_older_state_without_a_flag_uses_this_ticks(self, outside_now, expected):
        """State written before the flags were kept decides as that version did: by this tick's flag."""
        older = JobState(delayed_scale_down={"work": DelayedScaleDown(0, ((0, 6),))})
        res = self.flagged([(10, 5, outside_now)], older)
        assert res[0][0] is expected and res[0][1] == ({"work": 6} if outside_now else {})

    def test_zero_interval_scales_down_immediately(self):
        opts = AutoscalerOptions(enabled=True, scale_down_interval="0 s")
        ev = make_evaluation([vertex_eval("work", 10, 6)], options=opts)
        assert outcome(ev, options=opts) == (Reason.SCALING, {"work": (10, 6)})


@pytest.mark.parametrize(
    ("gc_ms", "heap_used", "blocked"),
    [(900.0, 0.5, False), (math.nan, math.nan, False), (950.0, 0.5, True), (0.0, 0.99, True)],
)
def test_memory_pressure_blocks_and_nan_never_does(gc_ms, heap_used, blocked):
    opts = AutoscalerOptions(enabled=True, memory_gc_pressure_threshold=0.9, memory_heap_usage_threshold=0.95)
    tm = TaskManagerSample(gc_time_ms_per_s=gc_ms, heap_used=heap_used, heap_max=1.0)
    ev = make_evaluation([vertex_eval("work", 1, 3)], options=opts, taskmanagers=tm)
    assert (outcome(ev, options=opts)[0] is Reason.MEMORY_PRESSURE) is blocked


@pytest.mark.parametrize(
    ("current", "average", "blocked"),
    [(0.99, 0.60, False), (0.50, 0.97, True), (0.99, math.nan, True)],
    ids=["spike-over-a-calm-window", "calm-now-after-a-full-window", "nothing-windowed-uses-current"],
)
def test_heap_gate_compares_the_window_average(current, average, blocked):
    """Reference ScalingExecutor#isJobUnderMemoryPressure: HEAP_MAX_USAGE_RATIO.getAverage()."""
    opts = AutoscalerOptions(enabled=True, memory_heap_usage_threshold=0.95)
    tm = TaskManagerSample(heap_used=current, heap_max=1.0)
    ev = make_evaluation([vertex_eval("work", 1, 3)], options=opts, taskmanagers=tm)
    ev = replace(ev, custom_metrics={"": {HEAP_USAGE_RATIO: (current, average)}})
    d = decide(ev, JobState(), opts, 0)
    assert (d.outcome is Reason.MEMORY_PRESSURE) is blocked
    if blocked:
        assert ("average heap usage" in d.detail) is not math.isnan(average)


def test_vertex_change_rejects_invalid_values():
    with pytest.raises(ValueError):
        VertexChange("v", 0, 2)
    with pytest.raises(ValueError):
        VertexChange("v", 2, 2)


MONDAY_10_MS = 1_795_428_000_000  # 2026-11-23T10:00:00Z, a Monday


def test_excluded_period_reports_the_changes_with_the_reference_header():
    opts = AutoscalerOptions(enabled=True, excluded_periods=("* * 9-17 ? * MON-FRI",))
    d = decide(make_evaluation([vertex_eval("work", 1, 3)], options=opts), JobState(), opts, MONDAY_10_MS)
    assert d.outcome is Reason.EXCLUDED_PERIOD and not d.applies
    assert d.detail == (
        "Scaling execution disabled by config job.autoscaler.excluded.periods: now (2026-11-23T10:00:00Z) "
        "is in the excluded period '* * 9-17 ? * MON-FRI'"
    )
    assert d.changes == {"work": VertexChange("work", 1, 3)}


def test_excluded_period_keeps_tracking_delayed_scale_downs():
    opts = AutoscalerOptions(enabled=True, excluded_periods=("* * * ? * *",), scale_down_interval="10 min")
    ev = make_evaluation([vertex_eval("work", 10, 6)], options=opts)
    first = decide(ev, JobState(), opts, MONDAY_10_MS)
    assert first.outcome is Reason.SCALE_DOWN_DELAYED
    later = decide(ev, first.state, opts, MONDAY_10_MS + 10 * MIN)
    assert later.outcome is Reason.EXCLUDED_PERIOD
    assert later.state.delayed_scale_down["work"].first_trigger_ms == MONDAY_10_MS


def test_outside_the_excluded_period_the_scaling_applies():
    opts = AutoscalerOptions(enabled=True, excluded_periods=("* * 9-17 ? * MON-FRI",))
    saturday = MONDAY_10_MS + 5 * 24 * 60 * MIN
    assert outcome(
        make_evaluation([vertex_eval("work", 1, 3)], options=opts), options=opts, now_ms=saturday
    ) == (
        Reason.SCALING,
        {"work": (1, 3)},
    )


def test_quota_blocks_a_scale_up_that_needs_another_taskmanager():
    opts = AutoscalerOptions(enabled=True, quota_cpu=6)
    tm = TaskManagerSample(count=1, cpu_cores_per_tm=4.0, memory_per_tm=2.0**31, slots_per_tm=4.0)
    ev = make_evaluation([vertex_eval("src", 2), vertex_eval("work", 4, 6)], options=opts, taskmanagers=tm)
    d = decide(ev, JobState(), opts, 0)
    assert d.outcome is Reason.RESOURCE_QUOTA_REACHED and not d.applies
    assert (
        d.detail
        == "CPU quota reached: 6 slots need 2 TaskManagers of 4 slots (now 1) = 8 cores > quota.cpu 6"
    )
    assert d.changes == {"work": VertexChange("work", 4, 6)}


def test_quota_with_unknown_taskmanagers_never_blocks():
    opts = AutoscalerOptions(enabled=True, quota_cpu=0, quota_memory=0)
    ev = make_evaluation([vertex_eval("work", 4, 60)], options=opts)
    assert outcome(ev, options=opts) == (Reason.SCALING, {"work": (4, 60)})


def test_a_load_change_drops_the_delayed_scale_downs_of_the_old_load():
    """The window restarted where the load changed: recommendations made for the old load, or on a
    window that straddled the change, must not size the job for the new one (ours, job_window.py)."""
    pending = JobState(delayed_scale_down={"work": DelayedScaleDown(0, ((0, 6), (5_000, 3)))})
    ev = replace(
        make_evaluation([vertex_eval("work", 10, 3)], not_ready=Reason.WINDOW_NOT_FULL), load_change_ms=5_000
    )
    res = decide(ev, pending, AutoscalerOptions(enabled=True), now_ms=10_000)
    assert res.outcome is Reason.WINDOW_NOT_FULL and res.state.delayed_scale_down == {}
    assert "the offered load changed at" in res.detail
    kept = decide(replace(ev, load_change_ms=None), pending, AutoscalerOptions(enabled=True), now_ms=10_000)
    assert kept.state.delayed_scale_down == pending.delayed_scale_down  # not ready alone keeps them


def test_after_a_load_change_the_scale_down_delay_counts_from_the_change():
    """On the first decision after a load change the lower load has lasted since the first sample of it,
    so the delay counts from there (ours); otherwise from the first recommendation."""
    opts = AutoscalerOptions(enabled=True, scale_down_interval="1 min")
    ev = make_evaluation([vertex_eval("work", 4, 1)], options=opts)
    first = decide(replace(ev, level_since_ms=10 * 1000), JobState(), opts, now_ms=40 * 1000)
    assert first.outcome is Reason.SCALE_DOWN_DELAYED and "30 s left" in first.detail
    assert first.state.delayed_scale_down["work"].first_trigger_ms == 10 * 1000
    due = decide(replace(ev, level_since_ms=10 * 1000), first.state, opts, now_ms=70 * 1000)
    assert due.outcome is Reason.SCALING and {k: c.target for k, c in due.changes.items()} == {"work": 1}
    plain = decide(ev, JobState(), opts, now_ms=40 * 1000)  # no load change: the reference's delay
    assert plain.state.delayed_scale_down["work"].first_trigger_ms == 40 * 1000
    assert "60 s left" in plain.detail


class TestKeepLastPeak:
    """scale-down.keep-last-peak.enabled (ours): after a scale-up for a peak, a scale-down stops at the
    smallest size where that peak would still be in band, if the current load is in band there too."""

    opts = AutoscalerOptions(enabled=True, scale_down_interval="1 min")
    # Work was scaled 2 -> 4 for a burst that needed 3,100 rec/s of capacity to be within the band.
    history = (ScalingRecord(0, {"work": (2, 4)}, needed_capacity={"work": 3100.0}),)

    def due(self, *, scale_down_threshold: float, history=history, options=opts):
        # At 4, 1,250 rec/s per subtask, the base load recommends 2; the delay has run.
        v = replace(
            vertex_eval("work", 4, 2, tpr=5000.0, tdr=1500.0), scale_down_threshold=scale_down_threshold
        )
        state = JobState(history=history, delayed_scale_down={"work": DelayedScaleDown(0, ((0, 2, True),))})
        self.decision = decide(make_evaluation([v], options=options), state, options, 2 * MIN)
        return self.decision.outcome, {k: (c.current, c.target) for k, c in self.decision.changes.items()}

    def test_stops_where_the_peak_and_the_current_load_are_both_within_the_band(self):
        # 3 x 1,250 = 3,750 covers the 3,100 the peak needed and is within this tick's band (<= 3,800).
        assert self.due(scale_down_threshold=3800.0) == (Reason.SCALING, {"work": (4, 3)})
        assert "no lower, the load of the last scale-up stays within" in self.decision.detail

    def test_goes_to_the_recommendation_when_no_size_holds_both(self):
        # The current load would be below the band at 3 (a real step down): the recommendation.
        assert self.due(scale_down_threshold=3000.0) == (Reason.SCALING, {"work": (4, 2)})

    def test_without_a_scale_up_in_the_history_or_when_off_it_is_the_reference(self):
        assert self.due(scale_down_threshold=3800.0, history=()) == (Reason.SCALING, {"work": (4, 2)})
        off = AutoscalerOptions(enabled=True, scale_down_interval="1 min", scale_down_keep_last_peak=False)
        assert self.due(scale_down_threshold=3800.0, options=off) == (Reason.SCALING, {"work": (4, 2)})
