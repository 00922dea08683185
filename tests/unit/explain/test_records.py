"""Decision records round-tripped through JSON, found by key, name or JobID, and kept per job."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace

from explain_outcomes import NOW, OPTS, outcome_of, thresholds

import autoscaler.explain.records as records
from autoscaler.explain import (
    DecisionRecord,
    VerificationRecord,
    VerifiedVertex,
    VertexRecord,
    add_decision,
    find_record,
    record_from_outcome,
)
from autoscaler.reasons import Reason
from autoscaler.testing import JOB, make_evaluation, vertex_eval
from autoscaler.tick.steps import JobOutcome


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


# ------------------------------------------------------------------------------------ kept decisions
def at(ts_ms: int, reason: Reason = Reason.IN_BAND, **changes) -> DecisionRecord:
    return replace(record_from_outcome(JobOutcome(JOB, ts_ms, reason, "detail")), **changes)


def verdict(rescale_ts_ms: int, ts_ms: int) -> VerificationRecord:
    vertex = VerifiedVertex("w", "Work", 1, 3, 3, expected=3000.0, measured=2900.0, ratio=2900 / 3000)
    return VerificationRecord(rescale_ts_ms, ts_ms, 0.9, True, (vertex,))


def test_ticks_that_decide_the_same_are_one_decision_and_a_rescale_stays_in_view():
    kept: tuple[DecisionRecord, ...] = ()
    kept = add_decision(kept, at(0, Reason.SCALING, scaled=True), keep=3)
    for ts in range(10, 500, 10):  # 49 ticks in band
        kept = add_decision(kept, at(ts), keep=3)
    assert [(r.outcome, r.first_ms, r.ts_ms, r.ticks) for r in kept] == [
        (Reason.SCALING, 0, 0, 1),
        (Reason.IN_BAND, 10, 490, 49),
    ]


def test_a_rescale_never_extends_a_run_and_the_oldest_decisions_are_pruned():
    kept: tuple[DecisionRecord, ...] = ()
    for ts, reason in enumerate(
        [Reason.IN_BAND, Reason.SCALING, Reason.SCALING, Reason.IN_BAND, Reason.STABILIZING]
    ):
        kept = add_decision(kept, at(ts, reason, scaled=reason is Reason.SCALING), keep=4)
    assert [r.ts_ms for r in kept] == [1, 2, 3, 4]  # the first fell out: 4 kept
    assert all(r.ticks == 1 for r in kept)
    assert add_decision(kept, at(9), keep=1) == (at(9),)


def test_another_job_run_or_other_parallelisms_start_a_new_decision():
    first = at(0, vertices=(VertexRecord("w", "Work", 2, 2, 128),))
    kept = add_decision((), first, keep=5)
    kept = add_decision(kept, replace(first, ts_ms=10, job_id="b" * 32), keep=5)  # resubmitted
    kept = add_decision(kept, at(20, vertices=(VertexRecord("w", "Work", 3, 3, 128),)), keep=5)
    assert len(kept) == 3


def test_a_verification_joins_the_rescale_it_verified_and_stands_on_its_own():
    kept = add_decision((), at(0, Reason.SCALING, scaled=True), keep=5)
    kept = add_decision(kept, at(10, Reason.STABILIZING), keep=5)
    kept = add_decision(kept, at(20, verification=verdict(0, 20)), keep=5)
    kept = add_decision(kept, at(30), keep=5)  # in band again: not folded into the verifying tick
    assert [r.ts_ms for r in kept] == [0, 10, 20, 30]
    assert kept[0].verification == verdict(0, 20) and kept[2].verification == verdict(0, 20)
    assert kept[1].verification is None and kept[3].verification is None


def test_verification_and_runs_round_trip_and_a_record_written_before_them_reads():
    record = at(90, verification=verdict(0, 90), since_ms=40, ticks=6)
    assert DecisionRecord.from_json(record.to_json()) == record
    old = {k: v for k, v in at(90).to_dict().items() if k not in ("verification", "since_ms", "ticks")}
    again = DecisionRecord.from_dict(old)
    assert again.verification is None and again.ticks == 1 and again.first_ms == 90


def test_to_dict_is_asdict_with_infinities_spelled_out():
    """to_dict walks the record itself (asdict deep-copies every leaf); the JSON must not change."""
    evaluation = make_evaluation(
        [thresholds(vertex_eval("src", 2, 3), 10.0, math.inf, lag=math.nan)], options=OPTS
    )
    record = replace(record_from_outcome(outcome_of(evaluation)), verification=verdict(0, 90), ticks=3)

    def spelled_out(value):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if isinstance(value, dict):
            return {k: spelled_out(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [spelled_out(v) for v in value]
        return value

    # No forecast (forecast.enabled false), no costs weighed, no lag target judged (cost.enabled false,
    # lag.target unset): left out, so the JSON is what it was before them.
    optional = ("forecast", "cost", "above_lag_target", "lag_above_target_s")
    plain = {k: v for k, v in asdict(record).items() if k not in optional}
    expected = spelled_out({**plain, "schema": records.SCHEMA_VERSION})
    assert record.to_dict() == expected
    assert expected["vertices"][0]["scale_down_threshold"] == "inf"
    assert json.dumps(record.to_dict(), sort_keys=True) == json.dumps(expected, sort_keys=True)
