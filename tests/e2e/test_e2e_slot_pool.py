"""Where a rescale's slots are between its PUT and its restarts: on the real cluster, then in the simulator.

The daemon decides what fits in the free slots Flink lists (``autoscaler/slot_fit.py``), so the
simulator must list the free slots Flink would at every moment (``autoscaler/simulator/engine/slots.py``).
On Flink 2.3 the adaptive scheduler declares a job's request to the resource manager at once:

* a PUT that raises it takes the free slots it wants within a second or two, while the job runs on at
  its old parallelism until the cooldown ends (the lab's is 10 s);
* a restart to fewer slots keeps the idle ones for about a minute (the default ``slot.idle.timeout`` is
  50 s) before they go back to the cluster.

One job, one slot-sharing group (a job holds as many slots as its widest vertex), Work taken 1 -> 2 -> 4
-> 1. The simulated lab then gets the same PUTs at the same moments, and must list the same free slots
at the moments that tell the two behaviours apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from harness import WORK, LoadJob, log, wait_until

from autoscaler.clock import FakeClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import SimClusterSpec

pytestmark = pytest.mark.e2e

SLOTS = 8


@dataclass(frozen=True)
class Seen:
    t: float  # seconds since the PUT it follows
    free: int
    work: int  # Work's running parallelism


def put_work(job: LoadJob, upper: int) -> float:
    """Ask for Work (and only Work) at ``upper``; the moment of the PUT (``time.time``)."""
    body = job.rest.get(f"/jobs/{job.job_id}/resource-requirements")
    work_id, _ = job.vertex(WORK)
    body[work_id]["parallelism"]["upperBound"] = upper
    response = job.rest.request("PUT", f"/jobs/{job.job_id}/resource-requirements", json=body)
    assert response.status_code == 200, response.text
    return time.time()


def watch(job: LoadJob, since: float, until: Callable[[Seen], bool], timeout_s: float) -> list[Seen]:
    """Free slots and Work's parallelism every quarter second, until ``until(seen)`` holds."""
    seen: list[Seen] = []
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        free = job.rest.get("/overview")["slots-available"]
        work = job.parallelism(WORK) if job.details()["state"] == "RUNNING" else 0
        seen.append(Seen(round(time.time() - since, 2), free, work))
        if until(seen[-1]):
            return seen
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout_s} s: {seen[-8:]}")


@pytest.mark.e2e_seconds(110)
def test_a_rescale_takes_its_slots_at_the_put_and_a_smaller_run_gives_them_back_later(submit_job, timings):
    test = "slot pool"
    job = submit_job(work_parallelism=1)
    put_work(job, 2)
    wait_until("Work at 2", lambda: job.parallelism(WORK) == 2 and job.details()["state"] == "RUNNING", 90)

    # In the cooldown that restart started: the two more slots leave the free ones long before Work runs
    # on them.
    up = put_work(job, 4)
    raised = watch(job, up, lambda s: s.work == 4, 60)
    taken = next(s for s in raised if s.free == SLOTS - 4)
    assert taken.work == 2 and taken.t <= 5.0, raised
    ran_at_4 = next(s for s in raised if s.work == 4).t
    assert ran_at_4 - taken.t >= 3.0, raised  # the slots were the job's, idle, until the cooldown ended
    timings.add(test, "a raised request's slots leave the free ones, after the PUT", taken.t)
    timings.add(test, "and the job runs on them, after the PUT", ran_at_4)

    # Down to 1: after its restart the job keeps its four slots for about a minute, then gives three back.
    down = put_work(job, 1)
    lowered = watch(job, down, lambda s: s.free == SLOTS - 1, 180)
    restart = next(s for s in lowered if s.work == 1).t
    released = lowered[-1].t - restart
    assert any(s.work == 1 and s.free == SLOTS - 4 and s.t - restart >= 30.0 for s in lowered), lowered
    log(f"{test}: restart to 1 {restart:.1f} s after the PUT, 3 idle slots released {released:.1f} s later")
    timings.add(test, "idle slots given back, after the restart to fewer", released)
    assert abs(released - SimClusterSpec().idle_slot_release_s) <= 25.0, (released, lowered[-5:])

    # The simulated lab, the same PUTs at the same moments: the same free slots where it matters.
    clock = FakeClock()
    sim = SimCluster(SimClusterSpec(slots=SLOTS, cooldown_after_rescaling_s=10, restart_pause_s=1), clock)
    sim_job = sim.submit(work_job(work_parallelism=1))

    def sim_put(upper: int) -> None:
        requirements = sim.resource_requirements(sim_job)
        requirements[sim.vertex_ids(sim_job)[WORK]] = (1, upper)
        sim.set_resource_requirements(sim_job, requirements)

    def sim_at(after_up_s: float) -> tuple[int, int]:
        """The simulator's free slots and Work's parallelism this long after its PUT to 4."""
        clock.advance(max(0.0, up_ms / 1000 + after_up_s - clock.now_ms() / 1000))
        return SLOTS - sim.slots_used(), sim.parallelism(sim_job)[WORK]

    clock.advance(11)  # past the cooldown since the start, as the real job's first PUT was
    sim_put(2)
    clock.advance(2)
    assert (SLOTS - sim.slots_used(), sim.parallelism(sim_job)[WORK]) == (SLOTS - 2, 2)
    up_ms = clock.now_ms()
    sim_put(4)
    assert sim_at(taken.t) == (SLOTS - 4, 2), "the slots are the job's before its restart"
    assert sim_at(ran_at_4 + 2.0) == (SLOTS - 4, 4)
    sim_at(down - up)
    sim_put(1)
    assert sim_at(down - up + restart + 30.0) == (SLOTS - 4, 1), "a smaller run keeps its idle slots"
    assert sim_at(down - up + restart + released + 30.0) == (SLOTS - 1, 1), "and gives them back"
