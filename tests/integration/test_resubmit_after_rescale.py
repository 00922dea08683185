"""A job rescaled, cancelled and resubmitted under its name is rescaled as soon as its own metrics call
for it (issue 36, item 1).

On real Flink a job went 1 -> 6, was cancelled and submitted again under the same name: a new JobID,
requirements 1..1, a new RUNNING timestamp. The daemon took Flink's request for the old JobID (its last
confirmed rescale) as standing for the new one: six ticks of ``WaitingForSlots`` ("Flink runs Work at 1
of the 6 asked") with 7 of 8 slots free, and then a ``ScalingVerified`` of the old rescale measured on
the new job. Here the same on the simulator, whose Flink does what real Flink does on a resubmission,
three ways: the daemon sees the job gone between the two runs, misses the cancel (both happen between
two ticks), or is down meanwhile and starts again on the same state database.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_world import TICK_S, SimWorld, sim_world

from autoscaler.daemon import Daemon
from autoscaler.evaluate.oracle.evaluator import PythonEvaluator
from autoscaler.metrics import MetricsReporter
from autoscaler.reasons import Reason
from autoscaler.simulator.rest import transport
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant
from autoscaler.state import open_stores
from autoscaler.tick.steps import JobOutcome

KEY = "sim/job"
LOAD = Constant(rate=4000.0)  # Work at 1 runs 1,250 rec/s: the load needs several subtasks


def restarted(world: SimWorld, url: str) -> Daemon:
    """A new daemon process on the same state database: nothing in memory survives but the clock."""
    return Daemon(
        world.daemon.settings,
        evaluator=PythonEvaluator(),
        clock=world.clock,
        state=open_stores(url).state,
        events=world.events,
        metrics=MetricsReporter(),
        transports={"sim": transport(world.sim)},
        on_outcome=world.outcomes.append,
    )


async def first_scaling(world: SimWorld, job_id: str, ticks: int) -> JobOutcome | None:
    """Tick until the daemon rescales ``job_id`` (at most ``ticks`` ticks)."""
    for _ in range(ticks):
        await world.tick()
        for outcome in world.outcomes:
            if outcome.job.job_id == job_id and outcome.outcome is Reason.SCALING:
                return outcome
    return None


def asked(outcome: JobOutcome) -> int:
    assert outcome.realized is not None
    return max(b.upper for b in outcome.realized.requirements.values())


@pytest.mark.parametrize("between", ["cancel seen", "cancel missed", "daemon restarted"])
async def test_a_resubmitted_job_is_rescaled_on_its_own_metrics_not_held_by_the_old_request(
    tmp_path: Path, between: str
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    world = sim_world(8, state=open_stores(url).state)
    sim = world.sim

    start_ms = world.clock.now_ms()
    old = sim.submit(work_job(name="job", input_rate=LOAD))
    scaled_old = await first_scaling(world, old, 30)
    assert scaled_old is not None, [(o.outcome, o.detail) for o in world.outcomes]
    took_ms = scaled_old.now_ms - start_ms  # what the job's own metrics take to call for a rescale
    target = asked(scaled_old)
    assert target > 2
    for _ in range(5):  # Flink restarts the job at the new parallelism; the daemon confirms it
        await world.tick()
        if world.daemon.state.load(KEY).pending is None:
            break
    before = world.daemon.state.load(KEY)
    assert before.pending is None and before.history[-1].confirmed_ms is not None
    assert before.history[-1].verification is None  # cancelled before a full window measured it
    assert max(sim.parallelism(old).values()) == target

    sim.cancel(old)
    if between == "cancel seen":
        await world.tick()
        await world.tick()
    elif between == "daemon restarted":
        world.daemon = restarted(world, url)
    resubmitted_ms = world.clock.now_ms()
    new = sim.submit(work_job(name="job", input_rate=LOAD))
    assert new != old and max(sim.parallelism(new).values()) == 1

    scaled_new = await first_scaling(world, new, took_ms // (TICK_S * 1000) + 2)
    mine = [o for o in world.outcomes if o.job.job_id == new]
    assert scaled_new is not None, [(o.outcome, o.detail) for o in mine]
    assert not [o for o in mine if o.outcome is Reason.WAITING_FOR_SLOTS]
    # As soon as its own metrics call for it: as long after its submission as the first run took
    # (one tick more at most: the resubmission falls between two ticks).
    assert scaled_new.now_ms - resubmitted_ms <= took_ms + TICK_S * 1000
    assert asked(scaled_new) == target  # the same load calls for what the old JobID was asked
    # The old JobID's rescale is not measured on the new job.
    assert Reason.SCALING_VERIFIED not in world.events.reasons(KEY)
    (event,) = [e for e in world.events.events(KEY) if e.reason is Reason.JOB_RESUBMITTED]
    assert f"JobID {old} -> {new}" in event.message

    after = world.daemon.state.load(KEY)
    assert after.job_id == new and after.history[0].changes == before.history[-1].changes  # history kept
    assert after.history[0].verification is None
    for _ in range(4):
        await world.tick()
    assert max(sim.parallelism(new).values()) == target
