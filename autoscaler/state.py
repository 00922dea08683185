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
    """One executed scaling: the parallelism before and after, per changed vertex.

    ``metrics`` holds, per changed vertex, (true processing rate, expected processing rate) at decision
    time: ineffective scale-up detection and the observed scalability coefficient read them back
    (``autoscaler.evaluate.history``). A vertex without an entry is simply not judged.
    """

    ts_ms: int
    changes: Mapping[VertexId, tuple[int, int]]
    confirmed_ms: int | None = None
    restart_duration_ms: int | None = None
    metrics: Mapping[VertexId, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", frozen_map(self.changes))
        object.__setattr__(self, "metrics", frozen_map(self.metrics))


@dataclass(frozen=True, slots=True)
class JobState:
    last_rescale_ms: int | None = None
    pending: PendingRescale | None = None
    delayed_scale_down: Mapping[VertexId, DelayedScaleDown] = field(default_factory=dict)
    history: tuple[ScalingRecord, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "delayed_scale_down", frozen_map(self.delayed_scale_down))

    def with_scaling(self, record: ScalingRecord, pending: PendingRescale | None) -> JobState:
        """State after executing a scaling: delayed scale-downs are void, the record joins the history.

        Trimming is per vertex (``autoscaler.evaluate.history.trim_history``), done by the caller.
        """
        return replace(
            self,
            last_rescale_ms=record.ts_ms,
            pending=pending,
            delayed_scale_down={},
            history=(*self.history, record),
        )


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
