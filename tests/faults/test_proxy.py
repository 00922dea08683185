"""The fault proxy itself, against the simulator over HTTP: each fault does to the wire what the fault
matrix relies on, and the record says what reached the cluster. A second each; no daemon, no Spark."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from autoscaler.simulator.server import SimulatorServer

from .harness import SimJob, sim_cluster
from .proxy import (
    JOBS_OVERVIEW,
    RESOURCE_REQUIREMENTS,
    SUBTASK_METRICS,
    VERTEX_METRICS,
    DecreasingMetric,
    Delay,
    Disconnect,
    DropMetric,
    Exchange,
    FaultProxy,
    Inflate,
    SetMetric,
    Trickle,
    Truncate,
    deeply_nested_json,
    error_status,
    html_error_page,
    job_path,
    malformed_json,
    swallow_put,
)

pytestmark = [pytest.mark.faults, pytest.mark.spark]


@dataclass
class Wire:
    proxy: FaultProxy
    http: httpx.Client
    job: SimJob

    def vertex(self, name: str = "Work") -> str:
        return self.job.sim.vertex_ids(self.job.job_id)[name]

    def subtasks(self, get: str | None = None, vertex: str = "Work") -> httpx.Response:
        path = f"/jobs/{self.job.job_id}/vertices/{self.vertex(vertex)}/subtasks/metrics"
        return self.http.get(path, params={"get": get} if get else None)


@pytest.fixture
def wire() -> Iterator[Wire]:
    sim = sim_cluster()
    job = SimJob.submit("sim", sim, "load-job")
    with (
        SimulatorServer(sim) as server,
        FaultProxy(server.url) as proxy,
        httpx.Client(base_url=proxy.url, timeout=5) as http,
    ):
        yield Wire(proxy, http, job)


def test_passes_answers_through_and_records_them(wire: Wire) -> None:
    jobs = wire.http.get("/jobs/overview").json()["jobs"]
    assert [j["jid"] for j in jobs] == [wire.job.job_id]
    (seen,) = wire.proxy.exchanges()
    assert (seen.method, seen.path, seen.status, seen.forwarded, seen.fault) == (
        "GET",
        "/jobs/overview",
        200,
        True,
        None,
    )


def test_a_burst_heals_itself_and_the_newest_rule_wins(wire: Wire) -> None:
    rule = wire.proxy.inject(error_status(503), JOBS_OVERVIEW, count=2)
    statuses = [wire.http.get("/jobs/overview").status_code for _ in range(3)]
    assert statuses == [503, 503, 200] and rule.spent
    assert wire.http.get("/jobs/overview").json()["jobs"]  # other paths and later requests: untouched
    wire.proxy.inject(error_status(500), JOBS_OVERVIEW)
    wire.proxy.inject(error_status(404), JOBS_OVERVIEW)
    assert wire.http.get("/jobs/overview").status_code == 404
    body = wire.http.get("/jobs/overview").json()
    assert body["errors"][0].startswith("org.apache.flink.runtime.rest.handler.RestHandlerException")


def test_a_disconnect_is_a_transport_error_and_nothing_is_forwarded(wire: Wire) -> None:
    with wire.proxy.fault(Disconnect()), pytest.raises(httpx.TransportError):
        wire.http.get("/overview")
    (seen,) = wire.proxy.exchanges()
    assert seen.status is None and not seen.forwarded
    assert wire.http.get("/overview").status_code == 200  # healed with the block


def test_a_delay_outlasts_the_client_timeout_until_healed(wire: Wire) -> None:
    rule = wire.proxy.inject(Delay(30))
    with pytest.raises(httpx.ReadTimeout):
        wire.http.get("/overview", timeout=0.3)
    wire.proxy.heal(rule)
    assert wire.http.get("/overview", timeout=5).status_code == 200


def test_a_swallowed_put_is_answered_like_flink_but_never_applied(wire: Wire) -> None:
    job = wire.job
    before = job.sim.resource_requirements(job.job_id)
    body = {vid: {"parallelism": {"lowerBound": 1, "upperBound": 2}} for vid in before}
    with wire.proxy.fault(swallow_put(), RESOURCE_REQUIREMENTS, method="PUT"):
        answer = wire.http.put(f"/jobs/{job.job_id}/resource-requirements", json=body)
        assert wire.http.get(f"/jobs/{job.job_id}/resource-requirements").status_code == 200  # GETs pass
    assert (answer.status_code, answer.json()) == (200, {})
    assert job.sim.resource_requirements(job.job_id) == before
    (put,) = wire.proxy.exchanges(method="PUT")
    assert put.status == 200 and not put.forwarded
    assert wire.proxy.forwarded(method="GET", path=RESOURCE_REQUIREMENTS)


def test_unreadable_bodies(wire: Wire) -> None:
    job_id = wire.job.job_id
    with wire.proxy.fault(Truncate(0.5), job_path(job_id)):
        cut = wire.http.get(f"/jobs/{job_id}")
    with pytest.raises(ValueError):
        json.loads(cut.content)
    assert cut.status_code == 200 and cut.content.startswith(b'{"jid"')
    with wire.proxy.fault(malformed_json(), SUBTASK_METRICS), pytest.raises(ValueError):
        wire.subtasks("busyTimeMsPerSecond").json()
    with wire.proxy.fault(html_error_page(200), job_path(job_id, "/jobmanager/config$")):
        page = wire.http.get(f"/jobs/{job_id}/jobmanager/config")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_metric_values_rewritten_as_flink_would_write_them(wire: Wire) -> None:
    names = "busyTimeMsPerSecond,accumulateBusyTimeMs"
    with wire.proxy.fault(SetMetric("^busyTimeMsPerSecond$", math.nan), SUBTASK_METRICS):
        busy, acc = wire.subtasks(names).json()
    assert busy["max"] == busy["avg"] == "NaN"  # aggregated answers: numbers, NaN as a string
    assert isinstance(acc["max"], float)  # other metrics untouched
    path = f"/jobs/{wire.job.job_id}/vertices/{wire.vertex()}/metrics"
    with wire.proxy.fault(SetMetric("busyTimeMsPerSecond", 1e300), VERTEX_METRICS):
        (value,) = wire.http.get(path, params={"get": "0.busyTimeMsPerSecond"}).json()
    assert value == {"id": "0.busyTimeMsPerSecond", "value": "1.0E300"}  # per subtask: Java strings


def test_a_dropped_metric_is_gone_from_the_values_and_optionally_from_the_names(wire: Wire) -> None:
    with wire.proxy.fault(DropMetric("^busyTimeMsPerSecond$"), SUBTASK_METRICS):
        assert [m["id"] for m in wire.subtasks("busyTimeMsPerSecond,idleTimeMsPerSecond").json()] == [
            "idleTimeMsPerSecond"
        ]
        assert "busyTimeMsPerSecond" in {m["id"] for m in wire.subtasks().json()}
    with wire.proxy.fault(DropMetric("^busyTimeMsPerSecond$", listing=True), SUBTASK_METRICS):
        assert "busyTimeMsPerSecond" not in {m["id"] for m in wire.subtasks().json()}


def test_a_decreasing_counter_falls_on_every_answer_and_stays_positive(wire: Wire) -> None:
    name = "Source__BacklogSource.numRecordsOut"
    deadline = time.monotonic() + 10
    while wire.subtasks(name, vertex="Source: BacklogSource").json()[0]["sum"] == 0:  # the job just started
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with wire.proxy.fault(DecreasingMetric(name, 0.5), SUBTASK_METRICS):
        sums = [wire.subtasks(name, vertex="Source: BacklogSource").json()[0]["sum"] for _ in range(4)]
    assert all(later < earlier for earlier, later in itertools.pairwise(sums))
    assert sums[-1] > 0


def _sent(proxy: FaultProxy, since: int) -> Exchange:
    """The one exchange from ``since`` on, once the proxy knows how much of its answer went out (it
    learns that the daemon hung up at its next write)."""
    deadline = time.monotonic() + 10
    while True:
        (seen,) = proxy.exchanges(since=since)
        if seen.sent is not None:
            return seen
        assert time.monotonic() < deadline, f"the proxy never finished the answer: {seen}"
        time.sleep(0.02)


def test_a_trickle_sends_the_real_answer_a_byte_at_a_time_until_the_reader_hangs_up(wire: Wire) -> None:
    whole = wire.http.get("/jobs/overview").content
    mark = wire.proxy.mark()
    with wire.proxy.fault(Trickle(bytes_per_s=20), JOBS_OVERVIEW):
        started = time.monotonic()
        with wire.http.stream("GET", "/jobs/overview") as answer:
            assert answer.headers["content-length"] == str(len(whole))  # its real length, announced
            head = b""
            for chunk in answer.iter_raw():  # each read gets a byte well within any per-read timeout
                assert len(chunk) == 1
                head += chunk
                if len(head) == 5:
                    break
        assert time.monotonic() - started >= 0.15  # four gaps of 1/20 s
    assert head == whole[:5]
    seen = _sent(wire.proxy, mark)
    assert seen.complete is False and 5 <= seen.sent < len(whole)  # the rest never went out


def test_an_inflated_answer_is_the_same_json_many_mb_long_with_or_without_its_length(wire: Wire) -> None:
    job_id = wire.job.job_id
    plain = wire.http.get(f"/jobs/{job_id}").json()
    size = 8 << 20
    for declare_length in (True, False):
        mark = wire.proxy.mark()
        with wire.proxy.fault(Inflate(size, declare_length), job_path(job_id)):
            answer = wire.http.get(f"/jobs/{job_id}")
        assert len(answer.content) == size
        assert answer.json()["jid"] == plain["jid"] == job_id  # JSON whitespace: the same answer
        assert answer.headers.get("content-length") == (str(size) if declare_length else None)
        assert (answer.headers.get("transfer-encoding") == "chunked") is not declare_length
        seen = _sent(wire.proxy, mark)
        assert (seen.sent, seen.complete) == (size, True)
    mark = wire.proxy.mark()
    with (
        wire.proxy.fault(Inflate(256 << 20, declare_length=False), job_path(job_id)),
        wire.http.stream("GET", f"/jobs/{job_id}") as answer,
    ):
        next(answer.iter_raw())  # a reader that stops early: the rest is never made or sent
    seen = _sent(wire.proxy, mark)
    assert seen.complete is False and seen.sent < 64 << 20


def test_deeply_nested_json_is_well_formed_and_too_deep_for_the_parser(wire: Wire) -> None:
    with wire.proxy.fault(deeply_nested_json(100_000), SUBTASK_METRICS):
        answer = wire.subtasks("busyTimeMsPerSecond")
    assert answer.status_code == 200 and len(answer.content) == 200_000
    assert answer.content.startswith(b"[[[[") and answer.content.endswith(b"]]]]")
    with pytest.raises(RecursionError):
        json.loads(answer.content)
