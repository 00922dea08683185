"""Plain values for the timeline and HTML tests: a two-vertex job's decision records and samples."""

from __future__ import annotations

import math

from autoscaler.explain import DecisionRecord, VertexRecord
from autoscaler.model import JobRef, JobSample, VertexSample
from autoscaler.reasons import Reason
from autoscaler.testing import make_sample, make_topology

T0 = 1_764_201_600_000  # 2025-11-27T00:00:00Z
JOB = JobRef(cluster="c1", job_id="a" * 32, name="orders")


def record(
    ts_ms: int,
    outcome: Reason,
    *,
    work: int = 1,
    decided: int | None = None,
    scaled: bool = False,
    offered: float = 2000.0,
    capacity: float = 1250.0,
    lag: float = 5000.0,
) -> DecisionRecord:
    """``src`` (lag, offered) -> ``work`` (capacity ``capacity`` for the same rate)."""
    return DecisionRecord(
        job_key=JOB.key,
        cluster=JOB.cluster,
        job_name=JOB.name,
        job_id=JOB.job_id,
        ts_ms=ts_ms,
        outcome=str(outcome),
        detail=f"{outcome} detail",
        scaled=scaled,
        vertices=(
            VertexRecord(
                "src",
                "Source: orders",
                1,
                1,
                128,
                true_processing_rate=math.inf,
                target_data_rate=offered,
                lag=lag,
            ),
            VertexRecord(
                "work",
                "Work",
                work,
                decided or work,
                128,
                true_processing_rate=capacity,
                target_data_rate=offered,
                decided=decided,
            ),
        ),
    )


def sample(
    ts_s: float,
    *,
    read: float,
    pending: float,
    busy_ms: float,
    work: int = 1,
    since_s: float = 0.0,
    stale: int = 0,
) -> JobSample:
    """``src`` -> ``work``: cumulative records read and the work vertex's cumulative busy ms at ts."""
    topology = make_topology({"src": 1, "work": work}, [("src", "work", "HASH")])
    return make_sample(
        topology,
        ts_ms=T0 + round(ts_s * 1000),
        running_since_ms=T0 + round(since_s * 1000),
        job=JOB,
        vertices={
            "src": VertexSample(
                num_records_in=read, pending_records=pending, accumulated_busy_time_agg_ms=0.0
            ),
            "work": VertexSample(num_records_in=read, accumulated_busy_time_agg_ms=busy_ms),
        },
        stale_ticks=stale,
    )
