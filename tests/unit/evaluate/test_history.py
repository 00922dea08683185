"""What past scalings feed back into the evaluator (flink-autoscaler.md §1.8-§1.10), on plain records."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.evaluate.history import (
    VERIFICATION_THRESHOLD,
    VertexScaling,
    ineffective_scale_up,
    is_ineffective_scale_up,
    last_scaling,
    needed_capacity,
    record_metrics,
    restart_time_s,
    scalability_coefficient,
    trim_history,
    verify_last_scaling,
    verify_scaling,
    vertex_history,
)
from autoscaler.model import JobEvaluation, ScaleUpGain
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import ScalingRecord, ScalingVerification, VertexVerification
from autoscaler.testing import make_evaluation, vertex_eval

NAN = math.nan
H = 3_600_000  # ms
TRACKING = AutoscalerOptions(restart_time_tracking_enabled=True)


def rec(
    ts_ms: int,
    changes: dict[str, tuple[int, int]],
    *,
    restart_ms: int | None = None,
    metrics: dict[str, tuple[float, float]] | None = None,
) -> ScalingRecord:
    return ScalingRecord(ts_ms, changes, restart_duration_ms=restart_ms, metrics=metrics or {})


# ---------------------------------------------------------------------------------------------- restart time
def test_restart_time_is_the_configured_one_without_tracking() -> None:
    history = [rec(0, {"v": (1, 2)}, restart_ms=90_000)]
    assert restart_time_s(history, AutoscalerOptions()) == 300.0  # restart.time 5 min
    assert restart_time_s([], TRACKING) == 300.0  # tracking on, nothing measured yet
    assert restart_time_s([rec(0, {"v": (1, 2)})], TRACKING) == 300.0  # not confirmed yet


def test_restart_time_tracked_is_the_max_in_whole_seconds_capped_by_the_limit() -> None:
    history = [rec(0, {"v": (1, 2)}, restart_ms=90_500), rec(1, {"v": (2, 3)}, restart_ms=30_000)]
    assert restart_time_s(history, TRACKING) == 90.0  # max(90.5 s, 30 s), Duration#toSeconds
    capped = AutoscalerOptions(
        restart_time_tracking_enabled=True, restart_time_tracking_limit=timedelta(seconds=60)
    )
    assert restart_time_s(history, capped) == 60.0
    assert restart_time_s([rec(0, {"v": (1, 2)}, restart_ms=0)], TRACKING) == 0.0  # a measured 0 counts


# ---------------------------------------------------------------------------------------------- trimming
def test_trim_keeps_the_newest_count_per_vertex() -> None:
    """§1.9 history.max.count is per vertex: a rarely scaled vertex keeps its old entry."""
    history = [
        rec(1, {"a": (1, 2), "b": (1, 2)}),
        rec(2, {"a": (2, 3)}),
        rec(3, {"a": (3, 4)}),
        rec(4, {"a": (4, 5)}),
    ]
    trimmed = trim_history(history, 10, AutoscalerOptions(history_max_count=2))
    assert [r.ts_ms for r in trimmed] == [1, 3, 4]
    assert dict(trimmed[0].changes) == {"b": (1, 2)}  # a's oldest entries are gone, b's only entry stays
    assert [e.new for e in vertex_history(trimmed, "a")] == [4, 5]


def test_trim_drops_old_entries_but_always_keeps_the_newest_record() -> None:
    history = [rec(0, {"a": (1, 2)}, restart_ms=5_000), rec(H, {"a": (2, 3)}, restart_ms=9_000)]
    options = AutoscalerOptions(history_max_age=timedelta(hours=1))
    assert [r.ts_ms for r in trim_history(history, H + 1, options)] == [H]
    assert [r.ts_ms for r in trim_history(history, 5 * H, options)] == [H]  # too old, but the newest
    assert trim_history(history, H, options) == tuple(history)  # exactly max.age old still counts
    none = trim_history(history, H, AutoscalerOptions(history_max_count=0))
    assert len(none) == 1 and dict(none[0].changes) == {} and none[0].restart_duration_ms == 9_000
    assert trim_history([], 0, options) == ()


def test_trim_keeps_metrics_in_step_with_changes() -> None:
    history = [rec(1, {"a": (1, 2), "b": (1, 2)}, metrics={"a": (1.0, 2.0), "b": (3.0, 6.0)})]
    history.append(rec(2, {"a": (2, 3)}, metrics={"a": (2.0, 3.0)}))
    (first, second) = trim_history(history, 3, AutoscalerOptions(history_max_count=1))
    assert dict(first.metrics) == {"b": (3.0, 6.0)} and dict(second.metrics) == {"a": (2.0, 3.0)}


def test_trim_keeps_needed_capacity_in_step_with_changes() -> None:
    history = [ScalingRecord(1, {"a": (1, 2), "b": (1, 2)}, needed_capacity={"a": 10.0, "b": 20.0})]
    history.append(ScalingRecord(2, {"a": (2, 3)}, needed_capacity={"a": 30.0}))
    (first, second) = trim_history(history, 3, AutoscalerOptions(history_max_count=1))
    assert dict(first.needed_capacity) == {"b": 20.0} and dict(second.needed_capacity) == {"a": 30.0}


def test_needed_capacity_is_the_scale_up_threshold_of_the_vertices_scaled_up() -> None:
    up = replace(vertex_eval("a", 2, 4), scale_up_threshold=3100.0)
    down = replace(vertex_eval("b", 3, 2), scale_up_threshold=900.0)
    unknown = vertex_eval("c", 1, 2)  # NaN threshold: nothing to keep
    evaluation = make_evaluation([up, down, unknown])
    changes = {"a": (2, 4), "b": (3, 2), "c": (1, 2)}
    assert needed_capacity(evaluation, changes) == {"a": 3100.0}


# ---------------------------------------------------------------------------------------------- per vertex
def test_vertex_history_reads_changes_and_metrics() -> None:
    history = [rec(1, {"a": (1, 2)}, metrics={"a": (100.0, 200.0)}), rec(2, {"b": (4, 2)})]
    assert vertex_history(history, "a") == (VertexScaling(1, 1, 2, 100.0, 200.0),)
    (b,) = vertex_history(history, "b")
    assert (b.current, b.new, b.scaled_up) == (4, 2, False) and math.isnan(b.true_processing_rate)
    assert last_scaling(history, "c") is None


@pytest.mark.parametrize(
    ("last", "parallelism", "tpr_now", "expected"),
    [
        (VertexScaling(0, 2, 4, 100.0, 200.0), 4, 105.0, True),  # 5 of 100 gained: 0.05 < 0.1
        (VertexScaling(0, 2, 4, 100.0, 200.0), 4, 110.0, False),  # 10 of 100: 0.1 is not < 0.1
        (VertexScaling(0, 2, 4, 100.0, 200.0), 4, 90.0, True),  # lost rate: negative gain
        (VertexScaling(0, 2, 4, 100.0, 200.0), 5, 105.0, False),  # not at the scaled-to parallelism
        (VertexScaling(0, 4, 2, 200.0, 100.0), 2, 100.0, False),  # last was a scale-down
        (VertexScaling(0, 2, 4, NAN, NAN), 4, 105.0, False),  # no rates recorded: no verdict
        (VertexScaling(0, 2, 4, 100.0, 100.0), 4, 100.0, False),  # nothing expected: no verdict
        (VertexScaling(0, 2, 4, math.inf, math.inf), 4, 100.0, False),  # idle then: no verdict
        (None, 4, 105.0, False),
    ],
)
def test_ineffective_scale_up(
    last: VertexScaling | None, parallelism: int, tpr_now: float, expected: bool
) -> None:
    """§1.8 detectIneffectiveScaleUp with the default threshold 0.1."""
    got = is_ineffective_scale_up(last, parallelism=parallelism, true_processing_rate=tpr_now, threshold=0.1)
    assert got is expected


def test_an_ineffective_scale_up_states_the_expected_and_the_actual_increase() -> None:
    """Reference JobVertexScalerTest: 10 -> 20 at TPR 90 promised 180 (an increase of 90.0); TPR 95 at 20
    is an increase of 5.0, 5.6 % of it: ineffective, and both increases are what the event states."""
    last = VertexScaling(0, 10, 20, 90.0, 180.0)
    gain = ineffective_scale_up(last, parallelism=20, true_processing_rate=95.0, threshold=0.1)
    assert gain == ScaleUpGain(expected=90.0, actual=5.0)
    effective = ineffective_scale_up(last, parallelism=20, true_processing_rate=180.0, threshold=0.1)
    assert effective is None  # the whole promised increase arrived


def entries(*points: tuple[int, float]) -> list[VertexScaling]:
    return [VertexScaling(i, p, p + 1, r, NAN) for i, (p, r) in enumerate(points)]


SCALABILITY = AutoscalerOptions(observed_scalability_enabled=True)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (((1, 100.0), (2, 200.0), (4, 400.0)), 1.0),  # linear: (100+400+1600)/(21*100) = 1
        (((1, 100.0), (2, 150.0), (4, 250.0)), 0.67),  # (100+300+1000)/(21*100) = 0.6667 -> up to 0.67
        (((1, 100.0), (2, 100.0), (4, 100.0)), 0.5),  # (100+200+400)/2100 = 0.33 -> clamped to min 0.5
        (((2, 200.0), (4, 300.0), (8, 400.0)), 0.58),  # beta 200/2: (400+1200+3200)/(84*100) = 0.571
        (((1, 100.0), (2, 150.0)), 1.0),  # 2 < min-observations 3
        (((1, 100.0), (2, NAN), (4, 250.0)), 1.0),  # an unknown rate: assume linear
        (((1, 100.0), (2, math.inf), (4, 250.0)), 1.0),  # an infinite rate: assume linear
    ],
)
def test_scalability_coefficient(points: tuple[tuple[int, float], ...], expected: float) -> None:
    """§1.10 alpha = sum(P*R) / (sum(P^2) * beta), clamped to [0.5, 1], rounded up to 2 decimals."""
    assert scalability_coefficient(entries(*points), SCALABILITY) == expected


def test_scalability_baseline_prefers_the_newest_parallelism_one_entry() -> None:
    """beta = TPR of the newest p=1 entry (80, not the older 100).

    sum(P*R) = 100 + 300 + 1000 + 80 = 1480; sum(P^2) = 1 + 4 + 16 + 1 = 22; 1480 / (22 * 80) = 0.8409.
    """
    got = scalability_coefficient(entries((1, 100.0), (2, 150.0), (4, 250.0), (1, 80.0)), SCALABILITY)
    assert got == 0.85


def test_scalability_rounds_up_on_the_decimal_text() -> None:
    """alpha = (10*60.7 + 100) / (101 * 100) = 0.07 stays 0.07, where ceil(0.07 * 100) / 100 = 0.08."""
    options = AutoscalerOptions(
        observed_scalability_enabled=True,
        observed_scalability_coefficient_min=0.01,
        observed_scalability_min_observations=2,
    )
    assert scalability_coefficient(entries((10, 60.7), (1, 100.0)), options) == 0.07


# ---------------------------------------------------------------------------------------------- recording
def test_record_metrics_uses_the_applied_parallelism() -> None:
    """FLINK-39743: the expected rate belongs to the parallelism really set (a plugin may change it)."""
    evaluation: JobEvaluation = make_evaluation([vertex_eval("a", 2, 4, tpr=100.0), vertex_eval("b", 3)])
    got = record_metrics(evaluation, {"a": (2, 5), "gone": (1, 2)})
    assert got == {"a": (100.0, 250.0)}  # 100 / 2 * 5; unknown vertices are skipped


# ---------------------------------------------------------------------------------------------- verification
WINDOW_MS = 15 * 60_000
# Work scaled 2 -> 4 at 10 s with a TPR of 1000 rec/s, so 2000 expected; confirmed at 60 s. The job's
# RUNNING timestamp (0) is from before the rescale unless a test says the job restarted.
SCALED = ScalingRecord(10_000, {"w": (2, 4)}, confirmed_ms=60_000, metrics={"w": (1000.0, 2000.0)})
LATER = 60_000 + WINDOW_MS  # a window entirely after the confirmation


def verify(record: ScalingRecord = SCALED, now_ms: int = LATER, running_since_ms: int = 0, **measured):
    return verify_scaling(
        record,
        {vid: m for vid, m in measured.items()},
        now_ms=now_ms,
        running_since_ms=running_since_ms,
        metrics_window_ms=WINDOW_MS,
    )


def test_a_rescale_that_delivered_its_expected_capacity_is_verified_as_expected() -> None:
    got = verify(w=(4, 1950.0))
    assert got == ScalingVerification(
        LATER, VERIFICATION_THRESHOLD, {"w": VertexVerification(4, 2000.0, 1950.0)}
    )
    assert got.vertices["w"].ratio == 0.975 and got.as_expected and got.short == ()


def test_a_rescale_well_below_its_expected_capacity_falls_short() -> None:
    got = verify(w=(4, 1500.0))
    assert got is not None and not got.as_expected and got.short == ("w",)
    assert got.vertices["w"].ratio == 0.75
    at_threshold = verify(w=(4, 1800.0))  # exactly 90 %: delivered
    assert at_threshold is not None and at_threshold.as_expected


def test_more_capacity_than_expected_is_as_expected() -> None:
    """A scale-down often leaves each subtask faster (less contention): that is no shortfall."""
    down = ScalingRecord(0, {"w": (4, 2)}, confirmed_ms=60_000, metrics={"w": (2000.0, 1000.0)})
    got = verify(down, w=(2, 1300.0))
    assert got is not None and got.as_expected and got.vertices["w"].ratio == 1.3


def test_a_vertex_flink_capped_is_judged_against_the_parallelism_it_got() -> None:
    """Asked for 4, got 3 (no free slots): 1000 / 2 * 3 = 1500 expected, not 2000."""
    got = verify(w=(3, 1470.0))
    assert got is not None and got.vertices["w"] == VertexVerification(3, 1500.0, 1470.0) and got.as_expected


def test_nothing_is_verified_before_confirmation_or_twice() -> None:
    assert verify(replace(SCALED, confirmed_ms=None), w=(4, 2000.0)) is None
    done = replace(SCALED, verification=ScalingVerification(LATER, 0.9, {}))
    assert verify(done, w=(4, 2000.0)) is None


def test_a_window_that_may_hold_samples_from_before_the_rescale_waits() -> None:
    """Without a restart seen after the rescale, the window must be younger than the confirmation."""
    assert verify(now_ms=LATER - 1, w=(4, 2000.0)) is None
    assert verify(now_ms=LATER, w=(4, 2000.0)) is not None
    # The job restarted after the rescale was requested: its window holds only samples after it.
    assert verify(now_ms=120_000, running_since_ms=15_000, w=(4, 2000.0)) is not None


def test_unknown_rates_are_not_measured_and_a_rescale_with_nothing_measured_waits() -> None:
    two = ScalingRecord(
        0,
        {"w": (2, 4), "x": (1, 2), "y": (1, 3)},
        confirmed_ms=60_000,
        metrics={"w": (1000.0, 2000.0), "x": (500.0, 1000.0), "y": (NAN, NAN)},  # y: TPR unknown then
    )
    got = verify(two, w=(4, 1000.0), x=(2, math.inf), y=(3, 900.0))  # x idle now: TPR infinite
    assert got is not None and set(got.vertices) == {"w", "x"}  # y had no expectation: not judged
    assert math.isnan(got.vertices["x"].measured) and math.isnan(got.vertices["x"].ratio)
    assert got.short == ("w",)  # x, not measured, is not held against the rescale
    assert verify(two, w=(4, NAN), x=(2, math.inf)) is None  # nothing measured: a later window tries
    assert verify(w=(4, 2000.0), gone=(1, 5.0)) is not None and verify(gone=(1, 5.0)) is None


def test_verify_last_scaling_reads_the_newest_record_and_the_evaluation() -> None:
    evaluation = make_evaluation([vertex_eval("w", 4, tpr=1900.0)], running_since_ms=30_000)
    older = ScalingRecord(-100, {"w": (1, 2)}, confirmed_ms=-50, metrics={"w": (500.0, 1000.0)})
    got = verify_last_scaling((older, SCALED), evaluation, 90_000)
    assert got is not None and got.ts_ms == SCALED.ts_ms
    assert got.verification == ScalingVerification(90_000, 0.9, {"w": VertexVerification(4, 2000.0, 1900.0)})
    assert verify_last_scaling((), evaluation, 90_000) is None


def test_trimming_keeps_the_verification_of_the_vertices_it_keeps() -> None:
    verification = ScalingVerification(5, 0.9, {"a": (2, 10.0, 9.0), "b": (3, 20.0, 19.0)})
    older = rec(0, {"a": (1, 2), "b": (1, 3)})
    history = (replace(older, verification=verification), *(rec(i, {"b": (i, i + 1)}) for i in range(1, 4)))
    (first, *_) = trim_history(history, 10, AutoscalerOptions(history_max_count=3))
    assert set(first.changes) == {"a"} and set(first.verification.vertices) == {"a"}
