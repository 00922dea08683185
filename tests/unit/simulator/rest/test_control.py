"""Changing a job over the simulator's REST: rescale with a PUT of the resource requirements (and
Flink's 400s for a body it rejects), cancel with a PATCH.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from simulator_rest_client import SINK_ID, SOURCE_ID, WORK_ID, Fixture, Rest

from autoscaler.clock import FakeClock
from autoscaler.simulator import SimCluster, handle

pytest_plugins = ("simulator_rest_client",)  # its cluster, rest and job_id fixtures


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


# ---- cancel -------------------------------------------------------------------------------------


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
