"""Payload models and metric names, against the recorded Flink 2.3 answers."""

from __future__ import annotations

import math

import pytest
from flink_samples import load_fixture
from pydantic import ValidationError

from autoscaler.flink.metric_names import FlinkMetric, matching, source_partitions
from autoscaler.flink.models import (
    AggregatedMetric,
    JobDetails,
    JobOverview,
    JobPlan,
    ParallelismBounds,
    TaskManagerInfo,
    VertexIO,
    flink_float,
)
from autoscaler.model import Edge

JID = "b504ef90bb3f9a8f570595d5ecf7ca6e"
SRC = "e5a72f353fc1e6bbf3bd96a41384998c"
WORK = "674df9b0384c0348e0b9d1034a44c46c"
AGG = "96eed58e350a66c179f06330f5425345"


def _names(fixture_name: str) -> list[str]:
    return [m["id"] for m in load_fixture(fixture_name)]


# --------------------------------------------------------------------------------------------- values
@pytest.mark.parametrize(
    ("raw", "expected"),
    [(1, 1.0), (2.5, 2.5), ("999", 999.0), ("1203.2", 1203.2), ("1.50132896E8", 150132896.0), (" 7 ", 7.0)],
)
def test_flink_float_reads_numbers_and_numeric_strings(raw: object, expected: float) -> None:
    assert flink_float(raw) == expected


@pytest.mark.parametrize("raw", [None, "NaN", "nan", "", "n/a", True])
def test_flink_float_makes_absent_or_unreadable_nan(raw: object) -> None:
    assert math.isnan(flink_float(raw))


def test_aggregated_metric_nan_strings_and_absent_aggregates() -> None:
    legacy = AggregatedMetric.model_validate(
        {"id": "busyTimeMsPerSecond", "min": "NaN", "max": "NaN", "avg": "NaN", "sum": "NaN", "skew": "NaN"}
    )
    assert all(math.isnan(v) for v in (legacy.min, legacy.max, legacy.avg, legacy.sum, legacy.skew))
    partial = AggregatedMetric.model_validate({"id": "numRecordsIn", "max": 4436.0, "sum": "9654", "x": 1})
    assert (partial.max, partial.sum) == (4436.0, 9654.0)
    assert math.isnan(partial.min) and math.isnan(partial.avg)


def test_aggregated_metric_rejects_non_scalar_values() -> None:
    with pytest.raises(ValidationError):
        AggregatedMetric.model_validate({"id": "x", "max": {"nested": 1}})


# --------------------------------------------------------------------------------------------- jobs
def test_job_overview_fixture_is_effectively_running() -> None:
    job = JobOverview.model_validate(load_fixture("jobs_overview.json")["jobs"][0])
    assert (job.jid, job.name, job.state) == (JID, "autoscaler-load-job", "RUNNING")
    assert (job.job_type, job.scheduler_type, job.start_time) == ("STREAMING", "Adaptive", 1795246565282)
    assert job.tasks["total"] == 3
    assert job.effective_running


@pytest.mark.parametrize(
    ("state", "tasks", "expected"),
    [
        ("RUNNING", {"running": 2, "finished": 1, "total": 3}, True),
        ("RUNNING", {"running": 2, "deploying": 1, "total": 3}, False),
        ("RUNNING", {"running": 0, "initializing": 3, "total": 3}, False),
        ("RESTARTING", {"running": 3, "total": 3}, False),
    ],
)
def test_effective_running_needs_every_task_running_or_finished(
    state: str, tasks: dict[str, int], expected: bool
) -> None:
    job = JobOverview(jid="j", name="n", state=state, tasks=tasks)
    assert job.effective_running is expected


def test_job_details_topology_from_fixture() -> None:
    details = JobDetails.model_validate(load_fixture("job.json"))
    topology = details.topology()
    assert [v.name for v in topology] == ["Source: BacklogSource", "Work", "Aggregate -> Sink: Writer"]
    assert list(topology.vertices) == [SRC, WORK, AGG]
    assert topology.edges == (Edge(SRC, WORK, "REBALANCE"), Edge(WORK, AGG, "HASH"))
    work = topology.vertices[WORK]
    assert (work.parallelism, work.max_parallelism, work.status) == (1, 128, "RUNNING")
    assert work.slot_sharing_group == "3087317a72974333cfee9525e2931899"
    assert topology.is_source(SRC) and not topology.is_source(AGG)
    assert details.running_since_ms == 1795246565789
    assert details.now == 1795246671050
    assert details.all_tasks_running


def test_job_details_vertex_io_ignores_complete_flags() -> None:
    details = JobDetails.model_validate(load_fixture("job.json"))
    assert details.vertex_io(SRC) == VertexIO(
        read_records=0.0, write_records=123362.0, accumulated_busy_time_ms=641
    )
    assert details.vertex_io(WORK) == VertexIO(110891.0, 110890.0, 89002.0)
    unknown = details.vertex_io("nope")
    assert math.isnan(unknown.read_records) and math.isnan(unknown.accumulated_busy_time_ms)


def test_job_details_not_all_running_when_a_vertex_deploys() -> None:
    payload = load_fixture("job.json")
    payload["vertices"][1]["status"] = "DEPLOYING"
    assert not JobDetails.model_validate(payload).all_tasks_running
    payload["vertices"][1]["status"] = "FINISHED"
    assert JobDetails.model_validate(payload).all_tasks_running


def test_job_details_rejects_a_plan_naming_unknown_vertices() -> None:
    payload = load_fixture("job.json")
    payload["plan"]["nodes"][1]["inputs"][0]["id"] = "ffffffffffffffffffffffffffffffff"
    with pytest.raises(ValidationError, match="unknown vertex"):
        JobDetails.model_validate(payload)


def test_job_details_requires_vertices() -> None:
    payload = load_fixture("job.json")
    del payload["vertices"]
    with pytest.raises(ValidationError):
        JobDetails.model_validate(payload)


def test_plan_fixture_matches_the_plan_inside_job_details() -> None:
    plan = JobPlan.model_validate(load_fixture("plan.json"))
    assert plan.type == "STREAMING"
    assert plan.nodes[0].description == "Source: BacklogSource<br/>"
    assert plan.edges() == JobDetails.model_validate(load_fixture("job.json")).plan.edges()


# --------------------------------------------------------------------------------------------- cluster
def test_taskmanager_info_flattens_resources() -> None:
    tm = TaskManagerInfo.model_validate(load_fixture("taskmanagers.json")["taskmanagers"][0])
    assert tm.id == "127.0.0.1:32853-7063d9"
    assert (tm.slots_number, tm.free_slots, tm.cpu_cores) == (8, 7, 8.0)
    assert tm.physical_memory == 25276502016
    assert tm.total_process_memory == 1610612736


def test_taskmanager_info_without_memory_configuration() -> None:
    tm = TaskManagerInfo.model_validate({"id": "tm", "slotsNumber": 2, "freeSlots": 0, "totalResource": {}})
    assert tm.total_process_memory is None and tm.physical_memory is None and math.isnan(tm.cpu_cores)


# --------------------------------------------------------------------------------------------- bounds
def test_parallelism_bounds_validate() -> None:
    assert ParallelismBounds(1, 3).to_json() == {"parallelism": {"lowerBound": 1, "upperBound": 3}}
    for lower, upper in ((0, 1), (3, 2), (-1, -1)):
        with pytest.raises(ValueError, match="lower <= upper"):
            ParallelismBounds(lower, upper)


# --------------------------------------------------------------------------------------------- names
def test_metric_predicates_on_the_source_listing() -> None:
    names = _names("src_subtask_metric_names.json")
    assert matching(FlinkMetric.BUSY_TIME_PER_SEC, names) == ["busyTimeMsPerSecond"]
    assert matching(FlinkMetric.BACKPRESSURE_TIME_PER_SEC, names) == ["backPressuredTimeMsPerSecond"]
    assert matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN_PER_SEC, names) == [
        "Source__BacklogSource.numRecordsInPerSecond"
    ]
    assert matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN, names) == ["Source__BacklogSource.numRecordsIn"]
    assert matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_OUT, names) == ["Source__BacklogSource.numRecordsOut"]
    assert matching(FlinkMetric.PENDING_RECORDS, names) == ["Source__BacklogSource.pendingRecords"]
    assert matching(FlinkMetric.NUM_RECORDS_IN_PER_SEC, names) == ["numRecordsInPerSecond"]
    assert source_partitions(names) == 0  # BacklogSource is neither Kafka nor Pulsar


def test_metric_predicates_on_the_work_listing() -> None:
    names = _names("work_subtask_metric_names.json")
    assert matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN_PER_SEC, names) == []
    assert matching(FlinkMetric.PENDING_RECORDS, names) == []
    assert matching(FlinkMetric.NUM_RECORDS_IN_PER_SEC, names) == ["numRecordsInPerSecond"]
    assert not FlinkMetric.NUM_RECORDS_IN_PER_SEC.matches("Work.numRecordsInPerSecond")


def test_metric_predicates_on_taskmanager_and_jobmanager_listings() -> None:
    tm = _names("tm_metrics_names.json")
    for metric in (
        FlinkMetric.HEAP_MEMORY_MAX,
        FlinkMetric.HEAP_MEMORY_USED,
        FlinkMetric.TOTAL_GC_TIME_PER_SEC,
        FlinkMetric.CPU_LOAD,
        FlinkMetric.MANAGED_MEMORY_USED,
        FlinkMetric.METASPACE_MEMORY_USED,
    ):
        assert len(matching(metric, tm)) == 1, metric
    jm = _names("jm_metrics_names.json")
    assert matching(FlinkMetric.NUM_TASK_SLOTS_TOTAL, jm) == ["taskSlotsTotal"]
    assert matching(FlinkMetric.NUM_TASK_SLOTS_AVAILABLE, jm) == ["taskSlotsAvailable"]


def test_pending_records_matches_every_operator_and_dedups() -> None:
    names = ["A.pendingRecords", "Source__B.pendingRecords", "A.pendingRecords", ".pendingRecords"]
    names.append("pendingRecords")
    assert matching(FlinkMetric.PENDING_RECORDS, names) == ["A.pendingRecords", "Source__B.pendingRecords"]


def test_source_partitions_counts_distinct_kafka_and_pulsar_partitions() -> None:
    kafka = "Source__Kafka.KafkaSourceReader.topic.{t}.partition.{p}.currentOffset"
    names = [
        kafka.format(t="orders", p=0),
        kafka.format(t="orders", p=1),
        kafka.format(t="orders", p=1),  # listed twice: still one partition
        kafka.format(t="orders.eu", p=0),  # dotted topic names are topics, not paths
        kafka.format(t="orders", p=2).replace(".currentOffset", ".committedOffset"),  # not counted
        "Source__Kafka.kafkaCluster.east.KafkaSourceReader.topic.orders.partition.0.currentOffset",
        "Source__Kafka.kafkaCluster.west.KafkaSourceReader.topic.orders.partition.0.currentOffset",
        "Source__Pulsar.PulsarConsumer.persistent_//public/default/events-partition-3.c1.numMsgsReceived",
        "Source__Pulsar.PulsarConsumer.persistent_//public/default/events-partition-3.c2.numMsgsReceived",
        "Source__Pulsar.PulsarConsumer.persistent_//public/default/events-partition-4.c1.numMsgsReceived",
        "Source__Pulsar.PulsarConsumer.persistent_//public/default/events-partition-4.c1.numBytesReceived",
    ]
    # orders/0, orders/1, orders.eu/0, east/orders/0, west/orders/0, events/3, events/4
    assert source_partitions(names) == 7
    assert source_partitions([]) == 0
