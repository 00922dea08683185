"""collect_taskmanagers(): the cluster-wide TaskManager sample, all NaN when it cannot be read."""

from __future__ import annotations

import math

import httpx
import respx
from collect_flink import (
    BASE,
    FakeFlink,
)

from autoscaler.collect import MetricNameCache, collect_taskmanagers
from autoscaler.flink.client import FlinkClient
from autoscaler.model import TaskManagerSample

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- TaskManagers
async def test_taskmanager_sample_from_the_recorded_answer(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    tms = await collect_taskmanagers(client, cache)
    assert tms == TaskManagerSample(
        gc_time_ms_per_s=0.0, heap_used=150132896.0, heap_max=436207616.0, cpu_load_avg=0.01971557853910795
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
