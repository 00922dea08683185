"""How many requests the simulated cluster answered, by endpoint template (``GET /jobs/:jobid``).

The fleet benchmark divides these by jobs and ticks to tell how many REST calls the daemon makes per job,
counted by the cluster's side rather than by the client it measures. A template (the route's pattern,
not the path) keeps the keys few whatever the number of jobs, and matches the daemon's own
``endpoint`` label of ``flink_autoscaler_rest_requests_total``, except for a subtask's index, which
the daemon's label keeps.
"""

from __future__ import annotations

import threading
from collections import Counter

__all__ = ["NO_ROUTE", "RequestCounts", "is_job_read"]

NO_ROUTE = "(no route)"
"""The template of a request no route matched (answered 404)."""


def is_job_read(endpoint: str) -> bool:
    """A read of one job's (``"GET /jobs/:jobid"``, its vertices' metrics, ...): not the cluster's own
    requests (the overview, the TaskManagers), nor a rescale's (``resource-requirements``)."""
    method, _, path = endpoint.partition(" ")
    return method == "GET" and path.startswith("/jobs/:jobid") and "resource-requirements" not in path


class RequestCounts:
    """Requests answered, by ``"<METHOD> <template>"``, and each job's reads (:func:`is_job_read`) by
    JobID, which tell a job read once per tick from the one a cluster-wide wait polls; thread-safe, so
    any server thread may count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._job_reads: Counter[str] = Counter()

    def add(self, method: str, template: str, job_id: str | None = None) -> None:
        key = f"{method} {template}"
        with self._lock:
            self._counts[key] += 1
            if job_id is not None and is_job_read(key):
                self._job_reads[job_id] += 1

    def job_reads(self) -> dict[str, int]:
        """Each job's reads so far, by JobID: a copy."""
        with self._lock:
            return dict(self._job_reads)

    def snapshot(self) -> dict[str, int]:
        """The counts so far, most requested first: a copy, so a reader never sees them move."""
        with self._lock:
            return dict(self._counts.most_common())

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())
