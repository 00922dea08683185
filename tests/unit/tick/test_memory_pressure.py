"""The heap gate over a real window: collect (simulated Flink) -> Spark -> decide.

The reference compares the window *average* of heap used / max with ``memory.heap-usage.threshold``
(``ScalingExecutor#isJobUnderMemoryPressure``); one spiky sample must not block, and a calm one after
a full window must not unblock.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from autoscaler.clock import FakeClock
from autoscaler.collect import MetricNameCache, collect
from autoscaler.evaluate import SparkEvaluator
from autoscaler.flink.client import FlinkClient
from autoscaler.model import HEAP_USAGE_RATIO, JobRef, JobSample, JobTarget, TaskManagerSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, work_job
from autoscaler.simulator import transport as sim_transport
from autoscaler.state import JobState
from autoscaler.tick.decide import decide

pytestmark = pytest.mark.spark

GATED = AutoscalerOptions(
    enabled=True,
    metrics_window=timedelta(seconds=30),
    stabilization_interval=timedelta(0),
    memory_heap_usage_threshold=0.8,
)


@pytest.mark.parametrize(
    ("heap", "blocked"),
    [([0.5, 0.5, 0.5, 0.99], False), ([0.99, 0.99, 0.99, 0.7], True)],
    ids=["spike-at-the-end", "calm-at-the-end"],
)
async def test_heap_gate_follows_the_window_average(
    spark: Any, clock: FakeClock, heap: list[float], blocked: bool
) -> None:
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(work_job(input_rate=Constant(rate=2000.0), work_parallelism=1))
    target = JobTarget(JobRef("sim", job_id, "load-job"), GATED)
    clock.advance(120)
    evaluator, cache = SparkEvaluator(spark), MetricNameCache()
    async with FlinkClient("http://flink", cluster="sim", transport=sim_transport(cluster)) as client:
        for ratio in heap:
            tms = TaskManagerSample(heap_used=ratio * 1024, heap_max=1024.0)
            sample = await collect(client, target, clock.now_ms(), cache, tms, warm_up_pause_s=0)
            assert isinstance(sample, JobSample), sample
            evaluation = evaluator.evaluate([sample], clock.now_ms())[sample.job.key]
            clock.advance(10)

    current, average = evaluation.custom_metric(HEAP_USAGE_RATIO)
    assert current == pytest.approx(heap[-1])
    assert min(heap) < average < max(heap)  # more than the last sample is in the window
    decision = decide(evaluation, JobState(), GATED, clock.now_ms())
    assert (decision.outcome is Reason.MEMORY_PRESSURE) is blocked
    if not blocked:
        assert decision.outcome is Reason.SCALING  # Work 1 -> 3 despite the last sample's 0.99
