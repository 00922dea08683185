"""Arbitration of free slots in a slot-limited session cluster: the real daemon, the simulator (whose
adaptive scheduler runs a restarting job on its own slots and the free ones), three competing jobs.

Ten slots, three jobs at parallelism 1 (seven free), each under-provisioned for a load that needs Work
at about 5: together they want more than is free. The job of higher ``scaling.slot-priority`` claims
first, then the one with the most backlog, and the third is held back with an event and a metric saying
why.
"""

from __future__ import annotations

from sim_world import sim_world

from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant

RATE = 4000.0  # Work at 1250 rec/s per subtask and 70 % utilization: parallelism 5


async def test_competing_rescales_share_the_free_slots_by_priority_then_backlog() -> None:
    world = sim_world(10)
    sim, events, metrics, outcomes = world.sim, world.events, world.metrics, world.outcomes
    jobs = {
        "urgent": sim.submit(
            work_job(
                name="urgent",
                input_rate=Constant(rate=RATE),
                job_config={"job.autoscaler.scaling.slot-priority": "10"},
            )
        ),
        "behind": sim.submit(work_job(name="behind", input_rate=Constant(rate=RATE), initial_backlog=2e6)),
        "calm": sim.submit(work_job(name="calm", input_rate=Constant(rate=RATE))),
    }
    for _ in range(30):
        await world.tick()
        if any(o.outcome is Reason.SCALING for o in outcomes):
            break
    decided = {o.job.name: o for o in outcomes[-3:]}
    assert set(decided) == set(jobs), "the three jobs decide in one tick"

    # The urgent job first: all it asked for. Then the job with the backlog: what is left (capped).
    urgent, behind, calm = decided["urgent"], decided["behind"], decided["calm"]
    assert urgent.outcome is Reason.SCALING and urgent.realized is not None
    urgent_p = max(b.upper for b in urgent.realized.requirements.values())
    assert behind.outcome is Reason.SCALING and behind.realized is not None
    behind_p = max(b.upper for b in behind.realized.requirements.values())
    assert urgent_p >= 5 and behind_p > 1 and (urgent_p - 1) + (behind_p - 1) == 7  # every free slot
    assert "asking for what fits" in behind.detail
    # The calm job: nothing left, so it waits, and says who took the slots.
    assert calm.outcome is Reason.WAITING_FOR_SLOTS
    (held,) = [e for e in events.events("sim/calm") if e.reason is Reason.SCALING_LIMITED]
    assert "sim/urgent (priority 10" in held.message and "sim/behind (priority 0" in held.message
    assert held.message.index("sim/urgent") < held.message.index("sim/behind")
    assert (
        metrics.registry.get_sample_value(
            "flink_autoscaler_slot_limited_rescales_total",
            {"cluster": "sim", "job": "calm", "action": "waited", "why": "claimed"},
        )
        == 1
    )

    # Flink (the simulator) runs what was asked: the cluster's ten slots, none over.
    for _ in range(6):
        await world.tick()
    running = {name: max(sim.parallelism(job_id).values()) for name, job_id in jobs.items()}
    assert running == {"urgent": urgent_p, "behind": behind_p, "calm": 1}
    assert sum(running.values()) == 10
