"""Reading ``/jobs/:id``, and waiting once per cluster and tick for the metric fetch the tick started.

Flink's metric fetcher is lazy and cluster-wide: a metrics query (``/jobs/:id`` included: its IO counters
come from the same store) gets the JobManager's last fetch and only then triggers a new fetch of every
TaskManager's metrics. A tick's sample is consistent only if ``/jobs/:id`` and the vertices' answers
come from one fetch, and current only if that fetch is the one the tick started. So, once per cluster,
:func:`await_fetch` polls one job's ``/jobs/:id`` until its counters move, and only then are the jobs
read, each with one ``/jobs/:id`` and one query per vertex (issue 13: it used to be every job polling
and reading its vertices twice, 17 to 31 requests per job per tick).

A fetch still lands whenever a query comes more than ``metrics.fetcher.update-interval`` after the last
one started, and that may be in the middle of a job's reads (a long tick, or a tick that found no fetch
due). :func:`fetches_differ` tells such a mixed reading at no cost: the busy-time counter of each
vertex is in both answers, and from one fetch the two agree. A job read across a landing is read again.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
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
    "await_fetch",
    "fetches_differ",
    "io_reading",
    "read_job_details",
    "require_running",
]

FETCH_POLL_S = 0.1  # how often /jobs/:id is re-read while waiting for the tick's fetch to land
Sleep = Callable[[float], Awaitable[object]]


class NotRunning(Exception):
    """The job is not (fully) running; no metrics are read."""


async def await_fetch(
    client: FlinkClient, job_id: str, last: Reading | None, wait: FetchWait
) -> JobDetails | None:
    """``/jobs/:id`` of the probe job once a fetch newer than ``last`` shows in it, or None.

    The first read starts the fetch if one is due. Its counters are compared with ``last``, the probe's
    reading at the previous tick (a reading that differs is a new fetch, landed already), or with this
    first read when there is none. Then ``/jobs/:id`` is read every ``FETCH_POLL_S`` for up to
    ``wait.seconds`` until they move: each poll also starts the fetch if it became due meanwhile.
    Counters that never move (no fetch was due, or it has not landed) give None; whether the jobs'
    readings are then new or the last fetch again, :mod:`autoscaler.collect.freshness` says per job.
    """
    current = await read_job_details(client, job_id)
    before = last if last is not None else io_reading(current)
    waited = 0.0
    while io_reading(current) == before:
        if waited >= wait.seconds:
            return None
        await wait.sleep(FETCH_POLL_S)
        waited += FETCH_POLL_S
        current = await read_job_details(client, job_id)
    return current


def fetches_differ(details: JobDetails, busy_sums: Mapping[str, float]) -> bool:
    """Whether ``/jobs/:id`` and the vertices' answers came from different fetches.

    ``busy_sums`` is each vertex's ``accumulateBusyTimeMs`` summed over its subtasks, from its answer;
    ``/jobs/:id`` sums the same counter of the same store into ``accumulated-busy-time``. From one fetch
    they are equal; a vertex where either is unknown tells nothing. (An idle vertex's busy time does not
    move between fetches, so a job idle throughout is never told mixed: its rates are 0 either way.)
    """
    for vid, busy in busy_sums.items():
        io = details.vertex_io(vid).accumulated_busy_time_ms
        if math.isnan(busy) or math.isnan(io) or io < 0:
            continue
        if abs(busy - io) > _SAME_FETCH_SLACK_MS + 1e-9 * abs(io):
            return True
    return False


_SAME_FETCH_SLACK_MS = 1.0  # Flink sums longs on one side and doubles on the other


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
