"""Decision records: built from real decisions, round-tripped through JSON, and rendered in words.

Assertions look for key phrases and reason codes, never whole strings, so wording can improve freely.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.decide import decide
from autoscaler.events import Event, EventType
from autoscaler.explain import (
    BLOCKED,
    GATES,
    NOT_REACHED,
    PASSED,
    DecisionRecord,
    explain,
    find_record,
    record_from_outcome,
    status_table,
)
from autoscaler.flink.models import ParallelismBounds
from autoscaler.outcome import JobOutcome
from autoscaler.plugins.chain import ChainResult, PluginOutcome
from autoscaler.realize import RealizeResult
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, PendingRescale
from autoscaler.state.store import Lease
from autoscaler.testing import JOB, make_evaluation, vertex_eval

NOW = 1_800_000_000_000
OPTS = AutoscalerOptions(enabled=True)


def thresholds(v, up: float, down: float, lag: float = math.nan):
    return replace(v, scale_up_threshold=up, scale_down_threshold=down, lag=lag)


def scale_up_evaluation(options: AutoscalerOptions = OPTS, **kwargs):
    """src keeps up; work (capacity 1,000 rec/s, needs 1,500) is too slow and is recommended 3."""
    return make_evaluation(
        [
            thresholds(vertex_eval("src", 2, tpr=5000.0, tdr=1500.0), 1500.0, 3750.0, lag=12_000.0),
            thresholds(vertex_eval("work", 1, 3, tpr=1000.0, tdr=1500.0), 1500.0, 3750.0),
        ],
        options=options,
        **kwargs,
    )


def outcome_of(evaluation, state=None, options=OPTS, chain=None, realized=None, flink_cooldown_ms=0):
    d = decide(evaluation, state or JobState(), options, NOW, flink_cooldown_ms=flink_cooldown_ms)
    reason = d.outcome
    if chain is not None and chain.changes is None:
        reason = Reason.SCALING_VETOED
    return JobOutcome(JOB, NOW, reason, d.detail, d, chain, realized)


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


def test_json_round_trip_keeps_every_field_including_unknown_and_infinite_values():
    evaluation = make_evaluation(
        [thresholds(vertex_eval("src", 2, 3), 10.0, math.inf, lag=math.nan)], options=OPTS
    )
    record = record_from_outcome(outcome_of(evaluation))
    record = replace(record, vertices=(replace(record.vertices[0], name="inf"),))  # a name, not a number
    text = record.to_json()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    json.loads(text)
    again = DecisionRecord.from_json(text)
    assert again == record
    assert again.vertices[0].lag is None and again.vertices[0].scale_down_threshold == math.inf
    assert again.vertices[0].name == "inf"
    newer = {**record.to_dict(), "schema": 2, "added_later": 1}  # a newer daemon's extra field
    assert DecisionRecord.from_dict(newer) == record


def test_find_record_by_key_name_or_job_id():
    record = record_from_outcome(JobOutcome(JOB, NOW, Reason.NOT_RUNNING, "job is FAILED"))
    other = replace(record, job_key="c2/job", cluster="c2", job_id="b" * 32)
    records = {record.job_key: record, other.job_key: other}
    assert find_record(records, "c1/job") is record
    assert find_record(records, "b" * 32) is other
    assert find_record(records, "job") is None  # ambiguous: two clusters run "job"
    assert find_record({record.job_key: record}, "job") is record


def test_status_table_lists_jobs_vertices_cooldown_and_last_event():
    deferred = record_from_outcome(
        outcome_of(scale_up_evaluation(running_since_ms=NOW - 10_000), flink_cooldown_ms=30_000)
    )
    in_band = replace(
        record_from_outcome(outcome_of(make_evaluation([vertex_eval("w", 4, 5, outside_band=False)]))),
        job_key="c1/other",
        job_name="other",
    )
    states = {
        deferred.job_key: JobState(pending=PendingRescale(JOB.job_id, NOW, {"work": 3}, {"work": 1})),
        "c1/new": JobState(),
    }
    event = Event(deferred.job_key, Reason.SCALING_REPORT, EventType.NORMAL, "Scaling execution ...", NOW)
    table = status_table(
        {r.job_key: r for r in (deferred, in_band)}, states, NOW + 5000, {deferred.job_key: event}
    )
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["JOB", "/", "VERTEX"]
    job_line = next(line for line in lines if line.startswith("c1/job"))
    assert "CooldownDeferred (5 s ago), rescale pending" in job_line and "15 s" in job_line
    assert "ScalingReport: Scaling execution" in job_line
    work_line = next(line for line in lines if line.strip().startswith("work"))
    assert work_line.split()[1:4] == ["1", "3", "0.50"]  # parallelism, recommendation, load
    assert any(line.startswith("c1/other") and "InBand" in line for line in lines)
    assert any(line.startswith("c1/new") and "none yet" in line for line in lines)
    src_line = next(line for line in lines if line.strip().startswith("src"))
    assert "12.0k" in src_line  # lag


def test_status_table_names_who_acts_on_each_cluster():
    leases = [Lease("c1", "host-a:41", NOW + 42_000, NOW - 600_000), Lease("c2", "host-b:7", NOW - 1, 0)]
    lines = status_table({}, {}, NOW, leases=leases).splitlines()
    assert lines[-3].split() == ["CLUSTER", "ACTED", "ON", "BY", "LEASE"]
    assert lines[-2].split() == ["c1", "host-a:41", "42", "s", "left"]
    assert lines[-1].split()[:2] == ["c2", "host-b:7"] and "no daemon acts" in lines[-1]


def test_status_table_without_jobs_says_so():
    assert "no jobs recorded yet" in status_table({}, {}, NOW)
