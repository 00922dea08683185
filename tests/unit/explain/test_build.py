"""Decision records built from real decisions: each gate's verdict, the vertices, the plugins, the
cooldown, and what ``explain`` says about them.

Assertions look for key phrases and reason codes, never whole strings, so wording can improve freely.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from explain_outcomes import NOW, OPTS, outcome_of, scale_up_evaluation

from autoscaler.explain import (
    BLOCKED,
    GATES,
    NOT_REACHED,
    PASSED,
    DecisionRecord,
    explain,
    record_from_outcome,
)
from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import ScaleUpGain
from autoscaler.plugins.chain import ChainResult, PluginOutcome
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, PendingRescale, ScalingRecord, ScalingVerification, VertexVerification
from autoscaler.testing import JOB, make_evaluation, vertex_eval
from autoscaler.tick.steps import JobOutcome, RealizeResult


def verdicts(record: DecisionRecord) -> dict[str, str]:
    return {g.gate: g.verdict for g in record.gates}


def test_a_scale_up_passes_every_gate_and_names_the_slow_vertex():
    realized = RealizeResult(True, {"src": ParallelismBounds(1, 2), "work": ParallelismBounds(1, 3)})
    record = record_from_outcome(outcome_of(scale_up_evaluation(), realized=realized))
    assert record.outcome == Reason.SCALING and record.scaled
    assert set(verdicts(record).values()) == {PASSED}
    work = next(v for v in record.vertices if v.vertex == "work")
    assert (work.parallelism, work.recommended, work.decided) == (1, 3, 3)
    text = explain(record)
    assert "SCALED" in text and "[Scaling]" in text
    assert "work: parallelism 1 -> 3" in text
    assert "too slow" in text and "1,000 rec/s" in text and "1,500 rec/s" in text
    assert "no executor plugins configured" in text
    assert "job.autoscaler.utilization.target = 0.7" in text


def test_in_band_blocks_at_the_band_gate_and_later_gates_are_not_reached():
    evaluation = make_evaluation([vertex_eval("work", 4, 5, outside_band=False)])
    record = record_from_outcome(outcome_of(evaluation))
    gates = verdicts(record)
    assert record.blocked_by is not None and record.blocked_by.gate == "utilization band"
    assert gates["rescale in flight"] == gates["memory pressure"] == PASSED
    assert gates["advisor mode"] == gates["cooldown"] == gates["executor plugins"] == NOT_REACHED
    text = explain(record)
    assert "within its utilization band" in text and "BLOCKED" in text and "[InBand]" in text


@pytest.mark.parametrize(
    ("case", "gate"),
    [
        ("not ready", "metrics ready"),
        ("in flight", "rescale in flight"),
        ("advisor", "advisor mode"),
        ("cooldown", "cooldown"),
    ],
)
def test_each_blocking_gate_is_named(case, gate):
    options, state, kwargs, cooldown = OPTS, None, {}, 0
    if case == "not ready":
        kwargs = {"not_ready": Reason.WINDOW_NOT_FULL}
    elif case == "in flight":
        state = JobState(pending=PendingRescale(JOB.job_id, NOW - 1000, {"work": 3}, {"work": 1}))
    elif case == "advisor":
        options = AutoscalerOptions(enabled=True, scaling_enabled=False)
    else:
        kwargs, cooldown = {"running_since_ms": NOW - 10_000}, 30_000
    evaluation = scale_up_evaluation(options, **kwargs)
    record = record_from_outcome(outcome_of(evaluation, state, options, flink_cooldown_ms=cooldown))
    assert record.blocked_by is not None and record.blocked_by.gate == gate
    names = [g.gate for g in record.gates]
    assert names[: len(GATES)] == [name for name, _, _ in GATES]


def test_a_cooldown_says_when_the_job_is_decided_again():
    evaluation = scale_up_evaluation(running_since_ms=NOW - 10_000)
    record = record_from_outcome(outcome_of(evaluation, flink_cooldown_ms=30_000))
    assert record.retry_at_ms == NOW + 20_000 and record.cooldown_until_ms == NOW + 20_000
    text = explain(record, now_ms=NOW)
    assert "deferred until the cooldown ends" in text and "Decided again at" in text


def test_a_veto_names_the_plugin_and_its_reason():
    chain = ChainResult(
        None,
        (
            PluginOutcome("budget-cap", Reason.SCALING_APPROVED),
            PluginOutcome("cpu-gate", Reason.SCALING_VETOED, "cluster CPU 0.93 above 0.80"),
        ),
    )
    record = record_from_outcome(outcome_of(scale_up_evaluation(), chain=chain))
    assert record.outcome == Reason.SCALING_VETOED and not record.scaled
    assert verdicts(record)["executor plugins"] == BLOCKED
    assert [(p.plugin, p.outcome) for p in record.plugins] == [
        ("budget-cap", "ScalingApproved"),
        ("cpu-gate", "ScalingVetoed"),
    ]
    text = explain(record)
    assert "cpu-gate: VETOED (cluster CPU 0.93 above 0.80)" in text and "budget-cap: approved" in text


def test_an_error_before_the_decision_stage_says_so():
    record = record_from_outcome(JobOutcome(JOB, NOW, Reason.AUTOSCALER_ERROR, "evaluation failed: boom"))
    assert record.gates == () and record.vertices == ()
    text = explain(record)
    assert "was not reached" in text and "evaluation failed: boom" in text


def test_scaling_interval_min_gives_the_cooldown_after_a_rescale():
    options = AutoscalerOptions(enabled=True, scaling_interval_min=timedelta(minutes=5))
    realized = RealizeResult(True, {})
    record = record_from_outcome(outcome_of(scale_up_evaluation(options), options=options, realized=realized))
    assert record.cooldown_until_ms == NOW + 300_000
    assert "No rescale before" in explain(record, now_ms=NOW)


def test_metrics_unknown_blocks_at_its_own_gate_and_is_not_called_in_band():
    """Issue 11 item 6: every rate NaN is not "every vertex is within its band"."""
    nan = float("nan")
    unknown = [
        replace(vertex_eval(vid, 2), true_processing_rate=nan, target_data_rate=nan)
        for vid in ("src", "work")
    ]
    record = record_from_outcome(outcome_of(make_evaluation(unknown)))
    gates = verdicts(record)
    assert record.outcome == Reason.METRICS_UNKNOWN
    assert record.blocked_by is not None and record.blocked_by.gate == "metrics known"
    assert gates["metrics ready"] == PASSED and gates["utilization band"] == NOT_REACHED
    text = explain(record)
    assert "[MetricsUnknown]" in text and "unknown" in text and "utilization band" not in text.split("\n")[1]
    assert text.count("metrics unknown, not judged") == 2  # each vertex says so


def test_an_ineffective_scale_up_shows_what_it_promised_and_delivered():
    v = replace(
        vertex_eval("work", 4, 8, tpr=420.0),
        ineffective_scale_up=True,
        scale_up_gain=ScaleUpGain(400.0, 20.0),
    )
    record = record_from_outcome(outcome_of(make_evaluation([v])))
    work = record.vertices[0]
    assert (work.expected_increase, work.actual_increase) == (400.0, 20.0)
    assert "ineffective: it raised the rate by 20 rec/s of the 400 rec/s expected" in explain(record)
    assert DecisionRecord.from_json(record.to_json()) == record
    older = record.to_dict()  # a record saved before the increases were kept
    for vertex in older["vertices"]:
        del vertex["expected_increase"], vertex["actual_increase"]
    assert DecisionRecord.from_dict(older).vertices[0].expected_increase is None


def test_the_tick_that_verified_a_rescale_records_the_verdict_with_vertex_names():
    """The decide stage put the verdict on the rescale's record in the state; the record of that tick
    carries it, and explain says which rescale it judged and how it did."""
    verification = ScalingVerification(NOW, 0.9, {"work": VertexVerification(3, 3000.0, 2100.0)})
    scaled = ScalingRecord(NOW - 600_000, {"work": (1, 3)}, NOW - 540_000, verification=verification)
    evaluation = make_evaluation([vertex_eval("work", 3, tpr=2100.0)])
    record = record_from_outcome(outcome_of(evaluation, JobState(history=(scaled,))))
    v = record.verification
    assert v is not None and (v.rescale_ts_ms, v.ts_ms, v.as_expected) == (NOW - 600_000, NOW, False)
    assert [(x.name, x.before, x.decided, x.parallelism, x.ratio) for x in v.vertices] == [
        ("work", 1, 3, 3, 0.7)
    ]
    text = explain(record)
    assert "This tick verified the rescale at" in text and "LESS capacity than expected (below 90%)" in text
    assert "work: parallelism 1 -> 3: 2,100 rec/s at full load of 3,000 rec/s expected (70%)" in text
    earlier = replace(verification, ts_ms=NOW - 60_000)  # verified by an earlier tick: not this one's
    older = record_from_outcome(
        outcome_of(evaluation, JobState(history=(replace(scaled, verification=earlier),)))
    )
    assert older.verification is None
