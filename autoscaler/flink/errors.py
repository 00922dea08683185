"""Every way a Flink REST call can fail, as one exception family.

Callers catch :class:`FlinkError` (or a subclass) and never see httpx, JSON or pydantic exceptions; the
message always says which cluster, which URL and which endpoint, so a log line or an event is enough to
find the problem.
"""

from __future__ import annotations

__all__ = ["FlinkBadPayload", "FlinkError", "FlinkHTTPError", "FlinkUnreachable"]


class FlinkError(Exception):
    """A Flink REST call failed; ``str(err)`` is ready for logs and events."""

    def __init__(self, detail: str, *, cluster: str, base_url: str, method: str, endpoint: str) -> None:
        self.detail = detail
        self.cluster = cluster
        self.base_url = base_url
        self.method = method
        self.endpoint = endpoint
        super().__init__(f"cluster {cluster!r} ({base_url}) {method} {endpoint}: {detail}")


class FlinkUnreachable(FlinkError):
    """No HTTP answer at all: connection refused, DNS, TLS, timeout, connection reset."""


class FlinkHTTPError(FlinkError):
    """Flink answered with a non-2xx status; ``messages`` holds the first line of each ``errors`` item."""

    def __init__(
        self,
        status: int,
        messages: list[str],
        *,
        cluster: str,
        base_url: str,
        method: str,
        endpoint: str,
    ) -> None:
        self.status = status
        self.messages = list(messages)
        detail = f"HTTP {status}: {messages[0]}" if messages else f"HTTP {status}"
        super().__init__(detail, cluster=cluster, base_url=base_url, method=method, endpoint=endpoint)


class FlinkBadPayload(FlinkError):
    """Flink answered 2xx but the body is not JSON or does not have the expected shape."""
