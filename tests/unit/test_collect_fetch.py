"""collect() reads a tick's metrics as of the one fetch the tick started (``autoscaler/collect/fetch.py``)."""

from __future__ import annotations

import pytest
from collect_flink import (
    AGG,
    NOW_MS,
    SRC,
    TARGET,
    WORK,
    FakeFlink,
    RecordingSleep,
    sample_job,
    unavailable_job,
)

from autoscaler.collect import MetricNameCache, collect
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobSample, TaskManagerSample
from autoscaler.reasons import Reason

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# ----------------------------------------------------------------------------------------- one fetch per tick
def _next_fetch(fake: FakeFlink) -> None:
    """What a later fetch of Flink's stores: 6,000 more records read by the source, 3,000 more pending."""
    for vertex in fake.job["vertices"]:
        if vertex["id"] == SRC:
            metrics = vertex["metrics"]
            vertex["metrics"] = {**metrics, "write-records": metrics["write-records"] + 6000}
    name = "Source__BacklogSource.pendingRecords"
    fake.values[SRC][name] = {k: float(v) + 3000 for k, v in fake.values[SRC][name].items()}


async def test_a_fetch_landing_after_jobs_details_is_read_whole(fake: FakeFlink, client: FlinkClient) -> None:
    """Counters from /jobs/:id and pendingRecords from the vertex answer come from the same fetch.

    On a real cluster, the fetch the tick started landed between the two in about a fifth of the ticks,
    and a 30 s window's source rate was then off by up to 25 %."""
    cache = MetricNameCache()
    before = await sample_job(client, cache)
    fake.queried.clear()
    fake.fetch_lands = lambda: _next_fetch(fake)  # lands right after the tick's first /jobs/:id
    after = await sample_job(client, cache)
    src_before, src_after = before.vertices[SRC], after.vertices[SRC]
    assert src_after.num_records_out - src_before.num_records_out == 6000
    assert src_after.pending_records - src_before.pending_records == 3000
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 2  # the vertices, read again after it


async def test_without_a_fetch_landing_the_vertices_are_read_once(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    await sample_job(client, cache)
    fake.queried.clear()
    reads = fake.details_reads
    await sample_job(client, cache)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG]
    assert fake.details_reads == reads + 2  # /jobs/:id before and after the vertices


async def test_the_tick_waits_for_its_fetch_then_reads_the_vertices_after_it(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A fetch that lands after every read of the tick would leave the sample a tick old."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    before = await sample_job(client, cache)
    fake.queried.clear()
    reads = fake.details_reads
    fake.fetch_lands = lambda: _next_fetch(fake)
    # Lands right after the sixth answer: /jobs/:id, the source's listing, 3 vertices, /jobs/:id again.
    fake.requests_before_landing = 5
    result = await collect(client, TARGET, NOW_MS, cache, TaskManagerSample(), fetch_wait_s=1.0, sleep=sleep)
    assert isinstance(result, JobSample)
    assert result.vertices[SRC].num_records_out - before.vertices[SRC].num_records_out == 6000
    assert result.vertices[SRC].pending_records - before.vertices[SRC].pending_records == 3000
    assert sleep.pauses == [0.1]  # landed during the first pause: one more /jobs/:id saw it
    assert fake.details_reads == reads + 3
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 2


async def test_an_idle_job_waits_at_most_fetch_wait(fake: FakeFlink, client: FlinkClient) -> None:
    """Counters that never move (no records, or no fetch started) keep the first reading."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    before = await sample_job(client, cache)
    fake.queried.clear()
    result = await collect(client, TARGET, NOW_MS, cache, TaskManagerSample(), fetch_wait_s=0.5, sleep=sleep)
    assert isinstance(result, JobSample)
    assert result.vertices == before.vertices
    assert sum(sleep.pauses) == pytest.approx(0.5)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG]


async def test_a_job_rescaled_while_read_is_skipped_not_mixed(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await sample_job(client, cache)

    def rescaled() -> None:
        _next_fetch(fake)
        fake.set_vertex(WORK, parallelism=2)

    fake.fetch_lands = rescaled
    result = await unavailable_job(client, cache)
    assert result.reason is Reason.PARTIAL_METRICS
    assert "changed while its metrics were read" in result.detail
