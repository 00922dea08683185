"""Builders for the formula tests: topologies, samples and aggregates with exact window values."""

from __future__ import annotations

import math
from collections.abc import Mapping

from autoscaler.evaluate.aggregates import (
    VertexAggregates,
)
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
DEFAULTS = AutoscalerOptions()


def topology(
    parallelism: Mapping[str, int], edges: list[tuple[str, str]] | None = None, max_p: int = 128, **ship: str
) -> JobTopology:
    vertices = [VertexInfo(v, v, p, max_p) for v, p in parallelism.items()]
    return JobTopology.build(
        vertices, [Edge(a, b, ship.get(f"{a}_{b}", "REBALANCE")) for a, b in edges or []]
    )


def job_sample(topo: JobTopology, options: AutoscalerOptions = DEFAULTS, **partitions: int) -> JobSample:
    target = JobTarget(JobRef("c1", "0" * 32, "job"), options)
    return JobSample(
        target, 0, 0, topo, {v: VertexSample() for v in topo.vertices}, num_source_partitions=partitions
    )


def agg(
    *,
    in_rate: float = NAN,
    out_rate: float = NAN,
    lag_rate: float = NAN,
    lag: float = NAN,
    busy_ms: float = NAN,
    in_per_s: float = NAN,
    observed: tuple[float, int] = (0.0, 0),
    acc_busy_rate: float = NAN,
    counter_busy_ms: float = NAN,
) -> VertexAggregates:
    """Aggregates whose window averages are exactly the given values."""
    busy = (0.0, 0) if math.isnan(busy_ms) else (busy_ms, 1)
    return VertexAggregates(
        samples=2,
        busy_sum=busy[0],
        busy_count=busy[1],
        accumulated_busy_rate=acc_busy_rate,
        accumulated_busy_agg_rate=counter_busy_ms,
        records_in_rate=in_rate,
        records_out_rate=out_rate,
        lag_rate=lag_rate,
        lag_latest=lag,
        records_in_per_s_avg=in_per_s,
        observed_tpr_sum=observed[0],
        observed_tpr_count=observed[1],
    )


def source(rate: float, *, lag_rate: float = 0.0, lag: float = 0.0, tpr: float = NAN) -> VertexAggregates:
    """A source with input `rate`; its busy time makes the busy-time TPR equal `tpr`."""
    busy = NAN if math.isnan(tpr) else 1000.0 * rate / tpr
    return agg(in_rate=rate, out_rate=rate, lag_rate=lag_rate, lag=lag, busy_ms=busy, in_per_s=rate)
