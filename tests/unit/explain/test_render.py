"""The ``status`` table: jobs, their vertices, cooldowns and last events, and who acts on each cluster;
and ``explain``'s earlier decisions with their inputs and a rescale's verification.

Assertions look for key phrases and reason codes, never whole strings, so wording can improve freely.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

from explain_outcomes import NOW, OPTS, outcome_of, scale_up_evaluation
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.explain import (
    DecisionRecord,
    VerificationRecord,
    VerifiedVertex,
    add_decision,
    explain,
    record_from_outcome,
    status_table,
)
from autoscaler.model import JobEvaluation
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.state import JobState, PendingRescale
from autoscaler.state.events import Event, EventType
from autoscaler.state.store import Lease
from autoscaler.testing import JOB, make_evaluation, make_sample, make_topology, vertex_eval
from autoscaler.tick.steps import JobOutcome, RealizeResult


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


def test_status_table_says_since_when_a_job_could_not_be_read():
    """Fault probe (issue 12): during an outage the row showed an old decision as if all were well."""
    text = "cluster 'c1' (http://jm:8081) GET /jobs/x/jobmanager/config: ConnectError: refused"
    run: tuple[DecisionRecord, ...] = ()
    for ts in (NOW, NOW + 10_000, NOW + 20_000):
        outcome = JobOutcome(JOB, ts, Reason.CLUSTER_UNREACHABLE, text)
        run = add_decision(run, record_from_outcome(outcome), keep=5)
    lines = status_table({JOB.key: run[-1]}, {}, NOW + 25_000).splitlines()
    job_line = next(line for line in lines if line.startswith(JOB.key))
    assert "ClusterUnreachable (5 s ago), not read since 2027-01-15 08:00:00 UTC (25 s, 3 ticks)" in job_line
    in_band = record_from_outcome(outcome_of(make_evaluation([vertex_eval("w", 4)])))
    assert "not read since" not in status_table({JOB.key: in_band}, {}, NOW)


def test_status_table_without_jobs_says_so():
    assert "no jobs recorded yet" in status_table({}, {}, NOW)


# ---------------------------------------------------------------------------------------- earlier decisions
def kept_decisions() -> tuple[DecisionRecord, ...]:
    """A rescale (under an older scale-down.max-factor), the tick that verified it, then 29 in band."""
    rescale = record_from_outcome(outcome_of(scale_up_evaluation(), realized=RealizeResult(True, {})))
    older = tuple((k, "0.5" if k == "scale-down.max-factor" else v) for k, v in rescale.options)
    rescale = replace(rescale, ts_ms=NOW - 900_000, options=older)
    in_band = record_from_outcome(outcome_of(make_evaluation([vertex_eval("work", 3, outside_band=False)])))
    work = VerifiedVertex("work", "work", 1, 3, 3, expected=3000.0, measured=2950.0, ratio=2950 / 3000)
    verified = VerificationRecord(NOW - 900_000, NOW - 300_000, 0.9, True, (work,))
    kept = add_decision((), rescale, 20)
    kept = add_decision(kept, replace(in_band, ts_ms=NOW - 300_000, verification=verified), 20)
    for ts in range(NOW - 290_000, NOW + 1, 10_000):
        kept = add_decision(kept, replace(in_band, ts_ms=ts), 20)
    return kept


def test_explain_shows_earlier_decisions_newest_first_with_their_inputs_and_verification():
    *earlier, last = kept_decisions()
    text = explain(last, now_ms=NOW, earlier=earlier)
    head, _, rest = text.partition("Earlier decisions, newest first:")
    assert "[InBand] (the same for 30 ticks since" in head
    verifying, _, rescale = rest.partition("SCALED [Scaling]")
    assert "[InBand]" in verifying and "This tick verified the rescale at" in verifying
    assert "gates: BLOCKED at utilization band" in verifying
    # the rescale's inputs: backlog, each vertex's rates and thresholds, the gates, the settings then
    assert "backlog processing: no, 10 samples in the window" in rescale
    assert (
        "work: p 1 -> 3 (recommended 3), load 50%, capacity 1,000 rec/s, must process 1,500 rec/s" in rescale
    )
    assert "scale-up below 1,500 rec/s, scale-down above 3,750 rec/s" in rescale
    assert "gates: all passed" in rescale
    assert "settings then: scale-down.max-factor = 0.5 (later 0.6)" in rescale
    assert "Verification at" in rescale and "the expected capacity was delivered" in rescale
    assert "work: parallelism 1 -> 3: 2,950 rec/s at full load of 3,000 rec/s expected (98%)" in rescale


def test_a_rescale_not_verified_yet_says_so_and_one_rescaled_again_says_it_never_will_be():
    rescale = record_from_outcome(outcome_of(scale_up_evaluation(), realized=RealizeResult(True, {})))
    text = explain(rescale, now_ms=NOW)
    assert "Verification: none yet" in text and "Earlier decisions" not in text
    earlier = replace(rescale, ts_ms=NOW - 600_000)
    text = explain(rescale, now_ms=NOW, earlier=[earlier])
    assert "Verification: none (the job was rescaled again before it could be measured)" in text


def test_status_and_explain_escape_controls_cut_long_names_and_hide_url_secrets():
    """Fault probe (issue 35, items 5 and 8): a 10,000-character job name padded every status line to
    its width; a newline or ESC in a name printed raw; an event quoting a URL showed its token."""
    long_key = "c1/" + "x" * 10_000
    hostile = replace(
        record_from_outcome(outcome_of(make_evaluation([vertex_eval("w\n\x1b[2Jfake", 4, 5)]))),
        job_key="c1/a\nc1/b\u202e",
    )
    event = Event(
        hostile.job_key, Reason.SCALING, EventType.NORMAL, "GET http://jm/?token=s3cr3t-42 \x1b[31m", NOW
    )
    table = status_table(
        {hostile.job_key: hostile},
        {long_key: JobState()},
        NOW,
        {hostile.job_key: event},
        [Lease("c1\x1b[1m", "host\n-a", NOW + 1000, NOW)],
    )
    assert max(len(line) for line in table.splitlines()) < 300
    assert "\x1b" not in table and "\u202e" not in table and "s3cr3t" not in table
    assert any(line.startswith("c1/a\\nc1/b\\u202e") for line in table.splitlines())
    assert any(line.startswith("  w\\n\\x1b[2Jfake") for line in table.splitlines())
    assert any(line.startswith("c1/xxx") and "..." in line for line in table.splitlines())
    assert any(line.startswith("c1\\x1b[1m") and "host\\n-a" in line for line in table.splitlines())
    text = explain(hostile, events=[event])
    assert "\x1b" not in text and "\u202e" not in text and "s3cr3t" not in text
    assert text.startswith("Job c1/a\\nc1/b\\u202e") and "token=***" in text


_UNKNOWN_OR_NOT = st.one_of(st.none(), st.just(math.nan), st.floats(0, 1e7))
_VERTEX_FLOATS = (
    "load",
    "true_processing_rate",
    "target_data_rate",
    "catch_up_data_rate",
    "lag",
    "scale_up_threshold",
    "scale_down_threshold",
    "expected_processing_rate",
    "expected_increase",
    "actual_increase",
    "busy_skew",
)


@given(
    vertex=st.fixed_dictionaries({name: _UNKNOWN_OR_NOT for name in _VERTEX_FLOATS}),
    verified=st.fixed_dictionaries({name: _UNKNOWN_OR_NOT for name in ("expected", "measured", "ratio")}),
    restart_time_s=_UNKNOWN_OR_NOT,
)
def test_no_text_a_user_reads_says_nan(vertex, verified, restart_time_s):
    """Built from a decision, a record holds None where a value is unknown; read back from elsewhere
    it may hold NaN. Either way explain and status say so in words."""
    *earlier, last = kept_decisions()
    work = replace(last.vertices[0], ineffective_scale_up=True, **vertex)
    check = VerificationRecord(
        NOW - 900_000, NOW, 0.9, False, (VerifiedVertex("w", "w", 1, 3, 3, **verified),)
    )
    record = replace(last, vertices=(work,), restart_time_s=restart_time_s, verification=check)
    texts = (
        explain(record, now_ms=NOW, earlier=earlier[-2:]),
        status_table({record.job_key: record}, {}, NOW),
    )
    for text in texts:
        assert "nan" not in text.lower()


# ------------------------------------------------------------------ both costs, and the lag target (issue 38)
COSTED = AutoscalerOptions(enabled=True, cost_enabled=True)


def weighed(tpr: float, options: AutoscalerOptions = COSTED, lag: float = 0.0):
    """src (keeps up, ``lag`` records behind) -HASH-> work (2 subtasks, ``tpr`` rec/s for 2,000 offered),
    recommended 3: the gate "worth a restart" weighs it."""
    src = replace(vertex_eval("src", 2, tpr=20_000.0, tdr=2000.0), lag=lag)
    work = vertex_eval("work", 2, 3, tpr=tpr, tdr=2000.0)
    topology = make_topology({"src": 2, "work": 2}, [("src", "work", "HASH")])
    sample = make_sample(topology, options=options, job=JOB)
    return JobEvaluation(sample, {"src": src, "work": work}, False, 10, True, restart_time_s=10.0)


def test_explain_shows_both_costs_of_a_change_held_as_not_worth_it_from_the_records_values():
    outcome = outcome_of(weighed(2500.0), options=COSTED)
    weighing = outcome.decision.weighing
    assert outcome.outcome is Reason.NOT_WORTH_IT and weighing is not None
    record = record_from_outcome(outcome)
    cost = record.cost
    assert cost is not None and not cost.worth_it
    assert (cost.change_total, cost.wait_total) == (weighing.change.total, weighing.wait.total)
    assert (cost.change_restarts, cost.wait_restarts, cost.slots_now, cost.slots_then) == (1, 0, 2, 3)
    assert cost.horizon_s == weighing.horizon_s and cost.rate == 2000.0
    assert DecisionRecord.from_json(record.to_json()) == record
    text = explain(replace(record, detail="(the detail's words are not what is shown below)"))
    block = text[text.index("Costs weighed") :]
    assert "waiting cost less: held (NotWorthIt)" in block and "at 2,000 rec/s offered" in block
    assert f"changing now: {weighing.change.total:,.0f} slot-s = " in block
    assert f"waiting:      {weighing.wait.total:,.0f} slot-s = " in block
    assert "1 restart +" in block and "0 restarts +" in block and "s above the lag target" in block
    earlier = explain(record_from_outcome(outcome_of(weighed(1800.0), options=COSTED)), earlier=[record])
    assert f"costs: changing now {weighing.change.total:,.0f} slot-s, waiting" in earlier


def test_explain_shows_both_costs_of_a_change_that_paid_and_none_without_cost_enabled():
    paid = record_from_outcome(outcome_of(weighed(1800.0), options=COSTED))
    assert paid.outcome == Reason.SCALING and paid.cost is not None and paid.cost.worth_it
    assert "changing cost less: the change was made" in explain(paid)
    plain = record_from_outcome(outcome_of(weighed(1800.0, OPTS)))
    assert plain.cost is None and plain.above_lag_target is None
    assert "Costs weighed" not in explain(plain) and "Lag target" not in explain(plain)


def test_explain_reports_the_seconds_above_the_lag_target_over_the_kept_decisions():
    """Judged at each tick from the sources' lag, rate and the job's capacity: 30 s of lag target is
    60,000 records at 2,000 rec/s. Each tick found above counts the time since the previous record."""
    target = COSTED.model_copy(update={"lag_target": timedelta(seconds=30)})
    behind = record_from_outcome(outcome_of(weighed(2500.0, target, lag=100_000.0), options=target))
    within = record_from_outcome(outcome_of(weighed(2500.0, target, lag=1_000.0), options=target))
    assert behind.above_lag_target is True and within.above_lag_target is False
    kept: tuple[DecisionRecord, ...] = ()
    in_band = replace(within, outcome=str(Reason.IN_BAND))  # another decision: a run of its own
    for n, r in enumerate([within, behind, behind, behind, in_band]):
        kept = add_decision(kept, replace(r, ts_ms=NOW + n * 10_000), keep=20)
    assert [(r.ticks, r.lag_above_target_s) for r in kept] == [(4, 30.0), (1, 0.0)]
    text = explain(kept[-1], earlier=kept[:-1])
    assert (
        "Lag target (lag.target 30 s): within it at the decision, 0 s above it over this decision's run"
        in text
    )
    assert "30 s above it over the 2 decisions kept since" in text
    assert "lag target: above it at the decision, 30 s above it over this decision's run" in text
    catch_up = record_from_outcome(outcome_of(weighed(2500.0, lag=100_000.0), options=COSTED))
    assert "Lag target (lag.target unset: the catch-up bound, catch-up.duration): within it" in explain(
        catch_up
    )
