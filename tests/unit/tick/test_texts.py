"""The texts and counters of the record stage for issue 11 (items 5-7): the reference's event formats
(``IneffectiveScaling``, ``ScalingLimited``, ``ScalingReport``), ``MetricsUnknown`` and the alignment-mode
fallback, on plain values."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs
from told import Told, told

from autoscaler.model import AlignmentBounds, JobEvaluation, ScaleUpGain, VertexChange, VertexEvaluation
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, ScalingRecord, ScalingVerification, VertexVerification
from autoscaler.state.events import Event, EventType
from autoscaler.testing import JOB, make_evaluation, vertex_eval
from autoscaler.tick.decide import decide
from autoscaler.tick.steps import Decided, Decision, JobEvaluated, JobStep
from autoscaler.tick.texts import report_text, resubmission_text, verification_text

MIN = 60_000
VID = "bc764cd8ddf7a0cff126f51c16239658"  # a vertex id as Flink writes it (hex)


def recorded(evaluation: JobEvaluation) -> tuple[Told, list[Event]]:
    rec = told([JobStep(evaluation.sample, notices=(JobEvaluated(evaluation),))], now_ms=1_000)
    return rec, [event for event, _ in rec.events]


def one(events: list[Event], reason: Reason) -> Event:
    (event,) = [e for e in events if e.reason is reason]
    return event


def counter(rec: Told, name: str, **labels: str) -> float | None:
    return rec.metrics.registry.get_sample_value(name, {"cluster": JOB.cluster, "job": JOB.name, **labels})


# ---------------------------------------------------------------------------------------------- item 7a
def ineffective(gain: ScaleUpGain, **options: object) -> JobEvaluation:
    opts = AutoscalerOptions(enabled=True, **options)
    v = replace(vertex_eval(VID, 20, 40), ineffective_scale_up=True, scale_up_gain=gain)
    return make_evaluation([v], options=opts)


@pytest.mark.parametrize(("detection", "word"), [(True, "enabled"), (False, "disabled")])
def test_the_ineffective_scaling_event_carries_the_expected_and_the_actual_increase(detection, word):
    """Reference JobVertexScalerTest: INEFFECTIVE_MESSAGE_FORMAT with 90.0 and 5.0."""
    _, events = recorded(
        ineffective(ScaleUpGain(90.0, 5.0), scaling_effectiveness_detection_enabled=detection)
    )
    event = one(events, Reason.INEFFECTIVE_SCALING)
    assert event.type is EventType.NORMAL
    assert event.message == (
        f"Ineffective scaling detected for {VID} (expected increase: 90.0, actual increase 5.0). "
        f"Blocking of ineffective scaling decisions is {word}"
    )
    assert event.key == f"ineffective{VID}90.0"  # the reference's message key


def test_increases_are_written_as_java_doubles_and_a_new_expectation_is_a_new_event():
    _, events = recorded(ineffective(ScaleUpGain(12_345_678.0, -0.0005)))
    event = one(events, Reason.INEFFECTIVE_SCALING)
    assert "(expected increase: 1.2345678E7, actual increase -5.0E-4)" in event.message
    _, again = recorded(ineffective(ScaleUpGain(100.0, 1.0)))
    assert one(again, Reason.INEFFECTIVE_SCALING).key != event.key  # deduplicated per expectation


# ---------------------------------------------------------------------------------------------- item 7b
def test_the_scaling_limited_event_carries_the_partitions_the_upper_bound_and_the_lower_limit():
    """Reference testSendingScalingLimitedEvents: SCALE_LIMITED_MESSAGE_FORMAT with 20, 15, 15, 200, 1."""
    v = replace(
        vertex_eval(VID, 10, 15, max_parallelism=720),
        limited_from=20,
        limited_by=AlignmentBounds(15, 200, 1),
    )
    _, events = recorded(make_evaluation([v]))
    event = one(events, Reason.SCALING_LIMITED)
    assert event.type is EventType.WARNING and event.key == f"ScalingLimited{VID}"
    assert event.message == (
        f"Scaling limited detected for {VID} (expected parallelism: 20, actual parallelism 15). "
        "Scaling limited due to numKeyGroupsOrPartitions : 15\uff0c"
        "upperBoundForAlignment(maxParallelism or parallelismUpperLimit): 200, parallelismLowerLimit: 1."
    )


# ---------------------------------------------------------------------------------------------- item 7d
def test_an_alignment_mode_fallback_is_a_warning_event_a_counter_and_a_log_line():
    opts = AutoscalerOptions.from_flink_conf(
        {"job.autoscaler.enabled": "true", "job.autoscaler.scaling.parallelism-alignment.mode": "primes"}
    )
    with capture_logs() as logs:
        rec, events = recorded(make_evaluation([vertex_eval(VID, 2)], options=opts))
    event = one(events, Reason.OPTIONS_VALIDATION)
    assert event.type is EventType.WARNING and "Falling back to BALANCED" in event.message
    assert "'primes'" in event.message
    key = "job.autoscaler.scaling.parallelism-alignment.mode"
    assert counter(rec, "flink_autoscaler_option_fallbacks_total", option=key) == 1.0
    assert [entry["log_level"] for entry in logs if entry["event"] == "alignment_mode_fallback"] == [
        "warning"
    ]


def test_a_built_in_alignment_mode_warns_about_nothing():
    opts = AutoscalerOptions(enabled=True, parallelism_alignment_mode="evenly_spread")
    rec, events = recorded(make_evaluation([vertex_eval(VID, 2)], options=opts))
    assert events == [] and counter(rec, "flink_autoscaler_option_fallbacks_total", option="x") is None


# ---------------------------------------------------------------------------------------------- item 6
def test_metrics_unknown_is_a_warning_event_a_counter_and_a_log_line():
    nan = replace(vertex_eval(VID, 2), true_processing_rate=math.nan, target_data_rate=math.nan)
    evaluation = make_evaluation([nan])
    decision = decide(evaluation, JobState(), evaluation.sample.target.options, 0)
    assert decision.outcome is Reason.METRICS_UNKNOWN
    with capture_logs() as logs:
        rec = told([JobStep(evaluation.sample, notices=(Decided(decision),))], now_ms=1_000)
    (event,) = [e for e, _ in rec.events]
    assert (event.reason, event.type, event.message) == (
        Reason.METRICS_UNKNOWN,
        EventType.WARNING,
        decision.detail,
    )
    assert counter(rec, "flink_autoscaler_metrics_unknown_total") == 1.0
    (line,) = [entry for entry in logs if entry["event"] == "metrics_unknown"]
    assert line["log_level"] == "warning" and line["detail"] == decision.detail


# ---------------------------------------------------------------------------------------------- item 5
def changed(
    vertex: VertexEvaluation, target: int, outcome: Reason = Reason.SCALING, **options: object
) -> Decision:
    opts = AutoscalerOptions(enabled=True, **options)
    evaluation = make_evaluation([vertex], options=opts)
    change = VertexChange(vertex.vertex, vertex.parallelism, target)
    return Decision(evaluation.job, outcome, "", {vertex.vertex: change}, JobState(), evaluation)


def test_the_report_states_the_capacity_of_the_parallelism_actually_applied():
    """The issue's report: 4 -> 3 with a capacity of 4972.71 said 2486.36, what p=2 (the evaluator's
    recommendation) would give. The capacity is that of the applied 3: 4972.71 / 4 * 3."""
    v = vertex_eval(VID, 4, 2, tpr=4972.71, tdr=2000.0)
    assert v.expected_processing_rate == pytest.approx(2486.355)  # the recommendation's
    text = report_text(changed(v, 3), enabled=True)
    assert text == (
        "Scaling execution enabled, begin scaling vertices:"
        f"{{ Vertex ID {VID} | Parallelism 4 -> 3 | Processing capacity 4972.71 -> 3729.53 | "
        "Target data rate 2000.00}"
    )


def test_a_delayed_scale_down_reports_the_window_maximum_it_applies():
    """Through the decide stage: recommendations 3, then 2; after scale-down.interval the window's
    highest (3) is applied, and the report's capacity is that of 3."""
    opts = AutoscalerOptions(enabled=True, scale_down_interval="10 min")
    state, decision = JobState(), None
    for minute, target in [(0, 3), (5, 2), (10, 2)]:
        evaluation = make_evaluation([vertex_eval(VID, 4, target, tpr=4972.71)], options=opts)
        decision = decide(evaluation, state, opts, minute * MIN)
        state = decision.state
    assert decision is not None and decision.changes == {VID: VertexChange(VID, 4, 3)}
    assert "Parallelism 4 -> 3 | Processing capacity 4972.71 -> 3729.53 |" in report_text(
        decision, enabled=True
    )


def test_unknown_rates_are_written_as_java_writes_them():
    v = replace(vertex_eval(VID, 4, 8), true_processing_rate=math.nan)
    assert "Processing capacity NaN -> NaN |" in report_text(changed(v, 8), enabled=True)


@pytest.mark.parametrize(
    ("outcome", "options", "header"),
    [
        (
            Reason.ADVISOR_MODE,
            {"scaling_enabled": False},
            "Scaling execution disabled by config job.autoscaler.scaling.enabled:false, "
            "recommended parallelism change:",
        ),
        (
            Reason.EXCLUDED_PERIOD,
            {"excluded_periods": ("* * 9-17 ? * MON-FRI", "22:00:00-23:00:00")},
            "Scaling execution disabled by config job.autoscaler.excluded.periods:"
            "[* * 9-17 ? * MON-FRI, 22:00:00-23:00:00], recommended parallelism change:",
        ),
    ],
)
def test_a_report_not_executed_names_the_key_and_value_that_disabled_it(outcome, options, header):
    """Reference ScalingExecutor#checkIfBlockedAndTriggerScalingEvent's header."""
    text = report_text(changed(vertex_eval(VID, 2, 4), 4, outcome, **options), enabled=False)
    assert text.startswith(header + f"{{ Vertex ID {VID} | Parallelism 2 -> 4 |")


def test_the_scaling_verified_text_names_each_vertex_its_numbers_and_what_flink_gave_it():
    verification = ScalingVerification(
        9_000,
        0.9,
        {VID: VertexVerification(3, 1500.0, 1200.0), "idle": VertexVerification(2, 80.0, math.nan)},
    )
    record = ScalingRecord(0, {VID: (2, 4), "idle": (1, 2)}, confirmed_ms=5_000, verification=verification)
    text = verification_text(record, {VID: "Map: enrich"})
    assert text.startswith("Rescale of 1970-01-01T00:00:00Z delivered less processing capacity than expected")
    assert "Map: enrich 2 -> 4 (Flink runs it at 3): 1200.00 rec/s at full load, 80% of the 1500.00" in text
    assert "idle 1 -> 2: capacity not measured (idle or unknown), 80.00 rec/s expected" in text
    assert "Below 90% of the expected capacity" in text
    fine = replace(record, verification=replace(verification, vertices={VID: (4, 1500.0, 1490.0)}))
    assert "verified over a full metric window" in verification_text(fine, {})
    assert verification_text(fine, {}).endswith("(threshold 90%)")


def test_the_scaling_verified_text_says_how_many_samples_its_window_held() -> None:
    verification = ScalingVerification(9_000, 0.9, {VID: VertexVerification(4, 1500.0, 1490.0)})
    record = ScalingRecord(0, {VID: (2, 4)}, confirmed_ms=5_000, verification=verification)
    assert "verified over a full metric window (7 samples): " in verification_text(record, {}, 7)
    short = replace(verification, vertices={VID: (4, 1500.0, 1000.0)})
    text = verification_text(replace(record, verification=short), {}, 7)
    assert "less processing capacity than expected over a full metric window (7 samples): " in text
    assert "samples" not in verification_text(record, {})  # unknown: not said


def test_a_resubmission_says_it_dropped_the_old_jobids_standing_request_and_its_verification() -> None:
    """Issue 36: the old JobID's confirmed rescale no longer holds the new JobID; the event says so."""
    confirmed = ScalingRecord(10 * MIN, {VID: (1, 6)}, confirmed_ms=10 * MIN + 5_000, job_id="old")
    text = resubmission_text("old", "new", JobState(history=(confirmed,)))
    assert text.startswith("job resubmitted: JobID old -> new; kept the job name's scaling history")
    assert f"its standing request {{'{VID}': 6}} (the new JobID runs what it was submitted with)" in text
    assert "the verification of that rescale" in text
    verified = replace(confirmed, verification=ScalingVerification(11 * MIN, 0.9, {}))
    text = resubmission_text("old", "new", JobState(history=(verified,)))
    assert "standing request" in text and "verification" not in text
    # Never confirmed (no standing request to drop): only the history is told.
    text = resubmission_text("old", "new", JobState(history=(replace(confirmed, confirmed_ms=None),)))
    assert "dropped" not in text


@given(
    expected=st.one_of(st.just(math.nan), st.floats(0, 1e7)),
    measured=st.one_of(st.just(math.nan), st.just(math.inf), st.floats(0, 1e7)),
)
def test_the_scaling_verified_text_never_says_nan(expected: float, measured: float) -> None:
    """An idle vertex is not measured, and a rescale from a record kept before expectations were may
    have nothing to expect: the event says so in words."""
    verification = ScalingVerification(9_000, 0.9, {VID: VertexVerification(4, expected, measured)})
    record = ScalingRecord(0, {VID: (2, 4)}, confirmed_ms=5_000, verification=verification)
    assert "nan" not in verification_text(record, {}).lower()
