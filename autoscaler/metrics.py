"""Every Prometheus metric the daemon exports, on an injected registry.

``MetricsReporter`` is fed domain objects (evaluations, decisions, errors) and removes the series of
jobs that disappeared, so dashboards never show a stale vertex.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from autoscaler.model import JobEvaluation, JobRef
from autoscaler.reasons import Reason

__all__ = ["MetricsReporter", "serve_metrics"]

_VERTEX_LABELS = ("cluster", "job", "vertex", "vertex_name")
_JOB_LABELS = ("cluster", "job")

# (metric suffix, help, VertexEvaluation attribute)
_VERTEX_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("parallelism", "Current parallelism of the vertex", "parallelism"),
    ("recommended_parallelism", "Parallelism the autoscaler recommends", "target_parallelism"),
    ("max_parallelism", "Maximum parallelism (key groups) of the vertex", "max_parallelism"),
    ("load", "Busy time ratio of the vertex (0..1)", "load"),
    ("true_processing_rate", "Records/s the vertex could process at full load", "true_processing_rate"),
    ("target_data_rate", "Records/s the vertex must process (input rate + lag growth)", "target_data_rate"),
    (
        "catch_up_data_rate",
        "Extra records/s needed to drain the backlog in catch-up.duration",
        "catch_up_data_rate",
    ),
    ("lag", "Pending records at the source", "lag"),
    ("scale_up_rate_threshold", "Processing rate below which the vertex scales up", "scale_up_threshold"),
    (
        "scale_down_rate_threshold",
        "Processing rate above which the vertex scales down",
        "scale_down_threshold",
    ),
    (
        "expected_processing_rate",
        "Processing rate expected at the recommended parallelism",
        "expected_processing_rate",
    ),
)


class MetricsReporter:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._vertex = {
            attr: Gauge(f"flink_autoscaler_vertex_{name}", text, _VERTEX_LABELS, registry=r)
            for name, text, attr in _VERTEX_GAUGES
        }
        self.scalings = Counter("flink_autoscaler_scalings", "Rescales issued", _JOB_LABELS, registry=r)
        self.balanced = Counter(
            "flink_autoscaler_balanced", "Ticks that ended without a change", _JOB_LABELS, registry=r
        )
        self.decisions = Counter(
            "flink_autoscaler_decisions", "Decision outcomes by reason", (*_JOB_LABELS, "outcome"), registry=r
        )
        self.errors = Counter(
            "flink_autoscaler_errors", "Errors by cluster and reason", ("cluster", "reason"), registry=r
        )
        self.plugin_outcomes = Counter(
            "flink_autoscaler_plugin_outcomes",
            "Executor-plugin outcomes per instance (approved, modified, vetoed, failed)",
            (*_JOB_LABELS, "plugin", "outcome"),
            registry=r,
        )
        self.deferred = Counter(
            "flink_autoscaler_deferred_decisions",
            "Decisions deferred by scaling-interval.min or Flink's cooldown (retried when it ends)",
            _JOB_LABELS,
            registry=r,
        )
        self.forced = Counter(
            "flink_autoscaler_forced_scalings",
            "Changes below the minimum requirement forced by scaling-interval.max",
            _JOB_LABELS,
            registry=r,
        )
        self.ticks = Counter("flink_autoscaler_ticks", "Control-loop ticks run", registry=r)
        self.ticks_skipped = Counter(
            "flink_autoscaler_ticks_skipped", "Ticks skipped because the previous one overran", registry=r
        )
        self.tick_seconds = Histogram(
            "flink_autoscaler_tick_duration_seconds",
            "Duration of a whole tick",
            registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.evaluation_seconds = Histogram(
            "flink_autoscaler_evaluation_duration_seconds",
            "Duration of the batched Spark evaluation",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.jobs = Gauge(
            "flink_autoscaler_jobs", "Jobs autoscaled in the last tick", ("cluster",), registry=r
        )
        self._series: dict[str, set[tuple[str, ...]]] = {}

    def report_evaluation(self, evaluation: JobEvaluation) -> None:
        job = evaluation.job
        names = {v.id: v.name for v in evaluation.sample.topology}
        seen: set[tuple[str, ...]] = set()
        for v in evaluation.vertices.values():
            labels = (job.cluster, job.name, v.vertex, names.get(v.vertex, v.vertex))
            seen.add(labels)
            for attr, gauge in self._vertex.items():
                value = getattr(v, attr)
                gauge.labels(*labels).set(float(value) if value is not None else math.nan)
        for stale in self._series.get(job.key, set()) - seen:
            self._remove_vertex_series(stale)
        self._series[job.key] = seen

    def report_outcome(self, job: JobRef, outcome: Reason, scaled: bool) -> None:
        self.decisions.labels(job.cluster, job.name, str(outcome)).inc()
        if scaled:
            self.scalings.labels(job.cluster, job.name).inc()
        else:
            self.balanced.labels(job.cluster, job.name).inc()

    def report_error(self, cluster: str, reason: Reason) -> None:
        self.errors.labels(cluster, str(reason)).inc()

    def forget_jobs(self, job_keys: Iterable[str]) -> None:
        """Remove every vertex series of jobs that are gone."""
        for key in job_keys:
            for labels in self._series.pop(key, set()):
                self._remove_vertex_series(labels)

    def known_jobs(self) -> set[str]:
        return set(self._series)

    def _remove_vertex_series(self, labels: tuple[str, ...]) -> None:
        for gauge in self._vertex.values():
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)


def serve_metrics(address: str, registry: CollectorRegistry) -> Any:
    """Start the /metrics HTTP endpoint on ``host:port``; returns the server so it can be shut down."""
    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=registry)
    return server
