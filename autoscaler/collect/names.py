"""Which metric names a job's vertices and the cluster's TaskManagers list, remembered between ticks.

Only names that the names endpoint listed are ever queried (Flink answers ``[]`` as soon as one requested
name is unknown), and names are cached per job until its vertex set changes. A source's listing is
renewed now and then (:func:`_relist_source`): its ``pendingRecords`` gauge appears lazily, and its
partitions, counted from the names, may grow. Re-listing every source on every tick cost a request per
source per tick (issue 13: a job's reads are to be ``/jobs/:id`` and one query per vertex). The cache
also remembers which JobID of a job was once collected completely (the warm-up,
:mod:`autoscaler.collect.job`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.metric_names import FlinkMetric, matching
from autoscaler.model import JobTopology, VertexId
from autoscaler.plugins.metrics import MetricRef

__all__ = ["MetricNameCache", "listed_vertex_names"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


@dataclass(slots=True)
class _JobNames:
    vertex_ids: frozenset[str]
    by_vertex: dict[str, tuple[str, ...]] = field(default_factory=dict)
    listed_ms: dict[str, int] = field(default_factory=dict)  # when each vertex's names were listed


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

    def forget(self, job_keys: Iterable[str]) -> None:
        for key in job_keys:
            self._jobs.pop(key, None)
            self._warm.pop(key, None)

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

    def store(self, job_key: str, vertex_id: str, names: Sequence[str], listed_ms: int = 0) -> None:
        entry = self._jobs.get(job_key)
        if entry is not None and vertex_id in entry.vertex_ids:
            entry.by_vertex[vertex_id] = tuple(names)
            entry.listed_ms[vertex_id] = listed_ms

    def listed_ms(self, job_key: str, vertex_id: str) -> int | None:
        """When the vertex's cached names were listed; None if none are cached."""
        entry = self._jobs.get(job_key)
        return entry.listed_ms.get(vertex_id) if entry is not None else None

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


SOURCE_RELIST_MS = 5 * 60_000  # a source's partitions may grow: its names are listed again this often
PENDING_RELIST_MS = 60_000  # a source without pendingRecords in its names is listed again this often ...
PENDING_EARLY_MS = 2 * 60_000  # ... and on every tick this long after its job run started


async def listed_vertex_names(
    client: FlinkClient,
    job_id: str,
    job_key: str,
    topology: JobTopology,
    live: Sequence[str],
    cache: MetricNameCache,
    custom: Mapping[VertexId, Sequence[str]] | None = None,
    *,
    now_ms: int = 0,
    running_since_ms: int = 0,
) -> dict[str, tuple[str, ...]]:
    """Listed names per live vertex: cached, except vertices never listed completely, sources due again
    (:func:`_relist_source`) and vertices whose cached listing lacks a declared custom name (user metrics
    appear lazily too)."""
    cached = cache.vertex_names(job_key, frozenset(topology.vertices))
    custom = custom or {}

    def due(vid: str) -> bool:
        if vid not in cached or _lacks(cached[vid], custom.get(vid, ())):
            return True
        listed_ms = cache.listed_ms(job_key, vid) or 0
        return topology.is_source(vid) and _relist_source(cached[vid], listed_ms, now_ms, running_since_ms)

    to_list = [vid for vid in live if due(vid)]
    listed = await _gather({vid: client.vertex_metric_names(job_id, vid) for vid in to_list})
    names = {**cached, **{vid: tuple(n) for vid, n in listed.items()}}
    for vid in to_list:
        # Only a listing with the required names is worth keeping (the first listing can be empty).
        if matching(FlinkMetric.BUSY_TIME_PER_SEC, names[vid]):
            cache.store(job_key, vid, names[vid], now_ms)
    return names


def _relist_source(names: Sequence[str], listed_ms: int, now_ms: int, running_since_ms: int) -> bool:
    """Whether a source's cached names are due to be listed again.

    Every :data:`SOURCE_RELIST_MS` (new partitions show as new names); while its listing lacks a
    ``pendingRecords`` gauge (a Kafka source registers it only once its readers have fetched), on every
    tick for :data:`PENDING_EARLY_MS` after the job run started and every :data:`PENDING_RELIST_MS`
    after that (a source that never reports a lag costs a listing a minute, not one a tick).
    """
    age_ms = now_ms - listed_ms
    if age_ms >= SOURCE_RELIST_MS:
        return True
    if matching(FlinkMetric.PENDING_RECORDS, names):
        return False
    return now_ms - running_since_ms < PENDING_EARLY_MS or age_ms >= PENDING_RELIST_MS


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
