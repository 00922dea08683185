"""Plain values the archive tests feed in: a two-vertex job's samples and outcomes of every kind."""

from __future__ import annotations

from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import (
    JobRef,
    JobSample,
    TaskManagerMemory,
    TaskManagerSample,
    VertexChange,
    VertexSample,
)
from autoscaler.plugins.chain import ChainResult, PluginOutcome
from autoscaler.reasons import Reason
from autoscaler.state import JobState
from autoscaler.testing import make_evaluation, make_sample, make_topology, vertex_eval
from autoscaler.tick.steps import Decision, JobOutcome, RealizeResult

DAY_MS = 86_400_000
T0 = 1_764_201_600_000  # 2025-11-27T00:00:00Z
JOB = JobRef(cluster="c1", job_id="a" * 32, name="orders")
OTHER = JobRef(cluster="c 2/x", job_id="b" * 32, name="clicks")


def sample(ts_ms: int, job: JobRef = JOB, busy: float = 500.0) -> JobSample:
    """``src`` (2) -HASH-> ``work`` (4), with every VertexSample field set on ``work``."""
    topology = make_topology({"src": 2, "work": 4}, [("src", "work", "HASH")])
    work = VertexSample(busy, 10.0, 1e6, 2e6, 3e6, 1500.0, 7.0, 1600.0, 3e6 / 4)
    return make_sample(
        topology,
        ts_ms=ts_ms,
        running_since_ms=ts_ms - 60_000,
        job=job,
        vertices={"src": VertexSample(num_records_in=5e5, pending_records=42.0), "work": work},
        taskmanagers=TaskManagerSample(
            heap_used=1e9, heap_max=2e9, count=3, slots_total=12, memory=TaskManagerMemory(*range(1, 10))
        ),
        num_source_partitions={"src": 8},
        custom_vertex_metrics={"work": {"queue": 3.0}},
        custom_job_metrics={"ext.lag": 9.0},
        stale_ticks=1,
    )


def outcome(kind: str, now_ms: int, job: JobRef = JOB) -> JobOutcome:
    """A job's outcome: ``applied``, ``vetoed``, ``blocked``, ``unchanged`` or ``not_evaluated``."""
    if kind == "not_evaluated":
        return JobOutcome(job, now_ms, Reason.CLUSTER_UNREACHABLE, "connection refused")
    target = 4 if kind == "unchanged" else 6
    evaluation = make_evaluation(
        [vertex_eval("src", 2), vertex_eval("work", 4, target)], ts_ms=now_ms - 1000, job=job
    )
    changes = {} if kind == "unchanged" else {"work": VertexChange("work", 4, 6)}
    reason = {"applied": Reason.SCALING, "vetoed": Reason.SCALING_VETOED, "blocked": Reason.ADVISOR_MODE}
    outcome_reason = reason.get(kind, Reason.IN_BAND)
    decided = Reason.SCALING if kind in ("applied", "vetoed") else outcome_reason
    decision = Decision(job, decided, "why", changes, JobState(), evaluation)
    chain = realized = None
    if kind == "vetoed":
        chain = ChainResult(None, (PluginOutcome("guard", Reason.SCALING_VETOED, "no"),))
    if kind == "applied":
        chain = ChainResult(changes, ())
        realized = RealizeResult(True, {"src": ParallelismBounds(1, 2), "work": ParallelismBounds(1, 6)})
    return JobOutcome(job, now_ms, outcome_reason, "why", decision, chain, realized)
