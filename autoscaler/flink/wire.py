"""How :class:`~autoscaler.flink.client.FlinkClient` puts a request on the wire: aiohttp by default,
httpx on request (and whenever an httpx transport is given: the in-process simulator, tests).

Why aiohttp: a fleet tick sends one request per job and vertex (11,000 at 1,000 jobs of 10 vertices).
Through httpx and its default transport (httpcore) a request cost the daemon about 0.95 ms of CPU,
most of it in httpcore's pool checking every pooled socket on every request; aiohttp keeps its
connections in a queue and parses HTTP in C: 0.27 ms under httpx's client, 0.13 ms without it
(docs/performance.md, "Fleet"). So the client talks to a small :class:`Wire` that returns an
:class:`Answer` (status, reason, body), and both wires fail the same way: aiohttp's failures come out
as the httpx errors of the same meaning, which the client describes and retries as it always did (a
refused or failed connection is a ``ConnectError``, a lapsed timeout a ``ConnectTimeout`` or
``ReadTimeout``, a connection that died mid-answer a ``ReadError``, an answer that is not HTTP a
``RemoteProtocolError``).

``http_transport: httpx`` in a cluster's settings chooses httpx, should a proxy or TLS setup need it;
tests that mock Flink with respx (which mocks httpx) choose it too.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

import aiohttp
import httpx
import yarl

__all__ = ["AiohttpWire", "Answer", "HttpxWire", "Wire", "WireOptions", "env_proxy", "open_wire"]

_U = TypeVar("_U")
_URL_CACHE_SIZE = 100_000  # URLs kept per client: 5,000 jobs x 10 vertices twice over


class Answer(NamedTuple):
    """What came back: the status, its reason phrase and the whole body."""

    status: int
    reason: str
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class Wire(Protocol):
    """Sends one request to one cluster; a failure without an answer is an ``httpx.TransportError``."""

    async def send(self, method: str, path: str, params: Mapping[str, str] | None, body: Any) -> Answer: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class WireOptions:
    """What both wires are told: where, with which headers and TLS, how long to wait, how many at once."""

    base_url: str
    headers: Mapping[str, str]
    ssl_context: ssl.SSLContext | bool
    timeout_s: float
    max_connections: int


def open_wire(
    kind: Literal["aiohttp", "httpx"], options: WireOptions, transport: httpx.AsyncBaseTransport | None = None
) -> Wire:
    """The wire a client asked for; an httpx ``transport`` (the in-process simulator) means httpx."""
    if kind == "httpx" or transport is not None:
        return HttpxWire(options, transport)
    return AiohttpWire(options)


class _Urls(Generic[_U]):
    """Each request's absolute URL, built once per (path, query) and reused: a tick asks the same
    questions as the last (each vertex's metric query), and building one costs more than sending it.
    httpx builds it, so both wires encode the query alike; ``convert`` makes it the wire's own."""

    def __init__(self, base_url: str, convert: Callable[[httpx.URL], _U]) -> None:
        self._base = base_url.rstrip("/")
        self._convert = convert
        self._urls: dict[tuple[str, tuple[tuple[str, str], ...]], _U] = {}

    def __call__(self, path: str, params: Mapping[str, str] | None) -> _U:
        key = (path, tuple(params.items()) if params else ())
        url = self._urls.get(key)
        if url is None:
            if len(self._urls) >= _URL_CACHE_SIZE:
                self._urls.clear()  # jobs come and go: start over rather than track what is stale
            url = self._urls[key] = self._convert(httpx.URL(self._base + path, params=params))
        return url


class HttpxWire:
    """httpx's client and transport (httpcore, unless one is given)."""

    def __init__(self, options: WireOptions, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._urls = _Urls(options.base_url, lambda url: url)
        self._http = httpx.AsyncClient(
            headers=dict(options.headers),
            verify=options.ssl_context,
            timeout=httpx.Timeout(options.timeout_s),
            transport=transport,
            follow_redirects=False,
        )

    async def send(self, method: str, path: str, params: Mapping[str, str] | None, body: Any) -> Answer:
        url = self._urls(path, params)
        try:
            response = await self._http.request(method, url, json=body)
        except OSError as exc:  # httpx lets a TLS alert after the handshake out as ssl.SSLError
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=httpx.Request(method, url)) from exc
        return Answer(response.status_code, response.reason_phrase, response.content)

    async def aclose(self) -> None:
        await self._http.aclose()


class AiohttpWire:
    """One cluster's connections: at most ``max_connections`` open, kept alive between ticks.

    The aiohttp session is opened by the first request, in the event loop that sends it: a session
    belongs to one loop, and the daemon and each CLI command run one. Should a request come from
    another loop, a session is opened for it; the first loop's connections are left to it.
    """

    def __init__(self, options: WireOptions) -> None:
        # httpx has encoded the URL: aiohttp sends it as it is
        self._urls = _Urls(options.base_url, lambda url: yarl.URL(str(url), encoded=True))
        self._headers = dict(options.headers)
        self._ssl = options.ssl_context
        timeout_s = options.timeout_s
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        self._max_connections = options.max_connections
        base = httpx.URL(options.base_url)
        # aiohttp's trust_env would read ~/.netrc and the proxy variables in a worker thread on every
        # request (half the daemon's CPU at 1,000 jobs): the proxy is looked up once, here
        self._proxy = env_proxy(base.scheme, base.host)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=self._ssl)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout, trust_env=False
            )
            self._loop = loop
        return self._session

    async def send(self, method: str, path: str, params: Mapping[str, str] | None, body: Any) -> Answer:
        session = self._session_for_loop()
        url = self._urls(path, params)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = None if data is None else {"Content-Type": "application/json"}
        try:
            async with session.request(
                method, url, data=data, headers=headers, allow_redirects=False, proxy=self._proxy
            ) as answer:
                return Answer(answer.status, answer.reason or "", await answer.read())
        except (aiohttp.ClientError, OSError) as exc:  # OSError: a timeout, a TLS alert
            raise _as_httpx_error(exc, method, url) from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def env_proxy(scheme: str, host: str) -> str | None:
    """The proxy ``HTTP_PROXY``/``HTTPS_PROXY`` (or ``ALL_PROXY``) name for ``host``, unless ``NO_PROXY``
    exempts it: what httpx honoured by default, looked up once per cluster rather than per request."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _as_httpx_error(exc: BaseException, method: str, url: yarl.URL) -> httpx.TransportError:
    """aiohttp's failure as the httpx error of the same meaning (the client describes and retries it)."""
    text = str(exc) or type(exc).__name__
    kind: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        kind = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.InvalidURL):
        kind = httpx.UnsupportedProtocol
    else:  # ServerDisconnectedError, ClientOSError: the connection went away mid-request
        kind = httpx.ReadError
    return kind(text, request=httpx.Request(method, str(url)))
