"""The simulator's task and operator metrics as its TaskManagers report them: operator scopes, pending
records and partitions over subtasks, legacy and uncounting sources, a hot key's uneven subtasks.
"""

from __future__ import annotations

import math

import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import (
    Constant,
    SimCluster,
    SimClusterSpec,
    SimEdgeSpec,
    SimJobSpec,
    SimVertexSpec,
    work_job,
)
from autoscaler.simulator.engine import operator_metric_prefix
from autoscaler.simulator.engine.reporting import _split_int, _split_weighted
from autoscaler.simulator.engine.store import MetricValue

SOURCE, SINK = "Source: BacklogSource", "Aggregate -> Sink: Writer"


@pytest.fixture
def cluster(clock: FakeClock) -> SimCluster:
    return SimCluster(SimClusterSpec(), clock)


def test_chained_vertices_report_one_metric_scope_per_operator(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(10)
    subtask = cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)[SINK]][0]
    assert {"Aggregate.numRecordsIn", "Sink__Writer.numRecordsIn", "Sink__Writer.numRecordsOut"} <= set(
        subtask
    )
    assert subtask["Sink__Writer.numRecordsOut"] == 0  # output_ratio 0: a sink
    assert operator_metric_prefix("Source: Numbers") == "Source__Numbers"


def test_pending_records_and_partitions_are_spread_over_subtasks(
    cluster: SimCluster, clock: FakeClock
) -> None:
    job_id = cluster.submit(work_job(source_parallelism=3, initial_backlog=8000))
    clock.advance(0.1)
    subtasks = cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)[SOURCE]]
    partitions = [
        sorted(int(name.split(".")[5]) for name in s if name.endswith(".currentOffset")) for s in subtasks
    ]
    assert partitions == [[0, 3, 6], [1, 4, 7], [2, 5]]
    pending = [s["Source__BacklogSource.pendingRecords"] for s in subtasks]
    assert sum(pending) == int(cluster.backlog(job_id))
    assert pending[0] > pending[2]  # fewer partitions, less backlog


def test_legacy_source_reports_nan_busy_time_and_no_pending_records(clock: FakeClock) -> None:
    spec = SimJobSpec(
        name="legacy",
        vertices=[SimVertexSpec(name="Source: Datagen", capacity_per_subtask=1000, legacy_source=True)],
        input_rate=Constant(10),
    )
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(spec)
    clock.advance(10)
    subtask = cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)["Source: Datagen"]][0]
    assert math.isnan(float(subtask["busyTimeMsPerSecond"]))
    assert not any(name.endswith(".pendingRecords") for name in subtask)


def test_source_that_does_not_count_records_in_still_counts_what_it_emits(clock: FakeClock) -> None:
    spec = SimJobSpec(
        name="uncounted",
        vertices=[SimVertexSpec(name="Source: Reader", capacity_per_subtask=1000, counts_records_in=False)],
        input_rate=Constant(10),
    )
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(spec)
    clock.advance(10)
    subtask = cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)["Source: Reader"]][0]
    counters = {name: subtask[f"Source__Reader.{name}"] for name in ("numRecordsIn", "numRecordsOut")}
    rates = {name: subtask[f"Source__Reader.{name}PerSecond"] for name in ("numRecordsIn", "numRecordsOut")}
    assert counters["numRecordsIn"] == 0 and counters["numRecordsOut"] > 0
    assert rates["numRecordsIn"] == 0.0 and rates["numRecordsOut"] > 0


def test_the_taskmanager_heap_follows_the_spec(clock: FakeClock) -> None:
    """A fleet's TaskManagers hold many tasks: their heap size is the spec's (the lab's small TM unless
    told), so that many tasks need not read as memory pressure."""
    default = SimCluster(SimClusterSpec(), clock).metric_store().taskmanagers
    assert {m["Status.JVM.Memory.Heap.Max"] for m in default.values()} == {436_207_616}
    big = SimCluster(SimClusterSpec(taskmanager_heap_bytes=8 << 30), clock).metric_store().taskmanagers
    assert {
        (m["Status.JVM.Memory.Heap.Max"], m["Status.JVM.Memory.Heap.Committed"]) for m in big.values()
    } == {(8 << 30, 8 << 30)}


# ---- a hot key ------------------------------------------------------------------------------------


def hot_key_job(hot_key_share: float, parallelism: int = 4, rate: float = 2000) -> SimJobSpec:
    """Source -> HASH -> Work (1000 rec/s per subtask, ``hot_key_share`` on subtask 0) -> Sink."""
    return SimJobSpec(
        name=f"hot-{hot_key_share}-{parallelism}",
        vertices=[
            SimVertexSpec(name="Source: Events", capacity_per_subtask=100_000),
            SimVertexSpec(
                name="Work", capacity_per_subtask=1000, parallelism=parallelism, hot_key_share=hot_key_share
            ),
            SimVertexSpec(name="Sink: Out", capacity_per_subtask=100_000, output_ratio=0.0),
        ],
        edges=[
            SimEdgeSpec(source="Source: Events", target="Work", ship_strategy="HASH"),
            SimEdgeSpec(source="Work", target="Sink: Out", ship_strategy="HASH"),
        ],
        input_rate=Constant(rate),
    )


def work_subtasks(cluster: SimCluster, job_id: str) -> tuple[dict[str, MetricValue], ...]:
    return cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)["Work"]]


def test_a_hot_key_saturates_its_subtask_and_caps_the_throughput(
    cluster: SimCluster, clock: FakeClock
) -> None:
    """h 0.5, p 4: subtask 0 gets 0.5 + 0.5/4 = 62.5 % of the records, so Work carries 1000/0.625."""
    job_id = cluster.submit(hot_key_job(0.5))
    assert cluster.job(job_id).weights("Work") == (2.5, 0.5, 0.5, 0.5)
    clock.advance(70)  # past a full meter window

    subtasks = work_subtasks(cluster, job_id)
    assert [s["busyTimeMsPerSecond"] for s in subtasks] == pytest.approx([1000, 200, 200, 200], abs=1)
    assert [s["idleTimeMsPerSecond"] for s in subtasks] == pytest.approx([0, 800, 800, 800], abs=1)
    assert [s["Shuffle.Netty.Input.Buffers.inPoolUsage"] for s in subtasks] == [1.0, 0.0, 0.0, 0.0]
    rates = [float(s["numRecordsInPerSecond"]) for s in subtasks]
    assert sum(rates) == pytest.approx(1600, rel=0.01)
    assert rates[0] == pytest.approx(5 * rates[1])
    assert [s["Work.numRecordsOutPerSecond"] for s in subtasks] == pytest.approx(rates)
    counts = [int(s["numRecordsIn"]) for s in subtasks]
    assert sum(counts) == int(cluster.job(job_id).tasks["Work"].records_in)
    assert counts[0] == pytest.approx(5 * counts[1], abs=5)
    accumulated = [float(s["accumulateBusyTimeMs"]) for s in subtasks]
    assert accumulated == pytest.approx([70_000, 14_000, 14_000, 14_000], rel=0.01)

    source = cluster.metric_store().jobs[job_id].vertices[cluster.vertex_ids(job_id)["Source: Events"]][0]
    assert source["backPressuredTimeMsPerSecond"] > 900  # the hot subtask holds the source back
    before = cluster.backlog(job_id)
    clock.advance(10)
    assert (cluster.backlog(job_id) - before) / 10 == pytest.approx(2000 - 1600, rel=0.01)


def test_more_parallelism_barely_spreads_a_hot_key(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(hot_key_job(0.5))
    clock.advance(40)
    assert cluster.job(job_id).max_emission_rate == pytest.approx(1600)
    requirements = cluster.resource_requirements(job_id)
    requirements[cluster.vertex_ids(job_id)["Work"]] = (1, 8)
    cluster.set_resource_requirements(job_id, requirements)
    clock.advance(75)  # the restart pause, then a full meter window; the backlog is never drained

    assert cluster.parallelism(job_id)["Work"] == 8
    limit = 1000 / (0.5 + 0.5 / 8)  # 1778 rec/s: twice the subtasks, 11 % more throughput
    assert cluster.job(job_id).max_emission_rate == pytest.approx(limit)
    subtasks = work_subtasks(cluster, job_id)
    assert sum(float(s["numRecordsInPerSecond"]) for s in subtasks) == pytest.approx(limit, rel=0.01)
    assert subtasks[0]["busyTimeMsPerSecond"] == pytest.approx(1000, abs=1)
    assert subtasks[1]["busyTimeMsPerSecond"] == pytest.approx(1000 * 0.0625 / 0.5625, abs=1)


def test_without_a_hot_key_every_subtask_reports_the_same(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(hot_key_job(0.0))
    assert cluster.job(job_id).weights("Work") == (1.0,) * 4
    clock.advance(70)
    subtasks = work_subtasks(cluster, job_id)
    for name in (
        "busyTimeMsPerSecond",
        "idleTimeMsPerSecond",
        "numRecordsInPerSecond",
        "accumulateBusyTimeMs",
    ):
        assert len({s[name] for s in subtasks}) == 1
    assert subtasks[0]["busyTimeMsPerSecond"] == pytest.approx(500, abs=1)  # 2000 rec/s on 4 x 1000
    assert sum(float(s["numRecordsInPerSecond"]) for s in subtasks) == pytest.approx(2000, rel=0.01)
    assert cluster.backlog(job_id) == 0


def test_split_weighted_sums_back_and_matches_the_even_split() -> None:
    assert _split_weighted(1001.7, (1.0, 1.0, 1.0)) == _split_int(1001.7, 3)
    parts = _split_weighted(1001.7, (2.5, 0.5, 0.5, 0.5))
    assert sum(parts) == 1001 and parts[0] == pytest.approx(5 * parts[1], abs=5)
    assert _split_weighted(-3, (2.0, 0.0)) == [0, 0]
