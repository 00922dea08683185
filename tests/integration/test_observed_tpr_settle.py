"""A load step with a short window: the source is not sized from Flink's meters straddling the step.

The real daemon against the simulator (whose ``numRecordsInPerSecond`` meter and back-pressure gauge
average the last 60 s, as Flink's do). Work is the bottleneck, so after the step from 500 to 4,000 rec/s
the source is back-pressured and its backlog grows: it is catching up, and its observed true processing
rate is measured. Within the minute after the step both views still hold the calm before it, so the
quotient is a fraction of the source's capacity (100,000 rec/s). With rates from Flink's meters (the
observed TPR then competes with the busy-time one) a window restarted at the step decided on that
fraction: Source 1 -> 8. With the settle time, only Work scales.
"""

from __future__ import annotations

import pytest
from sim_world import QUICK, sim_world

from autoscaler.reasons import Reason
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS, work_job
from autoscaler.simulator.spec import Steps

STEP_S = 300
SOURCE, WORK = LAB_VERTEX_IDS["Source: BacklogSource"], LAB_VERTEX_IDS["Work"]
METERS = {
    **QUICK,
    "job.autoscaler.metrics.window": "30 s",
    "job.autoscaler.metrics.prefer-counter-rates": "false",  # the observed TPR competes
}


async def first_rescale(settle: str) -> dict[str, int]:
    world = sim_world(20, {**METERS, "job.autoscaler.observed-true-processing-rate.settle-time": settle})
    submitted_ms = world.clock.now_ms()
    world.sim.submit(work_job(name="step", input_rate=Steps(steps=[(0, 500.0), (STEP_S, 4000.0)])))
    for _ in range(45):
        await world.tick()
        scaled = [o for o in world.outcomes if o.outcome is Reason.SCALING]
        if scaled:
            assert scaled[0].realized is not None
            assert world.clock.now_ms() - submitted_ms > STEP_S * 1000, "no rescale before the step"
            return {vid: b.upper for vid, b in scaled[0].realized.requirements.items()}
    pytest.fail("no rescale after the load step")


async def test_the_source_is_not_sized_from_meters_that_straddle_the_step() -> None:
    asked = await first_rescale("60 s")
    assert asked[SOURCE] == 1, asked  # the source keeps up at 1; only Work is short
    assert asked[WORK] == 5, asked  # 4,000 rec/s at 1,250 per subtask and 70 % utilization


async def test_without_the_settle_time_the_straddling_meters_oversize_the_source() -> None:
    asked = await first_rescale("0 s")  # the reference: every catching-up sample counts
    assert asked[SOURCE] >= 4, asked
