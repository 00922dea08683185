"""Flink REST access: the client (with ``rest``, its request hook, TLS and error texts, and ``payloads``,
the readers of its answers), its error family, payload models and metric names."""

from __future__ import annotations

from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkBadPayload, FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.flink.metric_names import FlinkMetric, matching, source_partitions
from autoscaler.flink.models import (
    AggregatedMetric,
    ClusterOverview,
    JobDetails,
    JobOverview,
    ParallelismBounds,
    TaskManagerInfo,
    VertexIO,
)

__all__ = [
    "AggregatedMetric",
    "ClusterOverview",
    "FlinkBadPayload",
    "FlinkClient",
    "FlinkError",
    "FlinkHTTPError",
    "FlinkMetric",
    "FlinkUnreachable",
    "JobDetails",
    "JobOverview",
    "ParallelismBounds",
    "TaskManagerInfo",
    "VertexIO",
    "matching",
    "source_partitions",
]
