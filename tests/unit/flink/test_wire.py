"""The aiohttp wire under FlinkClient, over real sockets on 127.0.0.1: what the server sees, how
connections are kept, and each kind of failure as the error httpx would have raised."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import socket
import threading
from datetime import timedelta
from typing import Literal

import pytest
from socket_servers import raw_server, read_request

import autoscaler.flink.payloads as payloads
from autoscaler.clock import FakeClock
from autoscaler.flink import FlinkClient, FlinkUnreachable
from autoscaler.flink.errors import FlinkBadPayload
from autoscaler.flink.payloads import InvalidPayload
from autoscaler.flink.wire import AiohttpWire, Answer, HttpxWire, env_proxy
from autoscaler.settings import AutoscalerOptions, ClusterSettings, ConfigError
from autoscaler.simulator import SimCluster, SimClusterSpec, SimulatorServer, work_job
from autoscaler.simulator.scenarios import LAB_VERTEX_IDS

WORK_ID = LAB_VERTEX_IDS["Work"]


def test_the_default_transport_is_aiohttp_and_httpx_stays_on_request() -> None:
    cs = ClusterSettings(name="c", rest_url="http://jm:8081")
    client = FlinkClient.from_settings(cs, timedelta(seconds=5))
    assert isinstance(client._wire, AiohttpWire)
    fallback = cs.model_copy(update={"http_transport": "httpx"})
    client = FlinkClient.from_settings(fallback, timedelta(seconds=5))
    assert isinstance(client._wire, HttpxWire)


async def test_reads_rescales_and_keeps_a_few_connections_over_real_http(clock: FakeClock) -> None:
    cluster = SimCluster(SimClusterSpec(), clock)
    job_id = cluster.submit(work_job())
    clock.advance(60)
    with SimulatorServer(cluster) as server:
        async with FlinkClient(server.url, cluster="sim", max_concurrency=3) as client:
            assert (await client.overview()).slots_total == 8
            names = ["numRecordsIn", "busyTimeMsPerSecond"]
            answers = await asyncio.gather(
                *(client.vertex_metrics(job_id, WORK_ID, names) for _ in range(40))
            )
            assert all(set(a) == set(names) for a in answers)  # the comma-joined query arrived whole

            bounds = await client.resource_requirements(job_id)
            bounds[WORK_ID] = dataclasses.replace(bounds[WORK_ID], upper=3)
            await client.set_resource_requirements(job_id, bounds)  # a PUT with a JSON body
            clock.advance(2)
            assert {v.id: v.parallelism for v in (await client.job_details(job_id)).vertices}[WORK_ID] == 3
        # 44 requests, at most 3 at a time, over kept-alive connections
        assert 1 <= server.connections_opened <= 3


async def test_sends_the_configured_headers_and_no_compressed_body_reaches_the_client() -> None:
    seen: list[bytes] = []

    def answer(conn: socket.socket) -> None:
        seen.append(read_request(conn))
        body = b'{"taskmanagers": 1, "slots-total": 2, "slots-available": 0, "jobs-running": 0}'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="raw", headers={"Authorization": "Bearer t0ken"}) as client:
            assert (await client.overview()).slots_total == 2
    head = seen[0].decode("latin-1").lower()
    assert head.startswith("get /overview http/1.1")
    assert "authorization: bearer t0ken" in head and "accept: application/json" in head


async def test_connection_refused_is_a_connect_error_retried_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    async with FlinkClient(f"http://127.0.0.1:{port}", cluster="gone") as client:
        with pytest.raises(FlinkUnreachable, match="ConnectError"):
            await client.overview()


async def test_no_answer_within_the_timeout_is_a_timeout() -> None:
    release = threading.Event()

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        release.wait(5)

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="slow", timeout_s=0.2) as client:
            with pytest.raises(FlinkUnreachable, match=r"timed out after 0.2s \(ReadTimeout\)"):
                await client.overview()
        release.set()


async def test_a_connection_closed_mid_answer_is_a_read_error_and_the_retry_succeeds() -> None:
    calls: list[int] = []

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        calls.append(1)
        if len(calls) == 1:
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"taskman')
            conn.close()
            return
        body = b'{"taskmanagers": 1, "slots-total": 4, "slots-available": 0, "jobs-running": 0}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="flaky") as client:
            assert (await client.overview()).slots_total == 4
    assert len(calls) == 2


async def test_an_answer_that_is_not_http_is_a_protocol_error() -> None:
    def answer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        conn.close()

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="notflink") as client:
            with pytest.raises(FlinkUnreachable, match="RemoteProtocolError"):
                await client.overview()


async def test_a_body_that_is_not_json_is_still_a_bad_payload() -> None:
    def answer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 6\r\n\r\n<html>")

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="html") as client:
            with pytest.raises(FlinkBadPayload, match="invalid JSON"):
                await client.overview()


def test_the_proxy_comes_from_the_environment_unless_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert env_proxy("http", "jm") is None
    monkeypatch.setenv("HTTP_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "jm.internal")
    assert env_proxy("http", "jm") == "http://proxy.corp:3128"
    assert env_proxy("http", "jm.internal") is None
    assert env_proxy("https", "jm") is None


async def test_requests_go_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    def proxy(conn: socket.socket) -> None:
        seen.append(read_request(conn))
        body = b'{"taskmanagers": 1, "slots-total": 6, "slots-available": 0, "jobs-running": 0}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    with raw_server(proxy) as proxy_url:
        for name in ("http_proxy", "all_proxy", "no_proxy", "NO_PROXY", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        async with FlinkClient("http://jobmanager.invalid:8081", cluster="behind") as client:
            assert (await client.overview()).slots_total == 6
    assert seen[0].startswith(b"GET http://jobmanager.invalid:8081/overview HTTP/1.1")


@pytest.mark.parametrize("kind", ["aiohttp", "httpx"])
async def test_both_wires_send_the_same_request_line(kind: Literal["aiohttp", "httpx"]) -> None:
    """Metric names hold dots, brackets and spaces; Flink must get the same query from either wire."""
    seen: list[bytes] = []

    def answer(conn: socket.socket) -> None:
        seen.append(read_request(conn))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")

    with raw_server(answer) as url:
        async with FlinkClient(url + "/base/", cluster="q", http_transport=kind) as client:
            names = ["0.numRecordsIn", "Source__Kafka[1].lag max", "a,b"]
            assert await client.vertex_metrics("j" * 32, "v" * 32, names) == {}
    request_line = seen[0].split(b"\r\n")[0].decode()
    assert request_line == (
        f"GET /base/jobs/{'j' * 32}/vertices/{'v' * 32}/subtasks/metrics"
        "?get=0.numRecordsIn%2CSource__Kafka%5B1%5D.lag+max%2Ca%2Cb&agg=min%2Cmax%2Cavg%2Csum HTTP/1.1"
    )


# ------------------------------------------------------------------------------------ issue 35: bounds
OVERVIEW = b'{"taskmanagers": 1, "slots-total": 4, "slots-available": 0, "jobs-running": 0}'


@pytest.mark.parametrize("kind", ["aiohttp", "httpx"])
async def test_a_retry_after_a_dropped_connection_gets_what_is_left_of_the_one_deadline(
    kind: Literal["aiohttp", "httpx"],
) -> None:
    """The first connection is dropped after 0.6 s (a load balancer), the second never answers: the
    request ends 1 s after it began, not 0.6 s + another whole second."""
    calls: list[int] = []
    release = threading.Event()

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        calls.append(1)
        if len(calls) == 1:
            release.wait(0.6)
            conn.close()
            return
        release.wait(5)

    with raw_server(answer) as url:
        async with FlinkClient(url, cluster="lb", timeout_s=1.0, http_transport=kind) as client:
            started = asyncio.get_running_loop().time()
            with pytest.raises(FlinkUnreachable, match=r"timed out after 1s"):
                await client.overview()
            took = asyncio.get_running_loop().time() - started
        release.set()
    assert len(calls) == 2
    assert took < 1.5, f"{took:.2f} s: the retry had a deadline of its own"


@pytest.mark.parametrize("kind", ["aiohttp", "httpx"])
async def test_a_compressed_answer_is_limited_by_what_it_decompresses_to(
    kind: Literal["aiohttp", "httpx"],
) -> None:
    """A 10 KB gzip body that inflates to 10 MB: its Content-Length is within the limit, its content not."""
    body = gzip.compress(OVERVIEW[:-1] + b" " * (10 << 20) + b"}")
    assert len(body) < 64 << 10

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
        with contextlib.suppress(OSError):
            conn.sendall(head + body)

    calls: list[int | str] = []
    with raw_server(answer) as url:
        async with FlinkClient(
            url,
            cluster="bomb",
            http_transport=kind,
            max_answer_bytes=1 << 20,
            on_request=lambda *a: calls.append(a[-1]),
        ) as client:
            with pytest.raises(FlinkBadPayload, match="larger than the 1048576-byte limit"):
                await client.overview()
    assert calls == ["FlinkBadPayload"]


@pytest.mark.parametrize("kind", ["aiohttp", "httpx"])
async def test_an_answer_at_the_limit_is_read(kind: Literal["aiohttp", "httpx"]) -> None:
    def answer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OVERVIEW), OVERVIEW))

    with raw_server(answer) as url:
        limit = len(OVERVIEW)
        async with FlinkClient(url, cluster="c", http_transport=kind, max_answer_bytes=limit) as client:
            assert (await client.overview()).slots_total == 4


def test_the_answer_limit_is_a_memory_size_option_read_per_cluster() -> None:
    key = "job.autoscaler.flink.rest-client.max-answer-size"
    assert AutoscalerOptions().rest_client_max_answer_size == 64 << 20
    assert AutoscalerOptions.from_flink_conf({key: "8 mb"}).rest_client_max_answer_size == 8 << 20
    with pytest.raises(ConfigError, match="max-answer-size"):
        AutoscalerOptions.from_flink_conf({key: "12"})  # 12 bytes: below 1 kb, a typo
    with pytest.raises(ValueError):
        FlinkClient("http://jm:8081", cluster="c", max_answer_bytes=0)


def test_json_too_deep_for_its_reader_is_an_invalid_payload() -> None:
    """Parsed, but too deep for what reads it (a validator, a ``str()`` of a value): still the payload's
    fault. And too deep for the parser itself, as ``decode`` alone."""

    def depth(value: object) -> int:
        return 1 + depth(value[0]) if isinstance(value, list) and value else 0

    shallow = Answer(200, "OK", b"[" * 500 + b"]" * 500)
    assert payloads.parse(shallow, depth) == 499  # the innermost [] counts 0
    with pytest.raises(InvalidPayload, match="nested too deeply"):
        payloads.parse(shallow, lambda value: depth(value) + _recurse(5000))
    with pytest.raises(InvalidPayload, match="nested too deeply"):
        payloads.decode(Answer(200, "OK", b"[" * 100_000 + b"]" * 100_000))


def _recurse(n: int) -> int:
    return 0 if n == 0 else 1 + _recurse(n - 1)
