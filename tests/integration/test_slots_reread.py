"""Slots taken between a tick's reading and its claims are seen: the slot stage reads the free slots
again right before it claims them, for the clusters with a rescale that needs more.

Eight slots, ``grower`` at Work 1 under a load that needs about 5: seven free when the tick reads them.
While the tick decides, a job of someone else's takes five of them (here: an executor plugin submits it
to the simulated cluster, as a user or another daemon's shard could at that moment). With the tick's
reading the daemon would ask for all 5, and Flink would run Work at 3 and restart it again whenever
slots come free; with the new reading it asks for what fits, says why, and Flink runs what it asked.
"""

from __future__ import annotations

from sim_world import sim_world

from autoscaler.plugins import PluginContext, ScalingExecutorPlugin
from autoscaler.plugins.api import Changes
from autoscaler.plugins.configured import PluginInstances
from autoscaler.reasons import Reason
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.scenarios import work_job
from autoscaler.simulator.spec import Constant


class Intruder(ScalingExecutorPlugin):
    """Approves everything; the first time, a job of someone else's takes five slots meanwhile."""

    name = "intruder"

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.intruded = False

    def apply(self, context: PluginContext, changes: Changes) -> Changes:
        if not self.intruded:
            self.intruded = True
            self.sim.submit(work_job(name="intruder", work_parallelism=5, input_rate=Constant(rate=100.0)))
        return changes


async def test_slots_taken_while_the_tick_decided_are_not_claimed_again() -> None:
    world = sim_world(8)
    sim = world.sim
    intruder = Intruder(sim)
    world.daemon.plugins = PluginInstances(fixed=[intruder])
    grower = sim.submit(work_job(name="grower", input_rate=Constant(rate=4000.0)))
    for _ in range(30):
        await world.tick()
        if intruder.intruded:
            break
    (decided,) = [o for o in world.outcomes if o.job.name == "grower" and o.outcome is Reason.SCALING]
    assert decided.realized is not None
    asked = max(b.upper for b in decided.realized.requirements.values())
    assert asked == 3 and "asking for what fits" in decided.detail  # 1 + the 2 left free, not 5
    assert "2 are free" in decided.detail
    for _ in range(4):
        await world.tick()
    assert max(sim.parallelism(grower).values()) == 3
    below = [e for e in world.events.events("sim/grower") if "below" in e.key]
    assert not below, below  # Flink runs what was asked: no standing request above it
