"""The cluster-wide TaskManager sample a tick shares among the cluster's jobs.

Collected once per cluster and tick; all NaN when it cannot be read, since TaskManager metrics only
refine decisions (memory pressure, GC time, CPU load) and never decide whether a job is collected.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace

import structlog

from autoscaler.collect.names import MetricNameCache
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkError
from autoscaler.flink.metric_names import FlinkMetric, matching
from autoscaler.flink.models import AggregatedMetric
from autoscaler.model import NAN, TaskManagerSample

__all__ = ["TM_AGGREGATES", "MemoryUsage", "collect_taskmanagers"]

log = structlog.get_logger(__name__)

TM_AGGREGATES: tuple[str, ...] = ("max", "avg")
_TM_METRICS = (
    FlinkMetric.HEAP_MEMORY_USED,
    FlinkMetric.HEAP_MEMORY_MAX,
    FlinkMetric.CPU_LOAD,
    FlinkMetric.MANAGED_MEMORY_USED,
    FlinkMetric.METASPACE_MEMORY_USED,
)


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
        managed_used=_agg(values, FlinkMetric.MANAGED_MEMORY_USED, "max"),
        metaspace_used=_agg(values, FlinkMetric.METASPACE_MEMORY_USED, "max"),
    )


def _agg(values: Mapping[str, AggregatedMetric], metric: FlinkMetric, agg: str) -> float:
    found = [getattr(m, agg) for name, m in values.items() if metric.matches(name)]
    return float(found[0]) if found else NAN


class MemoryUsage:
    """A cluster's TaskManager memory usage over its metric window: heap, managed and metaspace used
    (each the max over TaskManagers), averaged as the reference's memory tuning reads them.

    Kept here, per cluster, not in the Spark window: the TaskManagers are the cluster's, the same for all
    its jobs, and three numbers a tick per cluster need no batch.
    """

    def __init__(self) -> None:
        self._points: deque[tuple[int, float, float, float]] = deque()

    def observe(self, sample: TaskManagerSample, now_ms: int, window_ms: int) -> TaskManagerSample:
        """``sample`` with the averages over the last ``window_ms``, this tick's values included."""
        self._points.append((now_ms, sample.heap_used, sample.managed_used, sample.metaspace_used))
        while self._points and self._points[0][0] < now_ms - window_ms:
            self._points.popleft()
        heap, managed, metaspace = (_mean(p[i] for p in self._points) for i in (1, 2, 3))
        return replace(sample, heap_used_avg=heap, managed_used_avg=managed, metaspace_used_avg=metaspace)


def _mean(values: Iterable[float]) -> float:
    """The mean of the finite values, NaN when there are none."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else NAN
