"""One tick's metrics for one job: a complete :class:`JobSample`, or an :class:`Unavailable` saying why.

Never partial: scaling on half a picture is worse than skipping a tick. Only names that the names
endpoint listed are ever queried (Flink answers ``[]`` as soon as one requested name is unknown), and
names are cached per job until its vertex set changes, except for sources, whose ``pendingRecords``
gauge appears lazily and is therefore re-listed every tick.

Flink's metric fetcher is lazy: a query gets the JobManager's last fetch and only then triggers a new
one, so the very first queries of a job can come back ``[]``. On a job's first collection, when a
vertex's answer is empty or lacks a required name, the job is therefore collected once more after a
short pause (the warm-up) before the tick is given up as ``PARTIAL_METRICS``.

Custom metrics (declared by the job's metric providers, :mod:`autoscaler.plugins.metrics`) are read in
the same tick and never decide whether a job is collected: per-vertex names go in their own request per
vertex (a name that vanished would otherwise empty the standard answer), TaskManager names in one
request per job, external ones through the providers under a time budget. Anything unreadable is NaN.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import structlog

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.metric_names import FlinkMetric, matching, source_partitions
from autoscaler.flink.models import AggregatedMetric, JobDetails
from autoscaler.model import (
    HEAP_USAGE_RATIO,
    NAN,
    JobSample,
    JobTarget,
    JobTopology,
    TaskManagerSample,
    Unavailable,
    VertexId,
    VertexSample,
)
from autoscaler.plugins.metrics import (
    AGGREGATES,
    EXTERNAL_METRICS_BUDGET_S,
    ConfiguredProvider,
    ExternalMetricsContext,
    MetricRef,
    declared_taskmanager_names,
    declared_vertex_names,
    external_metrics,
)
from autoscaler.reasons import Reason
from autoscaler.settings import BusyTimeAggregator

__all__ = [
    "VERTEX_AGGREGATES",
    "WARM_UP_PAUSE_S",
    "MetricNameCache",
    "collect",
    "collect_taskmanagers",
    "observed_true_processing_rate",
]

log = structlog.get_logger(__name__)

FINISHED = "FINISHED"

VERTEX_AGGREGATES: tuple[str, ...] = ("min", "max", "avg", "sum")
# The subtask counter behind busyTimeMsPerSecond, aggregatable like it (min/max/avg/sum over subtasks).
# Not in FlinkMetric (the reference reads the summed job-details counter instead); optional: without it
# the evaluator falls back to the gauge.
WARM_UP_PAUSE_S = 1.0  # the lab's fetch round trip: a query triggers a fetch that lands within ~1 s
FETCH_POLL_S = 0.1  # how often /jobs/:id is re-read while waiting for the tick's fetch to land
TM_AGGREGATES: tuple[str, ...] = ("max", "avg")
_TM_METRICS = (FlinkMetric.HEAP_MEMORY_USED, FlinkMetric.HEAP_MEMORY_MAX, FlinkMetric.CPU_LOAD)
_T = TypeVar("_T")
Sleep = Callable[[float], Awaitable[object]]


class MissingMetrics(Exception):
    """A required metric is not (yet) reported; the tick is skipped as PARTIAL_METRICS."""


class _NotRunning(Exception):
    """The job is not (fully) running; no metrics are read."""


@dataclass(slots=True)
class _JobNames:
    vertex_ids: frozenset[str]
    by_vertex: dict[str, tuple[str, ...]] = field(default_factory=dict)


class MetricNameCache:
    """Listed metric names per job (until its vertex set changes) and the TaskManager query per cluster.

    It also remembers which JobID of a job key was once collected completely: until then, collection
    is a warm-up that may retry (a resubmitted job has a new JobID and a cold fetcher again).
    """

    def __init__(self) -> None:
        self._jobs: dict[str, _JobNames] = {}
        self._tm: dict[str, tuple[str, ...]] = {}
        self._tm_listing: dict[str, frozenset[str]] = {}  # cluster -> listed TaskManager names (custom)
        self._warm: dict[str, str] = {}  # job key -> JobID collected completely at least once

    def forget(self, job_key: str) -> None:
        self._jobs.pop(job_key, None)
        self._warm.pop(job_key, None)

    def drop_names(self, job_key: str) -> None:
        """Re-list the job's names next time (an answer lacked a listed name), but stay warm."""
        self._jobs.pop(job_key, None)

    def is_warm(self, job_key: str, job_id: str) -> bool:
        return self._warm.get(job_key) == job_id

    def mark_warm(self, job_key: str, job_id: str) -> None:
        self._warm[job_key] = job_id

    def vertex_names(self, job_key: str, vertex_ids: frozenset[str]) -> dict[str, tuple[str, ...]]:
        """The cached names for the job, dropped first if its vertex set is no longer the cached one."""
        entry = self._jobs.get(job_key)
        if entry is None or entry.vertex_ids != vertex_ids:
            if entry is not None:
                log.debug("metric_names_cache_reset", job=job_key)
            entry = self._jobs[job_key] = _JobNames(vertex_ids)
        return dict(entry.by_vertex)

    def store(self, job_key: str, vertex_id: str, names: Sequence[str]) -> None:
        entry = self._jobs.get(job_key)
        if entry is not None and vertex_id in entry.vertex_ids:
            entry.by_vertex[vertex_id] = tuple(names)

    def taskmanager_query(self, cluster: str) -> tuple[str, ...] | None:
        return self._tm.get(cluster)

    def store_taskmanager_query(self, cluster: str, names: Sequence[str]) -> None:
        self._tm[cluster] = tuple(names)

    def forget_taskmanagers(self, cluster: str) -> None:
        self._tm.pop(cluster, None)

    def taskmanager_listing(self, cluster: str) -> frozenset[str] | None:
        """The TaskManager names last listed for custom metrics on ``cluster``."""
        return self._tm_listing.get(cluster)

    def store_taskmanager_listing(self, cluster: str, names: Iterable[str]) -> None:
        self._tm_listing[cluster] = frozenset(names)


# --------------------------------------------------------------------------------------------- formulas
def observed_true_processing_rate(
    in_per_s: float, lag: float, backpressured_ms_per_s: float, lag_threshold_s: float
) -> float:
    """What a source really processes, measured only while it catches up (reference ``OBSERVED_TPR``).

    No input means no measurable limit (+inf, which allows scaling down). While the backlog is at least
    ``lag_threshold_s`` seconds of input, the source runs flat out except while back-pressured, so the
    rate divided by the unpressured fraction of time is its capacity. Otherwise it is not measured.
    """
    if math.isnan(in_per_s):
        return NAN
    if in_per_s == 0:
        return math.inf
    if math.isnan(lag) or lag < lag_threshold_s * in_per_s:
        return NAN
    if math.isnan(backpressured_ms_per_s) or backpressured_ms_per_s >= 1000.0:
        return NAN
    return in_per_s / (1.0 - backpressured_ms_per_s / 1000.0)


# --------------------------------------------------------------------------------------------- TaskManagers
async def collect_taskmanagers(client: FlinkClient, cache: MetricNameCache) -> TaskManagerSample:
    """Cluster-wide TaskManager metrics; all NaN when they cannot be read (they only refine decisions)."""
    try:
        names = cache.taskmanager_query(client.cluster)
        if names is None:
            listed = await client.taskmanager_metric_names()
            wanted = [*_TM_METRICS, FlinkMetric.TOTAL_GC_TIME_PER_SEC]
            names = tuple(n for metric in wanted for n in matching(metric, listed)[:1])
            if names:
                cache.store_taskmanager_query(client.cluster, names)
        values = await client.taskmanager_metrics(names, TM_AGGREGATES) if names else {}
    except FlinkError as err:
        log.warning("taskmanager_metrics_failed", cluster=client.cluster, error=str(err))
        return TaskManagerSample()
    if not values:
        # No TaskManager registered, or a listed name vanished: choose the names afresh next tick.
        cache.forget_taskmanagers(client.cluster)
        log.warning("taskmanager_metrics_empty", cluster=client.cluster)
        return TaskManagerSample()
    return TaskManagerSample(
        gc_time_ms_per_s=_agg(values, FlinkMetric.TOTAL_GC_TIME_PER_SEC, "max"),
        heap_used=_agg(values, FlinkMetric.HEAP_MEMORY_USED, "max"),
        heap_max=_agg(values, FlinkMetric.HEAP_MEMORY_MAX, "max"),
        cpu_load_avg=_agg(values, FlinkMetric.CPU_LOAD, "avg"),
    )


def _agg(values: Mapping[str, AggregatedMetric], metric: FlinkMetric, agg: str) -> float:
    found = [getattr(m, agg) for name, m in values.items() if metric.matches(name)]
    return float(found[0]) if found else NAN


# --------------------------------------------------------------------------------------------- jobs
async def collect(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    taskmanagers: TaskManagerSample,
    *,
    providers: Sequence[ConfiguredProvider] = (),
    external_budget_s: float = EXTERNAL_METRICS_BUDGET_S,
    warm_up_pause_s: float = WARM_UP_PAUSE_S,
    fetch_wait_s: float = 0.0,
    sleep: Sleep = asyncio.sleep,
) -> JobSample | Unavailable:
    """Never raises: every failure becomes an Unavailable with a reason and a readable detail.

    ``fetch_wait_s`` is how long to wait for the metric fetch the tick started (see ``_after_the_fetch``);
    0 reads ``/jobs/:id`` once more and no longer waits.

    ``sleep(warm_up_pause_s)`` is awaited at most once, on a job's first collection, before collecting
    it once more because an answer was incomplete (tests pass 0 or a recording sleep).

    ``providers`` are the job's metric providers (:func:`autoscaler.plugins.metrics.metric_providers`).
    Their TaskManager and external metrics are read while the standard ones are, their vertex metrics
    beside each vertex's standard query; all end up in ``JobSample.custom_*_metrics``.
    """
    job_level = (
        asyncio.ensure_future(
            _custom_job_metrics(client, target, now_ms, cache, providers, external_budget_s)
        )
        if providers
        else None
    )
    try:
        sample = await _collect(
            client,
            target,
            now_ms,
            cache,
            taskmanagers,
            providers,
            lambda: sleep(warm_up_pause_s),
            _FetchWait(fetch_wait_s, sleep),
        )
        if job_level is not None:
            sample = replace(sample, custom_job_metrics=await _settled(job_level, target))
        return _with_heap_usage(sample)
    except _NotRunning as err:
        return Unavailable(target, Reason.NOT_RUNNING, str(err))
    except MissingMetrics as err:
        log.info("metrics_partial", job=target.job.key, detail=str(err))
        return Unavailable(target, Reason.PARTIAL_METRICS, str(err))
    except FlinkUnreachable as err:
        return Unavailable(target, Reason.CLUSTER_UNREACHABLE, str(err))
    except FlinkError as err:
        log.warning("metrics_failed", job=target.job.key, error=str(err))
        return Unavailable(target, Reason.PARTIAL_METRICS, str(err))
    except Exception as err:  # a bug must not stop the other jobs' ticks
        log.exception("collect_failed", job=target.job.key)
        return Unavailable(target, Reason.AUTOSCALER_ERROR, f"{type(err).__name__}: {err}")
    finally:
        if job_level is not None and not job_level.done():
            job_level.cancel()  # the job is skipped: nobody needs its custom metrics


def _with_heap_usage(sample: JobSample) -> JobSample:
    """Windows the heap usage while the memory gate can fire (threshold < 1): it reads the average."""
    if sample.target.options.memory_heap_usage_threshold >= 1:
        return sample
    ratio = sample.taskmanagers.heap_usage_ratio
    return replace(sample, custom_job_metrics={**sample.custom_job_metrics, HEAP_USAGE_RATIO: ratio})


async def _settled(job_level: Awaitable[dict[str, float]], target: JobTarget) -> dict[str, float]:
    """The job-level custom metrics, or none if reading them failed in a way nobody caught (a bug)."""
    try:
        return await job_level
    except Exception:
        log.exception("custom_job_metrics_failed", job=target.job.key)
        return {}


async def _collect(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    taskmanagers: TaskManagerSample,
    providers: Sequence[ConfiguredProvider],
    pause: Callable[[], Awaitable[object]],
    wait: _FetchWait,
) -> JobSample:
    """One attempt; on a job's first collection a second one after the pause if metrics were missing.

    The whole collection is repeated, ``/jobs/:id`` included: its IO counters come from the same lazy
    metric store, so they are as stale as the empty answer was.
    """
    job = target.job
    try:
        return await _collect_once(client, target, now_ms, cache, taskmanagers, providers, wait)
    except MissingMetrics as err:
        if cache.is_warm(job.key, job.job_id):
            raise
        # The lazy fetcher answered from an empty or older fetch; our queries triggered a new one.
        log.info("metrics_warm_up", job=job.key, detail=str(err))
    await pause()
    return await _collect_once(client, target, now_ms, cache, taskmanagers, providers, wait)


async def _collect_once(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    taskmanagers: TaskManagerSample,
    providers: Sequence[ConfiguredProvider],
    wait: _FetchWait,
) -> JobSample:
    job = target.job
    details = await _job_details(client, job.job_id)
    _require_running(details)
    topology = details.topology()
    live = [v.id for v in topology if v.status != FINISHED]
    custom = declared_vertex_names(providers, topology) if providers else {}
    names = await _vertex_names(client, job.job_id, job.key, topology, live, cache, custom)
    (read, missing), custom_values = await asyncio.gather(
        _read_vertices(client, job.job_id, topology, names, live),
        _read_custom_vertices(client, job.job_id, names, custom, live),
    )
    _raise_missing(missing, live, cache, job.key)
    fetched = await _after_the_fetch(client, details, wait)
    if fetched is not None:  # read the vertices again, as of the fetch /jobs/:id now shows
        if fetched.topology() != topology:
            raise MissingMetrics(f"job {details.name} ({details.jid}) changed while its metrics were read")
        read, missing = await _read_vertices(client, job.job_id, topology, names, live)
        _raise_missing(missing, live, cache, job.key)
        details = fetched
    cache.mark_warm(job.key, job.job_id)
    # A finished vertex has no running subtasks to report; like the reference, it counts as idle.
    vertices = {v.id: _finished_sample(details, v.id) for v in topology if v.status == FINISHED}
    for vid, (query, answer) in read.items():
        vertices[vid] = query.sample(answer, details, target)
    partitions = {
        vid: n for vid in live if topology.is_source(vid) and (n := source_partitions(names[vid])) > 0
    }
    return JobSample(
        target=target,
        ts_ms=now_ms,
        running_since_ms=details.running_since_ms,
        topology=topology,
        vertices={vid: vertices[vid] for vid in topology.vertices},
        taskmanagers=taskmanagers,
        num_source_partitions=partitions,
        custom_vertex_metrics=custom_values,
    )


_Read = tuple["_VertexQuery", Mapping[str, AggregatedMetric]]


async def _read_vertices(
    client: FlinkClient,
    job_id: str,
    topology: JobTopology,
    names: Mapping[str, Sequence[str]],
    vertex_ids: Sequence[str],
) -> tuple[dict[str, _Read], dict[str, MissingMetrics]]:
    """Query every vertex at once: the complete answers, and why the others are incomplete.

    Any other failure (HTTP, unreachable) is raised once every query has finished.
    """
    results = await asyncio.gather(
        *(_read_vertex(client, job_id, topology, vid, names[vid]) for vid in vertex_ids),
        return_exceptions=True,
    )
    read: dict[str, _Read] = {}
    missing: dict[str, MissingMetrics] = {}
    for vid, result in zip(vertex_ids, results, strict=True):
        if isinstance(result, MissingMetrics):
            missing[vid] = result
        elif isinstance(result, BaseException):
            raise result
        else:
            read[vid] = result
    return read, missing


async def _read_vertex(
    client: FlinkClient, job_id: str, topology: JobTopology, vid: str, listed: Sequence[str]
) -> _Read:
    query = _VertexQuery.plan(topology, vid, listed)
    answer = await client.vertex_metrics(job_id, vid, query.names, VERTEX_AGGREGATES)
    query.check_answer(answer)
    return query, answer


def _raise_missing(
    missing: Mapping[str, MissingMetrics], live: Sequence[str], cache: MetricNameCache, job_key: str
) -> None:
    if missing:
        cache.drop_names(job_key)  # a listing or an answer without the names: re-list next time
        raise next(missing[vid] for vid in live if vid in missing)


async def _after_the_fetch(client: FlinkClient, details: JobDetails, wait: _FetchWait) -> JobDetails | None:
    """``/jobs/:id`` once the metric fetch this tick started has landed, or None if none landed.

    The tick's first metrics request starts a fetch and is answered from the previous one; the new
    fetch lands a moment later (within a second on a real cluster), sometimes between ``/jobs/:id``
    (whose counters give the record and busy rates) and the vertex answers (``pendingRecords``),
    sometimes after both. Either way a sample is mixed or a tick old, and a 30 s window's source rate
    was off by up to 25 %. So ``/jobs/:id`` is read again, every ``FETCH_POLL_S`` for up to
    ``wait.seconds``, until its counters move; then the caller reads the vertices once more, after the
    fetch. Fetches are at least ``metrics.fetcher.update-interval`` apart, so no other one lands in
    between. Counters that never move (an idle job, or a tick that started no fetch) keep the first
    reading.
    """
    waited = 0.0
    after = await _job_details(client, details.jid)
    while _counters(after) == _counters(details):
        if waited >= wait.seconds:
            return None
        await wait.sleep(FETCH_POLL_S)
        waited += FETCH_POLL_S
        after = await _job_details(client, details.jid)
    _require_running(after)
    return after


@dataclass(frozen=True, slots=True)
class _FetchWait:
    seconds: float
    sleep: Sleep


def _counters(details: JobDetails) -> list[dict[str, Any]]:
    return [v.metrics for v in details.vertices]


async def _job_details(client: FlinkClient, job_id: str) -> JobDetails:
    try:
        return await client.job_details(job_id)
    except FlinkHTTPError as err:
        if err.status == 404:
            raise _NotRunning(f"job {job_id} is gone: {err}") from err
        raise


def _require_running(details: JobDetails) -> None:
    if details.state != "RUNNING":
        raise _NotRunning(f"job {details.name} ({details.jid}) is {details.state}")
    if not details.all_tasks_running:
        pending = ", ".join(
            f"{v.name} ({v.status})" for v in details.vertices if v.status not in ("RUNNING", FINISHED)
        )
        raise _NotRunning(f"job {details.name} ({details.jid}) is RUNNING but not all tasks are: {pending}")


def _finished_sample(details: JobDetails, vid: str) -> VertexSample:
    io = details.vertex_io(vid)
    return VertexSample(
        busy_time_ms_per_s=0.0,
        backpressured_ms_per_s=0.0,
        num_records_in=io.read_records,
        num_records_out=io.write_records,
        accumulated_busy_time_ms=io.accumulated_busy_time_ms,
        num_records_in_per_s=0.0,
        pending_records=0.0 if details.topology().is_source(vid) else NAN,
    )


async def _vertex_names(
    client: FlinkClient,
    job_id: str,
    job_key: str,
    topology: JobTopology,
    live: Sequence[str],
    cache: MetricNameCache,
    custom: Mapping[VertexId, Sequence[str]] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Listed names per live vertex: cached, except sources (``pendingRecords`` appears lazily) and
    vertices whose cached listing lacks a declared custom name (user metrics appear lazily too)."""
    cached = cache.vertex_names(job_key, frozenset(topology.vertices))
    custom = custom or {}
    to_list = [
        vid
        for vid in live
        if topology.is_source(vid) or vid not in cached or _lacks(cached[vid], custom.get(vid, ()))
    ]
    listed = await _gather({vid: client.vertex_metric_names(job_id, vid) for vid in to_list})
    names = {**cached, **{vid: tuple(n) for vid, n in listed.items()}}
    for vid in to_list:
        # Only a listing with the required names is worth keeping (the first listing can be empty).
        if not topology.is_source(vid) and matching(FlinkMetric.BUSY_TIME_PER_SEC, names[vid]):
            cache.store(job_key, vid, names[vid])
    return names


async def _gather(calls: Mapping[str, Awaitable[_T]]) -> dict[str, _T]:
    """Run all calls; re-raise the first failure only after every call has finished."""
    results = await asyncio.gather(*calls.values(), return_exceptions=True)
    out: dict[str, _T] = {}
    for key, result in zip(calls, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        out[key] = result
    return out


def _lacks(listed: Sequence[str], declared: Sequence[str]) -> bool:
    """Whether some declared custom name is not in the listing (so the listing may be stale)."""
    present = set(listed)
    return any(MetricRef.parse(d).flink_name not in present for d in declared)


# --------------------------------------------------------------------------------------------- custom metrics
async def _read_custom_vertices(
    client: FlinkClient,
    job_id: str,
    names: Mapping[str, Sequence[str]],
    custom: Mapping[VertexId, Sequence[str]],
    live: Sequence[str],
) -> dict[VertexId, dict[str, float]]:
    """Each vertex's declared names in their own request; finished or unreadable ones are NaN."""
    running = set(live)
    results = await asyncio.gather(
        *(
            _read_custom_vertex(client, job_id, vid, names.get(vid, ()), declared)
            if vid in running
            else _nan_values(declared)
            for vid, declared in custom.items()
        )
    )
    return dict(zip(custom, results, strict=True))


async def _nan_values(declared: Sequence[str]) -> dict[str, float]:
    return dict.fromkeys(declared, NAN)


async def _read_custom_vertex(
    client: FlinkClient, job_id: str, vid: str, listed: Sequence[str], declared: Sequence[str]
) -> dict[str, float]:
    refs = [MetricRef.parse(d) for d in declared]
    try:
        answer = await client.vertex_metrics(job_id, vid, _listed_names(refs, listed), AGGREGATES)
    except Exception as err:  # custom metrics never cost the job its sample
        log.warning("custom_vertex_metrics_failed", vertex_id=vid, error=str(err))
        answer = {}
    return _pick(refs, answer)


async def _custom_job_metrics(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    providers: Sequence[ConfiguredProvider],
    budget_s: float,
) -> dict[str, float]:
    """TaskManager and external metrics of the job's providers, all at once; never raises.

    A name both read from Flink and reported by a provider keeps the first measured value (Flink first,
    then the providers in configured order).
    """
    job = target.job
    calls = [_custom_taskmanager_metrics(client, cache, declared_taskmanager_names(providers))]
    for p in providers:
        context = ExternalMetricsContext(job, target.options, p.config, now_ms)
        calls.append(external_metrics(p, context, budget_s))
    merged: dict[str, float] = {}
    for values in await asyncio.gather(*calls):
        for name, value in values.items():
            if math.isnan(merged.get(name, NAN)):
                merged[name] = value
    return merged


async def _custom_taskmanager_metrics(
    client: FlinkClient, cache: MetricNameCache, declared: Sequence[str]
) -> dict[str, float]:
    """Declared TaskManager names, aggregated over TaskManagers; only listed names are queried.

    The listing is cached per cluster and refreshed while a declared name is missing from it.
    """
    if not declared:
        return {}
    refs = [MetricRef.parse(d) for d in declared]
    try:
        listed = cache.taskmanager_listing(client.cluster)
        if listed is None or any(r.flink_name not in listed for r in refs):
            listed = frozenset(await client.taskmanager_metric_names())
            cache.store_taskmanager_listing(client.cluster, listed)
        answer = await client.taskmanager_metrics(_listed_names(refs, listed), AGGREGATES)
    except Exception as err:
        log.warning("custom_taskmanager_metrics_failed", cluster=client.cluster, error=str(err))
        answer = {}
    return _pick(refs, answer)


def _listed_names(refs: Sequence[MetricRef], listed: Iterable[str]) -> list[str]:
    present = set(listed)
    return list(dict.fromkeys(r.flink_name for r in refs if r.flink_name in present))


def _pick(refs: Sequence[MetricRef], answer: Mapping[str, AggregatedMetric]) -> dict[str, float]:
    """Each declared name's aggregate from the answer; NaN when Flink did not answer it."""
    return {
        r.declared: float(getattr(answer[r.flink_name], r.aggregate)) if r.flink_name in answer else NAN
        for r in refs
    }


@dataclass(frozen=True, slots=True)
class _VertexQuery:
    """Which listed names to ask for one vertex, and how to read the answer."""

    vertex_id: str
    vertex_name: str
    is_source: bool
    busy: str
    backpressure: str | None
    accumulated_busy: str | None  # accumulateBusyTimeMs when listed
    in_per_s: tuple[str, ...]  # sources: Source__*.numRecordsInPerSecond; others: numRecordsInPerSecond
    records_in: tuple[str, ...]  # sources: Source__*.numRecordsIn
    records_out: tuple[str, ...]  # sources: Source__*.numRecordsOut
    out_per_s: tuple[str, ...]  # sources: Source__*.numRecordsOutPerSecond
    pending: tuple[str, ...]  # sources: every *.pendingRecords

    @classmethod
    def plan(cls, topology: JobTopology, vid: str, listed: Sequence[str]) -> _VertexQuery:
        vertex = topology.vertices[vid]
        source = topology.is_source(vid)
        busy = matching(FlinkMetric.BUSY_TIME_PER_SEC, listed)
        backpressure = matching(FlinkMetric.BACKPRESSURE_TIME_PER_SEC, listed)
        if not busy:
            raise MissingMetrics(_missing(vertex.name, vid, "busyTimeMsPerSecond"))
        if source and not backpressure:
            raise MissingMetrics(_missing(vertex.name, vid, "backPressuredTimeMsPerSecond"))
        if source:
            in_per_s = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN_PER_SEC, listed)
            records_in = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_IN, listed)
            records_out = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_OUT, listed)
            out_per_s = matching(FlinkMetric.SOURCE_TASK_NUM_RECORDS_OUT_PER_SEC, listed)
            pending = matching(FlinkMetric.PENDING_RECORDS, listed)
        else:
            in_per_s = matching(FlinkMetric.NUM_RECORDS_IN_PER_SEC, listed)
            records_in = records_out = out_per_s = pending = []
        return cls(
            vertex_id=vid,
            vertex_name=vertex.name,
            is_source=source,
            busy=busy[0],
            backpressure=backpressure[0] if backpressure else None,
            accumulated_busy=next(iter(matching(FlinkMetric.ACCUMULATED_BUSY_TIME, listed)), None),
            in_per_s=tuple(in_per_s),
            records_in=tuple(records_in),
            records_out=tuple(records_out),
            out_per_s=tuple(out_per_s),
            pending=tuple(pending),
        )

    @property
    def names(self) -> tuple[str, ...]:
        optional = tuple(n for n in (self.backpressure, self.accumulated_busy) if n)
        every = (
            self.busy,
            *optional,
            *self.in_per_s,
            *self.records_in,
            *self.records_out,
            *self.out_per_s,
            *self.pending,
        )
        return tuple(dict.fromkeys(every))

    def check_answer(self, answer: Mapping[str, AggregatedMetric]) -> None:
        """The lazy metric fetcher can answer ``[]`` (or miss names) right after a (re)start."""
        if self.busy not in answer:
            raise MissingMetrics(_missing(self.vertex_name, self.vertex_id, self.busy))
        if self.is_source and self.backpressure not in answer:
            raise MissingMetrics(_missing(self.vertex_name, self.vertex_id, "backPressuredTimeMsPerSecond"))

    def sample(
        self, answer: Mapping[str, AggregatedMetric], details: JobDetails, target: JobTarget
    ) -> VertexSample:
        io = details.vertex_io(self.vertex_id)
        aggregator = target.options.busy_time_aggregator
        busy = _by_aggregator(answer[self.busy], aggregator)
        backpressure = answer[self.backpressure].avg if self.backpressure in answer else NAN
        acc_busy = (
            _by_aggregator(answer[self.accumulated_busy], aggregator)
            if self.accumulated_busy in answer
            else NAN
        )
        in_per_s = _sum(answer, self.in_per_s)
        if not self.is_source:
            return VertexSample(
                busy_time_ms_per_s=busy,
                backpressured_ms_per_s=backpressure,
                num_records_in=io.read_records,
                num_records_out=io.write_records,
                accumulated_busy_time_ms=io.accumulated_busy_time_ms,
                num_records_in_per_s=in_per_s,
                accumulated_busy_time_agg_ms=acc_busy,
            )
        in_per_s = _unless_uncounted(in_per_s, _sum(answer, self.out_per_s))
        lag = self._lag(answer)
        return VertexSample(
            busy_time_ms_per_s=busy,
            backpressured_ms_per_s=backpressure,
            num_records_in=self._source_records_in(io.read_records, answer),
            num_records_out=io.write_records,
            accumulated_busy_time_ms=io.accumulated_busy_time_ms,
            num_records_in_per_s=in_per_s,
            pending_records=lag,
            observed_tpr=observed_true_processing_rate(
                in_per_s, lag, backpressure, target.options.observed_tpr_lag_threshold.total_seconds()
            ),
            accumulated_busy_time_agg_ms=acc_busy,
        )

    def _source_records_in(self, read_records: float, answer: Mapping[str, AggregatedMetric]) -> float:
        """A source reads from outside Flink, so ``read-records`` is 0; its operator counter tells."""
        if read_records != 0:
            return read_records
        records_out = _sum(answer, self.records_out) if self.records_out else NAN
        if self.records_in:
            return _unless_uncounted(_sum(answer, self.records_in), records_out)
        return records_out

    def _lag(self, answer: Mapping[str, AggregatedMetric]) -> float:
        if not self.pending:
            # As the reference does: a source without the gauge is taken as having no backlog.
            log.debug("source_without_pending_records", vertex=self.vertex_name, vertex_id=self.vertex_id)
            return 0.0
        return _sum(answer, self.pending)


def _unless_uncounted(records_in: float, records_out: float) -> float:
    """A source reader that never counts ``numRecordsIn`` (any not built on ``SourceReaderBase``)
    reports 0 while it emits: then what it emitted is what it read. The reference would see an idle
    source and never scale it."""
    return records_out if records_in == 0 and records_out > 0 else records_in


def _by_aggregator(metric: AggregatedMetric, aggregator: BusyTimeAggregator) -> float:
    if aggregator is BusyTimeAggregator.AVG:
        return metric.avg
    if aggregator is BusyTimeAggregator.MIN:
        return metric.min
    return metric.max


def _sum(answer: Mapping[str, AggregatedMetric], names: Iterable[str]) -> float:
    """Sum of the ``sum`` aggregates; NaN if nothing to sum or any part is NaN or missing."""
    parts = [answer[n].sum if n in answer else NAN for n in names]
    return math.fsum(parts) if parts and not any(math.isnan(p) for p in parts) else NAN


def _missing(vertex_name: str, vid: str, metric: str) -> str:
    return f"vertex {vertex_name} ({vid}): no {metric} yet"
