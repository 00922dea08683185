"""The simulator's metric endpoints against a real Flink 2.3 cluster's: names, aggregations, Java's
value formats, and the lazy metric fetcher behind them.
"""

from __future__ import annotations

from typing import Any

import pytest
from simulator_rest_client import SOURCE_ID, WORK_ID, Fixture, Rest, keys, names

from autoscaler.clock import FakeClock
from autoscaler.simulator import Constant, SimCluster, SimClusterSpec, SimJobSpec, SimVertexSpec, work_job
from autoscaler.simulator.rest import java_string

pytest_plugins = ("simulator_rest_client",)  # its cluster, rest and job_id fixtures


# ---- metric names -------------------------------------------------------------------------------


def test_metric_name_lists_match_flink(rest: Rest, job_id: str, fixture: Fixture) -> None:
    work = names(rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics"))
    assert work == names(fixture("work_subtask_metric_names.json"))

    source = names(rest.get(f"/jobs/{job_id}/vertices/{SOURCE_ID}/subtasks/metrics"))
    kafka = {
        f"Source__BacklogSource.KafkaSourceReader.topic.sim.partition.{n}.currentOffset" for n in range(8)
    }
    assert source == names(fixture("src_subtask_metric_names.json")) | kafka

    per_subtask = names(rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}/metrics"))
    assert per_subtask == names(fixture("vertex_metrics_names.json"))
    assert names(rest.get(f"/jobs/{job_id}/metrics")) == names(fixture("job_metrics_names.json"))
    assert names(rest.get("/taskmanagers/metrics")) == names(fixture("tm_metrics_names.json"))
    tm_id = rest.get("/taskmanagers")["taskmanagers"][0]["id"]
    assert names(rest.get(f"/taskmanagers/{tm_id}/metrics")) == names(fixture("tm_one_metrics_names.json"))
    assert names(rest.get("/jobmanager/metrics")) == names(fixture("jm_metrics_names.json"))


# ---- metric values and quirks -------------------------------------------------------------------


def test_aggregated_vertex_metrics_like_the_lab(rest: Rest, job_id: str, fixture: Fixture) -> None:
    query = (
        "busyTimeMsPerSecond,backPressuredTimeMsPerSecond,numRecordsInPerSecond,"
        "numRecordsOutPerSecond,idleTimeMsPerSecond"
    )
    work = rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics", get=query, agg="sum,avg,max")
    expected = fixture("work_subtasks_metrics.json")
    assert [keys(e) for e in work] == [keys(e) for e in expected]
    assert [e["id"] for e in work] == [e["id"] for e in expected]
    for ours, theirs in zip(work, expected, strict=True):
        assert ours["max"] == pytest.approx(theirs["max"], abs=5)

    query = (
        "Source__BacklogSource.pendingRecords,Source__BacklogSource.numRecordsOutPerSecond,"
        "numRecordsOutPerSecond,busyTimeMsPerSecond,backPressuredTimeMsPerSecond"
    )
    source = rest.get(f"/jobs/{job_id}/vertices/{SOURCE_ID}/subtasks/metrics", get=query, agg="sum,avg,max")
    expected = fixture("src_subtasks_metrics.json")
    assert [(e["id"], keys(e)) for e in source] == [(e["id"], keys(e)) for e in expected]
    by_id = {e["id"]: e for e in source}
    assert by_id["backPressuredTimeMsPerSecond"]["avg"] > 900
    assert by_id["Source__BacklogSource.pendingRecords"]["sum"] == pytest.approx(750 * 90, rel=0.01)
    assert all(isinstance(e[agg], float) for e in source for agg in ("sum", "avg", "max"))


def test_default_aggregations_are_all_five(rest: Rest, job_id: str) -> None:
    (entry,) = rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics", get="busyTimeMsPerSecond")
    assert list(entry) == ["id", "min", "max", "avg", "sum", "skew"]
    assert entry["skew"] == 0.0


def test_one_unknown_name_empties_the_whole_answer(rest: Rest, job_id: str, fixture: Fixture) -> None:
    path = f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics"
    mixed = rest.get(path, get="busyTimeMsPerSecond,Source__BacklogSource.pendingRecords", agg="max")
    assert mixed == fixture("mixed_missing.json") == []
    tm = rest.get("/taskmanagers/metrics", get="Status.JVM.CPU.Load,Status.No.Such.Metric")
    assert tm == []
    # Non-numeric metrics are skipped rather than emptying the answer.
    assert names(rest.get(path, get="isBackPressured,busyTimeMsPerSecond")) == {"busyTimeMsPerSecond"}


def test_per_subtask_values_are_strings(rest: Rest, job_id: str, fixture: Fixture) -> None:
    query = (
        "0.busyTimeMsPerSecond,0.Source__BacklogSource.pendingRecords,"
        "0.numRecordsOutPerSecond,0.backPressuredTimeMsPerSecond,0.no.such.metric"
    )
    answer = rest.get(f"/jobs/{job_id}/vertices/{SOURCE_ID}/metrics", get=query)
    assert names(answer) == names(fixture("vertex_metrics.json"))
    assert all(isinstance(entry["value"], str) for entry in answer)
    values = {entry["id"]: entry["value"] for entry in answer}
    assert values["0.busyTimeMsPerSecond"].endswith(".0")  # a Java double
    assert values["0.backPressuredTimeMsPerSecond"].isdigit()  # a Java long
    one = rest.get(
        f"/jobs/{job_id}/vertices/{SOURCE_ID}/subtasks/0/metrics", get="numRecordsOut,isBackPressured"
    )
    assert one[1] == {"id": "isBackPressured", "value": "true"}


def test_nan_is_the_string_nan(rest: Rest, cluster: SimCluster, clock: FakeClock) -> None:
    job = SimJobSpec(
        name="datagen",
        vertices=[SimVertexSpec(name="Source: Datagen", capacity_per_subtask=1000, legacy_source=True)],
        input_rate=Constant(10),
    )
    job_id = cluster.submit(job)
    clock.advance(10)
    vid = cluster.vertex_ids(job_id)["Source: Datagen"]
    (entry,) = rest.get(f"/jobs/{job_id}/vertices/{vid}/subtasks/metrics", get="busyTimeMsPerSecond")
    assert entry == {
        "id": "busyTimeMsPerSecond",
        "min": "NaN",
        "max": "NaN",
        "avg": "NaN",
        "sum": "NaN",
        "skew": "NaN",
    }
    (value,) = rest.get(f"/jobs/{job_id}/vertices/{vid}/metrics", get="0.busyTimeMsPerSecond")
    assert value["value"] == "NaN"
    assert rest.get(f"/jobs/{job_id}")["vertices"][0]["metrics"]["accumulated-busy-time"] == "NaN"


def test_skew_follows_flinks_formula(rest: Rest, cluster: SimCluster) -> None:
    job_id = cluster.submit(work_job(source_parallelism=3, initial_backlog=8000, input_rate=Constant(0)))
    (entry,) = rest.get(
        f"/jobs/{job_id}/vertices/{SOURCE_ID}/subtasks/metrics", get="Source__BacklogSource.pendingRecords"
    )
    values = [3000, 3000, 2000]  # 8 partitions over 3 subtasks: 3, 3 and 2 of them
    avg = sum(values) / 3
    assert entry["min"] == 2000 and entry["max"] == 3000
    assert entry["skew"] == pytest.approx(sum(abs(avg - v) for v in values) / 3 / avg * 100, rel=0.01)


def test_job_jm_and_tm_metrics(rest: Rest, cluster: SimCluster, job_id: str, clock: FakeClock) -> None:
    jm = rest.get("/jobmanager/metrics", get="taskSlotsTotal,taskSlotsAvailable")
    assert jm == [{"id": "taskSlotsTotal", "value": "8"}, {"id": "taskSlotsAvailable", "value": "7"}]
    tm = rest.get(
        "/taskmanagers/metrics",
        get="Status.JVM.CPU.Load,Status.JVM.Memory.Heap.Used,Status.JVM.Memory.Heap.Max,"
        "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
        agg="min,max,avg",
    )
    assert [e["id"] for e in tm][-1] == "Status.JVM.GarbageCollector.All.TimeMsPerSecond"
    assert all(keys(e) == {"id", "min", "max", "avg"} for e in tm)

    body = rest.get(f"/jobs/{job_id}/resource-requirements")
    body[WORK_ID]["parallelism"]["upperBound"] = 3
    assert rest.call("PUT", f"/jobs/{job_id}/resource-requirements", body) == (200, {})
    clock.advance(3)
    job_metrics = rest.get(f"/jobs/{job_id}/metrics", get="numRestarts,numRescales")
    assert job_metrics == [{"id": "numRestarts", "value": "1"}, {"id": "numRescales", "value": "1"}]
    assert rest.get("/jobmanager/metrics", get="taskSlotsAvailable") == [
        {"id": "taskSlotsAvailable", "value": "5"}
    ]


def test_java_string_formats_like_java() -> None:
    assert java_string(1.0) == "1.0"
    assert java_string(1203.2) == "1203.2"
    assert java_string(1.50132896e8) == "1.50132896E8"
    assert java_string(0.0001) == "1.0E-4"
    assert java_string(66945) == "66945"
    assert java_string(float("nan")) == "NaN"
    assert java_string(True) == "true"


# ---- the lazy metric fetcher --------------------------------------------------------------------


def test_lazy_fetcher_answers_the_last_fetch_and_refreshes_after_the_interval(clock: FakeClock) -> None:
    cluster = SimCluster(SimClusterSpec(metric_fetch_interval_s=10), clock)
    rest = Rest(cluster)
    job_id = cluster.submit(work_job())
    clock.advance(30)
    path = f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics"

    def read() -> list[dict[str, Any]]:
        return rest.get(path, get="numRecordsIn", agg="sum")

    assert read() == []  # nothing fetched yet; this query triggers the first fetch
    first = read()
    assert first[0]["sum"] == pytest.approx(1250 * 30, rel=0.01)
    clock.advance(5)
    assert read() == first  # younger than the interval: stale, no refresh
    assert rest.get(f"/jobs/{job_id}")["vertices"][1]["metrics"]["read-records"] == int(first[0]["sum"])
    clock.advance(25)
    assert read() == first  # 30 s stale: answered from the old fetch, which starts a new one
    assert read()[0]["sum"] == pytest.approx(1250 * 60, rel=0.01)


def test_lazy_fetcher_does_not_know_a_job_submitted_after_the_last_fetch(clock: FakeClock) -> None:
    cluster = SimCluster(SimClusterSpec(metric_fetch_interval_s=10), clock)
    rest = Rest(cluster)
    rest.get("/taskmanagers/metrics", get="Status.JVM.CPU.Load")  # first fetch, empty cluster
    job_id = cluster.submit(work_job())
    clock.advance(3)
    assert rest.get(f"/jobs/{job_id}/metrics", get="numRescales") == []
    clock.advance(7)
    rest.get(f"/jobs/{job_id}/metrics", get="numRescales")  # exactly an interval old: no refresh yet
    assert rest.get(f"/jobs/{job_id}/metrics", get="numRescales") == []
    clock.advance(ms=1)
    rest.get(f"/jobs/{job_id}/metrics", get="numRescales")  # more than an interval: triggers the refresh
    assert rest.get(f"/jobs/{job_id}/metrics", get="numRescales") == [{"id": "numRescales", "value": "0"}]
