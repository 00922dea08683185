"""collect_taskmanagers(): the cluster-wide TaskManager sample, all NaN when it cannot be read."""

from __future__ import annotations

import math

import httpx
import respx
from collect_flink import (
    BASE,
    FakeFlink,
)

from autoscaler.collect import MemoryUsage, MetricNameCache, collect_taskmanagers
from autoscaler.flink.client import FlinkClient
from autoscaler.model import TaskManagerSample

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- TaskManagers
async def test_taskmanager_sample_from_the_recorded_answer(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    tms = await collect_taskmanagers(client, cache)
    assert tms == TaskManagerSample(
        gc_time_ms_per_s=0.0,
        heap_used=150132896.0,
        heap_max=436207616.0,
        cpu_load_avg=0.01971557853910795,
        managed_used=0.0,
        metaspace_used=58_000_000.0,  # the max over TaskManagers, as the reference reads it
    )
    [(_, names)] = fake.queried
    assert "Status.JVM.GarbageCollector.All.TimeMsPerSecond" in names
    await collect_taskmanagers(client, cache)
    assert fake.listed["tm"] == 1  # the name choice is cached per cluster


async def test_taskmanager_gc_left_nan_when_not_listed(fake: FakeFlink, client: FlinkClient) -> None:
    fake.tm_listing.remove("Status.JVM.GarbageCollector.All.TimeMsPerSecond")
    tms = await collect_taskmanagers(client, MetricNameCache())
    assert math.isnan(tms.gc_time_ms_per_s)
    assert (tms.heap_used, tms.heap_max) == (150132896.0, 436207616.0)
    [(_, names)] = fake.queried
    assert "Status.JVM.GarbageCollector.All.TimeMsPerSecond" not in names


async def test_taskmanager_failure_is_all_nan(client: FlinkClient) -> None:
    with respx.mock(base_url=BASE) as router:
        router.route().mock(side_effect=httpx.ConnectError("refused"))
        tms = await collect_taskmanagers(client, MetricNameCache())
    assert all(math.isnan(v) for v in (tms.gc_time_ms_per_s, tms.heap_used, tms.heap_max, tms.cpu_load_avg))


async def test_taskmanager_empty_answer_is_all_nan_and_relists(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    fake.empty_answers["tm"] += 1
    assert math.isnan((await collect_taskmanagers(client, cache)).heap_used)
    assert (await collect_taskmanagers(client, cache)).heap_used == 150132896.0
    assert fake.listed["tm"] == 2


def test_memory_usage_averages_the_cluster_window_of_each_max_over_taskmanagers() -> None:
    usage = MemoryUsage()
    first = usage.observe(
        TaskManagerSample(heap_used=100.0, managed_used=0.0, metaspace_used=10.0), 0, 60_000
    )
    assert (first.heap_used_avg, first.managed_used_avg, first.metaspace_used_avg) == (100.0, 0.0, 10.0)
    usage.observe(
        TaskManagerSample(heap_used=300.0, managed_used=math.nan, metaspace_used=20.0), 30_000, 60_000
    )
    late = usage.observe(TaskManagerSample(heap_used=500.0, metaspace_used=30.0), 70_000, 60_000)
    # The sample at 0 left the window; NaN (unread) values count for nothing.
    assert (late.heap_used_avg, late.metaspace_used_avg) == (400.0, 25.0) and math.isnan(
        late.managed_used_avg
    )
