"""Dispatch: the route table from method and path to handler, ``handle``, and the in-process ``transport``.

One table for every endpoint, because the first match wins: literal segments come before parameterised
ones, whichever module their handlers live in.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from autoscaler.simulator.engine import SimCluster
from autoscaler.simulator.rest.checkpoints import checkpoints
from autoscaler.simulator.rest.cluster import (
    config,
    job_jobmanager_config,
    jobmanager_config,
    overview,
    taskmanager_details,
    taskmanagers,
)
from autoscaler.simulator.rest.control import cancel_job, get_requirements, put_requirements
from autoscaler.simulator.rest.counts import NO_ROUTE, RequestCounts
from autoscaler.simulator.rest.errors import HttpError
from autoscaler.simulator.rest.jobs import (
    job_config,
    job_details,
    job_plan,
    jobs,
    jobs_overview,
    vertex_details,
)
from autoscaler.simulator.rest.metrics import (
    job_metrics,
    jobmanager_metrics,
    jobs_metrics,
    subtask_metrics,
    subtasks_metrics,
    taskmanager_metrics,
    taskmanagers_metrics,
    vertex_metrics,
)
from autoscaler.simulator.rest.view import Handler, Params, Response, View

__all__ = ["handle", "transport"]

# Literal segments are listed before parameterised ones so "/jobs/overview" never reads as a job id.
_ROUTES: list[tuple[str, tuple[str, ...], Handler]] = [
    ("GET", ("overview",), overview),
    ("GET", ("config",), config),
    ("GET", ("jobs",), jobs),
    ("GET", ("jobs", "overview"), jobs_overview),
    ("GET", ("jobs", "metrics"), jobs_metrics),
    ("GET", ("jobs", ":jobid"), job_details),
    ("PATCH", ("jobs", ":jobid"), cancel_job),
    ("GET", ("jobs", ":jobid", "plan"), job_plan),
    ("GET", ("jobs", ":jobid", "config"), job_config),
    ("GET", ("jobs", ":jobid", "checkpoints"), checkpoints),
    ("GET", ("jobs", ":jobid", "jobmanager", "config"), job_jobmanager_config),
    ("GET", ("jobs", ":jobid", "metrics"), job_metrics),
    ("GET", ("jobs", ":jobid", "resource-requirements"), get_requirements),
    ("PUT", ("jobs", ":jobid", "resource-requirements"), put_requirements),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid"), vertex_details),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid", "metrics"), vertex_metrics),
    ("GET", ("jobs", ":jobid", "vertices", ":vertexid", "subtasks", "metrics"), subtasks_metrics),
    (
        "GET",
        ("jobs", ":jobid", "vertices", ":vertexid", "subtasks", ":subtaskindex", "metrics"),
        subtask_metrics,
    ),
    ("GET", ("jobmanager", "config"), jobmanager_config),
    ("GET", ("jobmanager", "metrics"), jobmanager_metrics),
    ("GET", ("taskmanagers",), taskmanagers),
    ("GET", ("taskmanagers", "metrics"), taskmanagers_metrics),
    ("GET", ("taskmanagers", ":taskmanagerid"), taskmanager_details),
    ("GET", ("taskmanagers", ":taskmanagerid", "metrics"), taskmanager_metrics),
]


def _match(method: str, segments: list[str]) -> tuple[Handler, Params, tuple[str, ...]] | None:
    for route_method, pattern, handler in _ROUTES:
        if route_method != method or len(pattern) != len(segments):
            continue
        params: Params = {}
        for expected, actual in zip(pattern, segments, strict=True):
            if expected.startswith(":"):
                params[expected[1:]] = actual
            elif expected != actual:
                break
        else:
            return handler, params, pattern
    return None


def handle(
    cluster: SimCluster,
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes | None,
    headers: Mapping[str, str] | None = None,
    counts: RequestCounts | None = None,
) -> Response:
    """Answer one REST request: ``(status, JSON-able payload)``. Holds the cluster still while answering.

    ``headers`` (lower-case names) is optional; when given, a PUT must say ``Content-Type: application/json``.
    ``counts``, when given, counts the request under its route's template (``NO_ROUTE`` if none matched).
    """
    method = method.upper()
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["v1"]:
        segments = segments[1:]
    with cluster.locked():
        found = _match(method, segments)
        if counts is not None:
            template = "/" + "/".join(found[2]) if found is not None else NO_ROUTE
            counts.add(method, template, found[1].get("jobid") if found is not None else None)
        if found is None:
            return 404, {"errors": [f"Not found: {path}"]}
        handler, params, _ = found
        try:
            return handler(
                View(cluster), params, query, body, {k.lower(): v for k, v in (headers or {}).items()}
            )
        except HttpError as error:
            return error.status, {"errors": [error.message]}


def transport(cluster: SimCluster, counts: RequestCounts | None = None) -> httpx.MockTransport:
    """An httpx transport answering from ``cluster`` in-process: ``httpx.AsyncClient(transport=...)``."""

    def respond(request: httpx.Request) -> httpx.Response:
        status, payload = handle(
            cluster,
            request.method,
            request.url.path,
            dict(request.url.params),
            request.content,
            dict(request.headers),
            counts,
        )
        return httpx.Response(status, json=payload)

    return httpx.MockTransport(respond)
