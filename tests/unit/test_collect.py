"""collect(): one JobSample per job and tick from Flink's answers, or an Unavailable saying why."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from flink_samples import load_fixture

from autoscaler.clock import FakeClock
from autoscaler.collect import MetricNameCache, collect, collect_taskmanagers, observed_true_processing_rate
from autoscaler.flink.client import FlinkClient
from autoscaler.model import HEAP_USAGE_RATIO, JobRef, JobSample, JobTarget, TaskManagerSample, Unavailable
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, work_job
from autoscaler.simulator import transport as sim_transport

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
    write-records in job.json), accumulateBusyTimeMs = each vertex's accumulated-busy-time in job.json
    (one subtask each, so min = max = avg = sum; flink-rest.md §4 shows the counter aggregating like any
    other), and an Aggregate vertex that lists Work's task-level names.
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
                "accumulateBusyTimeMs": {"min": 641.0, "max": 641.0, "avg": 641.0, "sum": 641.0},
            },
            WORK: {
                **_values("work_subtasks_metrics.json"),
                "accumulateBusyTimeMs": {"min": 89002.0, "max": 89002.0, "avg": 89002.0, "sum": 89002.0},
            },
            AGG: {
                "busyTimeMsPerSecond": {"min": 2.0, "max": 4.0, "avg": 3.0, "sum": 3.0},
                "backPressuredTimeMsPerSecond": {"max": 0.0, "avg": 0.0, "sum": 0.0},
                "numRecordsInPerSecond": {"max": 1247.6, "avg": 1247.6, "sum": 1247.6},
                "accumulateBusyTimeMs": {"min": 20.0, "max": 40.0, "avg": 30.0, "sum": 90.0},
            },
        }
        self.tm_listing = _names("tm_metrics_names.json")
        self.tm_values = _values("tm_metrics.json")
        self.listed: Counter[str] = Counter()  # name listings per vertex id ("tm" for TaskManagers)
        self.queried: list[tuple[str, list[str]]] = []
        self.details_reads = 0  # GET /jobs/:id
        self.empty_answers: Counter[str] = Counter()  # how many next queries answer [] (lazy fetcher)
        self.fetch_lands: Callable[[], None] | None = None  # run once, after the next answer ...
        self.requests_before_landing = 0  # ... or after this many more

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = self._answer(request)
        if self.fetch_lands is not None:  # Flink's lazy fetch lands between two requests
            if self.requests_before_landing > 0:
                self.requests_before_landing -= 1
            else:
                land, self.fetch_lands = self.fetch_lands, None
                land()
        return response

    def _answer(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        get = request.url.params.get("get")
        if parts == ["jobs", JID]:
            self.details_reads += 1
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
        if self.empty_answers[key] > 0:
            self.empty_answers[key] -= 1
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


class RecordingSleep:
    """Stands in for asyncio.sleep: records the pauses, waits for nothing."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def _sample(
    client: FlinkClient,
    cache: MetricNameCache,
    target: JobTarget = TARGET,
    sleep: RecordingSleep | None = None,
) -> JobSample:
    result = await collect(
        client, target, NOW_MS, cache, TaskManagerSample(), sleep=sleep or RecordingSleep()
    )
    assert isinstance(result, JobSample), result
    return result


async def _unavailable(
    client: FlinkClient, cache: MetricNameCache | None = None, sleep: RecordingSleep | None = None
) -> Unavailable:
    result = await collect(
        client,
        TARGET,
        NOW_MS,
        cache or MetricNameCache(),
        TaskManagerSample(),
        sleep=sleep or RecordingSleep(),
    )
    assert isinstance(result, Unavailable), result
    return result


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
    before = await _sample(client, cache)
    fake.queried.clear()
    fake.fetch_lands = lambda: _next_fetch(fake)  # lands right after the tick's first /jobs/:id
    after = await _sample(client, cache)
    src_before, src_after = before.vertices[SRC], after.vertices[SRC]
    assert src_after.num_records_out - src_before.num_records_out == 6000
    assert src_after.pending_records - src_before.pending_records == 3000
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG] * 2  # the vertices, read again after it


async def test_without_a_fetch_landing_the_vertices_are_read_once(
    fake: FakeFlink, client: FlinkClient
) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)
    fake.queried.clear()
    reads = fake.details_reads
    await _sample(client, cache)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG]
    assert fake.details_reads == reads + 2  # /jobs/:id before and after the vertices


async def test_the_tick_waits_for_its_fetch_then_reads_the_vertices_after_it(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A fetch that lands after every read of the tick would leave the sample a tick old."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    before = await _sample(client, cache)
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
    before = await _sample(client, cache)
    fake.queried.clear()
    result = await collect(client, TARGET, NOW_MS, cache, TaskManagerSample(), fetch_wait_s=0.5, sleep=sleep)
    assert isinstance(result, JobSample)
    assert result.vertices == before.vertices
    assert sum(sleep.pauses) == pytest.approx(0.5)
    assert [key for key, _ in fake.queried] == [SRC, WORK, AGG]


async def test_a_job_rescaled_while_read_is_skipped_not_mixed(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    await _sample(client, cache)

    def rescaled() -> None:
        _next_fetch(fake)
        fake.set_vertex(WORK, parallelism=2)

    fake.fetch_lands = rescaled
    result = await _unavailable(client, cache)
    assert result.reason is Reason.PARTIAL_METRICS
    assert "changed while its metrics were read" in result.detail


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


async def test_queries_only_listed_names_per_vertex(fake: FakeFlink, client: FlinkClient) -> None:
    await _sample(client, MetricNameCache())
    queried = dict(fake.queried)
    assert set(queried[SRC]) == {
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "accumulateBusyTimeMs",
        "Source__BacklogSource.numRecordsInPerSecond",
        "Source__BacklogSource.numRecordsIn",
        "Source__BacklogSource.numRecordsOut",
        "Source__BacklogSource.numRecordsOutPerSecond",
        "Source__BacklogSource.pendingRecords",
    }
    assert set(queried[WORK]) == {
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "accumulateBusyTimeMs",
        "numRecordsInPerSecond",
    }


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


@pytest.mark.parametrize(
    ("aggregator", "expected", "counter"), [("MAX", 4.0, 40.0), ("AVG", 3.0, 30.0), ("MIN", 2.0, 20.0)]
)
async def test_busy_time_aggregator(
    fake: FakeFlink, client: FlinkClient, aggregator: str, expected: float, counter: float
) -> None:
    """The gauge and its counter are aggregated over subtasks alike (the counter's rate pairs with it)."""
    options = AutoscalerOptions(enabled=True, busy_time_aggregator=BusyTimeAggregator(aggregator))
    sample = await _sample(client, MetricNameCache(), JobTarget(TARGET.job, options))
    assert sample.vertices[AGG].busy_time_ms_per_s == expected
    assert sample.vertices[AGG].accumulated_busy_time_agg_ms == counter


async def test_busy_time_counter_not_listed_is_not_queried(fake: FakeFlink, client: FlinkClient) -> None:
    """Optional: a Flink without the counter (or a legacy source) leaves it NaN, the gauge path is used."""
    fake.listings[WORK].remove("accumulateBusyTimeMs")
    sample = await _sample(client, MetricNameCache())
    assert math.isnan(sample.vertices[WORK].accumulated_busy_time_agg_ms)
    assert "accumulateBusyTimeMs" not in dict(fake.queried)[WORK]
    assert sample.vertices[WORK].busy_time_ms_per_s == 1000.0


async def test_busy_time_counter_nan_stays_nan(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[WORK]["accumulateBusyTimeMs"] = {"min": "NaN", "max": "NaN", "avg": "NaN", "sum": "NaN"}
    assert math.isnan((await _sample(client, MetricNameCache())).vertices[WORK].accumulated_busy_time_agg_ms)


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
    fake.values[SRC]["Source__BacklogSource.numRecordsOutPerSecond"] = {"sum": 0.0}
    assert (await _sample(client, MetricNameCache())).vertices[SRC].observed_tpr == math.inf


async def test_reader_that_never_counts_records_in_is_read_by_what_it_emits(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A reader not built on SourceReaderBase leaves numRecordsIn at 0 while it emits; the reference
    would take it for idle (observed TPR +inf, data rate 0) and never scale the job."""
    fake.values[SRC]["Source__BacklogSource.numRecordsIn"] = {"sum": 0.0}
    fake.values[SRC]["Source__BacklogSource.numRecordsInPerSecond"] = {"sum": 0.0}
    src = (await _sample(client, MetricNameCache())).vertices[SRC]
    assert src.num_records_in == 123361.0  # Source__BacklogSource.numRecordsOut
    assert src.num_records_in_per_s == 1203.2  # the recorded numRecordsOutPerSecond
    assert src.observed_tpr == pytest.approx(1_203_200.0)  # catching up, as in the recorded job


async def test_source_that_read_nothing_yet_stays_at_zero(fake: FakeFlink, client: FlinkClient) -> None:
    for name in ("numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond"):
        fake.values[SRC][f"Source__BacklogSource.{name}"] = {"sum": 0.0}
    src = (await _sample(client, MetricNameCache())).vertices[SRC]
    assert (src.num_records_in, src.num_records_in_per_s) == (0.0, 0.0)


async def test_records_out_nan_never_replaces_a_zero_records_in(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.numRecordsIn"] = {"sum": 0.0}
    fake.values[SRC]["Source__BacklogSource.numRecordsOut"] = {"sum": "NaN"}
    assert (await _sample(client, MetricNameCache())).vertices[SRC].num_records_in == 0.0


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
    """After a complete collection the job is warm: an empty answer skips the tick without a retry."""
    cache, sleep = MetricNameCache(), RecordingSleep()
    await _sample(client, cache, sleep=sleep)
    fake.empty_answers[WORK] += 1
    result = await _unavailable(client, cache, sleep=sleep)
    assert result.reason is Reason.PARTIAL_METRICS
    assert result.detail == f"vertex Work ({WORK}): no busyTimeMsPerSecond yet"
    assert sleep.pauses == []
    before = fake.listed[WORK]
    await _sample(client, cache, sleep=sleep)
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
    # The failed attempt stops at the empty answer; the second reads /jobs/:id before and after.
    assert fake.details_reads == 3


async def test_first_collection_gives_up_after_one_retry(fake: FakeFlink, client: FlinkClient) -> None:
    sleep = RecordingSleep()
    fake.empty_answers[SRC] += 2
    fake.empty_answers[WORK] += 2
    result = await _unavailable(client, sleep=sleep)
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
    await _sample(client, cache, sleep=sleep)
    assert cache.is_warm(TARGET.job.key, JID)
    assert not cache.is_warm(TARGET.job.key, "f" * 32)
    cache.forget(TARGET.job.key)
    assert not cache.is_warm(TARGET.job.key, JID)
    fake.empty_answers[WORK] += 1
    await _sample(client, cache, sleep=sleep)
    assert sleep.pauses == [1.0]


async def test_empty_name_listing_is_partial_and_not_cached(fake: FakeFlink, client: FlinkClient) -> None:
    cache = MetricNameCache()
    saved, fake.listings[WORK] = fake.listings[WORK], []
    assert (await _unavailable(client, cache)).reason is Reason.PARTIAL_METRICS
    assert fake.listed[WORK] == 2  # first collection: listed, then listed again after the warm-up pause
    fake.listings[WORK] = saved
    await _sample(client, cache)
    assert fake.listed[WORK] == 3


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
    fake.empty_answers["tm"] += 1
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


# --------------------------------------------------------------------------------------------- the simulator
def _sim_target(job_id: str, aggregator: str = "MAX") -> JobTarget:
    options = AutoscalerOptions(enabled=True, busy_time_aggregator=BusyTimeAggregator(aggregator))
    return JobTarget(JobRef("sim", job_id, "load-job"), options)


@pytest.mark.parametrize("aggregator", ["MAX", "AVG", "MIN"])
async def test_simulator_busy_counter_rate_matches_the_gauge(clock: FakeClock, aggregator: str) -> None:
    """The aggregated accumulateBusyTimeMs answers what the counter path needs, for every aggregator.

    Work at p=2 handles 1,250 rec/s per subtask and gets 2,000 rec/s: 0.8 busy, so the counter of each
    subtask grows 800 ms/s, which is also what the (steady) busyTimeMsPerSecond gauge says.
    """
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(work_job(input_rate=Constant(rate=2000.0), work_parallelism=2))
    work = cluster.vertex_ids(job_id)["Work"]
    clock.advance(120)
    cache, samples = MetricNameCache(), []
    async with FlinkClient("http://flink", cluster="sim", transport=sim_transport(cluster)) as client:
        for _ in range(2):
            result = await collect(
                client, _sim_target(job_id, aggregator), clock.now_ms(), cache, TaskManagerSample()
            )
            assert isinstance(result, JobSample), result
            samples.append(result.vertices[work])
            clock.advance(10)
    rate_ms_per_s = (samples[1].accumulated_busy_time_agg_ms - samples[0].accumulated_busy_time_agg_ms) / 10
    assert rate_ms_per_s == pytest.approx(800.0, rel=0.02)
    assert samples[1].busy_time_ms_per_s == pytest.approx(800.0, rel=0.02)
