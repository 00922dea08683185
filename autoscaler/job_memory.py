"""Everything this process remembers of a job between ticks, told at once when it stops acting on it.

A job's memory sits in several caches (the evaluator's window, the restored-window marks, the pending
retry, the logged executor chain, the Prometheus series, each cluster's metric names and fetch book).
Each registers once in the daemon's :class:`JobMemory` through the one-method :class:`ForgetsJobs`, so
forgetting a job (it left its cluster, or this process gave up its lease) is one call, and a new cache
cannot be missed by a hand-written list of calls. What is stored (state, window rows) is not memory of
this process: it stays for whoever acts on the job next.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["ForgetsJobs", "JobMemory"]


class ForgetsJobs(Protocol):
    """A cache of per-job memory: drops what it holds of these jobs (unknown keys are harmless)."""

    def forget(self, job_keys: Iterable[str]) -> None: ...


class JobMemory:
    """The caches of per-job memory in this process, each registered once, told together."""

    def __init__(self, *caches: ForgetsJobs) -> None:
        self._caches: list[ForgetsJobs] = []
        self.register(*caches)

    def register(self, *caches: ForgetsJobs) -> None:
        """Add caches; one registered twice is a wiring mistake (it would be told twice)."""
        for cache in caches:
            if any(cache is known for known in self._caches):
                raise ValueError(f"{type(cache).__name__} is registered already")
            self._caches.append(cache)

    def forget(self, job_keys: Iterable[str]) -> None:
        """This process no longer acts on these jobs: every cache drops them."""
        keys = tuple(job_keys)
        for cache in self._caches:
            cache.forget(keys)

    def __len__(self) -> int:
        return len(self._caches)
