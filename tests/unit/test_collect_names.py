"""The metric-name cache: listings kept per job until its vertex set changes, sources re-listed every tick."""

from __future__ import annotations

from collections import Counter

from collect_flink import (
    AGG,
    SRC,
    TARGET,
    WORK,
    FakeFlink,
    sample_job,
)

from autoscaler.collect import MetricNameCache
from autoscaler.flink.client import FlinkClient

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- name cache
async def test_names_cached_for_non_sources_relisted_for_sources(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    for _ in range(3):
        await sample_job(client, cache)
    assert fake.listed == Counter({SRC: 3, WORK: 1, AGG: 1})
    assert len(fake.queried) == 9  # every vertex's values are read every tick


async def test_lazily_appearing_pending_records_is_picked_up(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    fake.listings[SRC].remove("Source__BacklogSource.pendingRecords")
    assert (await sample_job(client, cache)).vertices[SRC].pending_records == 0.0
    fake.listings[SRC].append("Source__BacklogSource.pendingRecords")
    assert (await sample_job(client, cache)).vertices[SRC].pending_records == 66945.0


async def test_cache_dropped_when_the_vertex_set_changes(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await sample_job(client, cache)
    new_agg = "1" * 32
    fake.set_vertex(AGG, id=new_agg)
    fake.job["plan"]["nodes"][2]["id"] = new_agg
    fake.listings[new_agg], fake.values[new_agg] = fake.listings[AGG], fake.values[AGG]
    sample = await sample_job(client, cache)
    assert list(sample.vertices) == [SRC, WORK, new_agg]
    assert fake.listed == Counter({SRC: 2, WORK: 2, AGG: 1, new_agg: 1})


async def test_parallelism_change_keeps_the_cache(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await sample_job(client, cache)
    fake.set_vertex(WORK, parallelism=3)
    assert (await sample_job(client, cache)).topology.vertices[WORK].parallelism == 3
    assert fake.listed[WORK] == 1


async def test_forget_drops_a_job(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await sample_job(client, cache)
    cache.forget(TARGET.job.key)
    cache.forget("prod/unknown")  # forgetting an unknown job is harmless
    await sample_job(client, cache)
    assert fake.listed == Counter({SRC: 2, WORK: 2, AGG: 2})
