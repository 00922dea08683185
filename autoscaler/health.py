"""Liveness and readiness, served beside ``/metrics`` by one small HTTP server.

``/healthz`` answers 200 while the daemon's event loop runs, 503 once it is wedged: the loop beats
every second (:meth:`Health.beat`), and a loop that has not beaten for :attr:`Health.wedged_after_s`
(a minute, or six control intervals if longer) is blocked, by a plugin or a call that never returns,
so an orchestrator's liveness probe restarts the process. The HTTP server runs on its own thread,
which is why it can still say so. ``/readyz`` answers 200 only once a full tick completed within the
last few control intervals and the Spark evaluation works; otherwise 503 with a JSON reason, so an
operator (or a Kubernetes readiness probe) sees *why* without reading logs. The daemon pushes what it
knows (:meth:`Health.beat`, :meth:`Health.tick_completed`, :meth:`Health.set_spark`); the HTTP thread
only reads.

The server is built for a scrape flood: a listen backlog of :data:`LISTEN_BACKLOG` (the standard
library's 5 dropped the connections of a burst, whose clients then waited seconds to a minute for TCP's
retries, the probes among them), a thread per request, the probes' answers computed from a few fields
under their own lock (never behind a ``/metrics`` render), and ``/metrics`` served from a page rendered
at most once per its lifetime (:mod:`autoscaler.metrics_page`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from autoscaler.metrics_page import MetricsPage, accepts_gzip

__all__ = ["LISTEN_BACKLOG", "Health", "HttpEndpoint", "Readiness", "heartbeat", "serve_http"]

LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them (capped by ``net.core.somaxconn``)."""
_CLIENT_TIMEOUT_S = 30.0
"""How long a connection may take to send its request or read its answer before its thread gives up."""


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    reason: str  # a stable code: ready, starting, not_ticking, spark_unavailable
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "reason": self.reason, "detail": self.detail}


class Health:
    """What the probes report; thread-safe (the loop writes, the HTTP thread reads).

    ``clock`` is monotonic seconds, injected so tests move time by hand.
    """

    def __init__(
        self,
        interval_s: float,
        *,
        stale_after_intervals: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.stale_after_intervals = stale_after_intervals
        self.stale_after_s = interval_s * stale_after_intervals
        self._clock = clock
        self._lock = threading.Lock()
        self._last_tick: float | None = None
        self._spark: bool | None = None  # None: no session yet
        self._spark_detail = ""
        self._last_beat: float | None = None  # None: the loop has not started beating yet
        self.wedged_after_s = max(60.0, 6 * interval_s)

    def beat(self, at_s: float | None = None) -> None:
        """The event loop is running (called every second by its heartbeat task)."""
        with self._lock:
            self._last_beat = self._clock() if at_s is None else at_s

    def liveness(self) -> Readiness:
        """Alive unless the event loop stopped beating for :attr:`wedged_after_s` (module doc)."""
        with self._lock:
            last = self._last_beat
        if last is None:
            return Readiness(True, "alive", "the event loop has not started beating yet")
        age = self._clock() - last
        if age > self.wedged_after_s:
            return Readiness(
                False,
                "loop_wedged",
                f"the event loop has not run for {age:.0f} s (more than {self.wedged_after_s:g} s): "
                "something blocks it (a plugin, a call without a timeout)",
            )
        return Readiness(True, "alive", f"the event loop ran {age:.0f} s ago")

    def tick_completed(self, at_s: float | None = None) -> None:
        """A full tick ran to its end (whatever the jobs' outcomes were)."""
        with self._lock:
            self._last_tick = self._clock() if at_s is None else at_s

    def set_spark(self, ok: bool, detail: str = "") -> None:
        """The Spark session works (``ok``), or the last evaluation failed (``detail`` says how)."""
        with self._lock:
            self._spark, self._spark_detail = ok, detail

    def readiness(self) -> Readiness:
        with self._lock:
            last, spark, spark_detail = self._last_tick, self._spark, self._spark_detail
        if spark is None:
            return Readiness(False, "starting", "the Spark session is not up yet")
        if not spark:
            return Readiness(False, "spark_unavailable", spark_detail or "the last Spark evaluation failed")
        if last is None:
            return Readiness(False, "starting", "no tick has completed yet")
        age = self._clock() - last
        if age > self.stale_after_s:
            return Readiness(
                False,
                "not_ticking",
                f"last tick completed {age:.0f} s ago (more than {self.stale_after_s:g} s, "
                f"{self.stale_after_intervals:g} control intervals)",
            )
        return Readiness(True, "ready", f"last tick completed {age:.0f} s ago")


class HttpEndpoint:
    """The running server: ``url`` for tests and logs, ``shutdown()`` to stop it."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._server, self._thread = server, thread
        host, port = server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.port = int(port)

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HttpEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def serve_http(
    address: str,
    registry: CollectorRegistry,
    health: Health | None = None,
    *,
    page: MetricsPage | None = None,
) -> HttpEndpoint:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (port 0: any free one).

    Without ``health``, ``/readyz`` answers like ``/healthz``: a process that serves only metrics.
    ``page``: how ``/metrics`` is rendered and reused (default: :class:`MetricsPage` of ``registry``).
    """
    host, _, port = address.rpartition(":")
    metrics_page = page or MetricsPage(registry)

    class Handler(BaseHTTPRequestHandler):
        timeout = _CLIENT_TIMEOUT_S

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                current, vary = metrics_page.get(), {"Vary": "Accept-Encoding"}
                if accepts_gzip(self.headers.get("Accept-Encoding")):
                    gzipped = {**vary, "Content-Encoding": "gzip"}
                    self._send(200, CONTENT_TYPE_LATEST, current.gzipped(), gzipped)
                else:
                    self._send(200, CONTENT_TYPE_LATEST, current.body, vary)
            elif path == "/healthz":
                live = health.liveness() if health is not None else Readiness(True, "alive", "")
                body = {"alive": live.ready, "reason": live.reason, "detail": live.detail}
                self._json(200 if live.ready else 503, body)
            elif path == "/readyz":
                state = health.readiness() if health is not None else Readiness(True, "ready", "")
                self._json(200 if state.ready else 503, state.to_json())
            else:
                self._json(404, {"error": f"no such path {path}; try /metrics, /healthz or /readyz"})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, "application/json", json.dumps(body).encode())

        def _send(
            self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: a scrape every few seconds must not flood the daemon's log."""

    server = _Server((host or "127.0.0.1", int(port)), Handler)
    thread = threading.Thread(target=server.serve_forever, name="http-endpoint", daemon=True)
    thread.start()
    return HttpEndpoint(server, thread)


class _Server(ThreadingHTTPServer):
    """A thread per request, a real listen backlog, and quiet about clients that hang up."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A scraper that hung up or stalled (a flood's clients give up) is its own business; anything
        else is printed as the standard library does."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


async def heartbeat(health: Health, every_s: float = 1.0) -> None:
    """Beat while the event loop runs (cancel it to stop); a blocked loop stops beating."""
    import asyncio

    while True:
        health.beat()
        await asyncio.sleep(every_s)
