"""The metric-name cache: listings kept per job until its vertex set changes, a source's renewed at times."""

from __future__ import annotations

from collections import Counter

from collect_flink import (
    AGG,
    SRC,
    TARGET,
    WORK,
    FakeFlink,
    RecordingSleep,
    sample_job,
)
from lazy_flink import RUNNING_MS

from autoscaler.collect import MetricNameCache, collect
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobSample, TaskManagerSample

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- name cache
async def test_names_are_listed_once_per_vertex_and_read_every_tick(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """Issue 13: every source was re-listed on every tick, a request per source per tick."""
    cache = MetricNameCache()
    for _ in range(3):
        await sample_job(client, cache)
    assert fake.listed == Counter({SRC: 1, WORK: 1, AGG: 1})
    assert len(fake.queried) == 9  # every vertex's values are read every tick


async def _at(client: FlinkClient, cache: MetricNameCache, after_start_s: float) -> JobSample:
    result = await collect(
        client,
        TARGET,
        RUNNING_MS + round(after_start_s * 1000),
        cache,
        TaskManagerSample(),
        sleep=RecordingSleep(),
    )
    assert isinstance(result, JobSample), result
    return result


async def test_a_source_is_listed_again_every_five_minutes_for_new_partitions(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    for t in (600, 610, 620, 899, 900, 910):
        await _at(client, cache, t)
    assert fake.listed[SRC] == 2  # at 600 s and at 900 s


async def test_a_source_without_pending_records_is_listed_again_while_it_may_appear(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A Kafka source registers pendingRecords once its readers have fetched: every tick for the first
    two minutes of the run, then once a minute (a source that never reports a lag costs little)."""
    cache = MetricNameCache()
    fake.listings[SRC].remove("Source__BacklogSource.pendingRecords")
    for t in (10, 20, 30, 130, 140, 180, 190):
        await _at(client, cache, t)
    assert fake.listed[SRC] == 5  # 10, 20, 30 (early), 130 (>= 60 s since 30), 190 (60 s since 130)


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
    cache.forget([TARGET.job.key])
    cache.forget(["prod/unknown"])  # forgetting an unknown job is harmless
    await sample_job(client, cache)
    assert fake.listed == Counter({SRC: 2, WORK: 2, AGG: 2})
