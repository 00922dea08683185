"""The simulator over real HTTP on 127.0.0.1: start, answer, rescale, stop and release the port."""

from __future__ import annotations

import threading

import httpx
import pytest

from autoscaler.clock import FakeClock
from autoscaler.simulator import SimCluster, SimClusterSpec, SimulatorServer, run_simulator, work_job
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS

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
