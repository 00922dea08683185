"""One vertex's query and its answer as a VertexSample: listed names, the busy-time aggregator, sources'
records, lag and observed TPR, finished vertices (``autoscaler/collect/vertices.py``)."""

from __future__ import annotations

import math

import pytest
from collect_flink import (
    AGG,
    SRC,
    TARGET,
    WORK,
    FakeFlink,
    sample_job,
)

from autoscaler.clock import FakeClock
from autoscaler.collect import MetricNameCache, collect, observed_true_processing_rate
from autoscaler.flink.client import FlinkClient
from autoscaler.model import JobRef, JobSample, JobTarget, TaskManagerSample
from autoscaler.settings import AutoscalerOptions, BusyTimeAggregator
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, work_job
from autoscaler.simulator import transport as sim_transport

pytest_plugins = ("collect_flink",)  # its fake and client fixtures


# --------------------------------------------------------------------------------------------- one vertex
async def test_queries_only_listed_names_per_vertex(fake: FakeFlink, client: FlinkClient) -> None:
    await sample_job(client, MetricNameCache())
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


@pytest.mark.parametrize(
    ("aggregator", "expected", "counter"), [("MAX", 4.0, 40.0), ("AVG", 3.0, 30.0), ("MIN", 2.0, 20.0)]
)
async def test_busy_time_aggregator(
    fake: FakeFlink, client: FlinkClient, aggregator: str, expected: float, counter: float
) -> None:
    """The gauge and its counter are aggregated over subtasks alike (the counter's rate pairs with it)."""
    options = AutoscalerOptions(enabled=True, busy_time_aggregator=BusyTimeAggregator(aggregator))
    sample = await sample_job(client, MetricNameCache(), JobTarget(TARGET.job, options))
    assert sample.vertices[AGG].busy_time_ms_per_s == expected
    assert sample.vertices[AGG].accumulated_busy_time_agg_ms == counter


async def test_busy_time_counter_not_listed_is_not_queried(fake: FakeFlink, client: FlinkClient) -> None:
    """Optional: a Flink without the counter (or a legacy source) leaves it NaN, the gauge path is used."""
    fake.listings[WORK].remove("accumulateBusyTimeMs")
    sample = await sample_job(client, MetricNameCache())
    assert math.isnan(sample.vertices[WORK].accumulated_busy_time_agg_ms)
    assert "accumulateBusyTimeMs" not in dict(fake.queried)[WORK]
    assert sample.vertices[WORK].busy_time_ms_per_s == 1000.0


async def test_busy_time_counter_nan_stays_nan(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[WORK]["accumulateBusyTimeMs"] = {"min": "NaN", "max": "NaN", "avg": "NaN", "sum": "NaN"}
    assert math.isnan(
        (await sample_job(client, MetricNameCache())).vertices[WORK].accumulated_busy_time_agg_ms
    )


async def test_source_without_pending_records_has_no_lag(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("Source__BacklogSource.pendingRecords")
    src = (await sample_job(client, MetricNameCache())).vertices[SRC]
    assert src.pending_records == 0.0
    assert math.isnan(src.observed_tpr)  # no backlog: not catching up, nothing observed


async def test_pending_records_listed_but_nan_stays_nan(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.pendingRecords"] = {"max": "NaN", "avg": "NaN", "sum": "NaN"}
    src = (await sample_job(client, MetricNameCache())).vertices[SRC]
    assert math.isnan(src.pending_records) and math.isnan(src.observed_tpr)


async def test_pending_records_summed_over_every_operator(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].append("Source__Other.pendingRecords")
    fake.values[SRC]["Source__Other.pendingRecords"] = {"sum": 55.0}
    assert (await sample_job(client, MetricNameCache())).vertices[SRC].pending_records == 66945.0 + 55.0


async def test_source_records_in_falls_back_to_records_out(fake: FakeFlink, client: FlinkClient) -> None:
    fake.listings[SRC].remove("Source__BacklogSource.numRecordsIn")
    assert (await sample_job(client, MetricNameCache())).vertices[SRC].num_records_in == 123361.0


async def test_source_with_read_records_keeps_them(fake: FakeFlink, client: FlinkClient) -> None:
    fake.set_vertex(SRC, metrics={**fake.job["vertices"][0]["metrics"], "read-records": 42})
    assert (await sample_job(client, MetricNameCache())).vertices[SRC].num_records_in == 42.0


async def test_idle_source_has_infinite_observed_tpr(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.numRecordsInPerSecond"] = {"sum": 0.0}
    fake.values[SRC]["Source__BacklogSource.numRecordsOutPerSecond"] = {"sum": 0.0}
    assert (await sample_job(client, MetricNameCache())).vertices[SRC].observed_tpr == math.inf


async def test_reader_that_never_counts_records_in_is_read_by_what_it_emits(
    fake: FakeFlink, client: FlinkClient
) -> None:
    """A reader not built on SourceReaderBase leaves numRecordsIn at 0 while it emits; the reference
    would take it for idle (observed TPR +inf, data rate 0) and never scale the job."""
    fake.values[SRC]["Source__BacklogSource.numRecordsIn"] = {"sum": 0.0}
    fake.values[SRC]["Source__BacklogSource.numRecordsInPerSecond"] = {"sum": 0.0}
    src = (await sample_job(client, MetricNameCache())).vertices[SRC]
    assert src.num_records_in == 123361.0  # Source__BacklogSource.numRecordsOut
    assert src.num_records_in_per_s == 1203.2  # the recorded numRecordsOutPerSecond
    assert src.observed_tpr == pytest.approx(1_203_200.0)  # catching up, as in the recorded job


async def test_source_that_read_nothing_yet_stays_at_zero(fake: FakeFlink, client: FlinkClient) -> None:
    for name in ("numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond"):
        fake.values[SRC][f"Source__BacklogSource.{name}"] = {"sum": 0.0}
    src = (await sample_job(client, MetricNameCache())).vertices[SRC]
    assert (src.num_records_in, src.num_records_in_per_s) == (0.0, 0.0)


async def test_records_out_nan_never_replaces_a_zero_records_in(fake: FakeFlink, client: FlinkClient) -> None:
    fake.values[SRC]["Source__BacklogSource.numRecordsIn"] = {"sum": 0.0}
    fake.values[SRC]["Source__BacklogSource.numRecordsOut"] = {"sum": "NaN"}
    assert (await sample_job(client, MetricNameCache())).vertices[SRC].num_records_in == 0.0


async def test_finished_vertex_counts_as_idle_and_is_not_queried(
    fake: FakeFlink, client: FlinkClient
) -> None:
    fake.set_vertex(SRC, status="FINISHED")
    sample = await sample_job(client, MetricNameCache())
    src = sample.vertices[SRC]
    assert (src.busy_time_ms_per_s, src.backpressured_ms_per_s, src.num_records_in_per_s) == (0.0, 0.0, 0.0)
    assert (src.pending_records, src.num_records_out) == (0.0, 123362.0)
    assert math.isnan(src.observed_tpr)
    assert list(sample.vertices) == [SRC, WORK, AGG]
    assert fake.listed[SRC] == 0 and SRC not in dict(fake.queried)


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
