"""The simulator over real HTTP on 127.0.0.1: start, answer, rescale, stop and release the port; count."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import parse_qsl

import httpx
import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import (
    SimCluster,
    SimClusterSpec,
    SimulatorServer,
    run_simulator,
    transport,
    work_job,
)
from autoscaler.simulator.rest import NO_ROUTE, RequestCounts
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS
from autoscaler.simulator.server import COUNTS_PATH, JOB_READS_PATH, _query

WORK_ID = LAB_VERTEX_IDS["Work"]


@pytest.fixture
def cluster(clock: FakeClock) -> SimCluster:
    return SimCluster(SimClusterSpec(), clock)


def test_serves_overview_and_rescales_over_http(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job())
    clock.advance(60)
    with SimulatorServer(cluster) as server, httpx.Client(base_url=server.url, timeout=5) as client:
        assert server.url.startswith("http://127.0.0.1:")
        overview = client.get("/overview")
        assert overview.status_code == 200
        assert overview.headers["content-type"].startswith("application/json")
        assert overview.json()["slots-total"] == 8

        body = client.get(f"/jobs/{job_id}/resource-requirements").json()
        body[WORK_ID]["parallelism"]["upperBound"] = 3
        put = client.put(f"/jobs/{job_id}/resource-requirements", json=body)
        assert (put.status_code, put.json()) == (200, {})
        clock.advance(2)
        assert client.get(f"/jobs/{job_id}").json()["vertices"][1]["parallelism"] == 3

        metrics = client.get(
            f"/jobs/{job_id}/vertices/{WORK_ID}/subtasks/metrics",
            params={"get": "numRecordsIn", "agg": "sum"},
        )
        assert metrics.json()[0]["id"] == "numRecordsIn"
        assert client.get("/nope").status_code == 404
        bad = client.put(f"/jobs/{job_id}/resource-requirements", content=b"{oops")
        assert bad.status_code == 400 and "errors" in bad.json()
        assert client.patch(f"/jobs/{job_id}", params={"mode": "cancel"}).status_code == 202


def test_stop_releases_the_port_and_stops_answering(cluster: SimCluster) -> None:
    server = SimulatorServer(cluster).start()
    url = server.url
    port = int(url.rsplit(":", 1)[1])
    with httpx.Client(timeout=5) as client:
        assert client.get(f"{url}/overview").status_code == 200
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=2) as client:
        client.get(f"{url}/overview")
    with SimulatorServer(cluster, port=port) as again, httpx.Client(timeout=5) as client:
        assert again.url == url
        assert client.get(f"{url}/overview").status_code == 200
    with pytest.raises(RuntimeError):
        _ = server.url


def test_keep_alive_connections_are_cut_on_stop(cluster: SimCluster) -> None:
    server = SimulatorServer(cluster).start()
    with httpx.Client(base_url=server.url, timeout=2) as client:
        assert client.get("/overview").status_code == 200  # the pooled connection stays open
        server.stop()
        with pytest.raises(httpx.TransportError):
            client.get("/overview")


def test_concurrent_requests_while_the_clock_moves(cluster: SimCluster, clock: FakeClock) -> None:
    job_id = cluster.submit(work_job())
    errors: list[BaseException] = []

    def poll(url: str) -> None:
        try:
            with httpx.Client(base_url=url, timeout=5) as client:
                for _ in range(10):
                    assert client.get(f"/jobs/{job_id}").status_code == 200
                    assert client.get(
                        "/taskmanagers/metrics", params={"get": "Status.JVM.CPU.Load"}
                    ).is_success
        except BaseException as error:  # collected and re-raised in the test thread
            errors.append(error)

    with SimulatorServer(cluster) as server:
        threads = [threading.Thread(target=poll, args=(server.url,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(20):
            clock.advance(1)
        for thread in threads:
            thread.join(timeout=30)
    assert errors == []
    assert cluster.backlog(job_id) == pytest.approx(750 * 20, rel=0.01)


def test_run_simulator_serves_until_its_duration(capsys: pytest.CaptureFixture[str]) -> None:
    run_simulator(SimClusterSpec(), [work_job()], port=0, speed=100, duration_s=0.05)
    out = capsys.readouterr().out
    assert "http://127.0.0.1:" in out and "'load-job'" in out


def test_requests_are_counted_by_endpoint_template(cluster: SimCluster) -> None:
    """What the fleet benchmark reads: every request answered, under its route's template, the 404s
    apart, and the control endpoint itself not counted."""
    job_id = cluster.submit(work_job())
    vertex = f"/jobs/{job_id}/vertices/{WORK_ID}"
    with SimulatorServer(cluster) as server, httpx.Client(base_url=server.url, timeout=5) as client:
        for path in ("/overview", f"/jobs/{job_id}", f"/v1/jobs/{job_id}", "/jobs/overview", "/nope"):
            client.get(path)
        for _ in range(3):
            client.get(f"{vertex}/subtasks/metrics", params={"get": "busyTimeMsPerSecond", "agg": "max"})
        body = client.get(f"/jobs/{job_id}/resource-requirements").json()
        client.put(f"/jobs/{job_id}/resource-requirements", json=body)
        first = client.get(COUNTS_PATH).json()
        second = client.get(COUNTS_PATH).json()
        by_job = client.get(JOB_READS_PATH).json()
    expected = {
        "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics": 3,
        "GET /jobs/:jobid": 2,
        "GET /overview": 1,
        "GET /jobs/overview": 1,
        "GET /jobs/:jobid/resource-requirements": 1,
        "PUT /jobs/:jobid/resource-requirements": 1,
        f"GET {NO_ROUTE}": 1,
    }
    assert first["requests"] == expected and first["total"] == 10
    assert second["requests"] == expected  # reading the counts is not a request to the cluster
    assert next(iter(first["requests"])).endswith("/subtasks/metrics")  # most requested first
    assert first["cpu_s"] > 0
    assert server.counts.snapshot() == expected
    # the job's own reads by JobID: /jobs/:id twice and three vertex queries, not the rescale's requests
    assert by_job == {"job_reads": {job_id: 5}}


def test_the_in_process_transport_counts_the_same_way(cluster: SimCluster) -> None:
    counts = RequestCounts()
    job_id = cluster.submit(work_job())
    with httpx.Client(transport=transport(cluster, counts), base_url="http://sim") as client:
        client.get(f"/jobs/{job_id}/plan")
        client.get(f"/jobs/{job_id}/plan")
    assert counts.snapshot() == {"GET /jobs/:jobid/plan": 2} and counts.total == 2


def _raw(url: str, *chunks: bytes, pause_s: float = 0.05) -> bytes:
    """Send ``chunks`` on one connection, a pause between them; everything read until the server closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(pause_s)
        received = b""
        while data := sock.recv(65536):
            received += data
    return received


def test_http_requests_split_pipelined_and_closed(cluster: SimCluster) -> None:
    """The parts of HTTP/1.1 a REST client uses: a body arriving in pieces, two requests in one packet
    (answered in order), ``Connection: close``; and a malformed request line answered 400 and closed."""
    job_id = cluster.submit(work_job())
    body = json.dumps(
        {vid: {"parallelism": {"lowerBound": 1, "upperBound": 2}} for vid in LAB_VERTEX_IDS.values()}
    )
    put = (
        f"PUT /jobs/{job_id}/resource-requirements HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    with SimulatorServer(cluster) as server:
        split = _raw(
            server.url,
            put[:70],
            put[70:-10],
            put[-10:] + b"GET /config HTTP/1.1\r\nConnection: close\r\n\r\n",
        )
        bad = _raw(server.url, b"NONSENSE\r\n\r\n")
    first, second = split.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200 OK\r\n") and first.endswith(b"\r\n\r\n{}")
    assert b"Content-Length: 2\r\n" in first and b"Server: flink-simulator/" in first
    assert second.startswith(b"200 OK\r\n") and b"Connection: close\r\n" in second
    assert json.loads(second.split(b"\r\n\r\n", 1)[1])["flink-version"] == "2.3.0"
    assert bad.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert cluster.resource_requirements(job_id)[WORK_ID] == (1, 2)


@pytest.mark.parametrize(
    "query", ["", "get=a,b&agg=max", "a&b=", "a=1&&b=2", "a==b", "get=a%2Cb", "x=a+b", "k=%E2%9C%93"]
)
def test_query_strings_read_as_parse_qsl_reads_them(query: str) -> None:
    assert _query(query) == dict(parse_qsl(query, keep_blank_values=True))
