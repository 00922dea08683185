"""A loopback HTTP proxy that sits between the daemon and the simulated Flink cluster and breaks on demand.

Why a proxy and not faults inside the simulator: the daemon must be tested as it runs in production, a
separate process talking HTTP to a JobManager, and the faults worth testing are the ones a network, a
load balancer or a sick JobManager produce on the wire (connections cut, answers late or trickling, error
statuses, bodies cut short, not JSON, nested too deeply or inflated to hundreds of MB, numbers that
cannot be). The simulator stays a faithful Flink; the proxy
is the world between it and the daemon.

:class:`FaultProxy` forwards every request to the upstream REST endpoint until a test injects a fault
for a path pattern (a regex searched in the request path, without the query) and optionally one method.
The newest matching rule wins; a rule with ``count`` heals by itself after that many answers (a burst).
Every request is recorded (:class:`Exchange`), so a test can assert what reached the cluster, e.g. that
no ``PUT`` was forwarded while a fault was on, and, for an answer sent a chunk at a time (:class:`Stream`:
:class:`Trickle`, :class:`Inflate`), how much of it went out before the daemon hung up. Everything is
thread-safe: the test thread switches faults while the server threads answer the daemon.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

__all__ = [
    "ANY_PATH",
    "JOBS_OVERVIEW",
    "RESOURCE_REQUIREMENTS",
    "SUBTASK_METRICS",
    "VERTEX_METRICS",
    "Answer",
    "DecreasingMetric",
    "Delay",
    "Disconnect",
    "DropMetric",
    "Exchange",
    "Fault",
    "FaultProxy",
    "Inflate",
    "Reply",
    "Request",
    "Rule",
    "SetMetric",
    "Stream",
    "Trickle",
    "Truncate",
    "deeply_nested_json",
    "error_status",
    "html_error_page",
    "job_path",
    "malformed_json",
    "swallow_put",
]

_ID = "[0-9a-fA-F]{32}"
ANY_PATH = r"^/"
JOBS_OVERVIEW = r"^/jobs/overview$"
SUBTASK_METRICS = rf"^/jobs/{_ID}/vertices/{_ID}/subtasks/metrics$"
"""Aggregated over a vertex's subtasks: numbers (NaN as the string ``"NaN"``), ``min/max/avg/sum``."""
VERTEX_METRICS = rf"^/jobs/{_ID}/vertices/{_ID}/metrics$"
"""Per subtask, names prefixed ``<subtask>.``: values are strings."""
RESOURCE_REQUIREMENTS = rf"^/jobs/{_ID}/resource-requirements$"


def job_path(job_id: str, tail: str = "$") -> str:
    """A pattern for one job's paths: ``job_path(jid)`` is ``/jobs/<jid>`` itself, ``job_path(jid, "/")``
    every path below it; ``tail`` is a regex."""
    return rf"^/jobs/{re.escape(job_id)}{tail}"


# ------------------------------------------------------------------------------------------- wire values
@dataclass(frozen=True, slots=True)
class Request:
    """What the daemon asked for."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    """What goes back to the daemon (or came back from the cluster)."""

    status: int
    body: bytes
    content_type: str = "application/json; charset=UTF-8"

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Stream:
    """An answer sent a chunk at a time, as ``chunks`` yields them: slowly (:class:`Trickle`) or more than
    fits in memory (:class:`Inflate`). With ``length`` it is announced by ``Content-Length``, without it
    sent chunked (``Transfer-Encoding: chunked``), so the receiver knows its size only at the end."""

    status: int
    chunks: Iterator[bytes] = field(repr=False)
    length: int | None
    content_type: str = "application/json; charset=UTF-8"


DISCONNECT = None
"""A fault's answer meaning: cut the connection without a word (what a crashed JobManager does)."""

Forward = Callable[[], Reply]


class Fault(Protocol):
    """What a rule does to a matching request: answer without forwarding, forward and spoil the answer,
    or return :data:`DISCONNECT`. ``forward`` sends the request to the cluster (and records that it did)."""

    def respond(self, request: Request, forward: Forward) -> Reply | Stream | None: ...


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request the proxy saw: what it answered, whether the cluster ever got it, and which fault
    (the fault's ``repr``, None when passed through). ``seq`` numbers the requests as they arrived (an
    exchange is recorded once answered, so a slow one is recorded after later ones)."""

    seq: int
    method: str
    path: str
    query: str
    status: int | None  # None: the connection was cut
    forwarded: bool
    fault: str | None
    sent: int | None = None  # a Stream's body bytes written before it ended or the daemon hung up
    complete: bool | None = None  # whether a Stream's whole body was written


@dataclass(eq=False)
class Rule:
    """A fault for the requests whose path matches ``path`` (and ``method``, if given); ``count`` answers
    at most, then it is spent (a burst that heals by itself)."""

    fault: Fault
    path: re.Pattern[str]
    method: str | None = None
    count: int | None = None
    applied: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.count is not None and self.applied >= self.count:
            return False
        return (self.method is None or self.method == method) and self.path.search(path) is not None

    @property
    def spent(self) -> bool:
        return self.count is not None and self.applied >= self.count


# ---------------------------------------------------------------------------------------------- faults
@dataclass(frozen=True, slots=True)
class Disconnect:
    """The connection is cut (reset) before any answer: an unreachable or crashed JobManager."""

    def respond(self, request: Request, forward: Forward) -> Reply | None:
        return DISCONNECT


@dataclass(frozen=True, slots=True)
class Delay:
    """Answer ``seconds`` late (longer than the daemon's REST timeout, to test it); the request is
    forwarded after the wait, as a slow JobManager would still process it."""

    seconds: float
    stop: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def respond(self, request: Request, forward: Forward) -> Reply | None:
        self.stop.wait(self.seconds)  # set when the proxy stops, so no thread outlives it for long
        return forward()


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer with this status and body; the cluster never sees the request."""

    status: int
    body: bytes = field(repr=False)
    content_type: str = field(default="application/json; charset=UTF-8", repr=False)

    def respond(self, request: Request, forward: Forward) -> Reply | None:
        return Reply(self.status, self.body, self.content_type)


def error_status(status: int, message: str = "injected by the fault proxy") -> Answer:
    """A Flink-style error answer: ``{"errors": [...]}`` with a first line and a stack-trace-like tail."""
    body = {"errors": [f"org.apache.flink.runtime.rest.handler.RestHandlerException: {message}\n\tat proxy"]}
    return Answer(status, json.dumps(body).encode())


def html_error_page(status: int = 200) -> Answer:
    """What a reverse proxy or an SSO gateway in front of a JobManager serves: HTML, often with 200."""
    page = (
        b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
        b"<body><h1>Bad Gateway</h1><p>The upstream JobManager did not answer.</p></body></html>\n"
    )
    return Answer(status, page, "text/html; charset=UTF-8")


def malformed_json() -> Answer:
    """A 200 JSON answer that is not JSON (an unquoted key, a trailing comma, an unclosed bracket)."""
    return Answer(200, b'[{"id": "busyTimeMsPerSecond", max: 1000.0,, "avg": NaN')


def swallow_put() -> Answer:
    """Flink's ``200 {}`` to a rescale that never reaches the JobManager: a PUT that is never applied."""
    return Answer(200, b"{}")


@dataclass(frozen=True, slots=True)
class Truncate:
    """The cluster's answer, cut to ``fraction`` of its body (a connection dropped mid-body by a proxy
    that already sent a shorter Content-Length, or a JobManager that ran out of memory while writing)."""

    fraction: float = 0.5

    def respond(self, request: Request, forward: Forward) -> Reply | None:
        reply = forward()
        return Reply(reply.status, reply.body[: int(len(reply.body) * self.fraction)], reply.content_type)


@dataclass(frozen=True, slots=True)
class Trickle:
    """The cluster's answer, its headers at once and its body ``bytes_per_s`` bytes a second: every read
    of the receiver gets a byte within any per-read timeout, so only a deadline for the whole answer
    ends it (a JobManager in a GC spiral, a proxy that buffers badly). ``Content-Length`` is the real
    one. Stopped by a heal or the proxy's stop."""

    bytes_per_s: float = 1.0
    stop: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def respond(self, request: Request, forward: Forward) -> Reply | Stream | None:
        reply = forward()
        return Stream(reply.status, self._drip(reply.body), len(reply.body), reply.content_type)

    def _drip(self, body: bytes) -> Iterator[bytes]:
        for i in range(len(body)):
            if i and self.stop.wait(1.0 / self.bytes_per_s):
                return  # healed or stopping: the rest is never sent (the receiver sees a cut answer)
            yield body[i : i + 1]


@dataclass(frozen=True, slots=True)
class Inflate:
    """The cluster's answer padded with JSON whitespace to ``size`` bytes: still valid JSON of the same
    meaning, but as long as an answer that would take the receiver's memory (a proxy's or a broken
    JobManager's). Generated a MiB at a time, never held whole; with ``declare_length`` announced by its
    ``Content-Length``, otherwise sent chunked so that only reading tells its size."""

    size: int
    declare_length: bool = True

    def respond(self, request: Request, forward: Forward) -> Reply | Stream | None:
        reply = forward()
        length = max(self.size, len(reply.body))
        return Stream(
            reply.status,
            self._chunks(reply.body, length - len(reply.body)),
            length if self.declare_length else None,
            reply.content_type,
        )

    @staticmethod
    def _chunks(body: bytes, padding: int) -> Iterator[bytes]:
        yield body
        block = b" " * (1 << 20)
        while padding > 0:
            yield block[: min(padding, len(block))]
            padding -= len(block)


def deeply_nested_json(depth: int = 100_000) -> Answer:
    """A 200 answer of well-formed JSON nested ``depth`` arrays deep: ``[[[…]]]``, 200 KB at the default,
    deeper than any JSON parser's recursion (a fuzzer's or an attacker's answer, never Flink's)."""
    return Answer(200, b"[" * depth + b"]" * depth)


class _MetricRewrite:
    """Forward, then change the entries of a metrics answer whose ``id`` matches ``metric`` (a regex
    searched in the id, so ``busyTimeMsPerSecond`` also matches ``0.busyTimeMsPerSecond`` in a per-subtask
    answer). Aggregated answers carry numbers under ``min/max/avg/sum/skew``, per-subtask ones a string
    under ``value``; both are handled. An answer that is not a JSON list passes through."""

    metric: str

    def respond(self, request: Request, forward: Forward) -> Reply | None:
        reply = forward()
        try:
            entries = reply.json()
        except ValueError:
            return reply
        if reply.status != 200 or not isinstance(entries, list):
            return reply
        pattern = re.compile(self.metric)
        out: list[Any] = []
        for entry in entries:
            if isinstance(entry, dict) and pattern.search(str(entry.get("id", ""))):
                changed = self.rewrite(request, entry)
                if changed is not None:
                    out.append(changed)
            else:
                out.append(entry)
        return Reply(reply.status, json.dumps(out).encode(), reply.content_type)

    def rewrite(self, request: Request, entry: dict[str, Any]) -> dict[str, Any] | None:
        raise NotImplementedError


_AGGREGATES = ("min", "max", "avg", "sum", "skew")


def _values(entry: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """The entry's numeric fields as floats (``"NaN"`` strings included), with their keys."""
    for key in (*_AGGREGATES, "value"):
        if key in entry:
            try:
                yield key, float(entry[key])
            except (TypeError, ValueError):
                continue


def _wire(key: str, value: float) -> Any:
    """As Flink writes it: aggregates are JSON numbers except NaN (a string); a ``value`` is a Java string."""
    if key == "value":
        return _java_double(value)
    return "NaN" if math.isnan(value) else value


def _java_double(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(float(value))
    if "e" in text:  # Java: 1.0E300, not 1e+300
        mantissa, exponent = text.split("e")
        mantissa = mantissa if "." in mantissa else mantissa + ".0"
        text = f"{mantissa}E{int(exponent)}"
    return text


@dataclass(frozen=True, slots=True)
class SetMetric(_MetricRewrite):
    """Every matching metric reads ``value``: NaN, a negative number, a huge one."""

    metric: str
    value: float

    def rewrite(self, request: Request, entry: dict[str, Any]) -> dict[str, Any] | None:
        return {**entry, **{key: _wire(key, self.value) for key, _ in _values(entry)}}


@dataclass(frozen=True, slots=True)
class DropMetric(_MetricRewrite):
    """The matching metrics are left out of the values answers, and with ``listing`` of the lists of
    names too (a metric gone altogether, rather than one Flink lists but has no value for)."""

    metric: str
    listing: bool = False

    def rewrite(self, request: Request, entry: dict[str, Any]) -> dict[str, Any] | None:
        is_listing = set(entry) == {"id"}
        return entry if is_listing and not self.listing else None


@dataclass(frozen=True, slots=True)
class DecreasingMetric(_MetricRewrite):
    """A counter that runs backwards: each answer is ``factor`` times the one before, starting from the
    first value seen (per path, metric id and aggregate), so it falls between any two samples while the
    fault is on, yet never turns negative (that would be a different fault)."""

    metric: str
    factor: float = 0.9
    _seen: dict[tuple[str, str, str], float] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def rewrite(self, request: Request, entry: dict[str, Any]) -> dict[str, Any] | None:
        out = dict(entry)
        with self._lock:
            for key, value in _values(entry):
                slot = (request.path, str(entry.get("id")), key)
                last = self._seen.get(slot)
                now = value if last is None else last * self.factor
                self._seen[slot] = now
                out[key] = _wire(key, now)
        return out


# ----------------------------------------------------------------------------------------------- proxy
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A daemon that gave up on a late answer hangs up: normal here."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault-proxy"
    disable_nagle_algorithm = True
    server: _Server

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = Request(
            method=self.command,
            path=url.path,
            query=url.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self.rfile.read(length) if length > 0 else b"",
        )
        seq, reply = self.server.proxy.handle(request)
        if reply is DISCONNECT:
            # RST instead of FIN: the daemon sees a reset connection, not a polite end of a keep-alive.
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if isinstance(reply, Stream):
            self._stream(seq, reply)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def _stream(self, seq: int, reply: Stream) -> None:
        """Write the answer chunk by chunk until it ends or the daemon hangs up; record how much went out.
        An answer that did not go out whole leaves the connection closed (its length was a lie)."""
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        if reply.length is not None:
            self.send_header("Content-Length", str(reply.length))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent, complete = 0, False
        try:
            self.wfile.flush()
            for chunk in reply.chunks:
                if reply.length is None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
                sent += len(chunk)
            if reply.length is None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            complete = reply.length is None or sent == reply.length
        except OSError:  # the daemon hung up: what it did not read is the point
            pass
        finally:
            self.server.proxy.record_sent(seq, sent, complete)
        if not complete:
            self.close_connection = True

    do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the proxy records every exchange itself."""


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``; :meth:`inject` faults, :meth:`heal` them, read what
    passed with :meth:`exchanges`. ``with FaultProxy(url) as proxy: ... proxy.url``."""

    def __init__(self, upstream: str, *, upstream_timeout_s: float = 30.0) -> None:
        self.upstream = upstream.rstrip("/")
        self._timeout_s = upstream_timeout_s
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._exchanges: list[Exchange] = []
        self._sent: dict[int, tuple[int, bool]] = {}  # seq -> a Stream's (bytes written, whole)
        self._arrivals = 0
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end delayed and trickling answers, cut open connections; safe to call twice."""
        self._stop.set()
        with self._lock:
            for rule in self._rules:
                if isinstance(rule.fault, Delay | Trickle):
                    rule.fault.stop.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            with server.connections_lock:
                connections = list(server.connections)
            for connection in connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------- control
    def inject(
        self, fault: Fault, path: str = ANY_PATH, *, method: str | None = None, count: int | None = None
    ) -> Rule:
        """Apply ``fault`` to the requests whose path matches ``path`` (a regex) and ``method``; with
        ``count``, to that many answers only. The newest matching rule wins."""
        rule = Rule(fault, re.compile(path), method.upper() if method else None, count)
        with self._lock:
            self._rules.append(rule)
        return rule

    def heal(self, rule: Rule | None = None) -> None:
        """Remove ``rule``, or every rule; a delayed answer still pending is released at once."""
        with self._lock:
            gone = [r for r in self._rules if rule is None or r is rule]
            self._rules = [r for r in self._rules if r not in gone]
        for r in gone:
            if isinstance(r.fault, Delay | Trickle):
                r.fault.stop.set()

    @contextlib.contextmanager
    def fault(
        self, fault: Fault, path: str = ANY_PATH, *, method: str | None = None, count: int | None = None
    ) -> Iterator[Rule]:
        """:meth:`inject` for the ``with`` block, healed when it ends (even on a failed assertion)."""
        rule = self.inject(fault, path, method=method, count=count)
        try:
            yield rule
        finally:
            self.heal(rule)

    # ---------------------------------------------------------------------------------- records
    def mark(self) -> int:
        """The ``seq`` the next request will get: ``exchanges(since=mark)`` is what arrived after this call
        (take it after an :meth:`inject`, and every request it counts met the fault)."""
        with self._lock:
            return self._arrivals

    def exchanges(
        self, *, since: int = 0, method: str | None = None, path: str | None = None
    ) -> list[Exchange]:
        """Recorded exchanges that arrived from ``since`` on, filtered by method and a path regex, in
        arrival order."""
        pattern = re.compile(path) if path is not None else None
        with self._lock:
            recorded = sorted(self._exchanges, key=lambda e: e.seq)
            sent = dict(self._sent)
        recorded = [
            e if e.seq not in sent else replace(e, sent=sent[e.seq][0], complete=sent[e.seq][1])
            for e in recorded
        ]
        return [
            e
            for e in recorded
            if e.seq >= since
            and (method is None or e.method == method.upper())
            and (pattern is None or pattern.search(e.path))
        ]

    def forwarded(
        self, *, since: int = 0, method: str | None = None, path: str | None = None
    ) -> list[Exchange]:
        """The exchanges that reached the cluster."""
        return [e for e in self.exchanges(since=since, method=method, path=path) if e.forwarded]

    # ---------------------------------------------------------------------------------- serving
    def record_sent(self, seq: int, sent: int, complete: bool) -> None:
        """How much of exchange ``seq``'s :class:`Stream` was written, and whether all of it."""
        with self._lock:
            self._sent[seq] = (sent, complete)

    def handle(self, request: Request) -> tuple[int, Reply | Stream | None]:
        """The answer to ``request`` and its ``seq`` (the exchange is recorded before the answer is sent)."""
        with self._lock:
            seq, self._arrivals = self._arrivals, self._arrivals + 1
            rule = next((r for r in reversed(self._rules) if r.matches(request.method, request.path)), None)
            if rule is not None:
                rule.applied += 1
        forwarded = False

        def forward() -> Reply:
            nonlocal forwarded
            forwarded = True
            return self._forward(request)

        if rule is None:
            reply: Reply | Stream | None = forward()
        else:
            try:
                reply = rule.fault.respond(request, forward)
            except httpx.HTTPError:  # the cluster itself is gone: the daemon sees a cut connection
                reply = DISCONNECT
        with self._lock:
            self._exchanges.append(
                Exchange(
                    seq=seq,
                    method=request.method,
                    path=request.path,
                    query=request.query,
                    status=reply.status if reply is not None else None,
                    forwarded=forwarded,
                    fault=repr(rule.fault) if rule is not None else None,
                )
            )
        return seq, reply

    def _forward(self, request: Request) -> Reply:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.upstream, timeout=self._timeout_s)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        headers = {
            k: v for k, v in request.headers.items() if k in ("content-type", "accept", "authorization")
        }
        url = request.path + (f"?{request.query}" if request.query else "")
        try:
            response = client.request(request.method, url, content=request.body or None, headers=headers)
        except httpx.HTTPError:
            if self._stop.is_set():
                return Reply(503, b'{"errors": ["proxy stopping"]}')
            raise
        return Reply(
            response.status_code,
            response.content,
            response.headers.get("content-type", "application/json; charset=UTF-8"),
        )
