"""The HTTP transport under :class:`~autoscaler.flink.client.FlinkClient`: httpx's API over aiohttp's
connections.

Why not httpx's own: a fleet tick sends one request per job and vertex (11,000 at 1,000 jobs of 10
vertices), and httpx's default transport (httpcore) spent about 0.95 ms of the daemon's CPU on each,
most of it in its connection pool checking every pooled socket on every request; aiohttp keeps its
connections in a queue, parses HTTP in C, and with httpx's request and response objects kept around it
costs about 0.27 ms (see docs/performance.md, "Fleet"). The client keeps httpx's API, its errors and
what tests mock (respx with ``using="httpx"`` mocks at the client, whatever the transport).

aiohttp's failures come out as httpx's, so :func:`~autoscaler.flink.rest.describe_transport_error`
and the client's retry of a GET work as they did: a refused or failed connection is a ``ConnectError``,
a lapsed timeout a ``ConnectTimeout`` or ``ReadTimeout``, a connection that died mid-answer a
``ReadError``, an answer that is not HTTP a ``RemoteProtocolError``.

``http_transport: httpx`` in a cluster's settings goes back to httpx's own transport.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp
import httpx
import yarl

__all__ = ["AiohttpTransport"]

# Request headers aiohttp sets itself: Host from the URL; Accept-Encoding for what it can decode (httpx
# would ask for what httpx can); Content-Length from the body.
_SET_BY_AIOHTTP = frozenset({"host", "accept-encoding", "content-length", "connection"})
# Answer headers that no longer hold once aiohttp has decoded the body.
_DROPPED_AFTER_DECODING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One cluster's connections: at most ``max_connections`` open, kept alive between ticks.

    The aiohttp session is opened by the first request, in the event loop that sends it: a session
    belongs to one loop, and the daemon and each CLI command run one. Should a request come from
    another loop, a session is opened for it; the first loop's connections are left to it.
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | bool = True, max_connections: int = 8) -> None:
        self._ssl: ssl.SSLContext | bool = ssl_context
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=self._ssl)
            # trust_env: HTTP(S)_PROXY and NO_PROXY apply, as they did with httpx
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True, auto_decompress=True)
            self._loop = loop
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session_for_loop()
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _SET_BY_AIOHTTP]
        body = await request.aread()
        try:
            async with session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),  # httpx has encoded it: sent as it is
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=_timeout(request.extensions.get("timeout")),
            ) as answer:
                content = await answer.read()
                status = answer.status
                raw = answer.raw_headers
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _as_httpx_error(exc, request) from exc
        kept = [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _DROPPED_AFTER_DECODING]
        return httpx.Response(status, headers=kept, content=content, request=request)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _timeout(spec: Any) -> aiohttp.ClientTimeout:
    """httpx's per-phase timeouts (``{"connect": s, "read": s, ...}``) as aiohttp's."""
    spec = spec if isinstance(spec, dict) else {}
    return aiohttp.ClientTimeout(total=None, sock_connect=spec.get("connect"), sock_read=spec.get("read"))


def _as_httpx_error(exc: BaseException, request: httpx.Request) -> httpx.TransportError:
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
    return kind(text, request=request)
