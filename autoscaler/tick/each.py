"""How a per-job stage runs: on every job still under way, concurrently, each failure its job's own.

Each job travels as a :class:`~autoscaler.tick.steps.JobStep`. A stage works on the steps still under
way and passes on the ones that already ended (``outcome`` set), so one job's veto, error or deferral
never holds back another's rescale. A job's failure in any stage stays with that job: it ends with an
``AutoscalerError`` outcome, and nothing it touched is scaled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import structlog

from autoscaler.tick.record import TickRecord
from autoscaler.tick.steps import JobStep

__all__ = ["each_job"]


async def each_job(
    steps: Sequence[JobStep], rec: TickRecord, stage: Callable[[JobStep], Awaitable[JobStep]]
) -> list[JobStep]:
    """Run ``stage`` on every step still under way, concurrently; a job's exception ends that job."""

    async def one(step: JobStep) -> JobStep:
        if step.outcome is not None:
            return step
        job = step.job
        with structlog.contextvars.bound_contextvars(cluster=job.cluster, job=job.name):
            try:
                return await stage(step)
            except Exception as exc:  # one job's failure stays with that job
                return replace(step, outcome=rec.failed(job, step.sample.target.options, exc))

    return list(await asyncio.gather(*(one(s) for s in steps)))
