"""Which jobs a cluster runs, as its last discovery saw them, and which left since (:class:`LiveJobs`).

One registry per cluster owns the answer to "which jobs are live": discovery tells it the jobs the
cluster runs (of the shards this daemon holds), and it says which jobs left, so their memory in this
process is forgotten and their stored window rows go. Nothing else (the Prometheus series least of all)
decides that a job is gone.

- A cluster that cannot be listed is not told anything: it keeps its last job set, and no job leaves
  because the cluster did not answer.
- A job dropped because this process gave up its lease (:meth:`LiveJobs.drop`) did not leave its cluster:
  another daemon acts on it now, with its stored state and window.
- A job that left stays "left" until asked (:meth:`LiveJobs.take_left`), even if the tick that saw it
  go ended before it was asked, and is no longer "left" if it comes back first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from autoscaler.model import JobRef

__all__ = ["LiveJobs"]


class LiveJobs:
    """The jobs one cluster runs as of its last successful discovery, and the ones that left since."""

    def __init__(self) -> None:
        self._keys: set[str] = set()  # every job the cluster runs (not running yet, invalid ones too)
        self._refs: dict[str, JobRef] = {}  # by key: the jobs found to autoscale
        self._left: set[str] = set()  # gone from the cluster since the last take_left()

    def discovered(self, keys: Iterable[str], refs: Iterable[JobRef]) -> None:
        """The cluster was listed: these are the jobs it runs (``keys``), and of them the ones to
        autoscale (``refs``). A job of the last set not among them left."""
        keys = set(keys)
        self._left = (self._left | (self._keys - keys)) - keys
        self._keys = keys
        self._refs = {ref.key: ref for ref in refs}

    def drop(self, which: Callable[[str], bool]) -> list[str]:
        """Drop the jobs ``which`` selects without calling them gone (a lease this process gave up: they
        still run, another daemon acts on them); their keys, sorted."""
        keys = sorted(k for k in self._keys | set(self._refs) if which(k))
        self._keys.difference_update(keys)
        for key in keys:
            self._refs.pop(key, None)
        return keys

    def take_left(self) -> set[str]:
        """The jobs that left the cluster since the last call; they are not reported again."""
        left, self._left = self._left, set()
        return left

    @property
    def refs(self) -> Mapping[str, JobRef]:
        """The jobs found to autoscale at the last discovery, by key (unavailable while the cluster
        cannot be listed)."""
        return self._refs

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
