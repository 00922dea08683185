"""Decision records round-tripped through JSON, and found by key, name or JobID."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from explain_outcomes import NOW, OPTS, outcome_of, thresholds

from autoscaler.explain import DecisionRecord, find_record, record_from_outcome
from autoscaler.outcome import JobOutcome
from autoscaler.reasons import Reason
from autoscaler.testing import JOB, make_evaluation, vertex_eval


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
