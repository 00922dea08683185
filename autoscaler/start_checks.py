"""What ``run`` refuses at start, found without starting anything: ``check-config`` runs these checks,
so that it never says OK to a configuration ``run`` then stops on (issue 35: the metrics port in use).

``run`` refuses, before its first tick: a configuration with no clusters; a ``metrics_address`` it cannot
listen on; a cluster's TLS files it cannot load (found only once Spark is up, a minute in); an
``archive_dir`` it cannot write; a SQLite ``state_url`` whose file or directory it cannot create or
write. Each is checked here the cheap way, touching nothing: the port is bound and released at once,
the files and directories are looked at, not created. Not checked: what needs a server (a PostgreSQL
``state_url``, the clusters, Spark), and the plugins, whose problems ``run`` logs and starts anyway
(``flink-autoscaler plugins`` lists them).

One exception: a port held by a running flink-autoscaler (it answers ``/healthz`` as one) is a warning,
not a problem. The documented way to change a daemon's file is to check it with the daemon still running
and restart it then (docs/operations.md), and the port is free once the old one stops.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import sqlalchemy as sa

from autoscaler.flink.rest import tls_context, tls_files
from autoscaler.settings import ConfigError, Settings

__all__ = ["NO_CLUSTERS", "StartChecks", "metrics_address_problem", "start_checks"]

NO_CLUSTERS = "no clusters configured: add a 'clusters:' list to the config file"


@dataclass(frozen=True, slots=True)
class StartChecks:
    problems: list[str] = field(default_factory=list)  # run would not start: check-config exits 2
    warnings: list[str] = field(default_factory=list)  # run would start only once something changed


def start_checks(settings: Settings) -> StartChecks:
    """Every reason ``run`` would not start with these settings, in words; no problems when it would."""
    problems = [NO_CLUSTERS] if not settings.clusters else []
    warnings = []
    address = settings.metrics_address
    if address and (bound := _bind_problem(address)) is not None:
        if _a_daemon_answers(address):
            warnings.append(
                f"metrics_address {address} is in use by a running flink-autoscaler: run starts once it "
                "stops (restarting that daemon with this file is fine)"
            )
        else:
            problems.append(bound)
    problems += _tls_problems(settings)
    if settings.archive_dir is not None:
        found = _unwritable(Path(settings.archive_dir), directory=True)
        if found is not None:
            problems.append(f"archive_dir {settings.archive_dir}: the daemon cannot write there ({found})")
    if (state := _state_problem(settings.state_url)) is not None:
        problems.append(state)
    return StartChecks(problems, warnings)


def metrics_address_problem(address: str, exc: OSError) -> str:
    """Why /metrics cannot be served on ``address``, in the words both check-config and run use."""
    host, _, port = address.rpartition(":")
    if isinstance(exc, socket.gaierror):
        return f"metrics_address {address}: cannot resolve the host {host!r} ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return f"metrics_address {address} is in use: another process listens on port {port}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"metrics_address {address}: {host} is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"metrics_address {address}: no permission to listen on port {port}"
    return f"metrics_address {address} cannot be served: {exc.strerror or exc}"


def _bind_problem(address: str) -> str | None:
    """Bind the address as ``run`` serves it (``autoscaler.health.serve_http``), and release it."""
    host, _, port = address.rpartition(":")
    try:
        server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), BaseHTTPRequestHandler)
    except OSError as exc:
        return metrics_address_problem(address, exc)
    server.server_close()
    return None


def _a_daemon_answers(address: str) -> bool:
    """Whether what listens on ``address`` answers ``/healthz`` as a flink-autoscaler does."""
    host, _, port = address.rpartition(":")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "[::]":
        host = "[::1]"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via HTTP_PROXY
    try:
        with opener.open(f"http://{host}:{port}/healthz", timeout=2) as answer:
            body = json.loads(answer.read(4096))
    except OSError as exc:  # a 503 (a wedged loop) is a daemon too
        body = _json_of(exc)
    except ValueError:
        return False
    return isinstance(body, dict) and {"alive", "reason"} <= body.keys()


def _json_of(exc: OSError) -> object:
    try:
        return json.loads(exc.read(4096)) if isinstance(exc, urllib.error.HTTPError) else None
    except ValueError:
        return None


def _tls_problems(settings: Settings) -> list[str]:
    """Each cluster's CA bundle and client certificate load, as its REST client loads them."""
    problems = []
    for cluster in settings.clusters:
        try:
            verify, cert = tls_files(cluster)
            tls_context(cluster.name, verify, cert)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def _state_problem(url: str) -> str | None:
    """A SQLite file the daemon cannot open for writing, or create (its directories included)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return None  # the settings' own validation speaks for the URL
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database).expanduser()
    found = _unwritable(path, directory=False)
    if found is None and path.exists():  # WAL mode keeps its -wal and -shm files beside the database
        found = _unwritable(path.parent, directory=True)
    return None if found is None else f"state_url {url}: the daemon cannot write the database ({found})"


def _unwritable(path: Path, *, directory: bool) -> str | None:
    """Why the daemon could not write ``path`` (a directory or a file), or create it; None if it can."""
    if path.exists():
        if path.is_dir() != directory:
            return f"{path} is {'not ' if directory else ''}a directory"
        mode = os.W_OK | os.X_OK if directory else os.R_OK | os.W_OK
        return None if os.access(path, mode) else f"no permission to write {path}"
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"no permission to create {path} in {parent}"
    return None
