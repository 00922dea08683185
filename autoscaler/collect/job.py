"""The collect stage for one job: ``collect()``, which puts the other modules of the package together.

It reads ``/jobs/:id``, lists (when the cached names will not do) and reads every live vertex (standard
and custom metrics at once), once, and the subtasks of a vertex that can have a slow one
(:mod:`autoscaler.collect.skew`): the cluster already waited for the tick's metric fetch
(:func:`~autoscaler.collect.fetch.await_fetch`). A fetch that landed between the job's answers is told
by :func:`~autoscaler.collect.fetch.fetches_differ`, and the job is read once more. Then the cluster's
fetch book says whether the reading is new or the last fetch again (``freshness``).

Flink's metric fetcher is lazy, so the very first queries of a job can come back ``[]``: on a job's
first collection, when a vertex's answer is empty or lacks a required name, the job is therefore
collected once more after a short pause (the warm-up) before the tick is given up as
``PARTIAL_METRICS``.

Neither reads a failed request again: a request that timed out (or was refused as too large, or not
JSON) ends the job's collection for the tick, because its one deadline (:meth:`FlinkClient._send`) is
all a request of the tick gets. And a reading that took longer than that deadline is not read again
because a fetch landed among its answers: the next reading would take as long and most likely mix
again, and the tick, which waits for its slowest job, cannot afford the second one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import structlog

from autoscaler.collect.custom import custom_job_metrics, read_custom_vertices, settled
from autoscaler.collect.fetch import (
    FETCH_POLL_S,
    NotRunning,
    Sleep,
    fetches_differ,
    read_job_details,
    require_running,
)
from autoscaler.collect.freshness import FetchCheck, StaleMetrics
from autoscaler.collect.names import MetricNameCache, listed_vertex_names
from autoscaler.collect.sanity import without_impossible
from autoscaler.collect.skew import read_skew
from autoscaler.collect.vertices import FINISHED, MissingMetrics, VertexRead, finished_sample, read_vertices
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError, FlinkUnreachable
from autoscaler.flink.metric_names import source_partitions
from autoscaler.flink.models import JobDetails
from autoscaler.model import HEAP_USAGE_RATIO, JobSample, JobTarget, TaskManagerSample, Unavailable
from autoscaler.plugins.metrics import EXTERNAL_METRICS_BUDGET_S, ConfiguredProvider, declared_vertex_names
from autoscaler.reasons import Reason
from autoscaler.skew import VertexSkew

__all__ = ["WARM_UP_PAUSE_S", "JobSlots", "collect"]

log = structlog.get_logger(__name__)

WARM_UP_PAUSE_S = 1.0  # the lab's fetch round trip: a query triggers a fetch that lands within ~1 s


class JobSlots:
    """At most ``n`` jobs of a cluster collected at once (``async with slots``), so that each job's
    reads come close together. Gathered all at once, every job's ``/jobs/:id`` queued before any vertex
    query, a job's reads spanned the whole tick, Flink's next fetch landed among them, and the job was
    read again: half the jobs of a 1,000-job tick. A job that pauses (``sleep``, given to
    :func:`collect`) gives its place up meanwhile, so warm-up pauses still overlap."""

    def __init__(self, n: int) -> None:
        self._free = asyncio.Semaphore(n)

    async def __aenter__(self) -> None:
        await self._free.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._free.release()

    async def sleep(self, seconds: float) -> None:
        self._free.release()
        try:
            await asyncio.sleep(seconds)
        finally:
            await self._free.acquire()


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
    fetches: FetchCheck | None = None,
    sleep: Sleep = asyncio.sleep,
) -> JobSample | Unavailable:
    """Never raises: every failure becomes an Unavailable with a reason and a readable detail.

    ``fetches`` (the cluster's :class:`~autoscaler.collect.freshness.FetchBook` and timing) tells a new
    reading from the last fetch served again: a stale sample keeps the time it was first read at and
    says for how many ticks (``JobSample.stale_ticks``); one served for too long is ``StaleMetrics``.
    Its ``catch_up`` book leaves out a source's observed true processing rate until the source has been
    catching up for ``observed-true-processing-rate.settle-time``. Without it every reading counts as
    new and every catching-up sample is measured.

    ``sleep(warm_up_pause_s)`` is awaited at most once, on a job's first collection, before collecting
    it once more because an answer was incomplete; ``sleep(FETCH_POLL_S)`` before reading a job again
    whose answers came from two fetches (tests pass a recording sleep).

    ``providers`` are the job's metric providers (:func:`autoscaler.plugins.metrics.metric_providers`).
    Their TaskManager and external metrics are read while the standard ones are, their vertex metrics
    beside each vertex's standard query; all end up in ``JobSample.custom_*_metrics``.
    """
    job_level = (
        asyncio.ensure_future(custom_job_metrics(client, target, now_ms, cache, providers, external_budget_s))
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
            lambda: sleep(FETCH_POLL_S),
            fetches,
        )
        if job_level is not None:
            sample = replace(sample, custom_job_metrics=await settled(job_level, target))
        return _with_heap_usage(sample)
    except NotRunning as err:
        return Unavailable(target, Reason.NOT_RUNNING, str(err))
    except StaleMetrics as err:
        log.warning("metrics_stale", job=target.job.key, detail=str(err))
        return Unavailable(target, Reason.STALE_METRICS, str(err))
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


async def _collect(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    taskmanagers: TaskManagerSample,
    providers: Sequence[ConfiguredProvider],
    pause: Callable[[], Awaitable[object]],
    short_pause: Callable[[], Awaitable[object]],
    fetches: FetchCheck | None,
) -> JobSample:
    """One reading; on a job's first collection a second one after the pause if metrics were missing.

    The whole collection is repeated, ``/jobs/:id`` included: its IO counters come from the same lazy
    metric store, so they are as stale as the empty answer was.
    """
    job = target.job
    try:
        reading = await _read_mixed_once(client, target, now_ms, cache, providers, short_pause)
    except MissingMetrics as err:
        if cache.is_warm(job.key, job.job_id):
            raise
        # The lazy fetcher answered from an empty or older fetch; our queries triggered a new one.
        log.info("metrics_warm_up", job=job.key, detail=str(err))
        await pause()
        reading = await _read_mixed_once(client, target, now_ms, cache, providers, short_pause)
    cache.mark_warm(job.key, job.job_id)
    skew = await read_skew(client, job.job_id, reading.details.topology(), reading.read, target.options)
    return _sample(reading, target, now_ms, taskmanagers, fetches, skew)


@dataclass(frozen=True, slots=True)
class _Reading:
    """One job's answers of one tick: ``/jobs/:id`` and each live vertex's query and answer."""

    details: JobDetails
    names: Mapping[str, Sequence[str]]
    read: Mapping[str, VertexRead]
    custom: Mapping[str, Mapping[str, float]]

    @property
    def mixed(self) -> bool:
        """Whether a fetch landed between ``/jobs/:id`` and the vertex answers (see ``fetches_differ``)."""
        busy = {
            vid: answer[query.accumulated_busy].sum
            for vid, (query, answer) in self.read.items()
            if query.accumulated_busy is not None and query.accumulated_busy in answer
        }
        return fetches_differ(self.details, busy)


async def _read_mixed_once(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    providers: Sequence[ConfiguredProvider],
    short_pause: Callable[[], Awaitable[object]],
) -> _Reading:
    """The job's answers, read again once after a short pause if a fetch landed among them.

    A fetch lands within a fraction of a second, so the second reading is whole; if it is still not (the
    two sides of the check never agree on this cluster), it is kept as it is, with a log line. A first
    reading that took longer than one request's deadline (``client.timeout_s``) is kept mixed at once:
    a cluster that slow is not asked twice in one tick (see the module's docstring).
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    reading = await _read(client, target, now_ms, cache, providers)
    if not reading.mixed:
        return reading
    took_s = loop.time() - started
    if took_s > client.timeout_s:
        log.warning("metric_fetch_landed_mid_slow_read", job=target.job.key, took_s=round(took_s, 3))
        return reading
    log.info("metric_fetch_landed_mid_read", job=target.job.key)
    await short_pause()
    reading = await _read(client, target, now_ms, cache, providers)
    if reading.mixed:
        # Right after a (re)start the subtasks register their metrics one by one (seen once per rescale
        # on the lab cluster, never in a steady run): not worth a warning while the job stabilizes.
        since_ms = now_ms - reading.details.running_since_ms
        settling = since_ms < target.options.stabilization_interval.total_seconds() * 1000
        (log.info if settling else log.warning)(
            "metric_fetches_disagree",
            job=target.job.key,
            detail="the busy time in /jobs/:id and in the vertices' answers differed twice in a row; the "
            "second reading is used",
        )
    return reading


async def _read(
    client: FlinkClient,
    target: JobTarget,
    now_ms: int,
    cache: MetricNameCache,
    providers: Sequence[ConfiguredProvider],
) -> _Reading:
    job = target.job
    details = await read_job_details(client, job.job_id)
    require_running(details)
    topology = details.topology()
    live = [v.id for v in topology if v.status != FINISHED]
    custom = declared_vertex_names(providers, topology) if providers else {}
    names = await listed_vertex_names(
        client,
        job.job_id,
        job.key,
        topology,
        live,
        cache,
        custom,
        now_ms=now_ms,
        running_since_ms=details.running_since_ms,
    )
    (read, missing), custom_values = await asyncio.gather(
        read_vertices(client, job.job_id, topology, names, live),
        read_custom_vertices(client, job.job_id, names, custom, live),
    )
    _raise_missing(missing, live, cache, job.key)
    return _Reading(details, names, read, custom_values)


def _sample(
    reading: _Reading,
    target: JobTarget,
    now_ms: int,
    taskmanagers: TaskManagerSample,
    fetches: FetchCheck | None,
    skew: Mapping[str, VertexSkew],
) -> JobSample:
    job, details = target.job, reading.details
    topology = details.topology()
    fresh = fetches.judge(job.key, details, now_ms) if fetches is not None else None
    if fresh is not None and fresh.expired is not None:
        raise StaleMetrics(fresh.expired)
    if fresh is not None and fresh.stale_ticks:
        age_s = (now_ms - fresh.ts_ms) / 1000
        log.info("metrics_stale_sample", job=job.key, age_s=age_s, ticks=fresh.stale_ticks)
    # A finished vertex has no running subtasks to report; like the reference, it counts as idle.
    vertices = {v.id: finished_sample(details, v.id) for v in topology if v.status == FINISHED}
    for vid, (query, answer) in reading.read.items():
        vertices[vid] = query.sample(answer, details, target)
    names = reading.names
    partitions = {
        vid: n for vid in reading.read if topology.is_source(vid) and (n := source_partitions(names[vid])) > 0
    }
    vertices, invalid = without_impossible(vertices, {v.id: v.name for v in topology})
    ts_ms = fresh.ts_ms if fresh is not None else now_ms
    if fetches is not None:
        vertices = fetches.book.catch_up.settle(
            job.key,
            running_since_ms=details.running_since_ms,
            ts_ms=ts_ms,
            vertices=vertices,
            settle_ms=round(target.options.observed_tpr_settle_time.total_seconds() * 1000),
        )
    return JobSample(
        target=target,
        ts_ms=ts_ms,
        running_since_ms=details.running_since_ms,
        topology=topology,
        vertices={vid: vertices[vid] for vid in topology.vertices},
        taskmanagers=taskmanagers,
        num_source_partitions=partitions,
        custom_vertex_metrics=reading.custom,
        stale_ticks=fresh.stale_ticks if fresh is not None else 0,
        restamped_ms=fresh.moved_ms if fresh is not None else 0,
        invalid_values=invalid,
        skew=skew,
    )


def _raise_missing(
    missing: Mapping[str, MissingMetrics], live: Sequence[str], cache: MetricNameCache, job_key: str
) -> None:
    if missing:
        cache.drop_names(job_key)  # a listing or an answer without the names: re-list next time
        raise next(missing[vid] for vid in live if vid in missing)
