"""A job Flink runs below its request gets the rest when slots come free: the real daemon, the
simulator's adaptive scheduler (which keeps the request and scales the job up after its cooldown when
another job gives slots back), and no second request from the daemon.

Eight slots: ``hog`` holds five (Work at 5, lightly loaded), ``grower`` one, under a load that needs Work
at about 5. With ``scaling.insufficient-slots: IGNORE`` the daemon asks for all of it; Flink runs what
fits (3) and keeps the request, which the daemon says once and counts as slots short. When ``hog`` is
cancelled, Flink takes ``grower`` to its request, and the daemon sends nothing more.
"""

from __future__ import annotations

from sim_world import QUICK, sim_world

from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant


async def test_a_job_below_its_request_reaches_it_when_slots_come_free_without_a_second_request() -> None:
    world = sim_world(8, {**QUICK, "job.autoscaler.scaling.insufficient-slots": "IGNORE"})
    sim = world.sim
    hog = sim.submit(work_job(name="hog", work_parallelism=5, input_rate=Constant(rate=500.0)))
    grower = sim.submit(work_job(name="grower", input_rate=Constant(rate=4000.0)))
    short = {"cluster": "sim", "job": "grower"}

    def slots_short() -> float | None:
        return world.metrics.registry.get_sample_value("flink_autoscaler_job_slots_short_of_request", short)

    for _ in range(30):
        await world.tick()
        if slots_short():
            break
    asked = max(b[1] for b in sim.resource_requirements(grower).values())
    assert asked >= 5 and sim.parallelism(grower)["Work"] == 3  # 2 free + its own 1
    assert slots_short() == asked - 3
    limited = [e.message for e in world.events.events("sim/grower") if e.reason is Reason.SCALING_LIMITED]
    assert sum(f"Flink runs Work at 3 of the {asked} asked" in m for m in limited) == 1
    rescales = sim.rescale_count(grower)

    sim.cancel(hog)
    for _ in range(12):
        await world.tick()
    assert sim.parallelism(grower)["Work"] == asked  # Flink scaled it up to the request ...
    assert sim.rescale_count(grower) == rescales + 1
    assert slots_short() == 0
    scalings = [o for o in world.outcomes if o.job.name == "grower" and o.realized is not None]
    assert len(scalings) == 1  # ... and the daemon asked once
