"""The physics of a simulated Flink session cluster, driven only by an injected clock.

No threads and no wall time: every public read first integrates the cluster up to ``clock.now_ms()`` in
steps of ``step_s``, so a test moves a ``FakeClock`` and reads. One job is a fluid model: the sources
emit as much of the backlog as the slowest vertex allows, each vertex's utilization follows from its share
of that flow, and vertices upstream of a saturated one are back-pressured.

Metrics are produced the way Flink's task metrics behave, because the autoscaler must cope with them:
``*PerSecond`` meters are ``MeterView``s (13 samples, one every 5 s, always divided by 60 s, hence the
one-minute ramp after a (re)start); idle and back-pressured time are ``TimerGauge``s (the average of the
intervals seen so far, 0 before the first), and busy time is ``1000 - idle - backPressured``, so every
vertex reads 1000 for the first few seconds after a start, like the real cluster.

The package: ``store`` holds the constants and the values the engine hands out (the metric store,
checkpoint counts, errors); ``job`` the flow model and state machine of one job (``SimJob``);
``reporting`` the metrics its TaskManagers would report; ``cluster`` the clock, the adaptive
scheduler and the metric fetcher (``SimCluster``).
"""

from __future__ import annotations

from autoscaler.simulator.engine.cluster import SimCluster
from autoscaler.simulator.engine.job import SimJob
from autoscaler.simulator.engine.reporting import BYTES_PER_RECORD, operator_metric_prefix
from autoscaler.simulator.engine.store import (
    CHECKPOINT_DURATION_MS,
    CHECKPOINT_INTERVAL_MS,
    JOB_STATES,
    TICK_MS,
    CheckpointSummary,
    JobMetrics,
    MetricStore,
    MetricValue,
    ResourceRequirementsError,
    UnknownJobError,
)

__all__ = [
    "BYTES_PER_RECORD",
    "CHECKPOINT_DURATION_MS",
    "CHECKPOINT_INTERVAL_MS",
    "JOB_STATES",
    "TICK_MS",
    "CheckpointSummary",
    "JobMetrics",
    "MetricStore",
    "MetricValue",
    "ResourceRequirementsError",
    "SimCluster",
    "SimJob",
    "UnknownJobError",
    "operator_metric_prefix",
]
