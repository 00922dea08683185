"""The realize stage: turns a decided parallelism into Flink's resource requirements, idempotently.

Realizing converges state instead of replaying an action: read the current requirements, change
only the vertices that differ, PUT the full body (Flink rejects partial ones) only if anything
changed. Running it twice, or after a crash between PUT and saving state, sends nothing the second
time. Flink applies the PUT asynchronously, so confirmation happens on later ticks from /jobs/:id
(``autoscaler.tick.decide.confirm``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Protocol

import structlog

from autoscaler.cluster import Clusters
from autoscaler.evaluate.history import needed_capacity, record_metrics, trim_history
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.flink.models import ParallelismBounds
from autoscaler.memory_advice import advice_for
from autoscaler.model import JobRef, VertexId
from autoscaler.reasons import Reason
from autoscaler.state import PendingRescale, ScalingRecord
from autoscaler.tick.decide import refused_retry_ms
from autoscaler.tick.each import each_job, failed
from autoscaler.tick.steps import (
    JobOutcome,
    JobStep,
    LeaseExpired,
    MemoryAdvised,
    RealizeResult,
    Rejected,
    Rescaling,
)
from autoscaler.tick.texts import LEASE_EXPIRED_TEXT, rejected_text

__all__ = ["RequirementsClient", "realize", "realize_jobs"]

log = structlog.get_logger(__name__)


class RequirementsClient(Protocol):
    async def resource_requirements(self, job_id: str) -> dict[str, ParallelismBounds]: ...

    async def set_resource_requirements(
        self, job_id: str, requirements: Mapping[str, ParallelismBounds]
    ) -> None: ...


async def realize(client: RequirementsClient, job: JobRef, desired: Mapping[VertexId, int]) -> RealizeResult:
    """Ask Flink for ``desired`` parallelism (upper bound; lower bound 1, as the reference does)."""
    current = await client.resource_requirements(job.job_id)
    unknown = sorted(set(desired) - set(current))
    if unknown:
        raise ValueError(f"job {job.key}: vertices {unknown} are not in the job's resource requirements")
    wanted = dict(current)
    for vid, parallelism in desired.items():
        wanted[vid] = ParallelismBounds(lower=1, upper=parallelism)
    if all(wanted[vid].upper == current[vid].upper for vid in desired):
        return RealizeResult(issued=False, requirements=current)
    await client.set_resource_requirements(job.job_id, wanted)
    return RealizeResult(issued=True, requirements=wanted)


async def realize_jobs(
    steps: Sequence[JobStep],
    now_ms: int,
    *,
    clusters: Clusters,
    clock_ms: Callable[[], int],
    interval: timedelta = timedelta(seconds=10),
) -> list[JobStep]:
    """Ask Flink for each approved parallelism (idempotently) and remember the rescale as pending.

    ``clock_ms`` reads the clock: the lease is checked at the moment of the request, not the tick's
    start (``now_ms``), since another daemon may act once it has lapsed. A PUT Flink refuses (4xx: a
    read-only proxy, a request Flink finds invalid) is ``RescaleRejected``: the next is asked a control
    ``interval`` later, then after a backoff doubling with each refusal in a row (``decide_jobs``),
    instead of a refused PUT every tick. Every step comes back ended.
    """

    async def one(step: JobStep) -> JobStep:
        decision, options, job = step.decision, step.sample.target.options, step.job
        assert decision is not None
        cluster = clusters[job.cluster]
        if not cluster.holds_job(job.key, clock_ms()):
            ended = JobOutcome(job, now_ms, Reason.LEASE_EXPIRED, LEASE_EXPIRED_TEXT, decision, step.chain)
            return step.ended(ended, LeaseExpired(decision))
        step = step.noting(Rescaling(decision))
        desired = {vid: c.target for vid, c in decision.changes.items()}
        try:
            realized = await realize(cluster.client, job, desired)
        except FlinkHTTPError as err:
            if not 400 <= err.status < 500:
                return failed(step, now_ms, err)
            refused = replace(
                decision.state, refused_rescales=decision.state.refused_rescales + 1, refused_ms=now_ms
            )
            retry = refused_retry_ms(refused, interval)
            rejected = Rejected(desired, err.status, tuple(err.messages), refused.refused_rescales, retry)
            text = rejected_text(rejected, now_ms)
            ended = JobOutcome(job, now_ms, Reason.RESCALE_REJECTED, text, decision, step.chain)
            return step.ended(ended, rejected, state=refused)
        except Exception as exc:  # told after its ScalingReport
            return failed(step, now_ms, exc)
        previous = {vid: c.current for vid, c in decision.changes.items()}
        pending = PendingRescale(job.job_id, now_ms, desired, previous)
        change_map = {vid: (c.current, c.target) for vid, c in decision.changes.items()}
        metrics = record_metrics(decision.evaluation, change_map) if decision.evaluation else {}
        needed = needed_capacity(decision.evaluation, change_map) if decision.evaluation else {}
        record = ScalingRecord(now_ms, change_map, metrics=metrics, needed_capacity=needed, job_id=job.job_id)
        scaled = replace(decision.state.with_scaling(record, pending), refused_rescales=0, refused_ms=None)
        scaled = replace(scaled, history=trim_history(scaled.history, now_ms, options))
        advice = advice_for(step.sample, desired)  # TaskManager memory: advised, never applied over REST
        advised = (MemoryAdvised(advice),) if advice is not None else ()
        if not realized.issued:
            log.info("requirements_already_match", desired=desired)
        ended = JobOutcome(job, now_ms, Reason.SCALING, decision.detail, decision, step.chain, realized)
        return step.ended(ended, *advised, state=scaled)

    return await each_job(steps, now_ms, one)
