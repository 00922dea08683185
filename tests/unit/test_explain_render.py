"""The ``status`` table: jobs, their vertices, cooldowns and last events, and who acts on each cluster.

Assertions look for key phrases and reason codes, never whole strings, so wording can improve freely.
"""

from __future__ import annotations

from dataclasses import replace

from explain_outcomes import NOW, outcome_of, scale_up_evaluation

from autoscaler.events import Event, EventType
from autoscaler.explain import record_from_outcome, status_table
from autoscaler.reasons import Reason
from autoscaler.state import JobState, PendingRescale
from autoscaler.state.store import Lease
from autoscaler.testing import JOB, make_evaluation, vertex_eval


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
