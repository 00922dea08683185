"""The simulator over real HTTP: the demo, integration tests, benchmarks and ``flink-autoscaler simulate``.

An asyncio HTTP/1.1 server on its own thread and event loop, bound to 127.0.0.1 by default. Requests are
answered one at a time, as the cluster's own lock would serialize them anyway; time moves only through
the cluster's clock, so nothing runs between requests.

Why not ``http.server``: a fleet of a thousand jobs asks tens of thousands of questions per control
interval, and ``BaseHTTPRequestHandler`` spent most of each answer parsing headers with the ``email``
package and switching between a thread per connection; on the two cores a benchmark shares with the
daemon, the simulator then took CPU the daemon under test needed. This server reads what a REST client
sends (a request line, headers, a ``Content-Length`` body, keep-alive) and nothing more. h11, the
parser httpx itself uses, was measured too: 54 us of CPU per request and answer on this machine,
which at 5,000 jobs (some 5,500 requests a second) is a third of a core taken from the daemon.

Every request answered is counted by endpoint template (``counts``); ``GET /_simulator/requests``
returns the counts, plus the simulator process's CPU time, and is itself not counted. Flink has no path
starting with ``_``, so the control path cannot shadow a REST endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import signal
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from autoscaler.clock import ScaledClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import FLINK_VERSION, RequestCounts, handle
from autoscaler.simulator.spec import SimClusterSpec, SimJobSpec

__all__ = ["COUNTS_PATH", "JOB_READS_PATH", "SimulatorServer", "run_simulator"]

COUNTS_PATH = "/_simulator/requests"
"""The control endpoint: ``{"requests": {"GET /jobs/:jobid": n, ...}, "total": n, "cpu_s": s}``."""
JOB_READS_PATH = "/_simulator/requests/jobs"
"""Each job's reads so far: ``{"job_reads": {"<jobid>": n, ...}}`` (a large answer: asked per tick)."""

_SERVER = f"flink-simulator/{FLINK_VERSION}"
_MAX_HEAD = 64 * 1024  # a request line and headers larger than this are not a REST client's
_IDLE_TIMEOUT_S = 30.0  # a keep-alive connection idle this long is closed, as http.server's timeout did


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The ``Date`` header, formatted once per second rather than once per answer."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


def _query(text: str) -> dict[str, str]:
    """The query string as ``parse_qsl(keep_blank_values=True)`` reads it; a plain one (no escapes, the
    usual case) is split directly, which is several times cheaper."""
    if "%" in text or "+" in text:
        return dict(parse_qsl(text, keep_blank_values=True))
    query: dict[str, str] = {}
    for pair in text.split("&"):
        if pair:
            name, _, value = pair.partition("=")
            query[name] = value
    return query


class _Connection(asyncio.Protocol):
    """One client connection: parse each complete request from the bytes received, answer it in order."""

    def __init__(self, server: SimulatorServer) -> None:
        self._server = server
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._last_active = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:  # headers and body go out in one write, but never wait for delayed ACKs
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._server._connections.add(transport)
        self._server.connections_opened += 1
        self._arm_idle_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self._transport is not None:
            self._server._connections.discard(self._transport)
        self._transport = None

    def _arm_idle_timer(self, delay_s: float = _IDLE_TIMEOUT_S) -> None:
        """One timer per connection, re-armed only when it fires (not per request: that cost showed)."""
        self._idle = asyncio.get_running_loop().call_later(delay_s, self._check_idle)

    def _check_idle(self) -> None:
        idle_s = time.monotonic() - self._last_active
        if idle_s >= _IDLE_TIMEOUT_S:
            if self._transport is not None:
                self._transport.close()
        else:
            self._arm_idle_timer(_IDLE_TIMEOUT_S - idle_s)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._last_active = time.monotonic()
        while self._transport is not None and not self._transport.is_closing():
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    self._reply(431, {"errors": ["Request header fields too large"]}, close=True)
                return
            head = self._buffer[:end].decode("latin-1")
            request_line, *header_lines = head.split("\r\n")
            parts = request_line.split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                self._reply(400, {"errors": [f"Bad request line: {request_line[:100]!r}"]}, close=True)
                return
            method, target, version = parts
            headers: dict[str, str] = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._reply(411, {"errors": ["A chunked request body is not supported"]}, close=True)
                return
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                self._reply(400, {"errors": ["Bad Content-Length"]}, close=True)
                return
            start = end + 4
            if len(self._buffer) < start + length:
                return  # the body is still on its way
            body = bytes(self._buffer[start : start + length]) if length > 0 else None
            del self._buffer[: start + length]
            connection = headers.get("connection", "").lower()
            close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
            status, payload = self._server._answer(method, target, body, headers)
            self._reply(status, payload, close=close)

    def _reply(self, status: int, data: bytes | dict[str, Any], *, close: bool) -> None:
        assert self._transport is not None
        body = data if isinstance(data, bytes) else json.dumps(data).encode("utf-8")
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        lines = [
            f"HTTP/1.1 {status} {phrase}",
            f"Server: {_SERVER}",
            f"Date: {_http_date()}",
            "Content-Type: application/json; charset=UTF-8",
            f"Content-Length: {len(body)}",
            "Access-Control-Allow-Origin: *",
        ]
        if close:
            lines.append("Connection: close")
        head = "\r\n".join(lines) + "\r\n\r\n"
        self._transport.write(head.encode("latin-1") + body)
        if close:
            self._transport.close()


class SimulatorServer:
    """Serve ``cluster`` over HTTP: ``with SimulatorServer(cluster) as server: httpx.get(server.url + ...)``.

    ``port=0`` picks a free port; ``url`` tells which. ``counts`` holds the requests answered so far,
    ``connections_opened`` the connections clients opened (how well they keep them alive).
    """

    def __init__(self, cluster: SimCluster, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.host = host
        self.port = port
        self.counts = RequestCounts()
        self.connections_opened = 0
        self._connections: set[asyncio.Transport] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None

    @property
    def url(self) -> str:
        if self._address is None:
            raise RuntimeError("the simulator server is not running; call start() first")
        return f"http://{self.host}:{self._address[1]}"

    def start(self) -> SimulatorServer:
        """Bind now (so a taken port fails here, in the caller), then serve on a thread of its own."""
        if self._address is not None:
            raise RuntimeError("the simulator server is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(loop.create_server(lambda: _Connection(self), sock=sock))
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._address = sock.getsockname()[:2]
        self._thread = threading.Thread(target=serve, name="flink-simulator", daemon=True)
        self._thread.start()
        ready.wait(timeout=10)
        return self

    def stop(self) -> None:
        """Stop serving, cut keep-alive connections and release the port; safe to call twice."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        self._address = None
        if loop is None:
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for transport in list(self._connections):
                transport.abort()  # a stopped simulator really stops answering
            for _ in range(3):  # let the aborted connections close their sockets before the loop ends
                await asyncio.sleep(0)
            self._connections.clear()
            loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop already ended
            asyncio.run_coroutine_threadsafe(shut(), loop)
        if thread is not None:
            thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _answer(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        """One request's status and JSON body; the control endpoint is answered here and not counted."""
        url = urlsplit(target)
        if url.path == COUNTS_PATH and method == "GET":
            stats = {
                "requests": self.counts.snapshot(),
                "total": self.counts.total,
                "cpu_s": time.process_time(),
            }
            return 200, json.dumps(stats).encode("utf-8")
        if url.path == JOB_READS_PATH and method == "GET":
            return 200, json.dumps({"job_reads": self.counts.job_reads()}).encode("utf-8")
        query = _query(url.query)
        try:
            status, payload = handle(self.cluster, method, url.path, query, body, headers, self.counts)
            data = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except Exception as error:  # a simulator bug must answer 500, not drop the connection
            status = 500
            data = json.dumps({"errors": [f"Internal server error: {error!r}"]}).encode("utf-8")
        return status, data


def run_simulator(
    spec: SimClusterSpec,
    jobs: Sequence[SimJobSpec],
    host: str = "127.0.0.1",
    port: int = 8081,
    speed: float = 1.0,
    duration_s: float | None = None,
) -> None:
    """Serve a simulated cluster with ``jobs`` submitted, until Ctrl-C, SIGTERM or ``duration_s``.

    Simulated time runs ``speed`` times faster than wall time; ``duration_s`` is wall-clock seconds.
    """
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    cluster = SimCluster(spec, ScaledClock(speed))
    job_ids = [cluster.submit(job) for job in jobs]
    stopped = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    server = SimulatorServer(cluster, host, port).start()
    try:
        print(f"Simulated Flink {FLINK_VERSION} REST API at {server.url} (speed x{speed:g})", flush=True)
        for job, job_id in zip(jobs, job_ids, strict=True):
            print(f"  job {job.name!r}: {job_id}", flush=True)
        stopped.wait(duration_s)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
