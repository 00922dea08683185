"""What the daemon remembers per job between ticks: one frozen ``JobState`` value, loaded and saved whole.

Jobs are keyed by ``cluster/job name`` (``JobRef.key``) so the history survives a resubmission under a
new JobID. These are plain values; how they are stored is ``autoscaler.state.store`` and ``.sql``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autoscaler.model import VertexId, frozen_map

__all__ = ["DelayedScaleDown", "JobState", "PendingRescale", "ScalingRecord"]


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
    ``restart_duration_ms`` (set when the rescale is confirmed) feeds restart-time tracking.
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
    """Everything one job carries from tick to tick.

    ``overrides`` is the parallelism the autoscaler last asked for, per vertex it ever changed (the
    reference's parallelism overrides): kept after the rescale is confirmed, so an operator (and the CLI)
    can see what the autoscaler wants even when nothing is pending.
    """

    last_rescale_ms: int | None = None
    pending: PendingRescale | None = None
    delayed_scale_down: Mapping[VertexId, DelayedScaleDown] = field(default_factory=dict)
    history: tuple[ScalingRecord, ...] = ()
    overrides: Mapping[VertexId, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "delayed_scale_down", frozen_map(self.delayed_scale_down))
        object.__setattr__(self, "history", tuple(self.history))
        object.__setattr__(self, "overrides", frozen_map(self.overrides))

    def with_scaling(self, record: ScalingRecord, pending: PendingRescale | None) -> JobState:
        """State after executing a scaling: delayed scale-downs are void, the record joins the history
        and its new parallelisms become the overrides.

        Trimming is per vertex (``autoscaler.evaluate.history.trim_history``), done by the caller.
        """
        return replace(
            self,
            last_rescale_ms=record.ts_ms,
            pending=pending,
            delayed_scale_down={},
            history=(*self.history, record),
            overrides={**self.overrides, **{vid: new for vid, (_, new) in record.changes.items()}},
        )
