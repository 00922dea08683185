"""The simulator over real HTTP, for the demo, integration tests and ``flink-autoscaler simulate``.

A ``ThreadingHTTPServer`` in a daemon thread, bound to 127.0.0.1 by default; the cluster's own lock
serializes requests. Time moves only through the cluster's clock, so nothing runs between requests.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from autoscaler.clock import ScaledClock
from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest import FLINK_VERSION, handle
from autoscaler.simulator.spec import SimClusterSpec, SimJobSpec

__all__ = ["SimulatorServer", "run_simulator"]


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cluster: SimCluster) -> None:
        self.cluster = cluster
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut keep-alive connections too, so a stopped simulator really stops answering."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up mid-answer are normal here; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"flink-simulator/{FLINK_VERSION}"
    timeout = 30
    disable_nagle_algorithm = True  # headers and body go out in two writes; don't wait for delayed ACKs
    server: _HttpServer

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else None
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            status, payload = handle(self.server.cluster, self.command, url.path, query, body, headers)
            data = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except Exception as error:  # a simulator bug must not kill the connection thread silently
            status = 500
            data = json.dumps({"errors": [f"Internal server error: {error!r}"]}).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """No per-request lines on stderr."""


class SimulatorServer:
    """Serve ``cluster`` over HTTP: ``with SimulatorServer(cluster) as server: httpx.get(server.url + ...)``.

    ``port=0`` picks a free port; ``url`` tells which.
    """

    def __init__(self, cluster: SimCluster, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.host = host
        self.port = port
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator server is not running; call start() first")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def start(self) -> SimulatorServer:
        if self._server is not None:
            raise RuntimeError("the simulator server is already running")
        self._server = _HttpServer((self.host, self.port), self.cluster)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="flink-simulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


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
