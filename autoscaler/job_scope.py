"""Which jobs a tick reads (:class:`JobScope`): every job of every cluster, or one job alone.

A cooldown that ends schedules the re-evaluation of its job at that instant: the same pipeline, for that
job alone. The scope is given to the collect stage only; what the later stages need to know of it (a
one-job view must not call the jobs it did not read gone, nor count as the loop's tick) they read from
what collect returns (``Collected.scope``), not from a flag passed down.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WHOLE", "JobScope"]


@dataclass(frozen=True, slots=True)
class JobScope:
    """All jobs (``job`` None: a whole tick) or the one job of key ``job`` (``cluster/name``)."""

    job: str | None = None

    @property
    def whole(self) -> bool:
        """A whole tick: every job read, so a job not found is gone, and the loop is alive."""
        return self.job is None

    def admits(self, job_key: str) -> bool:
        """Whether the job of this key is read."""
        return self.job is None or job_key == self.job

    def reaches(self, cluster: str) -> bool:
        """Whether a job of this cluster may be read (a job name may hold a slash: a prefix test)."""
        return self.job is None or self.job.startswith(f"{cluster}/")


WHOLE = JobScope()
