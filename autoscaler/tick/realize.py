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

from autoscaler.cluster import Clusters
from autoscaler.evaluate.history import needed_capacity, record_metrics, trim_history
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.flink.models import ParallelismBounds
from autoscaler.memory_advice import advice_for
from autoscaler.model import JobRef, VertexId
from autoscaler.reasons import Reason
from autoscaler.state import PendingRescale, ScalingRecord
from autoscaler.state.events import EventType
from autoscaler.tick.decide import refused_retry_ms
from autoscaler.tick.each import each_job
from autoscaler.tick.record import TickRecord
from autoscaler.tick.steps import JobOutcome, JobStep, RealizeResult

__all__ = ["RequirementsClient", "realize", "realize_jobs"]


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
    rec: TickRecord,
    *,
    clusters: Clusters,
    now_ms: Callable[[], int],
    interval: timedelta = timedelta(seconds=10),
) -> list[JobOutcome]:
    """Ask Flink for each approved parallelism (idempotently) and remember the rescale as pending.

    ``now_ms`` reads the clock: the lease is checked at the moment of the request, not the tick's
    start, since another daemon may act once it has lapsed. A PUT Flink refuses (4xx: a read-only
    proxy, a request Flink finds invalid) is ``RescaleRejected``: the next is asked a control
    ``interval`` later, then after a backoff doubling with each refusal in a row (``decide_jobs``),
    instead of a refused PUT every tick.
    """

    async def one(step: JobStep) -> JobStep:
        decision, options, job = step.decision, step.sample.target.options, step.job
        assert decision is not None
        cluster = clusters[job.cluster]
        if not cluster.holds_job(job.key, now_ms()):
            text = rec.lease_expired(decision)
            ended = JobOutcome(job, rec.now_ms, Reason.LEASE_EXPIRED, text, decision, step.chain)
            return replace(step, outcome=rec.outcome(ended))
        rec.rescaling(decision)
        desired = {vid: c.target for vid, c in decision.changes.items()}
        try:
            realized = await realize(cluster.client, job, desired)
        except FlinkHTTPError as err:
            if not 400 <= err.status < 500:
                raise
            refused = replace(
                decision.state, refused_rescales=decision.state.refused_rescales + 1, refused_ms=rec.now_ms
            )
            rec.save(job.key, refused)
            retry = refused_retry_ms(refused, interval)
            text = rec.rejected(job, desired, err, refused.refused_rescales, retry, options)
            ended = JobOutcome(job, rec.now_ms, Reason.RESCALE_REJECTED, text, decision, step.chain)
            return replace(step, outcome=rec.outcome(ended))
        previous = {vid: c.current for vid, c in decision.changes.items()}
        pending = PendingRescale(job.job_id, rec.now_ms, desired, previous)
        change_map = {vid: (c.current, c.target) for vid, c in decision.changes.items()}
        metrics = record_metrics(decision.evaluation, change_map) if decision.evaluation else {}
        needed = needed_capacity(decision.evaluation, change_map) if decision.evaluation else {}
        record = ScalingRecord(
            rec.now_ms, change_map, metrics=metrics, needed_capacity=needed, job_id=job.job_id
        )
        scaled = replace(decision.state.with_scaling(record, pending), refused_rescales=0, refused_ms=None)
        rec.save(job.key, replace(scaled, history=trim_history(scaled.history, rec.now_ms, options)))
        advice = advice_for(step.sample, desired)  # TaskManager memory: advised, never applied over REST
        if advice is not None:
            kind, text = Reason.CONFIGURATION_RECOMMENDATION, advice.text()
            rec.job_event(job.key, options, kind, EventType.NORMAL, text, key="MemoryTuning")
        rec.realized(job, realized, desired)
        ended = JobOutcome(job, rec.now_ms, Reason.SCALING, decision.detail, decision, step.chain, realized)
        return replace(step, outcome=rec.outcome(ended))

    done = await each_job(steps, rec, one)
    return [s.outcome for s in done if s.outcome is not None]
