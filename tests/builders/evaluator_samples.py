"""Tiny jobs for comparing evaluators: four fixed topologies, samples of them, and noisy vertex metrics.

The Spark evaluator and the plain-Python oracle (``autoscaler.evaluate.oracle.evaluator``) are fed the
same samples from here, in the unit tests, the custom-metric tests and the Spark Connect tests.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from datetime import timedelta

from autoscaler.model import (
    NAN,
    Edge,
    JobRef,
    JobSample,
    JobTarget,
    JobTopology,
    VertexInfo,
    VertexSample,
)
from autoscaler.settings import AutoscalerOptions

INF = math.inf
S = 1000
T0 = 1_800_000_000_000
FAST = AutoscalerOptions(metrics_window=timedelta(seconds=30), stabilization_interval=timedelta(0))


def topology(parallelism: Mapping[str, int], edges: Sequence[tuple[str, str, str]] = ()) -> JobTopology:
    return JobTopology.build(
        [VertexInfo(v, v, p, 128) for v, p in parallelism.items()], [Edge(a, b, s) for a, b, s in edges]
    )


TOPOLOGIES = {
    "a": topology({"src": 2, "work": 4}, [("src", "work", "HASH")]),
    "b": topology({"src": 1, "mid": 2, "sink": 2}, [("src", "mid", "REBALANCE"), ("mid", "sink", "FORWARD")]),
    "c": topology({"src": 3}),
    "d": topology({"src": 1}),
}


def job_sample(
    name: str,
    ts_ms: int,
    vertices: Mapping[str, VertexSample],
    *,
    running_since_ms: int = T0,
    options: AutoscalerOptions = FAST,
    topo: JobTopology | None = None,
) -> JobSample:
    target = JobTarget(JobRef("c1", f"id-{name}", name), options)
    return JobSample(target, ts_ms, running_since_ms, topo or TOPOLOGIES[name], vertices)


def noisy_vertex(rng: random.Random, t_s: float, rate: float) -> VertexSample:
    """Plausible metrics with holes: NaN, infinite observed TPR, a negative busy time now and then."""

    def hole(x: float, p: float = 0.15) -> float:
        return NAN if rng.random() < p else x

    return VertexSample(
        busy_time_ms_per_s=hole(rng.choice([rng.uniform(100, 900), -3.0, 1000.0])),
        backpressured_ms_per_s=hole(rng.uniform(0, 200)),
        num_records_in=hole(rate * t_s),
        num_records_out=hole(0.5 * rate * t_s),
        accumulated_busy_time_ms=hole(700.0 * t_s),
        num_records_in_per_s=hole(rng.choice([rate, INF])),
        pending_records=hole(1000.0 + 50.0 * t_s),
        observed_tpr=hole(rng.choice([2 * rate, INF]), 0.5),
        accumulated_busy_time_agg_ms=hole(600.0 * t_s),
    )
