"""collect(): one JobSample per job and tick from Flink's answers, or an Unavailable saying why."""

from __future__ import annotations

import math

import httpx
import pytest
import respx
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
    unavailable_job,
)

from autoscaler.collect import MetricNameCache, collect
from autoscaler.flink.client import FlinkClient
from autoscaler.model import HEAP_USAGE_RATIO, JobSample, JobTarget, TaskManagerSample
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- the happy path
async def test_sample_from_the_recorded_job(fake: FakeFlink, client: FlinkClient) -> None:
    tms = TaskManagerSample(gc_time_ms_per_s=1.0, heap_used=2.0, heap_max=4.0, cpu_load_avg=0.5)
    sample = await collect(client, TARGET, NOW_MS, MetricNameCache(), tms, warm_up_pause_s=0)
    assert isinstance(sample, JobSample)
    assert (sample.target, sample.ts_ms, sample.running_since_ms) == (TARGET, NOW_MS, 1795246565789)
    assert list(sample.topology.vertices) == [SRC, WORK, AGG]
    assert sample.taskmanagers == tms
    assert dict(sample.num_source_partitions) == {}  # BacklogSource is neither Kafka nor Pulsar

    src = sample.vertices[SRC]
    assert src.busy_time_ms_per_s == 1.0  # max (the default aggregator)
    assert src.backpressured_ms_per_s == 999.0  # avg
    assert (
        src.num_records_in == 123362.0
    )  # read-records is 0 for a source: Source__BacklogSource.numRecordsIn
    assert src.num_records_out == 123362.0  # write-records
    assert src.accumulated_busy_time_ms == 641.0
    assert src.accumulated_busy_time_agg_ms == 641.0  # accumulateBusyTimeMs, max over subtasks
    assert src.num_records_in_per_s == 1203.2
    assert src.pending_records == 66945.0
    # Catching up: lag 66945 >= 30 s * 1203.2/s = 36096, so TPR = 1203.2 / (1 - 999/1000) = 1203.2 / 0.001
    assert src.observed_tpr == pytest.approx(1_203_200.0)

    work = sample.vertices[WORK]
    assert work.busy_time_ms_per_s == 1000.0
    assert work.backpressured_ms_per_s == 0.0
    assert (work.num_records_in, work.num_records_out, work.accumulated_busy_time_ms) == (
        110891.0,
        110890.0,
        89002.0,
    )
    assert work.accumulated_busy_time_agg_ms == 89002.0
    assert work.num_records_in_per_s == pytest.approx(1247.6333333333334)
    assert math.isnan(work.pending_records) and math.isnan(work.observed_tpr)

    agg = sample.vertices[AGG]
    assert (agg.busy_time_ms_per_s, agg.num_records_in, agg.num_records_out) == (4.0, 110890.0, 0.0)
    assert math.isnan(agg.pending_records) and math.isnan(agg.observed_tpr)


async def test_heap_usage_is_windowed_only_while_the_memory_gate_can_fire(
    fake: FakeFlink, client: FlinkClient
) -> None:
    tms = TaskManagerSample(heap_used=3.0, heap_max=4.0)
    off = await collect(client, TARGET, NOW_MS, MetricNameCache(), tms, warm_up_pause_s=0)
    gated = JobTarget(TARGET.job, AutoscalerOptions(enabled=True, memory_heap_usage_threshold=0.9))
    on = await collect(client, gated, NOW_MS, MetricNameCache(), tms, warm_up_pause_s=0)
    assert isinstance(off, JobSample) and isinstance(on, JobSample)
    assert HEAP_USAGE_RATIO not in off.custom_job_metrics  # threshold 1.0 (default): nothing to window
    assert on.custom_job_metrics[HEAP_USAGE_RATIO] == 0.75


async def test_kafka_partitions_are_counted(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC] += [
        f"Source__BacklogSource.KafkaSourceReader.topic.orders.partition.{p}.currentOffset" for p in range(4)
    ]
    assert dict((await sample_job(client, MetricNameCache())).num_source_partitions) == {SRC: 4}


# --------------------------------------------------------------------------------------------- unavailable
async def test_missing_busy_time_in_listing_is_partial(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[WORK].remove("busyTimeMsPerSecond")
    result = await unavailable_job(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Work ({WORK}): no busyTimeMsPerSecond yet"


async def test_missing_source_backpressure_is_partial(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("backPressuredTimeMsPerSecond")
    result = await unavailable_job(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Source: BacklogSource ({SRC}): no backPressuredTimeMsPerSecond yet"


async def test_lazy_fetcher_empty_answer_is_partial_then_recovers(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """After a complete collection the job is warm: an empty answer skips the tick without a retry."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    await sample_job(client, cache, sleep=sleep)
    fake.empty_answers[WORK] += 1
    result = await unavailable_job(client, cache, sleep=sleep)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Work ({WORK}): no busyTimeMsPerSecond yet"
    assert sleep.pauses == []
    before = fake.listed[WORK]
    await sample_job(client, cache, sleep=sleep)
    assert fake.listed[WORK] == before + 1  # names are re-listed after an empty answer


async def test_first_collection_retries_an_empty_answer_after_a_pause(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """flink-rest.md §6.1: the first query of a job can answer [] (the lazy fetcher); ask once more."""
    sleep = RecordingSleep()
    fake.empty_answers[WORK] += 1
    result = await collect(client, TARGET, NOW_MS, MetricNameCache(), TaskManagerSample(), sleep=sleep)
    assert isinstance(result, JobSample)
    assert sleep.pauses == [1.0]  # the default warm-up pause
    assert result.vertices[WORK].busy_time_ms_per_s == 1000.0
    # The whole job is collected again, /jobs/:id included: its IO counters come from the same lazy
    # metric store as the empty answer, so they were just as stale.
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 2
    # Each attempt reads /jobs/:id once (the cluster waited for the fetch before).
    assert fake.details_reads == 2


async def test_first_collection_gives_up_after_one_retry(fake: FakeFlink, client: FlinkClient) -> None:
    sleep = RecordingSleep()
    fake.empty_answers[SRC] += 2
    fake.empty_answers[WORK] += 2
    result = await unavailable_job(client, sleep=sleep)
    assert result.reason is Reason.PARTIAL_METRICS
    assert len(sleep.pauses) == 1  # one pause for every incomplete vertex together
    assert result.detail == f"vertex Source: BacklogSource ({SRC}): no busyTimeMsPerSecond yet"
    assert fake.empty_answers[SRC] == fake.empty_answers[WORK] == 0  # each asked exactly twice
    assert fake.details_reads == 2


async def test_warm_up_pause_is_configurable(fake: FakeFlink, client: FlinkClient) -> None:
    sleep = RecordingSleep()
    fake.empty_answers[AGG] += 1
    result = await collect(
        client, TARGET, NOW_MS, MetricNameCache(), TaskManagerSample(), warm_up_pause_s=0.25, sleep=sleep
    )
    assert isinstance(result, JobSample) and sleep.pauses == [0.25]


async def test_real_sleep_with_zero_pause(fake: FakeFlink, client: FlinkClient) -> None:
    """The default sleep is asyncio.sleep; tests that exercise it pass a 0 s pause."""
    fake.empty_answers[WORK] += 1
    result = await collect(client, TARGET, NOW_MS, MetricNameCache(), TaskManagerSample(), warm_up_pause_s=0)
    assert isinstance(result, JobSample)


async def test_resubmitted_job_is_cold_again(fake: FakeFlink, client: FlinkClient) -> None:
    """A new JobID of the same job key has a fresh fetcher entry: it gets the warm-up again."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    await sample_job(client, cache, sleep=sleep)
    assert cache.is_warm(TARGET.job.key, JID)
    assert not cache.is_warm(TARGET.job.key, "f" * 32)
    cache.forget([TARGET.job.key])
    assert not cache.is_warm(TARGET.job.key, JID)
    fake.empty_answers[WORK] += 1
    await sample_job(client, cache, sleep=sleep)
    assert sleep.pauses == [1.0]


async def test_empty_name_listing_is_partial_and_not_cached(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    saved, fake.listings[WORK] = fake.listings[WORK], []
    assert (await unavailable_job(client, cache)).reason is Reason.PARTIAL_METRICS
    assert fake.listed[WORK] == 2  # first collection: listed, then listed again after the warm-up pause
    fake.listings[WORK] = saved
    await sample_job(client, cache)
    assert fake.listed[WORK] == 3


@pytest.mark.parametrize("status", ["DEPLOYING", "INITIALIZING", "CANCELING"])
async def test_vertex_not_running_is_not_running(fake: FakeFlink, client: FlinkClient, status: str) -> None:
    fake.set_vertex(WORK, status=status)
    result = await unavailable_job(client)
    assert result.reason is Reason.NOT_RUNNING
    assert f"Work ({status})" in result.detail
    assert not fake.queried and not fake.listed


async def test_job_not_running_is_not_running(fake: FakeFlink, client: FlinkClient) -> None:
    fake.job["state"] = "RESTARTING"
    result = await unavailable_job(client)
    assert result.reason is Reason.NOT_RUNNING
    assert result.detail == f"job autoscaler-load-job ({JID}) is RESTARTING"


async def test_vanished_job_is_not_running(client: FlinkClient) -> None:
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").respond(404, json={"errors": [f"Job {JID} not found"]})
        result = await unavailable_job(client)
    assert result.reason is Reason.NOT_RUNNING
    assert "not found" in result.detail


async def test_cluster_down_is_unreachable(client: FlinkClient) -> None:
    with respx.mock(base_url=BASE) as router:
        router.route().mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
        result = await unavailable_job(client)
    assert result.reason is Reason.CLUSTER_UNREACHABLE
    assert "'prod'" in result.detail and BASE in result.detail and f"GET /jobs/{JID}" in result.detail


async def test_metrics_endpoint_down_mid_collection_is_unreachable(client: FlinkClient) -> None:
    fake = FakeFlink()
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").mock(side_effect=fake.handle)
        router.route().mock(side_effect=httpx.ReadTimeout("timed out"))
        result = await unavailable_job(client)
    assert result.reason is Reason.CLUSTER_UNREACHABLE
    assert "/subtasks/metrics" in result.detail


async def test_http_error_on_metrics_is_partial(client: FlinkClient) -> None:
    fake = FakeFlink()
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").mock(side_effect=fake.handle)
        router.route().respond(500, json={"errors": ["Internal server error."]})
        result = await unavailable_job(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert "HTTP 500: Internal server error." in result.detail


async def test_unexpected_error_never_escapes(
    fake: FakeFlink, client: FlinkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(job_id: str) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(client, "job_details", boom)
    result = await unavailable_job(client)
    assert (result.reason, result.detail) == (Reason.AUTOSCALER_ERROR, "RuntimeError: bug")
