"""The simulator's task and operator metrics as its TaskManagers report them: operator scopes, pending
records and partitions over subtasks, legacy and uncounting sources.
"""

from __future__ import annotations

import math

import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, SimJobSpec, SimVertexSpec, work_job
from autoscaler.simulator.engine import operator_metric_prefix

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
