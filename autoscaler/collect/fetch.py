"""Reading ``/jobs/:id``, and waiting there for the metric fetch a tick started to land.

Flink's metric fetcher is lazy: a query gets the JobManager's last fetch and only then triggers a new
one. The IO counters of ``/jobs/:id`` come from the same store as the vertices' metrics, so a tick's
sample is consistent only if both are read from one fetch: :func:`after_the_fetch` polls ``/jobs/:id``
until its counters move. A job that is gone or not (fully) running is :class:`NotRunning`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from autoscaler.collect.vertices import FINISHED
from autoscaler.flink.client import FlinkClient
from autoscaler.flink.errors import FlinkHTTPError
from autoscaler.flink.models import JobDetails

__all__ = [
    "FETCH_POLL_S",
    "FetchWait",
    "NotRunning",
    "Reading",
    "Sleep",
    "after_the_fetch",
    "io_reading",
    "read_job_details",
    "require_running",
]

FETCH_POLL_S = 0.1  # how often /jobs/:id is re-read while waiting for the tick's fetch to land
Sleep = Callable[[float], Awaitable[object]]


class NotRunning(Exception):
    """The job is not (fully) running; no metrics are read."""


async def after_the_fetch(client: FlinkClient, details: JobDetails, wait: FetchWait) -> JobDetails | None:
    """``/jobs/:id`` once the metric fetch this tick started has landed, or None if none landed.

    The tick's first metrics request starts a fetch and is answered from the previous one; the new
    fetch lands a moment later (within a second on a real cluster), sometimes between ``/jobs/:id``
    (whose counters give the record and busy rates) and the vertex answers (``pendingRecords``),
    sometimes after both. Either way a sample is mixed or a tick old, and a 30 s window's source rate
    was off by up to 25 %. So ``/jobs/:id`` is read again, every ``FETCH_POLL_S`` for up to
    ``wait.seconds``, until its counters move; then the caller reads the vertices once more, after the
    fetch. Fetches are at least ``metrics.fetcher.update-interval`` apart, so no other one lands in
    between. Counters that never move (no fetch was due, or it has not landed yet) keep the first
    reading; whether that one is new or the last tick's again, :mod:`autoscaler.collect.freshness` says.
    """
    waited = 0.0
    after = await read_job_details(client, details.jid)
    while io_reading(after) == io_reading(details):
        if waited >= wait.seconds:
            return None
        await wait.sleep(FETCH_POLL_S)
        waited += FETCH_POLL_S
        after = await read_job_details(client, details.jid)
    require_running(after)
    return after


@dataclass(frozen=True, slots=True)
class FetchWait:
    seconds: float
    sleep: Sleep


# Every IO counter of every vertex of a /jobs/:id answer, hashable; NaN spelled out (NaN != NaN).
Reading = tuple[tuple[str, tuple[tuple[str, object], ...]], ...]


def io_reading(details: JobDetails) -> Reading:
    """What one metric fetch shows in ``/jobs/:id``: each vertex's counters, comparable with ``==``."""
    return tuple(
        (v.id, tuple((key, _comparable(v.metrics[key])) for key in sorted(v.metrics)))
        for v in details.vertices
    )


def _comparable(value: object) -> object:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


async def read_job_details(client: FlinkClient, job_id: str) -> JobDetails:
    try:
        return await client.job_details(job_id)
    except FlinkHTTPError as err:
        if err.status == 404:
            raise NotRunning(f"job {job_id} is gone: {err}") from err
        raise


def require_running(details: JobDetails) -> None:
    if details.state != "RUNNING":
        raise NotRunning(f"job {details.name} ({details.jid}) is {details.state}")
    if not details.all_tasks_running:
        pending = ", ".join(
            f"{v.name} ({v.status})" for v in details.vertices if v.status not in ("RUNNING", FINISHED)
        )
        raise NotRunning(f"job {details.name} ({details.jid}) is RUNNING but not all tasks are: {pending}")
