"""A tick's metrics come from the one fetch it started (``autoscaler/collect/fetch.py``): the cluster waits
for it once (``await_fetch``), then each job reads ``/jobs/:id`` and its vertices once, and a job whose
answers straddle a fetch that landed among them is read again (``fetches_differ``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
from collect_flink import (
    AGG,
    BASE,
    JID,
    NOW_MS,
    SRC,
    TARGET,
    WORK,
    FakeFlink,
    RecordingSleep,
    sample_job,
)

from autoscaler.collect import FetchWait, MetricNameCache, await_fetch, collect
from autoscaler.collect.fetch import FETCH_POLL_S, fetches_differ, io_reading
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobSample, TaskManagerSample
from autoscaler.settings import AutoscalerOptions

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


def _next_fetch(fake: FakeFlink) -> None:
    """What a later fetch of Flink's stores: 6,000 more records read by the source, 3,000 more pending,
    and 500 ms more busy time on every vertex (a fetch moves the time counters, in both answers)."""
    for vertex in fake.job["vertices"]:
        metrics = vertex["metrics"]
        if vertex["id"] == SRC:
            metrics = {**metrics, "write-records": metrics["write-records"] + 6000}
        vertex["metrics"] = {**metrics, "accumulated-busy-time": metrics["accumulated-busy-time"] + 500}
    for vid in (SRC, WORK, AGG):
        busy = fake.values[vid]["accumulateBusyTimeMs"]
        fake.values[vid]["accumulateBusyTimeMs"] = {**busy, "sum": busy["sum"] + 500}
    name = "Source__BacklogSource.pendingRecords"
    fake.values[SRC][name] = {k: float(v) + 3000 for k, v in fake.values[SRC][name].items()}


# ------------------------------------------------------------------------------------ the job's own reads
async def test_without_a_fetch_landing_each_vertex_and_jobs_details_are_read_once(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """Issue 13: a job used to cost 17 to 31 requests a tick; now /jobs/:id and one query per vertex
    (and the sources' name listing, which is the names module's to ration)."""
    cache = MetricNameCache()
    await sample_job(client, cache)
    fake.queried.clear()
    reads = fake.details_reads
    await sample_job(client, cache)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG]
    assert fake.details_reads == reads + 1


async def test_a_fetch_landing_among_the_answers_is_told_and_the_job_read_again_whole(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """Counters from /jobs/:id and pendingRecords from the vertex answer come from the same fetch.

    On a real cluster, a fetch landed between the two in about a fifth of the ticks, and a 30 s window's
    source rate was then off by up to 25 %. The busy-time counter, in both answers, tells it."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    before = await sample_job(client, cache)
    fake.queried.clear()
    fake.fetch_lands = lambda: _next_fetch(fake)  # lands right after the tick's /jobs/:id
    after = await sample_job(client, cache, sleep=sleep)
    src_before, src_after = before.vertices[SRC], after.vertices[SRC]
    assert src_after.num_records_out - src_before.num_records_out == 6000
    assert src_after.pending_records - src_before.pending_records == 3000
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 2  # read again after it
    assert sleep.pauses == [FETCH_POLL_S]


async def test_a_job_rescaled_while_read_is_read_again_as_it_runs_now(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A fetch that lands with a rescale: the second reading is of the new job run, whole."""
    cache = MetricNameCache()
    await sample_job(client, cache)

    def rescaled() -> None:
        _next_fetch(fake)
        fake.set_vertex(WORK, parallelism=2)

    fake.fetch_lands = rescaled
    sample = await sample_job(client, cache)
    assert sample.topology.vertices[WORK].parallelism == 2


def test_answers_of_one_fetch_agree_on_the_busy_time_and_unknown_tells_nothing(fake: FakeFlink) -> None:
    from autoscaler.flink.models import JobDetails

    details = JobDetails.model_validate(fake.job)
    same = {SRC: 641.0, WORK: 89002.0, AGG: 317.0}
    assert not fetches_differ(details, same)
    assert fetches_differ(details, {**same, WORK: 89502.0})
    assert not fetches_differ(details, {**same, WORK: float("nan")})
    assert not fetches_differ(details, {SRC: 641.5})  # within a millisecond: longs against doubles


# ------------------------------------------------------------------------------ the cluster's one wait
async def test_the_cluster_waits_for_the_fetch_its_first_read_started(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A fetch that lands after every read of the tick would leave the tick's samples a tick old."""
    sleep = RecordingSleep()
    last = io_reading(await client.job_details(JID))
    reads = fake.details_reads
    fake.fetch_lands = lambda: _next_fetch(fake)
    fake.requests_before_landing = 1  # lands after the first poll: the second one sees it
    landed = await await_fetch(client, JID, last, FetchWait(1.0, sleep))
    assert landed is not None and io_reading(landed) != last
    assert sleep.pauses == [FETCH_POLL_S, FETCH_POLL_S]
    assert fake.details_reads == reads + 3
    assert fake.queried == []  # no vertex is read while waiting


async def test_a_fetch_that_landed_before_the_wait_is_taken_at_once(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """The probe's reading at the last tick is what a new fetch must differ from, not its first read
    now: a fetch that another client started and that landed already needs no wait."""
    sleep = RecordingSleep()
    last = io_reading(await client.job_details(JID))
    _next_fetch(fake)
    landed = await await_fetch(client, JID, last, FetchWait(1.0, sleep))
    assert landed is not None and sleep.pauses == []


async def test_no_fetch_landing_waits_at_most_the_wait(fake: FakeFlink, client: FlinkClient) -> None:
    """Counters that never move (no fetch was due, or it has not landed): the jobs are read anyway and
    the fetch book tells each stale reading."""
    sleep = RecordingSleep()
    last = io_reading(await client.job_details(JID))
    assert await await_fetch(client, JID, last, FetchWait(0.5, sleep)) is None
    assert sum(sleep.pauses) == pytest.approx(0.5)


async def test_collect_itself_never_waits_for_a_fetch(fake: FakeFlink, client: FlinkClient) -> None:
    cache, sleep = MetricNameCache(), RecordingSleep()
    await sample_job(client, cache)
    result = await collect(client, TARGET, NOW_MS, cache, TaskManagerSample(), sleep=sleep)
    assert isinstance(result, JobSample) and sleep.pauses == []


async def test_answers_that_never_agree_are_read_twice_then_used(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A Flink whose two sides of the check disagree for good must not lose its jobs: after one more
    reading the job's sample is used, with a log line (a warning once the job has stabilized)."""
    from structlog.testing import capture_logs

    cache, sleep = MetricNameCache(), RecordingSleep()
    await sample_job(client, cache)
    fake.values[WORK]["accumulateBusyTimeMs"] = {**fake.values[WORK]["accumulateBusyTimeMs"], "sum": 1.0}
    fake.queried.clear()
    settled = replace(TARGET, options=AutoscalerOptions(enabled=True, stabilization_interval=timedelta(0)))
    with capture_logs() as logs:
        sample = await sample_job(client, cache, target=settled, sleep=sleep)
        await sample_job(client, cache)  # 105 s into its run, within 5 min of stabilization: info only
    assert sample.vertices[WORK].busy_time_ms_per_s == 1000.0
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 4 and sleep.pauses == [FETCH_POLL_S]
    levels = [e["log_level"] for e in logs if e["event"] == "metric_fetches_disagree"]
    assert levels == ["warning", "info"]


@pytest.mark.parametrize(("timeout_s", "readings"), [(5.0, 2), (0.5, 1)])
async def test_a_reading_slower_than_a_request_deadline_is_not_read_again(
    fake: FakeFlink, timeout_s: float, readings: int
) -> None:
    """Issue 35: every answer 0.3 s late. A reading (``/jobs/:id``, then the vertices side by side) then
    takes 0.6 s: within a 5 s deadline a fetch that landed among it has it read again; past a 0.5 s one
    it is kept, with a warning: a cluster that slow is not asked twice in one tick."""
    from structlog.testing import capture_logs

    async def late(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return fake.handle(request)

    transport = httpx.MockTransport(late)
    async with FlinkClient(BASE, cluster="prod", transport=transport, timeout_s=timeout_s) as client:
        cache = MetricNameCache()
        await sample_job(client, cache)
        fake.queried.clear()
        fake.fetch_lands = lambda: _next_fetch(fake)  # lands right after the tick's /jobs/:id
        with capture_logs() as logs:
            await sample_job(client, cache)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * readings
    slow = [e for e in logs if e["event"] == "metric_fetch_landed_mid_slow_read"]
    assert len(slow) == 2 - readings
