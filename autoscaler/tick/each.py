"""How a per-job stage runs: on every job still under way, concurrently, each failure its job's own.

Each job travels as a :class:`~autoscaler.tick.steps.JobStep`. A stage works on the steps still under
way and passes on the ones that already ended (``outcome`` set), so one job's veto, error or deferral
never holds back another's rescale. A job's failure in any stage stays with that job: it ends with the
cluster's error (a REST call that failed) or ours (anything else), a ``Failed`` notice, and nothing it
touched is scaled or written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import structlog

from autoscaler.flink.errors import FlinkError, FlinkUnreachable
from autoscaler.reasons import Reason
from autoscaler.tick.steps import Failed, JobOutcome, JobStep

__all__ = ["each_job", "failed"]

log = structlog.get_logger(__name__)


async def each_job(
    steps: Sequence[JobStep], now_ms: int, stage: Callable[[JobStep], Awaitable[JobStep]]
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
                return failed(step, now_ms, exc)

    return list(await asyncio.gather(*(one(s) for s in steps)))


def failed(step: JobStep, now_ms: int, exc: Exception) -> JobStep:
    """``step`` ended by ``exc``: logged here (with its traceback when it is a bug), told and counted by
    the record stage. A REST call that failed (a rejected PUT, a 5xx) is the cluster's error, anything
    else ours. The job's state is not written."""
    # A REST failure says all in its message; anything else is a bug and needs its traceback.
    log.error("job_tick_failed", error=str(exc), exc_info=not isinstance(exc, FlinkError))
    reason = (
        Reason.AUTOSCALER_ERROR
        if not isinstance(exc, FlinkError)
        else Reason.CLUSTER_UNREACHABLE
        if isinstance(exc, FlinkUnreachable)
        else Reason.CLUSTER_ERROR
    )
    outcome = JobOutcome(step.job, now_ms, reason, str(exc))
    return replace(step, outcome=outcome, state=None, notices=(*step.notices, Failed(reason, str(exc))))
