"""The values that travel between the stages of a tick: a job's :class:`Decision`, its :class:`JobStep`
from stage to stage, what Flink was asked (:class:`RealizeResult`) and showed (:class:`Confirmation`), the
notices a stage leaves for the operator (:data:`Notice`), and what the tick produced: one
:class:`JobOutcome` per job and the :class:`TickReport` that holds them.

A stage changes nothing but the steps it returns: a job's next ``JobState`` and its notices travel on
its step, and the record stage (:mod:`autoscaler.tick.record`) is the one that writes them (the state,
then the events, metrics and log lines each notice stands for). A notice holds values, never text: the
texts are written once, in :mod:`autoscaler.tick.texts`.

They sit apart from the stages so that whoever reads outcomes (``explain``, the decision store, the
demo, tests) depends on the values, not on the control loop that makes them. They are not in
:mod:`autoscaler.model` because they hold a job's ``JobState`` and the plugin chain's result, whose
modules import ``autoscaler.model``: that would close an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from autoscaler.flink.models import ParallelismBounds
from autoscaler.foresight.forecast import Forecast, NoForecast
from autoscaler.foresight.worth import Weighing
from autoscaler.memory_advice import MemoryAdvice
from autoscaler.model import JobEvaluation, JobRef, JobSample, VertexChange, VertexId, frozen_map
from autoscaler.plugins.chain import ChainResult
from autoscaler.reasons import Reason
from autoscaler.slot_fit import IdleSlots, SlotFit
from autoscaler.state import JobState, PendingRescale, ScalingRecord

__all__ = [
    "Confirmation",
    "Confirmed",
    "Decided",
    "Decision",
    "Failed",
    "JobEvaluated",
    "JobOutcome",
    "JobStep",
    "LeaseExpired",
    "MemoryAdvised",
    "NotEvaluated",
    "Notice",
    "PluginsRan",
    "RealizeResult",
    "Rejected",
    "Rescaling",
    "Resubmitted",
    "SlotsLimited",
    "SlotsShort",
    "Stuck",
    "TickReport",
    "Vetoed",
    "WaitsForIdleSlots",
]


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
    # The job's load forecast (forecast.enabled; None otherwise), shown by explain; with cost.enabled the
    # gate "worth a restart" reads it (tick/decide.py).
    forecast: Forecast | NoForecast | None = None
    # cost.enabled: both costs the gate "worth a restart" weighed, on a change held as NotWorthIt or made
    # because it paid (None otherwise: not weighed, or forced), for explain to show as values
    weighing: Weighing | None = None

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


# ---------------------------------------------------------------------------------- notices
# What a stage leaves for the operator about one job, in the order it happened; the record stage turns
# each into its event, counters and log line (``autoscaler.tick.record``).
@dataclass(frozen=True, slots=True)
class Resubmitted:
    """The job name runs under a new JobID; ``before`` is the state the old JobID left."""

    old_job_id: str
    before: JobState


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The pending rescale runs (``confirmation.capped``: below what was asked)."""

    confirmation: Confirmation
    names: Mapping[VertexId, str]


@dataclass(frozen=True, slots=True)
class Stuck:
    """A rescale Flink accepted never ran within ``timeout``; ``in_a_row`` so far, next not before
    ``retry_ms``."""

    pending: PendingRescale
    timeout: timedelta
    in_a_row: int
    retry_ms: int | None


@dataclass(frozen=True, slots=True)
class SlotsShort:
    """How many slots the job runs short of its standing request (a gauge, 0 when none)."""

    slots: int


@dataclass(frozen=True, slots=True)
class NotEvaluated:
    """The job has no evaluation this tick (``detail``: the evaluator's error, or that none came)."""

    detail: str


@dataclass(frozen=True, slots=True)
class JobEvaluated:
    """The job's evaluation: its gauges and its warnings (ineffective, limited, fallbacks, skew)."""

    evaluation: JobEvaluation


@dataclass(frozen=True, slots=True)
class Verified:
    """The first full window after a rescale measured what it delivered (``record.verification``)."""

    evaluation: JobEvaluation
    record: ScalingRecord


@dataclass(frozen=True, slots=True)
class Decided:
    """What the gates said (the operator hears of deferrals, forced rescales, unknown metrics, memory,
    quotas, advisor mode and excluded periods)."""

    decision: Decision


@dataclass(frozen=True, slots=True)
class PluginsRan:
    """The job's executor chain ran; each plugin's verdict."""

    chain: ChainResult


@dataclass(frozen=True, slots=True)
class Vetoed:
    """A plugin vetoed (or failed, or could not be loaded): nothing is asked of Flink."""

    chain: ChainResult


@dataclass(frozen=True, slots=True)
class SlotsLimited:
    """The rescale does not fit the free slots: ``action`` (waited, capped, ignored) as
    ``scaling.insufficient-slots`` says, ``why`` (claimed by the jobs before it, or short alone)."""

    action: str
    why: str
    fit: SlotFit
    asked: tuple[tuple[str, int, int], ...] = ()  # capped: (vertex name, asked, wanted)
    before: tuple[str, ...] = ()  # the jobs that claimed slots before it this tick


@dataclass(frozen=True, slots=True)
class WaitsForIdleSlots:
    """The rescale fits once the slots smaller runs left idle come back: it waits for them."""

    fit: SlotFit
    idle: tuple[IdleSlots, ...]


@dataclass(frozen=True, slots=True)
class LeaseExpired:
    """The job's lease lapsed during the tick: not rescaled (another daemon may act)."""

    decision: Decision


@dataclass(frozen=True, slots=True)
class Rescaling:
    """A rescale is about to be asked of Flink: its ScalingReport."""

    decision: Decision


@dataclass(frozen=True, slots=True)
class Rejected:
    """Flink refused the PUT (4xx): its status and words, how many in a row, the next not before."""

    desired: Mapping[VertexId, int]
    status: int
    messages: tuple[str, ...]
    in_a_row: int
    retry_ms: int | None


@dataclass(frozen=True, slots=True)
class MemoryAdvised:
    """The TaskManager memory advice for the new parallelism (advised, never applied over REST)."""

    advice: MemoryAdvice


@dataclass(frozen=True, slots=True)
class Failed:
    """The job's tick failed (``reason``: the cluster's error or ours); nothing was scaled."""

    reason: Reason
    error: str


Notice = (
    Resubmitted
    | Confirmed
    | Stuck
    | SlotsShort
    | NotEvaluated
    | JobEvaluated
    | Verified
    | Decided
    | PluginsRan
    | Vetoed
    | SlotsLimited
    | WaitsForIdleSlots
    | LeaseExpired
    | Rescaling
    | Rejected
    | MemoryAdvised
    | Failed
)


@dataclass(frozen=True, slots=True)
class JobStep:
    """One job between the stages: its sample, what was decided so far, its outcome once over, the state
    the record stage is to write for it (None: nothing to write) and its notices so far."""

    sample: JobSample
    decision: Decision | None = None
    chain: ChainResult | None = None
    outcome: JobOutcome | None = None
    state: JobState | None = None
    notices: tuple[Notice, ...] = ()

    @property
    def job(self) -> JobRef:
        return self.sample.job

    def noting(self, *notices: Notice) -> JobStep:
        """This step with ``notices`` told after the ones it has."""
        return replace(self, notices=(*self.notices, *notices))

    def ended(self, outcome: JobOutcome, *notices: Notice, state: JobState | None = None) -> JobStep:
        """This step over with ``outcome``, after ``notices``; ``state``: the job's state to write."""
        state = state if state is not None else self.state
        return replace(self, outcome=outcome, state=state, notices=(*self.notices, *notices))


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
