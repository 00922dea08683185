"""What the daemon remembers per job between ticks: one frozen ``JobState`` value, loaded and saved whole.

Jobs are keyed by ``cluster/job name`` (``JobRef.key``) so the history survives a resubmission under a
new JobID; the state also remembers its JobID, so a resubmission is noticed and what belonged to the old
JobID is dropped (:meth:`JobState.for_resubmission`). These are plain values; how they are stored is
``autoscaler.state.store`` and ``.sql``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from autoscaler.model import VertexId, frozen_map

__all__ = [
    "DelayedScaleDown",
    "JobState",
    "PendingRescale",
    "Recommendation",
    "ScalingRecord",
    "ScalingVerification",
    "VertexVerification",
]


class Recommendation(NamedTuple):
    """One scale-down recommendation of a vertex, remembered for the scale-down delay.

    ``outside_band`` says whether the vertex was outside its utilization band when it was recommended:
    the band gate counts a delayed scale-down by the flag of the recommendation it applies (reference
    ``DelayedScaleDown.RecommendedParallelism``). None means not known: stored by a version that did
    not remember it; the decide stage then uses the current tick's flag, as that version did.
    """

    ts_ms: int
    parallelism: int
    outside_band: bool | None = None


@dataclass(frozen=True, slots=True)
class DelayedScaleDown:
    """A vertex's pending scale-down: when it was first recommended and what was recommended since.

    ``recommendations`` holds :class:`Recommendation` entries with parallelism strictly decreasing, so
    its first entry inside the interval is the window maximum (the reference's monotonic deque). Plain
    ``(ts_ms, parallelism)`` pairs are accepted and read as recommendations without a band flag.
    """

    first_trigger_ms: int
    recommendations: tuple[Recommendation, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "recommendations", tuple(Recommendation(*r) for r in self.recommendations))

    def add(
        self, now_ms: int, parallelism: int, interval_ms: int, *, outside_band: bool | None
    ) -> DelayedScaleDown:
        """Remember this tick's recommendation: older ones that leave the interval, and those not above
        it (they can never be the window maximum again; an equal one is replaced so its time and flag
        are this tick's), are dropped."""
        kept = [
            r for r in self.recommendations if r.ts_ms >= now_ms - interval_ms and r.parallelism > parallelism
        ]
        latest = Recommendation(now_ms, parallelism, outside_band)
        return DelayedScaleDown(self.first_trigger_ms, (*kept, latest))

    def peak(self) -> Recommendation:
        """The window maximum: the recommendation a scale-down applies once its delay has elapsed."""
        return self.recommendations[0]

    def window_max(self) -> int:
        return self.peak().parallelism


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


class VertexVerification(NamedTuple):
    """One rescaled vertex measured once its metric window was full again after the rescale.

    ``expected`` is the capacity the decision promised for the parallelism the vertex ran at when
    measured (the decided one, unless Flink capped it); ``measured`` its true processing rate over that
    window, NaN when it could not be measured (unknown or infinite: an idle vertex).
    """

    parallelism: int
    expected: float
    measured: float

    @property
    def ratio(self) -> float:
        """Measured over expected capacity; NaN when either is unknown."""
        if not (math.isfinite(self.measured) and math.isfinite(self.expected)) or self.expected <= 0:
            return math.nan
        return self.measured / self.expected


@dataclass(frozen=True, slots=True)
class ScalingVerification:
    """What a rescale delivered, measured once (``autoscaler.evaluate.history.verify_scaling``).

    ``threshold`` is the ratio a vertex had to reach to count as delivering its expected capacity, kept
    with the verdict so a stored verdict reads the same after the threshold changes.
    """

    ts_ms: int
    threshold: float
    vertices: Mapping[VertexId, VertexVerification]

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "vertices", frozen_map({vid: VertexVerification(*v) for vid, v in self.vertices.items()})
        )

    @property
    def short(self) -> tuple[VertexId, ...]:
        """The vertices measured below ``threshold`` of their expected capacity."""
        return tuple(vid for vid, v in self.vertices.items() if v.ratio < self.threshold)

    @property
    def as_expected(self) -> bool:
        """No measured vertex fell short (vertices not measured are not held against the rescale)."""
        return not self.short


@dataclass(frozen=True, slots=True)
class ScalingRecord:
    """One executed scaling: the parallelism before and after, per changed vertex.

    ``metrics`` holds, per changed vertex, (true processing rate, expected processing rate) at decision
    time: ineffective scale-up detection and the observed scalability coefficient read them back
    (``autoscaler.evaluate.history``). A vertex without an entry is simply not judged.
    ``restart_duration_ms`` (set when the rescale is confirmed) feeds restart-time tracking.
    ``verification`` is what the rescale delivered, measured once over the first full metric window
    after it was confirmed; None until then (and in records stored before verification existed).
    ``needed_capacity`` holds, per vertex scaled *up*, the processing capacity its load then needed
    to be within the utilization band (its scale-up threshold): a later scale-down keeps that load
    within the band where it can (``scale-down.keep-last-peak.enabled``, tick/decide.py).
    ``job_id`` is the JobID the rescale was asked of: Flink holds it as that JobID's resource
    requirements, and only that JobID's metrics can verify it (:attr:`JobState.last_scaling_of_job_id`);
    None in records stored before it was kept.
    """

    ts_ms: int
    changes: Mapping[VertexId, tuple[int, int]]
    confirmed_ms: int | None = None
    restart_duration_ms: int | None = None
    metrics: Mapping[VertexId, tuple[float, float]] = field(default_factory=dict)
    verification: ScalingVerification | None = None
    needed_capacity: Mapping[VertexId, float] = field(default_factory=dict)
    job_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", frozen_map(self.changes))
        object.__setattr__(self, "metrics", frozen_map(self.metrics))
        object.__setattr__(self, "needed_capacity", frozen_map(self.needed_capacity))


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
    # Rescales in a row that Flink accepted but never ran (RescaleStuck), and when the last was given
    # up: the next one waits a doubling backoff instead of a PUT every confirm_timeout (tick/decide.py).
    stuck_rescales: int = 0
    stuck_ms: int | None = None
    # PUTs in a row that Flink refused (4xx, RescaleRejected), and when the last was: the next waits a
    # backoff doubling from one control interval, instead of a refused PUT every tick (tick/decide.py).
    refused_rescales: int = 0
    refused_ms: int | None = None
    # The JobID the state was last saved for; None before that (or when stored by a version that did not
    # keep it). Another JobID running under the job's name means it was resubmitted (tick/decide.py).
    job_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "delayed_scale_down", frozen_map(self.delayed_scale_down))
        object.__setattr__(self, "history", tuple(self.history))
        object.__setattr__(self, "overrides", frozen_map(self.overrides))

    @property
    def known_job_id(self) -> str | None:
        """The JobID this state belongs to: as saved, else the one its pending rescale was sent to (state
        stored before the JobID was kept); None when nothing says."""
        if self.job_id is not None:
            return self.job_id
        return self.pending.job_id if self.pending is not None else None

    @property
    def last_scaling_of_job_id(self) -> ScalingRecord | None:
        """The newest scaling if it was asked of the JobID the state follows now, else None.

        What Flink holds as a job's resource requirements, and what its metrics can verify, is the last
        rescale of that JobID: a resubmitted job starts from the requirements it was submitted with, and
        measures nothing of its predecessor's rescale. A record stored before records kept their JobID
        counts as the current JobID's, as it did then (a resubmission gives such records the old JobID).
        """
        if not self.history:
            return None
        last = self.history[-1]
        return last if last.job_id is None or last.job_id == self.job_id else None

    def for_resubmission(self, job_id: str) -> JobState:
        """The state the job name starts from under a new JobID, as an operator of a resubmitted job (or
        one restarted by a JobManager without HA) expects.

        Kept, because it describes the job's code and data, not one run of it: the scaling history
        (restart times, observed scalability, verifications) and the last rescale's time (cooldown).
        Dropped, because it belonged to the old JobID: the pending rescale (sent to a job that no longer
        runs, so it can never be confirmed), the stuck and refused rescale counts and their backoffs,
        the delayed scale-downs (recommended from the old run's metrics at its parallelism) and the
        overrides (what was asked of the old JobID; the new one runs what it was submitted with).
        The history's records stay the old JobID's: its last rescale is no request Flink holds for the
        new JobID, nor one the new JobID's metrics verify (:attr:`last_scaling_of_job_id`). Records
        stored before records kept their JobID are given the old one: they were asked of it or of one
        before it, never of the new one.
        """
        old = self.known_job_id
        history = tuple(r if r.job_id is not None else replace(r, job_id=old) for r in self.history)
        return replace(
            self,
            job_id=job_id,
            history=history,
            pending=None,
            delayed_scale_down={},
            overrides={},
            stuck_rescales=0,
            stuck_ms=None,
            refused_rescales=0,
            refused_ms=None,
        )

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
