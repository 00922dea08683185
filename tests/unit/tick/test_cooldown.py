"""scaling-interval.min / .max and Flink's adaptive-scheduler cooldown, on plain values and a fake `now`."""

from __future__ import annotations

import pytest

from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, ScalingRecord
from autoscaler.testing import make_evaluation, vertex_eval
from autoscaler.tick.decide import decide

S = 1000
T = 1_000_000 * S  # the last rescale
RESTART_S = 3  # the restart our rescale caused took 3 s


def rescaled_state() -> JobState:
    record = ScalingRecord(T, {"work": (1, 2)}, confirmed_ms=T + 10 * S, restart_duration_ms=RESTART_S * S)
    return JobState(last_rescale_ms=T, history=(record,))


def outcome(now_s, *, running_since_s=RESTART_S, in_band=False, state=None, flink_cooldown_s=0, **options):
    opts = AutoscalerOptions(enabled=True, scale_down_interval="0 s", **options)
    v = vertex_eval("work", 2, 3, outside_band=not in_band)
    ev = make_evaluation([v], options=opts, running_since_ms=T + running_since_s * S)
    d = decide(ev, state or rescaled_state(), opts, T + now_s * S, flink_cooldown_ms=flink_cooldown_s * S)
    return d.outcome, d.retry_at_ms, d.forced


def test_a_decision_inside_min_is_deferred_to_exactly_last_rescale_plus_min():
    assert outcome(60, scaling_interval_min="5 min") == (Reason.COOLDOWN_DEFERRED, T + 300 * S, False)
    assert outcome(299, scaling_interval_min="5 min")[0] is Reason.COOLDOWN_DEFERRED
    assert outcome(300, scaling_interval_min="5 min") == (Reason.SCALING, None, False)


def test_a_restart_or_failover_after_the_rescale_starts_the_cooldown_over():
    # Failover at +200 s: the job runs again since then, so min counts from there.
    assert outcome(320, running_since_s=200, scaling_interval_min="5 min") == (
        Reason.COOLDOWN_DEFERRED,
        T + 500 * S,
        False,
    )
    assert outcome(500, running_since_s=200, scaling_interval_min="5 min")[0] is Reason.SCALING


def test_a_job_never_rescaled_counts_from_its_start():
    assert outcome(100, running_since_s=0, state=JobState(), scaling_interval_min="2 min") == (
        Reason.COOLDOWN_DEFERRED,
        T + 120 * S,
        False,
    )


def test_flinks_own_cooldown_defers_like_a_longer_min():
    assert outcome(20, flink_cooldown_s=30, scaling_interval_min="10 s") == (
        Reason.COOLDOWN_DEFERRED,
        T + 30 * S,
        False,
    )
    assert outcome(20, flink_cooldown_s=30)[1] == T + 30 * S
    assert outcome(30, flink_cooldown_s=30)[0] is Reason.SCALING


@pytest.mark.parametrize(("now_s", "expected"), [(3599, Reason.IN_BAND), (3601, Reason.SCALING)])
def test_in_band_changes_are_forced_once_max_has_passed(now_s, expected):
    result = outcome(now_s, in_band=True, scaling_interval_max="1 h")
    assert result[0] is expected and result[2] is (expected is Reason.SCALING)


def test_unset_max_never_forces():
    assert outcome(10 * 3600, in_band=True)[0] is Reason.IN_BAND


def test_a_change_below_min_parallelism_change_waits_unless_forced():
    assert outcome(60, scaling_min_parallelism_change=2)[0] is Reason.IN_BAND  # 2 -> 3 is a change of 1
    assert outcome(60, scaling_min_parallelism_change=1)[0] is Reason.SCALING
    forced = outcome(7200, scaling_min_parallelism_change=2, scaling_interval_max="1 h")
    assert forced == (Reason.SCALING, None, True)


def test_a_forced_change_still_respects_the_cooldown():
    assert outcome(30, in_band=True, scaling_interval_max="10 s", scaling_interval_min="1 min")[:2] == (
        Reason.COOLDOWN_DEFERRED,
        T + 60 * S,
    )
