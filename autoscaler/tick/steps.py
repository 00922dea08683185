"""The values that travel between the stages of a tick: a job's :class:`Decision`, its :class:`JobStep`
from stage to stage, what Flink was asked (:class:`RealizeResult`) and showed (:class:`Confirmation`), and
what the tick produced: one :class:`JobOutcome` per job and the :class:`TickReport` that holds them.

They sit apart from the stages so that whoever reads outcomes (``explain``, the decision store, the
demo, tests) depends on the values, not on the control loop that makes them. They are not in
:mod:`autoscaler.model` because they hold a job's ``JobState`` and the plugin chain's result, whose
modules import ``autoscaler.model``: that would close an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autoscaler.flink.models import ParallelismBounds
from autoscaler.model import JobEvaluation, JobRef, JobSample, VertexChange, VertexId, frozen_map
from autoscaler.plugins.chain import ChainResult
from autoscaler.reasons import Reason
from autoscaler.state import JobState

__all__ = ["Confirmation", "Decision", "JobOutcome", "JobStep", "RealizeResult", "TickReport"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one job this tick.

    ``outcome`` is ``Reason.SCALING`` when ``changes`` are to be applied; any other reason means
    nothing is applied (``changes`` still hold what advisor mode, an excluded period or a quota
    blocked, so it can be reported).
    """

    job: JobRef
    outcome: Reason
    detail: str
    changes: Mapping[VertexId, VertexChange]
    state: JobState
    evaluation: JobEvaluation | None = None
    retry_at_ms: int | None = None  # COOLDOWN_DEFERRED: decide again exactly then
    forced: bool = False  # SCALING below the minimum requirement, forced by scaling-interval.max

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", frozen_map(self.changes))

    @property
    def applies(self) -> bool:
        return self.outcome is Reason.SCALING and bool(self.changes)

    def with_changes(
        self, changes: Mapping[VertexId, VertexChange], outcome: Reason, detail: str
    ) -> Decision:
        return replace(self, changes=changes, outcome=outcome, detail=detail)


@dataclass(frozen=True, slots=True)
class RealizeResult:
    issued: bool  # a PUT was sent
    requirements: Mapping[VertexId, ParallelismBounds]  # what Flink was asked for (after this call)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", frozen_map(self.requirements))


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The outcome of checking a pending rescale against what the job now runs."""

    done: bool
    actual: Mapping[VertexId, int]
    capped: bool = False  # Flink gave less than asked (e.g. not enough slots)
    restart_duration_ms: int | None = None
    asked: Mapping[VertexId, int] = field(default_factory=dict)  # the rescale's targets


@dataclass(frozen=True, slots=True)
class JobStep:
    """One job between the stages: its sample, what was decided so far, and its outcome once over."""

    sample: JobSample
    decision: Decision | None = None
    chain: ChainResult | None = None
    outcome: JobOutcome | None = None

    @property
    def job(self) -> JobRef:
        return self.sample.job


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What happened to one job in one tick (the demo prints these; tests assert on them)."""

    job: JobRef
    now_ms: int
    outcome: Reason
    detail: str
    decision: Decision | None = None
    chain: ChainResult | None = None
    realized: RealizeResult | None = None


@dataclass(frozen=True, slots=True)
class TickReport:
    """Every job's outcome of one tick, and the clusters that could not be read at all."""

    now_ms: int
    outcomes: tuple[JobOutcome, ...]
    cluster_errors: Mapping[str, str] = field(default_factory=dict)

    def for_job(self, name: str) -> JobOutcome | None:
        return next((o for o in self.outcomes if o.job.name == name), None)
