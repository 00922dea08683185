"""Turns a decided parallelism into Flink's resource requirements, idempotently, and confirms it.

Realizing converges state instead of replaying an action: read the current requirements, change
only the vertices that differ, PUT the full body (Flink rejects partial ones) only if anything
changed. Running it twice, or after a crash between PUT and saving state, sends nothing the second
time. Flink applies the PUT asynchronously, so confirmation happens on later ticks from /jobs/:id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import JobRef, JobSample, VertexId
from autoscaler.state import PendingRescale
from autoscaler.tick.steps import Confirmation, RealizeResult

__all__ = ["RequirementsClient", "confirm", "realize"]


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


def confirm(pending: PendingRescale, sample: JobSample) -> Confirmation:
    """A rescale is applied once the job restarted after the PUT and runs with every task up.

    Flink silently caps an upper bound by the free slots, so a restart with a lower parallelism still
    completes the rescale; ``capped`` says so instead of waiting forever.
    """
    actual = {
        vid: sample.topology.vertices[vid].parallelism
        for vid in pending.target
        if vid in sample.topology.vertices
    }
    restarted = sample.running_since_ms >= pending.issued_ms
    matches = all(actual.get(vid) == p for vid, p in pending.target.items())
    if matches or restarted:
        duration = sample.running_since_ms - pending.issued_ms if restarted else None
        return Confirmation(True, actual, not matches, duration, pending.target)
    return Confirmation(False, actual, asked=pending.target)
