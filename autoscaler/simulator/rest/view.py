"""What every handler is given: one request's consistent ``View`` of the cluster, and the handler type.

``View`` resolves the job and vertex a path names (with Flink's 400 and 404 answers) and fetches the
metric store at most once per request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from autoscaler.simulator.engine import MetricStore, MetricValue, SimCluster, SimJob, UnknownJobError
from autoscaler.simulator.rest.errors import NOT_FOUND_EXCEPTION, HttpError, bad_parameter, stringified

__all__ = ["JOB_ID", "Handler", "Params", "Response", "View", "check_job_id"]

JOB_ID = re.compile(r"^[0-9a-fA-F]{32}$")

Response = tuple[int, Any]


class View:
    """One request's consistent look at the cluster."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.now = cluster.current_ms()  # the jobs a handler reads catch up to it as they are read
        self._store: MetricStore | None = None
        self._first_slots: dict[str, int] | None = None

    @property
    def store(self) -> MetricStore:
        """Fetched at most once per request (each fetch may trigger the lazy fetcher's refresh)."""
        if self._store is None:
            self._store = self.cluster.metric_store()
        return self._store

    def job(self, job_id: str) -> SimJob:
        check_job_id(job_id)
        try:
            return self.cluster.job(job_id.lower())
        except UnknownJobError:
            raise HttpError(
                404,
                stringified(
                    NOT_FOUND_EXCEPTION,
                    f"Job {job_id} not found",
                    "job.AbstractExecutionGraphHandler.handleRequest:99",
                ),
            ) from None

    def subtask_stores(self, job_id: str, vertex_id: str) -> tuple[Mapping[str, MetricValue], ...]:
        job_metrics = self.store.jobs.get(job_id.lower())
        return job_metrics.vertices.get(vertex_id, ()) if job_metrics else ()

    def vertex_name(self, job: SimJob, vertex_id: str) -> str:
        for name, vid in job.vertex_ids.items():
            if vid == vertex_id:
                return name
        raise HttpError(
            404,
            stringified(
                NOT_FOUND_EXCEPTION,
                f"JobVertex {vertex_id} not found",
                "job.JobVertexDetailsHandler.handleRequest:91",
            ),
        )

    def first_slot(self, job: SimJob) -> int:
        """The job's first slot: jobs fill the slots in submission order. Computed once per request for
        every job, since a vertex's subtasks each ask (it was O(jobs) per subtask)."""
        if self._first_slots is None:
            self._first_slots, slot = {}, 0
            for other in self.cluster.jobs():
                self._first_slots[other.job_id] = slot
                slot += other.slots_taken
        return self._first_slots.get(job.job_id, 0)

    def taskmanager_of(self, job: SimJob, subtask: int) -> int:
        slot = self.first_slot(job) + subtask
        return min(slot // self.cluster.spec.slots, self.cluster.spec.taskmanagers - 1)


def check_job_id(job_id: str) -> None:
    if not JOB_ID.match(job_id):
        raise bad_parameter("path", "jobid", job_id)


Params = dict[str, str]
Handler = Callable[[View, Params, Mapping[str, str], bytes | None, Mapping[str, str]], Response]
