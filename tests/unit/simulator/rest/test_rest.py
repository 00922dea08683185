"""The simulator's REST answers against the ones recorded from a real Flink 2.3 cluster.

Here: routing and errors, the in-process transport, and the JSON shapes of the cluster, job, vertex,
checkpoint and TaskManager endpoints. The metric endpoints are in test_metrics.py;
cancel and rescale in test_control.py.
"""

from __future__ import annotations

import httpx
import pytest
from simulator_rest_client import SOURCE_ID, WORK_ID, Fixture, Rest, keys

from autoscaler.clock import FakeClock
from autoscaler.simulator import SimCluster, transport, work_job

pytest_plugins = ("simulator_rest_client",)  # its cluster, rest and job_id fixtures


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
    # A session cluster: the job's configuration is the cluster's; its own options are its global job
    # parameters (/jobs/:id/config), as on the real cluster.
    job_values = {e["key"]: e["value"] for e in rest.get(f"/jobs/{job_id}/jobmanager/config")}
    assert job_values == values
    parameters = rest.get(f"/jobs/{job_id}/config")["execution-config"]["user-config"]
    assert parameters == {"job.autoscaler.enabled": "true", "parallelism.default": "2"}


# ---- errors and routing -------------------------------------------------------------------------


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
