"""Async client for the Flink REST API: one method per endpoint, typed answers, one error family.

Every failure surfaces as a :class:`~autoscaler.flink.errors.FlinkError` naming the cluster, URL and
endpoint. GETs are retried once on a transport error (a JobManager behind a load balancer drops idle
connections) within the request's one deadline, but never after a timeout (see
:meth:`FlinkClient._send`); HTTP errors are answers, not glitches, and are never retried. An answer
longer than the client's ``max_answer_bytes`` is not read whole and counts as ``bad_payload``, as does
JSON nested too deeply to parse. A semaphore keeps the daemon from flooding one JobManager when it
queries many vertices at once. What every request shares apart from its endpoint (TLS, endpoint
templates, error texts) is in :mod:`autoscaler.flink.rest`; how a 2xx body becomes the endpoint's typed
value is in :mod:`autoscaler.flink.payloads`, and the body is read before the request hook hears of the
request, so a body of the wrong shape counts as ``bad_payload``. What puts a request on the wire
(aiohttp, or httpx on request) is in :mod:`autoscaler.flink.wire`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx
import structlog

import autoscaler.flink.payloads as payloads  # not "from autoscaler.flink": the package imports this module
from autoscaler.flink.errors import FlinkBadPayload, FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.models import (
    AggregatedMetric,
    CheckpointStats,
    ClusterOverview,
    DashboardConfig,
    ExecutionConfig,
    JobDetails,
    JobOverview,
    JobPlan,
    ParallelismBounds,
    TaskManagerInfo,
    VertexDetails,
)
from autoscaler.flink.payloads import InvalidPayload, Read
from autoscaler.flink.rest import (
    RequestHook,
    describe_transport_error,
    endpoint_template,
    error_messages,
    tls_context,
    tls_files,
)
from autoscaler.flink.wire import Answer, AnswerTooLarge, WireOptions, open_wire
from autoscaler.settings import DEFAULT_MAX_ANSWER_BYTES, ClusterSettings
from autoscaler.settings.values import redact_url

__all__ = ["DEFAULT_AGGREGATES", "FlinkClient", "RequestHook", "endpoint_template"]

log = structlog.get_logger(__name__)

DEFAULT_AGGREGATES: tuple[str, ...] = ("min", "max", "avg", "sum")
_T = TypeVar("_T")


class FlinkClient:
    """One Flink cluster's REST endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        cluster: str,
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        timeout_s: float = 10.0,
        max_concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
        http_transport: Literal["aiohttp", "httpx"] = "aiohttp",
        on_request: RequestHook | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        """``timeout_s`` is each request's one deadline, from its first byte sent to its answer's last
        byte read; ``max_answer_bytes`` the longest body read (``flink.rest-client.max-answer-size``)."""
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if max_answer_bytes < 1:
            raise ValueError("max_answer_bytes must be >= 1")
        self.cluster = cluster
        url = base_url.rstrip("/")
        self.base_url = redact_url(url)  # what messages and logs show: never a password
        self.timeout_s = timeout_s
        self.on_request = on_request
        self._limit = asyncio.Semaphore(max_concurrency)
        options = WireOptions(
            base_url=url,
            headers={"Accept": "application/json", **dict(headers or {})},
            ssl_context=tls_context(cluster, verify, cert),
            timeout_s=timeout_s,
            max_connections=max_concurrency,
            max_answer_bytes=max_answer_bytes,
        )
        self._wire = open_wire(http_transport, options, transport)

    @classmethod
    def from_settings(
        cls,
        cluster: ClusterSettings,
        default_timeout: timedelta,
        transport: httpx.AsyncBaseTransport | None = None,
        on_request: RequestHook | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> FlinkClient:
        """The client for a configured cluster; ``default_timeout`` applies when the cluster sets none."""
        verify, cert = tls_files(cluster)
        timeout = cluster.request_timeout if cluster.request_timeout is not None else default_timeout
        return cls(
            cluster.rest_url,
            cluster=cluster.name,
            headers=cluster.headers,
            verify=verify,
            cert=cert,
            timeout_s=timeout.total_seconds(),
            max_concurrency=cluster.max_concurrency,
            transport=transport,
            http_transport=cluster.http_transport,
            on_request=on_request,
            max_answer_bytes=max_answer_bytes,
        )

    async def aclose(self) -> None:
        await self._wire.aclose()

    async def __aenter__(self) -> FlinkClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"FlinkClient(cluster={self.cluster!r}, base_url={self.base_url!r})"

    # ----------------------------------------------------------------------------------- cluster
    async def overview(self) -> ClusterOverview:
        """``GET /overview``."""
        return await self._get("/overview", payloads.model(ClusterOverview))

    async def config(self) -> DashboardConfig:
        """``GET /config`` (Flink version and the REST cache's refresh interval)."""
        return await self._get("/config", payloads.model(DashboardConfig))

    async def jobmanager_config(self) -> dict[str, str]:
        """``GET /jobmanager/config``: the cluster configuration as flat keys."""
        return await self._get("/jobmanager/config", payloads.key_values)

    async def taskmanagers(self) -> list[TaskManagerInfo]:
        """``GET /taskmanagers``."""
        return await self._get("/taskmanagers", payloads.taskmanagers)

    async def taskmanager(self, tm_id: str) -> TaskManagerInfo:
        """``GET /taskmanagers/:id``."""
        return await self._get(f"/taskmanagers/{tm_id}", payloads.model(TaskManagerInfo))

    # ----------------------------------------------------------------------------------- jobs
    async def jobs_overview(self) -> list[JobOverview]:
        """``GET /jobs/overview``."""
        return await self._get("/jobs/overview", payloads.jobs)

    async def job_details(self, job_id: str) -> JobDetails:
        """``GET /jobs/:id``: state, vertices, IO counters and plan (topology validated here)."""
        return await self._get(f"/jobs/{job_id}", payloads.model(JobDetails))

    async def job_plan(self, job_id: str) -> JobPlan:
        """``GET /jobs/:id/plan``."""
        return await self._get(f"/jobs/{job_id}/plan", payloads.model(JobPlan))

    async def job_configuration(self, job_id: str) -> dict[str, str]:
        """``GET /jobs/:id/jobmanager/config``: the job's effective configuration; {} on HTTP 404."""
        try:
            return await self._get(f"/jobs/{job_id}/jobmanager/config", payloads.key_values)
        except FlinkHTTPError as err:
            if err.status == 404:
                log.debug("flink_job_configuration_missing", cluster=self.cluster, job_id=job_id)
                return {}
            raise

    async def job_execution_config(self, job_id: str) -> ExecutionConfig:
        """``GET /jobs/:id/config``."""
        return await self._get(f"/jobs/{job_id}/config", payloads.model(ExecutionConfig))

    async def vertex_details(self, job_id: str, vertex_id: str) -> VertexDetails:
        """``GET /jobs/:id/vertices/:vid``."""
        return await self._get(f"/jobs/{job_id}/vertices/{vertex_id}", payloads.model(VertexDetails))

    async def checkpoints(self, job_id: str) -> CheckpointStats:
        """``GET /jobs/:id/checkpoints``."""
        return await self._get(f"/jobs/{job_id}/checkpoints", payloads.model(CheckpointStats))

    # ----------------------------------------------------------------------------------- metrics
    async def vertex_metric_names(self, job_id: str, vertex_id: str) -> list[str]:
        """``GET /jobs/:id/vertices/:vid/subtasks/metrics``: names aggregatable over subtasks."""
        return await self._metric_names(f"/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics")

    async def vertex_metrics(
        self,
        job_id: str,
        vertex_id: str,
        names: Sequence[str],
        aggs: Sequence[str] = DEFAULT_AGGREGATES,
    ) -> dict[str, AggregatedMetric]:
        """Aggregated subtask metrics; {} when Flink knows any one name not (it then answers ``[]``)."""
        path = f"/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics"
        return await self._aggregated(path, names, aggs)

    async def subtask_metric_names(self, job_id: str, vertex_id: str) -> list[str]:
        """``GET /jobs/:id/vertices/:vid/metrics``: per-subtask names, prefixed ``<subtask>.``."""
        return await self._metric_names(f"/jobs/{job_id}/vertices/{vertex_id}/metrics")

    async def subtask_metrics(self, job_id: str, vertex_id: str, names: Sequence[str]) -> dict[str, float]:
        """``GET /jobs/:id/vertices/:vid/metrics?get=<subtask>.<name>,...``."""
        return await self._values(f"/jobs/{job_id}/vertices/{vertex_id}/metrics", names)

    async def job_metric_names(self, job_id: str) -> list[str]:
        """``GET /jobs/:id/metrics``."""
        return await self._metric_names(f"/jobs/{job_id}/metrics")

    async def job_metrics(self, job_id: str, names: Sequence[str]) -> dict[str, float]:
        """``GET /jobs/:id/metrics?get=...`` (e.g. numRescales, to confirm a rescale)."""
        return await self._values(f"/jobs/{job_id}/metrics", names)

    async def taskmanager_metric_names(self, tm_id: str | None = None) -> list[str]:
        """``GET /taskmanagers/metrics`` (aggregatable over TaskManagers), or one TaskManager's names."""
        path = f"/taskmanagers/{tm_id}/metrics" if tm_id else "/taskmanagers/metrics"
        return await self._metric_names(path)

    async def taskmanager_metrics(
        self, names: Sequence[str], aggs: Sequence[str] = DEFAULT_AGGREGATES
    ) -> dict[str, AggregatedMetric]:
        """Metrics aggregated over all TaskManagers; {} when any one name is unknown."""
        return await self._aggregated("/taskmanagers/metrics", names, aggs)

    async def jobmanager_metric_names(self) -> list[str]:
        """``GET /jobmanager/metrics``."""
        return await self._metric_names("/jobmanager/metrics")

    async def jobmanager_metrics(self, names: Sequence[str]) -> dict[str, float]:
        """``GET /jobmanager/metrics?get=...``; Flink sends the values as strings."""
        return await self._values("/jobmanager/metrics", names)

    # ----------------------------------------------------------------------------------- rescaling
    async def resource_requirements(self, job_id: str) -> dict[str, ParallelismBounds]:
        """``GET /jobs/:id/resource-requirements`` (echoes the request, not the actual parallelism)."""
        return await self._get(f"/jobs/{job_id}/resource-requirements", payloads.requirements)

    async def set_resource_requirements(
        self, job_id: str, requirements: Mapping[str, ParallelismBounds]
    ) -> None:
        """``PUT /jobs/:id/resource-requirements``. Flink accepts only a body naming every vertex."""
        path = f"/jobs/{job_id}/resource-requirements"
        body = {vid: bounds.to_json() for vid, bounds in requirements.items()}
        await self._request("PUT", path, None, json_body=body)
        log.info(
            "flink_resource_requirements_set",
            cluster=self.cluster,
            job_id=job_id,
            upper_bounds={vid: b.upper for vid, b in requirements.items()},
        )

    # ----------------------------------------------------------------------------------- plumbing
    async def _metric_names(self, path: str) -> list[str]:
        return await self._get(path, payloads.metric_names)

    async def _aggregated(
        self, path: str, names: Sequence[str], aggs: Sequence[str]
    ) -> dict[str, AggregatedMetric]:
        if not names:  # without get= Flink lists the names instead: a different answer entirely
            return {}
        return await self._get(path, payloads.aggregated, {"get": ",".join(names), "agg": ",".join(aggs)})

    async def _values(self, path: str, names: Sequence[str]) -> dict[str, float]:
        if not names:
            return {}
        return await self._get(path, payloads.values, {"get": ",".join(names)})

    async def _get(self, path: str, read: Read[_T], params: Mapping[str, str] | None = None) -> _T:
        value: _T = await self._request("GET", path, read, params=params)
        return value

    async def _request(
        self,
        method: str,
        path: str,
        read: Read[Any] | None,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        """Send, read a 2xx body with ``read`` (None: ignore it), then report the request once: a body
        that is not JSON or not of the endpoint's shape as bad_payload, never first as a 200."""
        async with self._limit:
            try:
                response = await self._send(method, path, params, json_body)
            except FlinkError as exc:
                self._notify(method, path, type(exc).__name__)
                raise
        value = None
        if response.is_success and read is not None:
            try:
                value = payloads.parse(response, read)
            except InvalidPayload as exc:
                self._notify(method, path, FlinkBadPayload.__name__)
                raise self._bad(method, path, str(exc)) from exc
        self._notify(method, path, response.status)
        if not response.is_success:
            messages = error_messages(response)
            log.debug(
                "flink_http_error",
                cluster=self.cluster,
                method=method,
                path=path,
                status=response.status,
                error=messages[0] if messages else None,
            )
            raise FlinkHTTPError(
                response.status,
                messages,
                cluster=self.cluster,
                base_url=self.base_url,
                method=method,
                endpoint=path,
            )
        return value

    async def _send(self, method: str, path: str, params: Mapping[str, str] | None, json_body: Any) -> Answer:
        """The answer, within one deadline of ``timeout_s`` for the request and its retry together.

        Why one deadline, and this long: a tick waits for its slowest job, and a job reads in a few
        rounds one after another (``/jobs/:id``, then its vertices side by side), so what one request
        may take is what a sick answer may add to every job's tick. ``timeout_s`` is
        ``flink.rest-client.timeout`` (or the cluster's ``request_timeout``), which the operator sizes
        against ``control_loop_interval``; it used to bound each socket read, so an answer trickling a
        byte at a time never hit it. Now it bounds the request from its first byte sent to its answer's
        last byte read (the wait for a free connection of ``max_concurrency`` is not counted: that is
        other requests' time). A GET is retried once after a transport error, which is what a
        JobManager behind a load balancer that dropped an idle connection causes (it fails at once),
        and only within what is left of the same deadline. A timeout is not retried: the cluster had
        the whole deadline and did not answer, and asking again would give the request a second one
        that the tick cannot afford (the job is read again next tick).
        """
        retries = 1 if method == "GET" else 0
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            try:
                return await self._wire.send(method, path, params, json_body, deadline=deadline)
            except httpx.TransportError as exc:
                detail = describe_transport_error(exc, self.timeout_s)
                if retries > 0 and not isinstance(exc, httpx.TimeoutException):
                    retries -= 1
                    log.info("flink_request_retry", cluster=self.cluster, path=path, error=detail)
                    continue
                log.debug("flink_unreachable", cluster=self.cluster, method=method, path=path, error=detail)
                raise self._error(FlinkUnreachable, method, path, detail) from exc
            except AnswerTooLarge as exc:
                # Rare and never Flink's doing (a proxy's or a broken JobManager's answer): a warning
                # per answer, and bad_payload in rest_errors_total (the caller's hook).
                log.warning(
                    "flink_answer_too_large", cluster=self.cluster, method=method, path=path, error=str(exc)
                )
                raise self._bad(method, path, str(exc)) from exc
            except httpx.HTTPError as exc:
                raise self._bad(method, path, f"{type(exc).__name__}: {exc}") from exc

    def _notify(self, method: str, path: str, status_or_error: int | str) -> None:
        if self.on_request is None:
            return
        try:
            self.on_request(self.cluster, method, endpoint_template(path), status_or_error)
        except Exception as exc:  # an observer must never fail a request
            log.warning("flink_request_hook_failed", cluster=self.cluster, error=str(exc))

    def _bad(self, method: str, path: str, detail: str) -> FlinkBadPayload:
        log.debug("flink_bad_payload", cluster=self.cluster, method=method, path=path, error=detail)
        return self._error(FlinkBadPayload, method, path, detail)

    def _error(self, kind: type[FlinkError], method: str, path: str, detail: str) -> FlinkError:
        return kind(detail, cluster=self.cluster, base_url=self.base_url, method=method, endpoint=path)
