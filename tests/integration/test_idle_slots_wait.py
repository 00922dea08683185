"""A scale-up that needs the slots another job's scale-down leaves idle waits for them, and then restarts
once, onto all it needs, instead of restarting now onto fewer and again a minute later.

Eight slots: ``shrinker`` holds five (Work at 5 for a load that needs 1), ``grower`` one, for a load that
needs Work at about 5: two are free. Both decide in the same tick. The simulator's Flink, like Flink 2.3
(docs/e2e.md, "Slots"), keeps the shrinker's four idle slots for 70 s after its restart. With
``scaling.insufficient-slots: CAP`` the grower would be capped to 3 now; the daemon knows its own
scale-down leaves those slots idle and when they come back, so the grower waits for them, says so, and
is then asked for everything in one rescale.
"""

from __future__ import annotations

from sim_world import QUICK, sim_world

from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant
from autoscaler.state.events import EventType


async def test_a_scale_up_waits_for_the_slots_a_scale_down_left_idle_and_restarts_once() -> None:
    world = sim_world(8, {**QUICK, "job.autoscaler.scale-down.interval": "0 s"})
    sim = world.sim
    shrinker = sim.submit(work_job(name="shrinker", work_parallelism=5, input_rate=Constant(rate=500.0)))
    grower = sim.submit(work_job(name="grower", input_rate=Constant(rate=4000.0)))

    def outcomes_of(name: str) -> list[Reason]:
        return [o.outcome for o in world.outcomes if o.job.name == name]

    for _ in range(30):
        await world.tick()
        if Reason.SCALING in outcomes_of("shrinker"):
            break
    assert Reason.SCALING in outcomes_of("shrinker"), outcomes_of("shrinker")
    first = next(o for o in reversed(world.outcomes) if o.job.name == "grower")
    assert first.outcome is Reason.WAITING_FOR_SLOTS, first.detail
    assert "sim/shrinker (4)" in first.detail and "come free by" in first.detail
    (event,) = [e for e in world.events.events("sim/grower") if e.reason is Reason.SCALING_LIMITED]
    assert event.type is EventType.NORMAL
    waited = {"cluster": "sim", "job": "grower", "action": "waited", "why": "idle"}
    counter = world.metrics.registry.get_sample_value
    assert counter("flink_autoscaler_slot_limited_rescales_total", waited) >= 1

    # Flink keeps the shrinker's idle slots for 70 s after its restart: the grower waits, then is asked
    # for all of it at once.
    for _ in range(15):
        await world.tick()
        if Reason.SCALING in outcomes_of("grower"):
            break
    scaled = next(o for o in world.outcomes if o.job.name == "grower" and o.outcome is Reason.SCALING)
    assert scaled.realized is not None
    asked = max(b.upper for b in scaled.realized.requirements.values())
    assert asked >= 5 and "asking for what fits" not in scaled.detail
    assert scaled.now_ms - first.now_ms >= 60_000  # it did wait for the idle slots
    for _ in range(4):
        await world.tick()
    assert max(sim.parallelism(grower).values()) == asked
    assert sim.rescale_count(grower) == 1 and max(sim.parallelism(shrinker).values()) == 1
