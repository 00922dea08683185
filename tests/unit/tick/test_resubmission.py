"""A job resubmitted under its name with a new JobID (a JobManager restarted without HA, a user's
resubmission): the daemon notices, says so once, keeps the name's scaling history and drops what was
in flight for the old JobID (fault probe, issue 12).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
from daemon_world import World
from structlog.testing import capture_logs
from told import Told, told

from autoscaler.evaluate.stage import Evaluated
from autoscaler.model import JobRef, VertexEvaluation
from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant
from autoscaler.state import DelayedScaleDown, JobState, PendingRescale, ScalingRecord
from autoscaler.state.codec import (
    RECORD_VERSION,
    STATE_VERSION,
    CodecError,
    decode_record,
    decode_state,
    encode_record,
    encode_state,
)
from autoscaler.state.events import EventType
from autoscaler.state.tick import Loaded
from autoscaler.testing import StubEvaluator, make_evaluation, vertex_eval
from autoscaler.tick.decide import decide_jobs
from autoscaler.tick.steps import JobStep

OLD, NEW = "a" * 32, "b" * 32
KEY = "c1/job"
HISTORY = (ScalingRecord(1_000, {"w": (1, 2)}, confirmed_ms=2_000, restart_duration_ms=30_000),)


def old_jobs_state(**changes: object) -> JobState:
    """What the old JobID left: a rescale in flight, two stuck ones before it, a held scale-down."""
    fields: dict[str, object] = {
        "last_rescale_ms": 5_000,
        "pending": PendingRescale(OLD, 5_000, {"w": 4}, {"w": 2}),
        "delayed_scale_down": {"w": DelayedScaleDown(3_000, ((3_000, 1),))},
        "history": HISTORY,
        "overrides": {"w": 4},
        "stuck_rescales": 2,
        "stuck_ms": 4_000,
        "refused_rescales": 1,
        "refused_ms": 4_500,
        "job_id": OLD,
    }
    fields.update(changes)
    return JobState(**fields)  # type: ignore[arg-type]


async def decide_steps(
    job_id: str, state: JobState, now_ms: int = 100_000, vertex: VertexEvaluation | None = None
) -> tuple[Told, list[JobStep]]:
    """One decide stage of the job running as ``job_id`` (by default in band at parallelism 2)."""
    evaluation = make_evaluation(
        [vertex or vertex_eval("w", 2)], job=JobRef("c1", job_id, "job"), running_since_ms=90_000
    )
    steps = await decide_jobs(
        [evaluation.sample],
        Loaded(states={KEY: state}),
        Evaluated({KEY: evaluation}),
        now_ms,
        flink_cooldown_ms={"c1": 0},
        confirm_timeout=timedelta(minutes=5),
    )
    return told(steps, now_ms=now_ms), steps


async def decide_for(job_id: str, state: JobState, now_ms: int = 100_000) -> Told:
    return (await decide_steps(job_id, state, now_ms))[0]


def resubmissions(rec: Told) -> list[tuple[EventType, str]]:
    return [(e.type, e.message) for e, _ in rec.events if e.reason is Reason.JOB_RESUBMITTED]


async def test_a_new_jobid_keeps_the_history_and_drops_the_old_jobids_rescale_once():
    with capture_logs() as logs:
        rec = await decide_for(NEW, old_jobs_state())

    state = rec.states[KEY]
    assert state.job_id == NEW
    # What the job name learned; the records stored without a JobID are the old JobID's now.
    assert state.history == tuple(replace(r, job_id=OLD) for r in HISTORY) and state.last_rescale_ms == 5_000
    assert state.pending is None and (state.stuck_rescales, state.stuck_ms) == (0, None)
    assert (state.refused_rescales, state.refused_ms) == (0, None)
    assert state.delayed_scale_down == {} and state.overrides == {}
    [(kind, text)] = resubmissions(rec)
    assert kind is EventType.WARNING  # a rescale in flight was dropped
    assert f"JobID {OLD} -> {NEW}" in text and "kept the job name's scaling history (1 rescales)" in text
    assert "unconfirmed rescale to {'w': 4}" in text and "2 stuck rescale(s)" in text
    [line] = [entry for entry in logs if entry["event"] == "job_resubmitted"]
    assert (line["old_job_id"], line["job_id"], line["log_level"]) == (OLD, NEW, "warning")
    counted = rec.metrics.registry.get_sample_value(
        "flink_autoscaler_job_resubmissions_total", {"cluster": "c1", "job": "job"}
    )
    assert counted == 1

    again = await decide_for(NEW, state, now_ms=110_000)  # the next tick finds the new JobID saved
    assert resubmissions(again) == [] and again.states[KEY].job_id == NEW


async def test_a_resubmission_with_nothing_in_flight_is_a_normal_event():
    rec = await decide_for(NEW, JobState(last_rescale_ms=5_000, history=HISTORY, job_id=OLD))
    [(kind, text)] = resubmissions(rec)
    assert kind is EventType.NORMAL and "unconfirmed" not in text and "stuck" not in text
    # What it does drop is said: the old JobID's confirmed rescale no longer stands for the new one.
    assert "its standing request" in text
    assert [r.changes for r in rec.states[KEY].history] == [r.changes for r in HISTORY]


async def test_state_stored_before_the_jobid_was_kept_learns_it_from_its_pending_rescale():
    """An upgrade: the stored state has no JobID. Its pending rescale names the JobID it went to."""
    rec = await decide_for(NEW, old_jobs_state(job_id=None))
    assert len(resubmissions(rec)) == 1 and rec.states[KEY].pending is None

    quiet = await decide_for(NEW, JobState(last_rescale_ms=5_000, history=HISTORY))
    assert resubmissions(quiet) == []  # nothing to compare with: the JobID is learnt, nothing dropped
    assert quiet.states[KEY] == JobState(last_rescale_ms=5_000, history=HISTORY, job_id=NEW)

    own = await decide_for(
        NEW, old_jobs_state(job_id=None, pending=PendingRescale(NEW, 99_000, {"w": 2}, {}))
    )
    assert resubmissions(own) == [] and own.states[KEY].job_id == NEW  # its own rescale: just learnt


async def test_a_job_resubmitted_on_the_cluster_is_noticed_once_and_its_stuck_rescale_not_inherited():
    """End to end on the simulator: the old JobID's rescale was accepted but never ran (RescaleStuck,
    then another one pending); the job is resubmitted. Before, the new JobID silently inherited the
    stuck count, and so the backoff that holds its own first rescale back."""
    w = World(StubEvaluator({"Work": 3}), confirm_timeout_s=60)
    w.transports["a"].faults[("PUT", r".*/resource-requirements")] = httpx.Response(200, json={})
    old_id = w.jobs["a"]
    for _ in range(20):  # Work 1 -> 3 requested, never runs: stuck after confirm_timeout
        await w.tick()
        if w.state.load("a/job-a").stuck_rescales:
            break
    old = w.state.load("a/job-a")
    assert old.stuck_rescales == 1 and old.history

    w.sims["a"].cancel(old_id)  # the JobManager lost the job (no HA); it is submitted again
    new_id = w.sims["a"].submit(work_job(name="job-a", input_rate=Constant(rate=2000.0)))
    del w.transports["a"].faults[("PUT", r".*/resource-requirements")]
    outcomes = [(await w.tick()).for_job("job-a") for _ in range(3)]

    events = [e for e in w.events.events("a/job-a") if e.reason is Reason.JOB_RESUBMITTED]
    assert len(events) == 1 and events[0].count == 1  # once per change, not once per tick
    assert f"JobID {old_id} -> {new_id}" in events[0].message and "1 stuck rescale(s)" in events[0].message
    assert Reason.JOB_RESUBMITTED not in w.events.reasons("b/job-b")
    assert all(o is None or o.outcome is not Reason.RESCALE_STUCK for o in outcomes)
    state = w.state.load("a/job-a")
    assert state.stuck_rescales == 0 and state.job_id == new_id
    assert state.pending is None or state.pending.job_id == new_id  # nothing pending for the old one
    assert state.history[: len(old.history)] == old.history  # the name's history is kept


# Work 1 -> 6, confirmed: Flink held 6 as the old JobID's requirements; no full window measured it yet.
ASKED_OF_OLD = ScalingRecord(
    5_000, {"w": (1, 6)}, confirmed_ms=6_000, restart_duration_ms=1_000, metrics={"w": (1000.0, 6000.0)}
)


@pytest.mark.parametrize("stored_job_id", [OLD, None], ids=["record with its JobID", "record stored before"])
async def test_the_old_jobids_rescale_is_no_standing_request_of_the_new_one_nor_verified_by_it(
    stored_job_id: str | None,
):
    """The new JobID runs Work at 1, as submitted, and its own metrics call for 6: a rescale, not
    ``WaitingForSlots`` behind the old JobID's request; its full window verifies nothing of the old."""
    record = replace(ASKED_OF_OLD, job_id=stored_job_id)
    state = JobState(last_rescale_ms=5_000, history=(record,), job_id=OLD)
    calls_for_six = vertex_eval("w", 1, 6)

    same, (held,) = await decide_steps(OLD, state, vertex=calls_for_six)  # the old JobID, run below it
    assert held.outcome is not None and held.outcome.outcome is Reason.WAITING_FOR_SLOTS
    assert "Flink runs w at 1 of the 6 asked" in held.outcome.detail

    rec, (step,) = await decide_steps(NEW, state, vertex=calls_for_six)
    assert step.outcome is None and step.decision is not None  # on to the executor chain and the PUT
    assert step.decision.outcome is Reason.SCALING and step.decision.changes["w"].target == 6
    assert Reason.SCALING_VERIFIED not in {e.reason for e, _ in rec.events}
    assert Reason.SCALING_VERIFIED in {e.reason for e, _ in same.events}  # its own JobID does verify it
    short = "flink_autoscaler_job_slots_short_of_request"
    assert rec.metrics.registry.get_sample_value(short, {"cluster": "c1", "job": "job"}) == 0
    assert same.metrics.registry.get_sample_value(short, {"cluster": "c1", "job": "job"}) == 5


def test_a_resubmission_keeps_the_records_and_gives_those_stored_without_a_jobid_the_old_one():
    mine = replace(ASKED_OF_OLD, ts_ms=1_000, job_id="9" * 32)
    state = JobState(history=(mine, ASKED_OF_OLD), job_id=OLD)
    assert state.last_scaling_of_job_id == ASKED_OF_OLD  # stored before records kept it: the current's

    after = state.for_resubmission(NEW)
    assert after.history == (mine, replace(ASKED_OF_OLD, job_id=OLD))
    assert after.last_scaling_of_job_id is None
    assert replace(after, history=(*after.history, replace(mine, job_id=NEW))).last_scaling_of_job_id


def test_a_records_jobid_round_trips_and_a_record_without_it_encodes_as_before():
    record = replace(ASKED_OF_OLD, job_id=NEW)
    text = encode_record(record)
    assert json.loads(text)["job_id"] == NEW and decode_record(RECORD_VERSION, text) == record
    assert "job_id" not in encode_record(ASKED_OF_OLD)
    assert decode_record(RECORD_VERSION, encode_record(ASKED_OF_OLD)).job_id is None
    with pytest.raises(CodecError, match=r"record\.job_id"):
        decode_record(RECORD_VERSION, '{"ts_ms": 1, "changes": {}, "job_id": 7}')


def test_the_jobid_round_trips_and_state_without_it_encodes_as_before():
    state = JobState(last_rescale_ms=1, job_id=NEW)
    text = encode_state(state)
    assert json.loads(text)["job_id"] == NEW and decode_state(STATE_VERSION, text) == state
    assert "job_id" not in encode_state(JobState(last_rescale_ms=1))  # as an older version wrote it
    old = '{"last_rescale_ms":5,"pending":null,"overrides":{},"delayed_scale_down":{}}'
    assert decode_state(STATE_VERSION, old).job_id is None
    with pytest.raises(CodecError, match="job_id"):
        decode_state(STATE_VERSION, '{"job_id": 7}')
