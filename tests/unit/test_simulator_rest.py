"""The simulator's REST answers against the ones recorded from a real Flink 2.3 cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import (
    Constant,
    SimCluster,
    SimClusterSpec,
    SimJobSpec,
    SimVertexSpec,
    handle,
    transport,
    work_job,
)
from autoscaler.simulator.rest import java_string
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS

SOURCE_ID = LAB_VERTEX_IDS["Source: BacklogSource"]
WORK_ID = LAB_VERTEX_IDS["Work"]
SINK_ID = LAB_VERTEX_IDS["Aggregate -> Sink: Writer"]
Fixture = Callable[[str], Any]


class Rest:
    """A tiny client over ``handle``: ``rest.get(path, get=...)`` -> payload (asserts the status)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    def call(self, method: str, path: str, body: Any = None, **query: str) -> tuple[int, Any]:
        raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        status, payload = handle(self.cluster, method, path, query, raw)
        json.dumps(payload, allow_nan=False)  # every answer must be strict JSON
        return status, payload

    def get(self, path: str, **query: str) -> Any:
        status, payload = self.call("GET", path, **query)
        assert status == 200, payload
        return payload


@pytest.fixture
def cluster(clock: FakeClock) -> SimCluster:
    return SimCluster(SimClusterSpec(), clock)


@pytest.fixture
def rest(cluster: SimCluster) -> Rest:
    return Rest(cluster)


@pytest.fixture
def job_id(cluster: SimCluster, clock: FakeClock) -> str:
    job_id = cluster.submit(work_job(name="autoscaler-load-job"))
    clock.advance(90)
    return job_id


def keys(value: dict[str, Any]) -> set[str]:
    return set(value)


def names(payload: list[dict[str, str]]) -> set[str]:
    return {entry["id"] for entry in payload}


# ---- shapes -------------------------------------------------------------------------------------


def test_cluster_level_shapes_match_flink(rest: Rest, job_id: str, fixture: Fixture) -> None:
    assert rest.get("/overview") == {**fixture("overview.json"), "slots-available": 7}
    config = rest.get("/config")
    assert keys(config) == keys(fixture("config.json"))
    assert keys(config["features"]) == keys(fixture("config.json")["features"])

    overview = rest.get("/jobs/overview")
    expected = fixture("jobs_overview.json")["jobs"][0]
    assert keys(overview) == {"jobs"}
    assert keys(overview["jobs"][0]) == keys(expected)
    assert keys(overview["jobs"][0]["tasks"]) == keys(expected["tasks"])
    assert overview["jobs"][0]["tasks"] == expected["tasks"]
    assert rest.get("/jobs") == {"jobs": [{"id": job_id, "status": "RUNNING"}]}


def test_job_details_shape_matches_flink(rest: Rest, job_id: str, fixture: Fixture) -> None:
    details = rest.get(f"/jobs/{job_id}")
    expected = fixture("job.json")
    assert keys(details) == keys(expected)
    assert keys(details["timestamps"]) == keys(expected["timestamps"])
    assert keys(details["status-counts"]) == keys(expected["status-counts"])
    assert [v["id"] for v in details["vertices"]] == [v["id"] for v in expected["vertices"]]
    assert [v["name"] for v in details["vertices"]] == [v["name"] for v in expected["vertices"]]
    for ours, theirs in zip(details["vertices"], expected["vertices"], strict=True):
        assert keys(ours) == keys(theirs)
        assert keys(ours["tasks"]) == keys(theirs["tasks"])
        assert keys(ours["metrics"]) == keys(theirs["metrics"])
        assert {k: type(v) for k, v in ours["metrics"].items()} == {
            k: type(v) for k, v in theirs["metrics"].items()
        }
    assert details["plan"] == rest.get(f"/jobs/{job_id}/plan")["plan"]
    source, work, sink = details["vertices"]
    assert source["metrics"]["read-records"] == 0  # like Flink: a source reads no network input
    assert source["metrics"]["write-records"] == work["metrics"]["read-records"] > 0
    assert sink["metrics"]["write-records"] == 0
    assert work["metrics"]["accumulated-busy-time"] == pytest.approx(90_000, rel=0.01)
    assert details["timestamps"]["RUNNING"] == details["start-time"]


def test_plan_matches_the_real_plan_apart_from_the_job_id(rest: Rest, job_id: str, fixture: Fixture) -> None:
    plan = rest.get(f"/jobs/{job_id}/plan")
    expected = fixture("plan.json")
    expected["plan"]["jid"] = job_id
    assert plan == expected


def test_job_config_and_requirements_shapes(rest: Rest, job_id: str, fixture: Fixture) -> None:
    config = rest.get(f"/jobs/{job_id}/config")
    assert config == {**fixture("job_config.json"), "jid": job_id}
    assert rest.get(f"/jobs/{job_id}/resource-requirements") == fixture("resreq.json")


def test_checkpoints_shape_matches_flink(rest: Rest, job_id: str, fixture: Fixture, clock: FakeClock) -> None:
    ours = rest.get(f"/jobs/{job_id}/checkpoints")
    theirs = fixture("checkpoints.json")
    assert keys(ours) == keys(theirs)
    assert keys(ours["counts"]) == keys(theirs["counts"])
    assert keys(ours["summary"]) == keys(theirs["summary"])
    assert all(keys(ours["summary"][k]) == keys(v) for k, v in theirs["summary"].items())
    assert keys(ours["latest"]) == keys(theirs["latest"])
    assert keys(ours["latest"]["completed"]) == keys(theirs["latest"]["completed"])
    assert keys(ours["history"][0]) == keys(theirs["history"][0])  # an in-progress entry at t = 90 s
    assert len(ours["history"]) == 10
    assert ours["counts"] == {"restored": 0, "total": 45, "in_progress": 1, "completed": 44, "failed": 0}
    assert (
        ours["latest"]["completed"]["trigger_timestamp"] == rest.get(f"/jobs/{job_id}")["start-time"] + 88_000
    )

    body = rest.get(f"/jobs/{job_id}/resource-requirements")
    body[WORK_ID]["parallelism"]["upperBound"] = 2
    rest.call("PUT", f"/jobs/{job_id}/resource-requirements", body)
    clock.advance(2 + 5)
    after = rest.get(f"/jobs/{job_id}/checkpoints")
    assert after["counts"]["completed"] == 44 + 2
    assert after["latest"]["restored"]["id"] == 44
    values = {
        e["id"]: e["value"] for e in rest.get(f"/jobs/{job_id}/metrics", get="lastCompletedCheckpointId")
    }
    assert values == {"lastCompletedCheckpointId": "46"}


def test_vertex_details_shape_matches_flink(rest: Rest, job_id: str, fixture: Fixture) -> None:
    for vertex_id, name in ((WORK_ID, "vertex_work.json"), (SOURCE_ID, "vertex_src.json")):
        ours = rest.get(f"/jobs/{job_id}/vertices/{vertex_id}")
        theirs = fixture(name)
        assert keys(ours) == keys(theirs)
        assert keys(ours["subtasks"][0]) == keys(theirs["subtasks"][0])
        assert keys(ours["subtasks"][0]["metrics"]) == keys(theirs["subtasks"][0]["metrics"])
        assert keys(ours["subtasks"][0]["status-duration"]) == keys(theirs["subtasks"][0]["status-duration"])
        assert keys(ours["aggregated"]) == keys(theirs["aggregated"])
        for part in ("metrics", "status-duration"):
            assert keys(ours["aggregated"][part]) == keys(theirs["aggregated"][part])
            for stat, value in ours["aggregated"][part].items():
                assert keys(value) == keys(theirs["aggregated"][part][stat])
        assert ours["subtasks"][0]["taskmanager-id"] == rest.get("/taskmanagers")["taskmanagers"][0]["id"]


def test_taskmanager_shapes_match_flink(rest: Rest, job_id: str, fixture: Fixture) -> None:
    (ours,) = rest.get("/taskmanagers")["taskmanagers"]
    theirs = fixture("taskmanagers.json")["taskmanagers"][0]
    assert keys(ours) == keys(theirs)
    for nested in ("totalResource", "freeResource", "hardware", "memoryConfiguration"):
        assert keys(ours[nested]) == keys(theirs[nested])
    assert (ours["slotsNumber"], ours["freeSlots"], ours["assignedTasks"]) == (8, 7, 3)
    detail = rest.get(f"/taskmanagers/{ours['id']}")
    expected = fixture("tm_detail.json")
    assert keys(detail) == keys(expected)
    assert keys(detail["metrics"]) == keys(expected["metrics"])
    assert keys(detail["allocatedSlots"][0]) == keys(expected["allocatedSlots"][0])
    assert detail["allocatedSlots"][0]["jobId"] == job_id


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


# ---- configuration ------------------------------------------------------------------------------


def test_jobmanager_config_lists_the_adaptive_scheduler(
    rest: Rest, cluster: SimCluster, fixture: Fixture
) -> None:
    config = rest.get("/jobmanager/config")
    assert all(keys(entry) == {"key", "value"} for entry in config + fixture("jobmanager_config.json"))
    values = {entry["key"]: entry["value"] for entry in config}
    assert values["jobmanager.scheduler"] == "adaptive"
    assert values["jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"] == "30s"
    assert values["taskmanager.numberOfTaskSlots"] == "8"

    job_id = cluster.submit(
        work_job(job_config={"job.autoscaler.enabled": "true", "parallelism.default": "2"})
    )
    job_values = {e["key"]: e["value"] for e in rest.get(f"/jobs/{job_id}/jobmanager/config")}
    assert job_values["job.autoscaler.enabled"] == "true"
    assert job_values["parallelism.default"] == "2"
    assert job_values["jobmanager.scheduler"] == "adaptive"


# ---- rescaling over REST ------------------------------------------------------------------------


def test_put_requirements_rescales(rest: Rest, cluster: SimCluster, job_id: str, clock: FakeClock) -> None:
    body = rest.get(f"/jobs/{job_id}/resource-requirements")
    body[WORK_ID]["parallelism"]["upperBound"] = 3
    status, payload = handle(
        cluster,
        "PUT",
        f"/jobs/{job_id}/resource-requirements",
        {},
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    assert (status, payload) == (200, {})
    assert rest.get(f"/jobs/{job_id}/resource-requirements") == body  # echoes the request at once
    assert rest.get(f"/jobs/{job_id}")["state"] == "RESTARTING"
    assert [v["status"] for v in rest.get(f"/jobs/{job_id}")["vertices"]] == ["CREATED"] * 3
    assert rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics", get="busyTimeMsPerSecond") == []
    clock.advance(2)
    details = rest.get(f"/jobs/{job_id}")
    assert details["state"] == "RUNNING"
    assert [v["parallelism"] for v in details["vertices"]] == [1, 3, 1]
    assert [n["parallelism"] for n in details["plan"]["nodes"]] == [1, 3, 1]
    assert details["timestamps"]["RUNNING"] == cluster.epoch_ms + 92_000
    assert len(rest.get(f"/jobs/{job_id}/vertices/{WORK_ID}")["subtasks"]) == 3


@pytest.mark.parametrize(
    ("fixture_name", "change"),
    [
        ("resreq_put_400_incomplete.json", lambda body: body.pop(SINK_ID)),
        (
            "resreq_put_400_bounds.json",
            lambda body: body[WORK_ID]["parallelism"].update(lowerBound=3, upperBound=2),
        ),
        (
            "resreq_put_400_max_parallelism.json",
            lambda body: body[WORK_ID]["parallelism"].update(upperBound=200),
        ),
        (
            "resreq_put_400_unknown_vertex.json",
            lambda body: body.update({"0" * 32: {"parallelism": {"lowerBound": 1, "upperBound": 1}}}),
        ),
    ],
)
def test_put_errors_are_flinks_400s(
    rest: Rest, job_id: str, fixture: Fixture, fixture_name: str, change: Callable[[dict[str, Any]], Any]
) -> None:
    body = rest.get(f"/jobs/{job_id}/resource-requirements")
    change(body)
    assert rest.call("PUT", f"/jobs/{job_id}/resource-requirements", body) == (400, fixture(fixture_name))
    assert rest.get(f"/jobs/{job_id}/resource-requirements") == fixture("resreq.json")


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        json.dumps({WORK_ID: {"parallelism": {"lowerBound": 1}}}).encode(),
        json.dumps({WORK_ID: {"parallelism": {"lowerBound": "1", "upperBound": 2}}}).encode(),
        json.dumps({"not-a-vertex-id": {"parallelism": {"lowerBound": 1, "upperBound": 2}}}).encode(),
    ],
)
def test_malformed_put_bodies_are_400(rest: Rest, job_id: str, body: bytes) -> None:
    status, payload = rest.call("PUT", f"/jobs/{job_id}/resource-requirements", body)
    assert status == 400
    assert "Request did not match expected format JobResourceRequirementsBody." in payload["errors"][0]


def test_empty_put_body_is_an_incomplete_request(rest: Rest, job_id: str) -> None:
    status, payload = rest.call("PUT", f"/jobs/{job_id}/resource-requirements", b"")
    assert status == 400
    assert f"missing job vertex [{SOURCE_ID}]" in payload["errors"][0]


def test_put_needs_a_json_content_type(cluster: SimCluster, job_id: str) -> None:
    body = json.dumps({SOURCE_ID: {"parallelism": {"lowerBound": 1, "upperBound": 1}}}).encode()
    status, payload = handle(
        cluster, "PUT", f"/jobs/{job_id}/resource-requirements", {}, body, {"Content-Type": "text/plain"}
    )
    assert status == 400 and "application/json" in payload["errors"][0]


# ---- errors, cancel, routing --------------------------------------------------------------------


def test_not_found_answers(rest: Rest, job_id: str) -> None:
    missing = "0" * 32
    for method, path in (
        ("GET", f"/jobs/{missing}"),
        ("GET", f"/jobs/{missing}/plan"),
        ("GET", f"/jobs/{missing}/resource-requirements"),
        ("PUT", f"/jobs/{missing}/resource-requirements"),
        ("PATCH", f"/jobs/{missing}"),
    ):
        status, payload = rest.call(method, path, b"{}")
        assert status == 404, path
        assert payload["errors"][0].startswith(
            f"org.apache.flink.runtime.rest.NotFoundException: Job {missing} not found"
        )
    assert rest.call("GET", "/no/such/path") == (404, {"errors": ["Not found: /no/such/path"]})
    assert rest.call("DELETE", "/overview") == (404, {"errors": ["Not found: /overview"]})
    assert rest.call("GET", f"/jobs/{job_id}/vertices/{missing}")[0] == 404
    status, payload = rest.call("GET", "/jobs/not-a-job-id")
    assert status == 400 and "jobid" in payload["errors"][0]
    assert rest.get(f"/jobs/{missing}/vertices/{WORK_ID}/subtasks/metrics", get="busyTimeMsPerSecond") == []
    assert rest.get("/v1/overview")["taskmanagers"] == 1


def test_cancel_with_patch(rest: Rest, cluster: SimCluster, job_id: str) -> None:
    assert rest.call("PATCH", f"/jobs/{job_id}", mode="cancel") == (202, {})
    assert cluster.state(job_id) == "CANCELED"
    overview = rest.get("/jobs/overview")["jobs"][0]
    assert overview["state"] == "CANCELED" and overview["end-time"] > 0
    assert overview["tasks"]["canceled"] == 3
    assert rest.get("/overview")["jobs-cancelled"] == 1
    status, payload = rest.call("PATCH", f"/jobs/{job_id}", mode="cancel")
    assert status == 409 and "terminal state (CANCELED)" in payload["errors"][0]
    assert rest.call("PATCH", f"/jobs/{job_id}", mode="stop")[0] == 400


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
    rest.get(f"/jobs/{job_id}/metrics", get="numRescales")  # triggers the refresh
    assert rest.get(f"/jobs/{job_id}/metrics", get="numRescales") == [{"id": "numRescales", "value": "0"}]


# ---- in-process transport -----------------------------------------------------------------------


async def test_transport_serves_an_async_client(cluster: SimCluster, job_id: str, clock: FakeClock) -> None:
    async with httpx.AsyncClient(transport=transport(cluster), base_url="http://flink") as client:
        overview = await client.get("/overview")
        assert overview.status_code == 200 and overview.json()["slots-total"] == 8
        answer = await client.get(
            f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics",
            params={"get": "busyTimeMsPerSecond", "agg": "max"},
        )
        assert answer.json() == [{"id": "busyTimeMsPerSecond", "max": 1000.0}]
        body = (await client.get(f"/jobs/{job_id}/resource-requirements")).json()
        body[WORK_ID]["parallelism"]["upperBound"] = 2
        put = await client.put(f"/jobs/{job_id}/resource-requirements", json=body)
        assert (put.status_code, put.json()) == (200, {})
        clock.advance(2)
        details = (await client.get(f"/jobs/{job_id}")).json()
        assert details["vertices"][1]["parallelism"] == 2
        bad = await client.put(f"/jobs/{job_id}/resource-requirements", content=b"{}")
        assert bad.status_code == 400
