"""Custom metrics declared by the job's metric providers (:mod:`autoscaler.plugins.metrics`).

They are read in the same tick as the standard metrics and never decide whether a job is collected:
per-vertex names go in their own request per vertex (a name that vanished would otherwise empty the
standard answer), TaskManager names in one request per job, external ones through the providers under a
time budget. Anything unreadable is NaN.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Iterable, Mapping, Sequence

import structlog

from autoscaler.collect.names import MetricNameCache
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.models import AggregatedMetric
from autoscaler.model import NAN, JobTarget, VertexId
from autoscaler.plugins.metrics import (
    AGGREGATES,
    ConfiguredProvider,
    ExternalMetricsContext,
    MetricRef,
    declared_taskmanager_names,
    external_metrics,
)

__all__ = ["custom_job_metrics", "read_custom_vertices", "settled"]

log = structlog.get_logger(__name__)


async def settled(job_level: Awaitable[dict[str, float]], target: JobTarget) -> dict[str, float]:
    """The job-level custom metrics, or none if reading them failed in a way nobody caught (a bug)."""
    try:
        return await job_level
    except Exception:
        log.exception("custom_job_metrics_failed", job=target.job.key)
        return {}


async def read_custom_vertices(
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


async def custom_job_metrics(
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
