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

Two bounds hold on both wires (issue 35), because a per-read timeout and an unbounded body let one sick
answer hold the whole tick and the daemon's memory:

- **One deadline per request**, for connecting, the headers and the whole body together (the client
  sets it once, see :meth:`FlinkClient._send`): a timeout per socket read restarts with every byte,
  so an answer trickling at a byte a second was read for minutes. Past the deadline the request is an
  ``httpx.TimeoutException`` (a ``ReadTimeout``), whatever it had received.
- **At most ``max_answer_bytes`` of body**: a ``Content-Length`` above it is refused before the body is
  read, and a body without one (chunked) or one that is longer when decompressed stops being read at
  the limit (:class:`AnswerTooLarge`); its connection is closed, not reused.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

import aiohttp
import httpx
import yarl

__all__ = [
    "AiohttpWire",
    "Answer",
    "AnswerTooLarge",
    "HttpxWire",
    "Wire",
    "WireOptions",
    "env_proxy",
    "open_wire",
]

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


class AnswerTooLarge(Exception):
    """An answer whose body is longer than the wire's ``max_answer_bytes``: refused, not read whole."""

    def __init__(self, limit: int, declared: int | None) -> None:
        self.limit = limit
        self.declared = declared
        seen = f"Content-Length {declared}" if declared is not None else "stopped reading there"
        super().__init__(f"answer larger than the {limit}-byte limit ({seen})")


class Wire(Protocol):
    """Sends one request to one cluster; a failure without an answer is an ``httpx.TransportError``, an
    answer above the size limit :class:`AnswerTooLarge`. ``deadline`` is the event loop's time
    (``loop.time()``) by which the whole answer must be in."""

    async def send(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any, *, deadline: float
    ) -> Answer: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class WireOptions:
    """What both wires are told: where, with which headers and TLS, how long to wait, how many at once,
    and how long an answer may be."""

    base_url: str
    headers: Mapping[str, str]
    ssl_context: ssl.SSLContext | bool
    timeout_s: float
    max_connections: int
    max_answer_bytes: int


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
        self._limit = options.max_answer_bytes
        self._http = httpx.AsyncClient(
            headers=dict(options.headers),
            verify=options.ssl_context,
            timeout=httpx.Timeout(options.timeout_s),
            transport=transport,
            follow_redirects=False,
        )

    async def send(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any, *, deadline: float
    ) -> Answer:
        url = self._urls(path, params)
        try:
            async with asyncio.timeout_at(deadline):
                async with self._http.stream(method, url, json=body) as response:
                    content = await self._read(response)
        except TimeoutError as exc:  # the deadline (httpx's own timeouts are per phase)
            raise httpx.ReadTimeout(str(exc) or "deadline", request=httpx.Request(method, url)) from exc
        except OSError as exc:  # httpx lets a TLS alert after the handshake out as ssl.SSLError
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=httpx.Request(method, url)) from exc
        return Answer(response.status_code, response.reason_phrase, content)

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, decoded, up to the limit; leaving the stream unread closes its connection."""
        declared = _declared_length(response.headers.get("content-length"))
        if declared is not None and declared > self._limit:
            raise AnswerTooLarge(self._limit, declared)
        return await _read_bounded(response.aiter_bytes(), self._limit, declared)

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
        # The deadline bounds the whole request (send()); sock_connect only names a slow connect as such.
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s)
        self._limit = options.max_answer_bytes
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

    async def send(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any, *, deadline: float
    ) -> Answer:
        session = self._session_for_loop()
        url = self._urls(path, params)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = None if data is None else {"Content-Type": "application/json"}
        try:
            async with asyncio.timeout_at(deadline):
                async with session.request(
                    method, url, data=data, headers=headers, allow_redirects=False, proxy=self._proxy
                ) as answer:
                    return Answer(answer.status, answer.reason or "", await self._read(answer))
        except (aiohttp.ClientError, OSError) as exc:  # OSError: a timeout (the deadline's too), a TLS alert
            raise _as_httpx_error(exc, method, url) from exc

    async def _read(self, answer: aiohttp.ClientResponse) -> bytes:
        """The body, decompressed, up to the limit. A plain body of a known length within it is read in
        one go (aiohttp's fast path, Flink's usual answer); any other is read chunk by chunk and given up
        at the limit. Leaving it unread closes the connection (aiohttp keeps only a finished one)."""
        declared = answer.content_length
        if declared is not None and declared > self._limit:
            answer.close()
            raise AnswerTooLarge(self._limit, declared)
        if declared is not None and "Content-Encoding" not in answer.headers:
            return await answer.read()
        try:
            return await _read_bounded(answer.content.iter_any(), self._limit, declared)
        except AnswerTooLarge:
            answer.close()
            raise

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


async def _read_bounded(chunks: AsyncIterator[bytes], limit: int, declared: int | None) -> bytes:
    """A body read chunk by chunk, given up (:class:`AnswerTooLarge`) as soon as it passes ``limit``:
    both wires' reader of a body whose length is not known in advance, or not its decoded length."""
    read: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(limit, declared)
        read.append(chunk)
    return b"".join(read)


def _declared_length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


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
