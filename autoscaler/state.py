"""What the daemon remembers per job between ticks: one ``JobState`` value, loaded and saved whole.

Jobs are keyed by ``cluster/job name`` so the history survives a resubmission under a new JobID.
The in-memory store serves tests and the demo; a durable SQL store plugs in behind the same protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from autoscaler.model import VertexId, frozen_map

__all__ = [
    "DelayedScaleDown",
    "JobState",
    "MemoryStateStore",
    "PendingRescale",
    "ScalingRecord",
    "StateStore",
]


@dataclass(frozen=True, slots=True)
class DelayedScaleDown:
    """A vertex's pending scale-down: when it was first recommended and what was recommended since.

    ``recommendations`` holds (ts_ms, parallelism) with parallelism strictly decreasing, so its first
    entry inside the interval is the window maximum (the reference's monotonic deque).
    """

    first_trigger_ms: int
    recommendations: tuple[tuple[int, int], ...]

    def add(self, now_ms: int, parallelism: int, interval_ms: int) -> DelayedScaleDown:
        kept = [(ts, p) for ts, p in self.recommendations if ts >= now_ms - interval_ms and p > parallelism]
        return DelayedScaleDown(self.first_trigger_ms, (*kept, (now_ms, parallelism)))

    def window_max(self) -> int:
        return self.recommendations[0][1]


@dataclass(frozen=True, slots=True)
class PendingRescale:
    """A PUT that Flink accepted but that /jobs/:id does not show running yet."""

    job_id: str
    issued_ms: int
    target: Mapping[VertexId, int]
    previous: Mapping[VertexId, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", frozen_map(self.target))
        object.__setattr__(self, "previous", frozen_map(self.previous))


@dataclass(frozen=True, slots=True)
class ScalingRecord:
    """One executed scaling: the parallelism before and after, per changed vertex."""

    ts_ms: int
    changes: Mapping[VertexId, tuple[int, int]]
    confirmed_ms: int | None = None
    restart_duration_ms: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", frozen_map(self.changes))


@dataclass(frozen=True, slots=True)
class JobState:
    last_rescale_ms: int | None = None
    pending: PendingRescale | None = None
    delayed_scale_down: Mapping[VertexId, DelayedScaleDown] = field(default_factory=dict)
    history: tuple[ScalingRecord, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "delayed_scale_down", frozen_map(self.delayed_scale_down))

    def with_scaling(self, record: ScalingRecord, pending: PendingRescale | None, max_count: int) -> JobState:
        """State after executing a scaling: delayed scale-downs are void, history keeps ``max_count``."""
        history = (*self.history, record)[-max_count:] if max_count > 0 else ()
        return replace(
            self, last_rescale_ms=record.ts_ms, pending=pending, delayed_scale_down={}, history=history
        )

    def trimmed(self, now_ms: int, max_age_ms: int, max_count: int) -> JobState:
        """Drop history older than ``max_age_ms`` or beyond ``max_count``; the newest entry is always kept."""
        if not self.history:
            return self
        kept = [r for r in self.history if r.ts_ms >= now_ms - max_age_ms][-max_count:] if max_count else []
        if not kept:
            kept = [self.history[-1]]
        return self if tuple(kept) == self.history else replace(self, history=tuple(kept))


class StateStore(Protocol):
    def load(self, job_key: str) -> JobState: ...

    def save(self, job_key: str, state: JobState) -> None: ...

    def delete(self, job_key: str) -> None: ...

    def keys(self) -> Iterable[str]: ...


class MemoryStateStore:
    """Process-local store (lost on restart); thread-safe for the CLI reading while the daemon writes."""

    def __init__(self) -> None:
        self._states: dict[str, JobState] = {}
        self._lock = threading.Lock()

    def load(self, job_key: str) -> JobState:
        with self._lock:
            return self._states.get(job_key, JobState())

    def save(self, job_key: str, state: JobState) -> None:
        with self._lock:
            self._states[job_key] = state

    def delete(self, job_key: str) -> None:
        with self._lock:
            self._states.pop(job_key, None)

    def keys(self) -> Iterable[str]:
        with self._lock:
            return list(self._states)
