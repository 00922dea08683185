"""One tick's metrics for one job: a complete :class:`JobSample`, or an :class:`Unavailable` saying why.

Never partial: scaling on half a picture is worse than skipping a tick. The collect stage is one package
because it is one conversation with Flink's lazy metric store, in modules by what they read:

- ``job``: ``collect()``, one job's sample, including the warm-up retry of a job's first collection;
- ``fetch``: ``/jobs/:id``, the wait (once per cluster) for the metric fetch the tick started to land,
  and telling a job read across a fetch;
- ``catch_up``: since when each source has been catching up, so that its observed true processing rate
  counts only once Flink's 60 s meters hold nothing else;
- ``freshness``: whether a tick read a new fetch or the last one again (stale), and the warning when
  the loop is too fast for the cluster's fetch interval;
- ``names``: the metric-name cache (only listed names are ever queried);
- ``vertices``: one vertex's query, its answer as a ``VertexSample``, the rate arithmetic;
- ``custom``: the custom metrics the job's metric providers declared (NaN when unreadable);
- ``taskmanagers``: the cluster-wide TaskManager sample, and its memory usage over the window.
"""

from __future__ import annotations

from autoscaler.collect.fetch import FetchWait, NotRunning, await_fetch
from autoscaler.collect.freshness import (
    FLINK_DEFAULT_FETCH_INTERVAL_MS,
    FetchBook,
    FetchCheck,
    FetchTiming,
    fetch_interval_warning,
)
from autoscaler.collect.job import WARM_UP_PAUSE_S, JobSlots, collect
from autoscaler.collect.names import MetricNameCache
from autoscaler.collect.taskmanagers import MemoryUsage, collect_taskmanagers
from autoscaler.collect.vertices import VERTEX_AGGREGATES, observed_true_processing_rate

__all__ = [
    "FLINK_DEFAULT_FETCH_INTERVAL_MS",
    "VERTEX_AGGREGATES",
    "WARM_UP_PAUSE_S",
    "FetchBook",
    "FetchCheck",
    "FetchTiming",
    "FetchWait",
    "JobSlots",
    "MemoryUsage",
    "MetricNameCache",
    "NotRunning",
    "await_fetch",
    "collect",
    "collect_taskmanagers",
    "fetch_interval_warning",
    "observed_true_processing_rate",
]
