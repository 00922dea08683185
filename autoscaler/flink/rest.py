"""What every request of :class:`~autoscaler.flink.client.FlinkClient` shares, apart from its endpoint.

The client keeps one method per endpoint; this module keeps what is the same for all of them: the TLS
a cluster's settings ask for, the endpoint templates the request hook reports (so metric labels stay
few), and the one-line texts that a :class:`~autoscaler.flink.errors.FlinkError` carries for a transport
error, for Flink's ``{"errors": [...]}`` body and for a payload that does not validate.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable

import httpx
from pydantic import ValidationError

from autoscaler.flink.wire import Answer
from autoscaler.settings import ClusterSettings, ConfigError

__all__ = [
    "RequestHook",
    "describe_transport_error",
    "describe_validation",
    "endpoint_template",
    "error_messages",
    "snippet",
    "tls_context",
    "tls_files",
]

# Called once per request after its answer: (cluster, method, endpoint template, HTTP status or the
# error's class name when there was no answer). Metrics hang off it; it never changes what a call does.
RequestHook = Callable[[str, str, str, int | str], None]

# After these path segments comes an id; the template names it so metric labels stay few.
_ID_AFTER = {"jobs": ":jobid", "vertices": ":vertexid", "taskmanagers": ":taskmanagerid"}
_NOT_IDS = {"overview", "metrics"}


def endpoint_template(path: str) -> str:
    """``/jobs/<hex>/vertices/<hex>/metrics`` -> ``/jobs/:jobid/vertices/:vertexid/metrics``."""
    parts = path.strip("/").split("/")
    out = []
    for i, part in enumerate(parts):
        previous = parts[i - 1] if i else ""
        out.append(_ID_AFTER[previous] if previous in _ID_AFTER and part not in _NOT_IDS else part)
    return "/" + "/".join(out)


def tls_files(cluster: ClusterSettings) -> tuple[bool | str, str | tuple[str, str] | None]:
    """The client's ``verify`` and ``cert`` for a configured cluster."""
    verify: bool | str = cluster.verify_tls
    if cluster.verify_tls and cluster.ca_file is not None:
        verify = str(cluster.ca_file)
    cert: str | tuple[str, str] | None = None
    if cluster.client_key is not None and cluster.client_cert is None:
        raise ConfigError(f"clusters[{cluster.name}]: client_key needs client_cert")
    if cluster.client_cert is not None:
        cert = (
            (str(cluster.client_cert), str(cluster.client_key))
            if cluster.client_key is not None
            else str(cluster.client_cert)
        )
    return verify, cert


def tls_context(
    cluster: str, verify: bool | str, cert: str | tuple[str, str] | None
) -> ssl.SSLContext | bool:
    """An SSLContext when a CA path or a client certificate is given (httpx 0.28 deprecates passing paths)."""
    if cert is None and not isinstance(verify, str):
        return verify
    try:
        if isinstance(verify, str):
            ctx = (
                ssl.create_default_context(capath=verify)
                if os.path.isdir(verify)
                else ssl.create_default_context(cafile=verify)
            )
        else:
            ctx = httpx.create_ssl_context(verify=verify)
        if isinstance(cert, tuple):
            ctx.load_cert_chain(certfile=cert[0], keyfile=cert[1])
        elif cert is not None:
            ctx.load_cert_chain(certfile=cert)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cluster {cluster!r}: cannot load TLS files: {exc}") from exc
    return ctx


def describe_transport_error(exc: httpx.TransportError, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout_s:g}s ({type(exc).__name__})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_messages(response: Answer) -> list[str]:
    """First line of each item of Flink's ``{"errors": [...]}`` (the rest is a Java stack trace); a body
    that is not such JSON (or is nested too deeply to read) by its first line."""
    try:
        body = json.loads(response.content)
        if isinstance(body, dict) and isinstance(body.get("errors"), list):
            lines = [str(item).strip().splitlines() for item in body["errors"]]
            return [first[0].strip() for first in lines if first]
    except (ValueError, RecursionError):
        pass
    text = snippet(response.text)
    return [text] if text else [response.reason] if response.reason else []


def snippet(text: str, limit: int = 200) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[:limit] + "..."


def describe_validation(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    shown = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        shown.append(f"{loc}: {err['msg']}")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "unexpected payload: " + "; ".join(shown) + more
