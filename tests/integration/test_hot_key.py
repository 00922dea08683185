"""A hot key: the real daemon against the simulator, a keyed vertex whose load sits on one subtask.

``Keyed`` runs at 4 subtasks of 1,000 rec/s each, but half its records carry one key, so subtask 0
receives 62.5 % of them: the vertex tops out at 1,600 rec/s, and at parallelism 8 only at 1,778. The
source offers 2,000 rec/s. The daemon sees subtask 0 saturated, its busy time (the max over subtasks)
says the vertex is, and it asks for more parallelism, which cannot spread one key.

With the built-in ``hot-key-guard`` executor plugin enabled, the collector's slow-subtask reading (one
extra request for that vertex) names the hot key, and the plugin holds the scale-up back, saying why.
Without it, the daemon restarts the job for a scale-up that leaves subtask 0 as busy as before.
"""

from __future__ import annotations

import pytest
from sim_world import QUICK, sim_world

from autoscaler.explain import record_from_outcome
from autoscaler.explain.render import explain
from autoscaler.metrics import MetricsReporter
from autoscaler.plugins.configured import PluginInstances
from autoscaler.plugins.loader import discover_plugins
from autoscaler.reasons import Reason
from autoscaler.simulator.spec import Constant, SimEdgeSpec, SimJobSpec, SimVertexSpec

GUARD = {
    "job.autoscaler.scaling.custom-executors": "hot-key",
    "job.autoscaler.scaling.custom-executor.hot-key.class": "hot-key-guard",
}


def hot_key_job() -> SimJobSpec:
    return SimJobSpec(
        name="clicks",
        vertices=(
            SimVertexSpec(name="Source: Clicks", capacity_per_subtask=100_000.0, parallelism=2),
            SimVertexSpec(name="Keyed", capacity_per_subtask=1000.0, parallelism=4, hot_key_share=0.5),
            SimVertexSpec(name="Sink: Store", capacity_per_subtask=50_000.0, parallelism=2, output_ratio=0.0),
        ),
        edges=(
            SimEdgeSpec(source="Source: Clicks", target="Keyed", ship_strategy="HASH"),
            SimEdgeSpec(source="Keyed", target="Sink: Store", ship_strategy="FORWARD"),
        ),
        input_rate=Constant(rate=2000.0),
    )


async def run(guarded: bool, ticks: int = 24):
    registry, _ = discover_plugins()
    world = sim_world(
        32,
        {**QUICK, **(GUARD if guarded else {})},
        metrics=MetricsReporter(vertex_metrics="all"),
        plugins=PluginInstances(registry),
    )
    job_id = world.sim.submit(hot_key_job())
    for _ in range(ticks):
        await world.tick()
    return world.sim, job_id, world.events, world.metrics, world.outcomes


async def test_the_hot_key_guard_holds_back_a_scale_up_that_cannot_spread_one_key() -> None:
    sim, job_id, events, metrics, outcomes = await run(guarded=True)

    # The collector named the hot key: subtask 0 of Keyed, with 62.5 % of its records.
    (slow,) = {e.message for e in events.events("sim/clicks") if e.reason is Reason.SLOW_SUBTASKS}
    assert slow.startswith("Keyed: subtask 0 of 4 is slow, busy 1,000 ms/s against a median of 200;")
    assert "it receives 1,000 rec/s against a median of 200 (62% of the vertex's records)" in slow
    assert slow.endswith("a hot key, which more parallelism cannot spread")
    labels = {"cluster": "sim", "job": "clicks"}
    assert metrics.registry.get_sample_value("flink_autoscaler_job_slow_subtasks", labels) == 1
    keyed = {**labels, "vertex": sim.vertex_ids(job_id)["Keyed"], "vertex_name": "Keyed"}
    skew = metrics.registry.get_sample_value("flink_autoscaler_vertex_busy_skew", keyed)
    assert skew == pytest.approx(1000 / 400, rel=0.05)  # busy [1000, 200, 200, 200]: max / avg

    # The scaler wanted Keyed up; the plugin held it, and nothing else was to change: vetoed, with why.
    vetoed = [o for o in outcomes if o.outcome is Reason.SCALING_VETOED]
    assert vetoed, [o.outcome for o in outcomes]
    assert "scale-up of Keyed 4 -> " in vetoed[-1].detail and "a hot key" in vetoed[-1].detail
    (veto_event,) = {e.message for e in events.events("sim/clicks") if e.reason is Reason.SCALING_VETOED}
    assert "executor plugin hot-key: ScalingVetoed (scale-up of Keyed 4 -> " in veto_event
    assert sim.parallelism(job_id) == {"Source: Clicks": 2, "Keyed": 4, "Sink: Store": 2}  # no restart

    # explain shows the slow subtask under the vertex, and the plugin's reason.
    text = explain(record_from_outcome(vetoed[-1]))
    assert "Keyed: subtask 0 of 4 is slow" in text and "busy-time skew 2.50" in text
    assert "hot-key: VETOED (scale-up of Keyed 4 -> 8 held, and nothing else changes: Keyed: subtask" in text


async def test_without_the_guard_a_restart_buys_a_scale_up_that_leaves_the_hot_subtask_busy() -> None:
    sim, job_id, _, _, outcomes = await run(guarded=False)
    assert any(o.realized is not None for o in outcomes)
    assert sim.parallelism(job_id)["Keyed"] > 4
    # The hot subtask is as saturated as before: the new subtasks share only the other keys.
    latest = [o for o in outcomes if o.decision is not None and o.decision.evaluation is not None][-1]
    keyed = sim.vertex_ids(job_id)["Keyed"]
    assert latest.decision.evaluation.sample.skew[keyed].hot_key
