"""collect(): one JobSample per job and tick from Flink's answers, or an Unavailable saying why."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx
from conftest import load_fixture

from autoscaler.collect import MetricNameCache, collect, collect_taskmanagers, observed_true_processing_rate
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobRef, JobSample, JobTarget, TaskManagerSample, Unavailable
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator

BASE = "http://jm:8081"
JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
SRC = "e5a72f353fc1e6bbf3bd96a41384998c"
WORK = "674df9b0384c0348e0b9d1034a44c46c"
AGG = "96eed58e350a66c179f06330f5425345"
NOW_MS = 1795246671050
TARGET = JobTarget(JobRef("prod", JID, "autoscaler-load-job"), AutoscalerOptions(enabled=True))


def _names(fixture_name: str) -> list[str]:
    return [m["id"] for m in load_fixture(fixture_name)]


def _values(fixture_name: str) -> dict[str, dict[str, Any]]:
    return {m["id"]: {k: v for k, v in m.items() if k != "id"} for m in load_fixture(fixture_name)}


class FakeFlink:
    """Flink's REST semantics over the recorded answers: ``[]`` as soon as one requested name is unknown.

    Values are the recorded ones (src_subtasks_metrics.json, work_subtasks_metrics.json). Wired on top,
    because the recording did not query them: the source operator's numRecordsInPerSecond = 1203.2 (its
    recorded numRecordsOutPerSecond: a source emits what it reads), numRecordsIn/Out = 123362 (the source's
    write-records in job.json), and an Aggregate vertex that lists Work's task-level names.
    """

    def __init__(self) -> None:
        self.job = load_fixture("job.json")
        work_names = _names("work_subtask_metric_names.json")
        self.listings: dict[str, list[str]] = {
            SRC: _names("src_subtask_metric_names.json"),
            WORK: work_names,
            AGG: [n for n in work_names if not n.startswith("Work.")],
        }
        self.values: dict[str, dict[str, dict[str, Any]]] = {
            SRC: {
                **_values("src_subtasks_metrics.json"),
                "Source__BacklogSource.numRecordsInPerSecond": {"max": 1203.2, "avg": 1203.2, "sum": 1203.2},
                "Source__BacklogSource.numRecordsIn": {"max": 123362.0, "avg": 123362.0, "sum": 123362.0},
                "Source__BacklogSource.numRecordsOut": {"max": 123361.0, "avg": 123361.0, "sum": 123361.0},
            },
            WORK: _values("work_subtasks_metrics.json"),
            AGG: {
                "busyTimeMsPerSecond": {"min": 2.0, "max": 4.0, "avg": 3.0, "sum": 3.0},
                "backPressuredTimeMsPerSecond": {"max": 0.0, "avg": 0.0, "sum": 0.0},
                "numRecordsInPerSecond": {"max": 1247.6, "avg": 1247.6, "sum": 1247.6},
            },
        }
        self.tm_listing = _names("tm_metrics_names.json")
        self.tm_values = _values("tm_metrics.json")
        self.listed: Counter[str] = Counter()  # name listings per vertex id ("tm" for TaskManagers)
        self.queried: list[tuple[str, list[str]]] = []
        self.empty_answers: set[str] = set()  # vertices whose next query answers [] (the lazy fetcher)

    def handle(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        get = request.url.params.get("get")
        if parts == ["jobs", JID]:
            return httpx.Response(200, json=self.job)
        if parts[:3] == ["jobs", JID, "vertices"] and parts[4:] == ["subtasks", "metrics"]:
            return self._metrics(parts[3], self.listings[parts[3]], self.values[parts[3]], get)
        if parts == ["taskmanagers", "metrics"]:
            return self._metrics("tm", self.tm_listing, self.tm_values, get)
        return httpx.Response(404, json={"errors": ["Not found: " + request.url.path]})

    def _metrics(
        self, key: str, listing: list[str], values: dict[str, dict[str, Any]], get: str | None
    ) -> httpx.Response:
        if get is None:
            self.listed[key] += 1
            return httpx.Response(200, json=[{"id": n} for n in listing])
        names = get.split(",")
        self.queried.append((key, names))
        if key in self.empty_answers:
            self.empty_answers.discard(key)
            return httpx.Response(200, json=[])
        if any(n not in listing for n in names):
            return httpx.Response(200, json=[])
        missing = [n for n in names if n not in values]
        assert not missing, f"the test wires no value for {missing}"
        return httpx.Response(200, json=[{"id": n, **values[n]} for n in names])

    def set_vertex(self, vid: str, **changes: Any) -> None:
        for vertex in self.job["vertices"]:
            if vertex["id"] == vid:
                vertex.update(changes)


@pytest.fixture
def fake() -> Iterator[FakeFlink]:
    fake = FakeFlink()
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.route().mock(side_effect=fake.handle)
        yield fake


@pytest.fixture
async def client() -> AsyncIterator[FlinkClient]:
    async with FlinkClient(BASE, cluster="prod") as c:
        yield c


async def _sample(client: FlinkClient, cache: MetricNameCache, target: JobTarget = TARGET) -> JobSample:
    result = await collect(client, target, NOW_MS, cache, TaskManagerSample())
    assert isinstance(result, JobSample), result
    return result


async def _unavailable(client: FlinkClient, cache: MetricNameCache | None = None) -> Unavailable:
    result = await collect(client, TARGET, NOW_MS, cache or MetricNameCache(), TaskManagerSample())
    assert isinstance(result, Unavailable), result
    return result


# --------------------------------------------------------------------------------------------- the happy path
async def test_sample_from_the_recorded_job(fake: FakeFlink, client: FlinkClient) -> None:
    tms = TaskManagerSample(gc_time_ms_per_s=1.0, heap_used=2.0, heap_max=4.0, cpu_load_avg=0.5)
    sample = await collect(client, TARGET, NOW_MS, MetricNameCache(), tms)
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
    assert work.num_records_in_per_s == pytest.approx(1247.6333333333334)
    assert math.isnan(work.pending_records) and math.isnan(work.observed_tpr)

    agg = sample.vertices[AGG]
    assert (agg.busy_time_ms_per_s, agg.num_records_in, agg.num_records_out) == (4.0, 110890.0, 0.0)
    assert math.isnan(agg.pending_records) and math.isnan(agg.observed_tpr)


async def test_queries_only_listed_names_per_vertex(fake: FakeFlink, client: FlinkClient) -> None:
    await _sample(client, MetricNameCache())
    queried = dict(fake.queried)
    assert set(queried[SRC]) == {
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "Source__BacklogSource.numRecordsInPerSecond",
        "Source__BacklogSource.numRecordsIn",
        "Source__BacklogSource.numRecordsOut",
        "Source__BacklogSource.pendingRecords",
    }
    assert set(queried[WORK]) == {
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "numRecordsInPerSecond",
    }


@pytest.mark.parametrize(("aggregator", "expected"), [("MAX", 4.0), ("AVG", 3.0), ("MIN", 2.0)])
async def test_busy_time_aggregator(
    fake: FakeFlink, client: FlinkClient, aggregator: str, expected: float
) -> None:
    options = AutoscalerOptions(enabled=True, busy_time_aggregator=BusyTimeAggregator(aggregator))
    sample = await _sample(client, MetricNameCache(), JobTarget(TARGET.job, options))
    assert sample.vertices[AGG].busy_time_ms_per_s == expected


async def test_source_without_pending_records_has_no_lag(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("Source__BacklogSource.pendingRecords")
    src = (await _sample(client, MetricNameCache())).vertices[SRC]
    assert src.pending_records == 0.0
    assert math.isnan(src.observed_tpr)  # no backlog: not catching up, nothing observed


async def test_pending_records_listed_but_nan_stays_nan(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.pendingRecords"] = {"max": "NaN", "avg": "NaN", "sum": "NaN"}
    src = (await _sample(client, MetricNameCache())).vertices[SRC]
    assert math.isnan(src.pending_records) and math.isnan(src.observed_tpr)


async def test_pending_records_summed_over_every_operator(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].append("Source__Other.pendingRecords")
    fake.values[SRC]["Source__Other.pendingRecords"] = {"sum": 55.0}
    assert (await _sample(client, MetricNameCache())).vertices[SRC].pending_records == 66945.0 + 55.0


async def test_source_records_in_falls_back_to_records_out(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("Source__BacklogSource.numRecordsIn")
    assert (await _sample(client, MetricNameCache())).vertices[SRC].num_records_in == 123361.0


async def test_source_with_read_records_keeps_them(fake: FakeFlink, client: FlinkClient) -> None:
    fake.set_vertex(SRC, metrics={**fake.job["vertices"][0]["metrics"], "read-records": 42})
    assert (await _sample(client, MetricNameCache())).vertices[SRC].num_records_in == 42.0


async def test_idle_source_has_infinite_observed_tpr(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.numRecordsInPerSecond"] = {"sum": 0.0}
    assert (await _sample(client, MetricNameCache())).vertices[SRC].observed_tpr == math.inf


async def test_kafka_partitions_are_counted(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC] += [
        f"Source__BacklogSource.KafkaSourceReader.topic.orders.partition.{p}.currentOffset" for p in range(4)
    ]
    assert dict((await _sample(client, MetricNameCache())).num_source_partitions) == {SRC: 4}


async def test_finished_vertex_counts_as_idle_and_is_not_queried(
    fake: FakeFlink, client: FlinkClient
) -> None:
    fake.set_vertex(SRC, status="FINISHED")
    sample = await _sample(client, MetricNameCache())
    src = sample.vertices[SRC]
    assert (src.busy_time_ms_per_s, src.backpressured_ms_per_s, src.num_records_in_per_s) == (0.0, 0.0, 0.0)
    assert (src.pending_records, src.num_records_out) == (0.0, 123362.0)
    assert math.isnan(src.observed_tpr)
    assert list(sample.vertices) == [SRC, WORK, AGG]
    assert fake.listed[SRC] == 0 and SRC not in dict(fake.queried)


# --------------------------------------------------------------------------------------------- unavailable
async def test_missing_busy_time_in_listing_is_partial(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[WORK].remove("busyTimeMsPerSecond")
    result = await _unavailable(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Work ({WORK}): no busyTimeMsPerSecond yet"


async def test_missing_source_backpressure_is_partial(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("backPressuredTimeMsPerSecond")
    result = await _unavailable(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Source: BacklogSource ({SRC}): no backPressuredTimeMsPerSecond yet"


async def test_lazy_fetcher_empty_answer_is_partial_then_recovers(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)
    fake.empty_answers.add(WORK)
    result = await _unavailable(client, cache)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Work ({WORK}): no busyTimeMsPerSecond yet"
    before = fake.listed[WORK]
    await _sample(client, cache)
    assert fake.listed[WORK] == before + 1  # names are re-listed after an empty answer


async def test_empty_name_listing_is_partial_and_not_cached(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    saved, fake.listings[WORK] = fake.listings[WORK], []
    assert (await _unavailable(client, cache)).reason is Reason.PARTIAL_METRICS
    fake.listings[WORK] = saved
    await _sample(client, cache)
    assert fake.listed[WORK] == 2


@pytest.mark.parametrize("status", ["DEPLOYING", "INITIALIZING", "CANCELING"])
async def test_vertex_not_running_is_not_running(fake: FakeFlink, client: FlinkClient, status: str) -> None:
    fake.set_vertex(WORK, status=status)
    result = await _unavailable(client)
    assert result.reason is Reason.NOT_RUNNING
    assert f"Work ({status})" in result.detail
    assert not fake.queried and not fake.listed


async def test_job_not_running_is_not_running(fake: FakeFlink, client: FlinkClient) -> None:
    fake.job["state"] = "RESTARTING"
    result = await _unavailable(client)
    assert result.reason is Reason.NOT_RUNNING
    assert result.detail == f"job autoscaler-load-job ({JID}) is RESTARTING"


async def test_vanished_job_is_not_running(client: FlinkClient) -> None:
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").respond(404, json={"errors": [f"Job {JID} not found"]})
        result = await _unavailable(client)
    assert result.reason is Reason.NOT_RUNNING
    assert "not found" in result.detail


async def test_cluster_down_is_unreachable(client: FlinkClient) -> None:
    with respx.mock(base_url=BASE) as router:
        router.route().mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
        result = await _unavailable(client)
    assert result.reason is Reason.CLUSTER_UNREACHABLE
    assert "'prod'" in result.detail and BASE in result.detail and f"GET /jobs/{JID}" in result.detail


async def test_metrics_endpoint_down_mid_collection_is_unreachable(client: FlinkClient) -> None:
    fake = FakeFlink()
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").mock(side_effect=fake.handle)
        router.route().mock(side_effect=httpx.ReadTimeout("timed out"))
        result = await _unavailable(client)
    assert result.reason is Reason.CLUSTER_UNREACHABLE
    assert "/subtasks/metrics" in result.detail


async def test_http_error_on_metrics_is_partial(client: FlinkClient) -> None:
    fake = FakeFlink()
    with respx.mock(base_url=BASE) as router:
        router.get(f"/jobs/{JID}").mock(side_effect=fake.handle)
        router.route().respond(500, json={"errors": ["Internal server error."]})
        result = await _unavailable(client)
    assert result.reason is Reason.PARTIAL_METRICS
    assert "HTTP 500: Internal server error." in result.detail


async def test_unexpected_error_never_escapes(
    fake: FakeFlink, client: FlinkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(job_id: str) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(client, "job_details", boom)
    result = await _unavailable(client)
    assert (result.reason, result.detail) == (Reason.AUTOSCALER_ERROR, "RuntimeError: bug")


# --------------------------------------------------------------------------------------------- name cache
async def test_names_cached_for_non_sources_relisted_for_sources(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    for _ in range(3):
        await _sample(client, cache)
    assert fake.listed == Counter({SRC: 3, WORK: 1, AGG: 1})
    assert len(fake.queried) == 9  # every vertex's values are read every tick


async def test_lazily_appearing_pending_records_is_picked_up(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    fake.listings[SRC].remove("Source__BacklogSource.pendingRecords")
    assert (await _sample(client, cache)).vertices[SRC].pending_records == 0.0
    fake.listings[SRC].append("Source__BacklogSource.pendingRecords")
    assert (await _sample(client, cache)).vertices[SRC].pending_records == 66945.0


async def test_cache_dropped_when_the_vertex_set_changes(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)
    new_agg = "1" * 32
    fake.set_vertex(AGG, id=new_agg)
    fake.job["plan"]["nodes"][2]["id"] = new_agg
    fake.listings[new_agg], fake.values[new_agg] = fake.listings[AGG], fake.values[AGG]
    sample = await _sample(client, cache)
    assert list(sample.vertices) == [SRC, WORK, new_agg]
    assert fake.listed == Counter({SRC: 2, WORK: 2, AGG: 1, new_agg: 1})


async def test_parallelism_change_keeps_the_cache(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)
    fake.set_vertex(WORK, parallelism=3)
    assert (await _sample(client, cache)).topology.vertices[WORK].parallelism == 3
    assert fake.listed[WORK] == 1


async def test_forget_drops_a_job(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)
    cache.forget(TARGET.job.key)
    cache.forget("prod/unknown")  # forgetting an unknown job is harmless
    await _sample(client, cache)
    assert fake.listed == Counter({SRC: 2, WORK: 2, AGG: 2})


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
    fake.empty_answers.add("tm")
    assert math.isnan((await collect_taskmanagers(client, cache)).heap_used)
    assert (await collect_taskmanagers(client, cache)).heap_used == 150132896.0
    assert fake.listed["tm"] == 2


# --------------------------------------------------------------------------------------------- the formula
@pytest.mark.parametrize(
    ("in_per_s", "lag", "backpressure", "expected"),
    [
        (0.0, 0.0, 0.0, math.inf),  # no input: nothing limits the rate
        (0.0, math.nan, math.nan, math.inf),
        (100.0, 3000.0, 0.0, 100.0),  # lag exactly 30 s of input: catching up
        (100.0, 3000.0, 500.0, 200.0),  # half the time back-pressured: twice the rate
        (100.0, 2999.0, 500.0, math.nan),  # not catching up
        (100.0, 3000.0, 1000.0, math.nan),  # always back-pressured: unknown
        (100.0, math.nan, 0.0, math.nan),
        (math.nan, 3000.0, 0.0, math.nan),
        (100.0, 3000.0, math.nan, math.nan),
    ],
)
def test_observed_true_processing_rate(
    in_per_s: float, lag: float, backpressure: float, expected: float
) -> None:
    got = observed_true_processing_rate(in_per_s, lag, backpressure, 30.0)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_observed_tpr_threshold_scales_with_input() -> None:
    assert observed_true_processing_rate(10.0, 50.0, 0.0, 5.0) == 10.0
    assert math.isnan(observed_true_processing_rate(10.0, 49.0, 0.0, 5.0))
