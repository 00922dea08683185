"""A back-pressured vertex is sized for the load offered upstream, not for its own throughput (issue 36
item 5).

The real daemon against the simulator with the lab's network buffers: 2,700 rec/s offered to Work at
p = 2 (2,500 rec/s). For the first 110 s the buffers in front of Work take the difference, so the
source reads (and emits) all 2,700 rec/s with no lag and no back-pressure while Work reads its 2,500 at
100 % busy: what real Flink reported on the ramp. Work's target data rate must be the 2,700 offered,
which takes it to 4 (round(2700 * 60/1800 + 2700/0.7) = 3947 > 3 * 1250); its own 2,500 would give 3
(3654 <= 3750), where it would run at 90 % and a further rise would need another restart.
"""

from __future__ import annotations

import pytest
from sim_world import QUICK, sim_world

from autoscaler.reasons import Reason
from autoscaler.simulator.engine.job import LAB_IN_FLIGHT_RECORDS
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS, work_job
from autoscaler.simulator.spec import Constant

SOURCE, WORK = LAB_VERTEX_IDS["Source: BacklogSource"], LAB_VERTEX_IDS["Work"]
OFFERED = 2700.0
LAB = {**QUICK, "job.autoscaler.metrics.window": "30 s"}  # the recommended profile: restart.time 1 min


async def test_work_is_sized_for_the_load_the_source_reads_while_the_buffers_fill() -> None:
    world = sim_world(8, LAB)
    job_id = world.sim.submit(
        work_job(input_rate=Constant(OFFERED), work_parallelism=2, in_flight_records=LAB_IN_FLIGHT_RECORDS)
    )
    for _ in range(10):
        await world.tick()
        scaled = [o for o in world.outcomes if o.outcome is Reason.SCALING]
        if scaled:
            break
    else:
        pytest.fail("no rescale")
    assert world.sim.backlog(job_id) == 0, "the buffers took the difference: no lag yet"
    decision = scaled[0].decision
    assert decision is not None
    work, source = decision.evaluation.vertices[WORK], decision.evaluation.vertices[SOURCE]
    assert work.true_processing_rate == pytest.approx(2500, rel=0.01)  # Work reads its capacity
    assert source.target_data_rate == pytest.approx(OFFERED, rel=0.01)
    assert work.target_data_rate == pytest.approx(OFFERED, rel=0.01)  # not its own 2,500
    assert scaled[0].realized is not None
    assert {vid: b.upper for vid, b in scaled[0].realized.requirements.items()}[WORK] == 4
