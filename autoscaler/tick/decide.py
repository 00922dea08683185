"""The decision stage: evaluation + remembered state + options + now -> Decision (and the next state).

At some 700 lines it stays one module, because it is the one place that says why a job is or is not
rescaled: :func:`decide_jobs` follows a resubmitted JobID, confirms the pending rescale and computes the
backoffs, then :func:`decide` runs the gates.

:func:`decide` is pure: no I/O, no clock. Every gate that can hold a job back is an entry of one ordered
table, :data:`GATES` (name, function from the job's values to the decision that holds it, or None), so
"why wasn't job X scaled?" is answered by reading it top to bottom; the first gate that answers decides,
and every "no" carries a ``Reason``. Per vertex the evaluator's recommendation passes the scale-down
delay first (``_vertex_changes``); then the job-level gates decide whether anything is applied. The
order follows the reference's ``ScalingExecutor`` (§1.8) around gates of ours: a rescale in flight and
the stuck-rescale backoff, metrics ready and known come first; the cooldown, the standing request and
the refused-PUT backoff last.

Advisor mode, excluded periods, quotas, cooldowns, the standing request and the refused-PUT backoff keep
the changes in the decision, so they can be reported; a cooldown also says when to decide again
(``retry_at_ms``). The gates that need the cluster's view (free slots) are in :mod:`autoscaler.tick.slots`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import cached_property

from autoscaler.calendar import excluded_period_at
from autoscaler.durations import to_ms, utc_text
from autoscaler.evaluate.history import verify_last_scaling
from autoscaler.evaluate.scaler import expected_processing_rate, scale_by_factor
from autoscaler.evaluate.stage import Evaluated
from autoscaler.foresight.cost import CostModel
from autoscaler.foresight.forecast import Forecast, NoForecast
from autoscaler.foresight.worth import JobQueue, Weighing, weigh
from autoscaler.model import (
    HEAP_USAGE_RATIO,
    JobEvaluation,
    JobSample,
    VertexChange,
    VertexEvaluation,
    VertexId,
)
from autoscaler.reasons import Reason
from autoscaler.resources import quota_exceeded, required_slots
from autoscaler.settings import AutoscalerOptions
from autoscaler.slot_fit import below_request, below_text, slots_short_of_request
from autoscaler.state import DelayedScaleDown, JobState, PendingRescale
from autoscaler.state.tick import Loaded
from autoscaler.tick.each import each_job
from autoscaler.tick.foresee import offered_rate
from autoscaler.tick.steps import (
    Confirmation,
    Confirmed,
    Decided,
    Decision,
    JobEvaluated,
    JobOutcome,
    JobStep,
    NotEvaluated,
    Notice,
    Resubmitted,
    SlotsShort,
    Stuck,
    Verified,
)
from autoscaler.tick.texts import refused_hold_text, stuck_hold_text
from autoscaler.unknown_metrics import metrics_unknown, partly_unknown

__all__ = ["confirm", "decide", "decide_jobs", "describe_changes"]


@dataclass(frozen=True)
class JobView:
    """What the gates read of one job this tick: its evaluation, its state (after the pending rescale
    was settled), its options, now, and what ``decide_jobs`` computed for it (the backoffs' ends, the
    standing request). The changes the evaluation asks for are worked out once, on first use, by the
    first gate that needs them (none before memory pressure: an evaluation that is not ready or not
    known proposes nothing)."""

    evaluation: JobEvaluation
    state: JobState
    options: AutoscalerOptions
    now_ms: int
    flink_cooldown_ms: int = 0
    stuck_retry_ms: int | None = None  # the stuck-rescale backoff ends then (decide_jobs)
    refused_retry_ms: int | None = None  # the refused-PUT backoff ends then (decide_jobs)
    below: Mapping[VertexId, tuple[int, int]] = field(default_factory=dict)  # vertex -> (runs, asked)
    forecast: Forecast | NoForecast | None = None  # forecast.enabled: the job's load forecast (foresee)

    @cached_property
    def proposed(
        self,
    ) -> tuple[dict[VertexId, VertexChange], dict[VertexId, DelayedScaleDown], set[VertexId], list[VertexId]]:
        """The changes, the delayed scale-downs to remember, the changes outside the band and the vertices
        kept at their last peak (:func:`_vertex_changes`); with ``cost.enabled`` and a foreseen rise, the
        vertices that would not carry its peak sized for it (:func:`_foreseen`)."""
        changes, delayed, outside, kept = _vertex_changes(
            self.evaluation, self.state, self.options, self.now_ms
        )
        for vid, change in self.ahead.items():
            if vid not in changes or change.target > changes[vid].target:
                changes[vid] = change
                outside.add(vid)
                delayed.pop(vid, None)  # sized up for the peak: no scale-down of it is pending
        return changes, delayed, outside, kept

    @cached_property
    def ahead(self) -> dict[VertexId, VertexChange]:
        """With ``cost.enabled`` and a foreseen rise: the scale-ups its peak asks for (:func:`_foreseen`)."""
        if not (self.options.cost_enabled and isinstance(self.forecast, Forecast)):
            return {}
        rise = self.forecast.rise_over(offered_rate(self.evaluation))
        return _foreseen(self.evaluation, self.options, rise)

    @cached_property
    def foreseen(self) -> frozenset[VertexId]:
        """The vertices whose change is sized for the forecast's peak rather than for the load now."""
        return frozenset(vid for vid, c in self.changes.items() if self.ahead.get(vid) == c)

    @property
    def changes(self) -> dict[VertexId, VertexChange]:
        return self.proposed[0]

    @cached_property
    def weighing(self) -> Weighing | None:
        """With ``cost.enabled``: the changes priced against waiting (:func:`_weigh`); None when off, or
        when the job cannot be priced (its rates unknown)."""
        return _weigh(self) if self.options.cost_enabled and self.changes else None

    @cached_property
    def new_state(self) -> JobState:
        return replace(self.state, delayed_scale_down=self.proposed[1])

    @cached_property
    def since_ms(self) -> int:
        return _cooldown_start(self.state, self.evaluation)

    @cached_property
    def total_change(self) -> int:
        return sum(abs(c.target - c.current) for c in self.changes.values())

    @cached_property
    def meets_minimum(self) -> bool:
        return bool(self.proposed[2]) and self.total_change >= self.options.scaling_min_parallelism_change

    @cached_property
    def forced(self) -> bool:
        return (
            not self.meets_minimum
            and bool(self.changes)
            and _max_interval_passed(self.options, self.since_ms, self.now_ms)
        )

    @cached_property
    def asked(self) -> dict[VertexId, VertexChange]:
        """The changes less the ones Flink already holds as a standing request (:func:`_standing_request`)."""
        below = self.below
        return {vid: c for vid, c in self.changes.items() if vid not in below or c.target != below[vid][1]}

    def no(self, reason: Reason, detail: str, state: JobState | None = None) -> Decision:
        """A hold that proposes nothing."""
        return Decision(
            self.evaluation.job, reason, detail, {}, self.state if state is None else state, self.evaluation
        )

    def held(
        self, reason: Reason, detail: str, changes: Mapping[VertexId, VertexChange] | None = None
    ) -> Decision:
        """A hold that keeps the changes it blocked, so they can be reported."""
        job, evaluation = self.evaluation.job, self.evaluation
        return Decision(
            job, reason, detail, self.changes if changes is None else changes, self.new_state, evaluation
        )


Gate = Callable[[JobView], Decision | None]
"""A gate: a job's values -> the decision that holds it back, or None to let it pass."""


def _in_flight(job: JobView) -> Decision | None:
    if job.state.pending is None:
        return None
    return job.no(Reason.RESCALE_IN_FLIGHT, "waiting for the last rescale to show in /jobs/:id")


def _stuck_backoff(job: JobView) -> Decision | None:
    """The job's last rescales were accepted but never ran: none before the backoff ends
    (:func:`stuck_retry_ms`)."""
    retry = job.stuck_retry_ms
    if retry is None or job.now_ms >= retry:
        return None
    return job.no(Reason.RESCALE_STUCK, stuck_hold_text(job.state.stuck_rescales, retry, job.now_ms))


def _not_ready(job: JobView) -> Decision | None:
    """Stabilization, a window not full yet, a load change (``metrics.load-change.threshold``)."""
    evaluation = job.evaluation
    if evaluation.not_ready is None:
        return None
    if evaluation.load_change_ms is not None:
        # The delayed scale-downs were recommended for the old load, the last of them on a window
        # that already straddled the change: none of them may size the job for the new one.
        return job.no(
            evaluation.not_ready, _not_ready_text(evaluation), replace(job.state, delayed_scale_down={})
        )
    return job.no(evaluation.not_ready, _not_ready_text(evaluation))


def _unknown(job: JobView) -> Decision | None:
    # Unknown is not "in band": nothing was judged, so nothing is scaled and the delayed
    # scale-downs stay as they were (an unknown tick neither adds to nor clears them).
    unknown = metrics_unknown(job.evaluation, job.options)
    return job.no(Reason.METRICS_UNKNOWN, unknown) if unknown else None


def _memory(job: JobView) -> Decision | None:
    pressure = _memory_pressure(job.evaluation, job.options)
    return job.no(Reason.MEMORY_PRESSURE, pressure) if pressure else None


def _scale_down_delay(job: JobView) -> Decision | None:
    """Only delayed scale-downs were outside the band, and ``scale-down.interval`` has not passed."""
    if job.meets_minimum or job.forced:
        return None
    changes, delayed, outside, _ = job.proposed
    vertices = job.evaluation.vertices
    held = [vid for vid in delayed if vid not in changes and vertices[vid].outside_band]
    if not held or outside:
        return None
    first = min(delayed[vid].first_trigger_ms for vid in held)
    wait_s = max(0, first + to_ms(job.options.scale_down_interval) - job.now_ms) / 1000
    return job.no(
        Reason.SCALE_DOWN_DELAYED,
        f"scale-down held for scale-down.interval ({wait_s:.0f} s left)",
        job.new_state,
    )


def _band(job: JobView) -> Decision | None:
    """Every vertex that would change is within its band, or the total change is below
    ``scaling.min-parallelism-change``; unless ``scaling-interval.max`` passed (forced, ours)."""
    if job.meets_minimum or job.forced:
        return None
    options = job.options
    if job.proposed[2]:
        return job.no(
            Reason.IN_BAND,
            f"total parallelism change {job.total_change} is below scaling.min-parallelism-change "
            f"{options.scaling_min_parallelism_change}",
            job.new_state,
        )
    return job.no(
        Reason.IN_BAND,
        "all vertices that could change are within their utilization band"
        + partly_unknown(job.evaluation, options),
        job.new_state,
    )


def _worth_it(job: JobView) -> Decision | None:
    """``cost.enabled``: the change must cost less than waiting over ``cost.horizon``
    (:mod:`autoscaler.foresight.worth`). A change forced by ``scaling-interval.max`` is not weighed, and
    one that cannot be priced (rates unknown) is not held for it."""
    weighing = job.weighing
    if job.forced or weighing is None or weighing.worth_it:
        return None
    text = f"{_describe(job.changes, job.evaluation)} does not pay for itself {weighing.text()}"
    return replace(job.no(Reason.NOT_WORTH_IT, text, job.new_state), weighing=weighing)


def _advisor(job: JobView) -> Decision | None:
    if job.options.scaling_enabled:
        return None
    return job.held(Reason.ADVISOR_MODE, "scaling execution disabled by config (advisor mode)")


def _excluded_period(job: JobView) -> Decision | None:
    period = excluded_period_at(job.options.excluded_periods, job.now_ms)
    if period is None:
        return None
    return job.held(
        Reason.EXCLUDED_PERIOD,
        f"Scaling execution disabled by config {_EXCLUDED_KEY}: now ({utc_text(job.now_ms)}) is in the "
        f"excluded period {period.text!r}",
    )


def _quota(job: JobView) -> Decision | None:
    evaluation, options = job.evaluation, job.options
    quota = quota_exceeded(
        evaluation.sample.topology,
        {vid: c.target for vid, c in job.changes.items()},
        evaluation.sample.taskmanagers,
        options.quota_cpu,
        options.quota_memory,
    )
    return job.held(Reason.RESOURCE_QUOTA_REACHED, quota) if quota else None


def _cooldown(job: JobView) -> Decision | None:
    """``scaling-interval.min`` and Flink's adaptive-scheduler cooldown: decide again when it ends."""
    options, flink_cooldown_ms = job.options, job.flink_cooldown_ms
    cooldown_ms = max(
        to_ms(options.scaling_interval_min) if options.scaling_interval_min else 0, flink_cooldown_ms
    )
    retry = job.since_ms + cooldown_ms
    if job.now_ms >= retry:
        return None
    which = (
        "Flink's adaptive-scheduler cooldown" if flink_cooldown_ms == cooldown_ms else "scaling-interval.min"
    )
    text = (
        f"{_describe(job.changes, job.evaluation)} deferred by {which} until {utc_text(retry)} "
        f"({(retry - job.now_ms) / 1000:.0f} s)"
    )
    return replace(job.held(Reason.COOLDOWN_DEFERRED, text), retry_at_ms=retry)


def _standing_request(job: JobView) -> Decision | None:
    """A vertex Flink runs below what was asked for it (too few free slots) keeps that request: a change
    to the same parallelism is not asked for again, recorded as a rescale, or left to get stuck. A
    decision with nothing else to change waits for slots (``WaitingForSlots``), saying so; one with
    more to change asks for the rest (:attr:`JobView.asked`, :func:`_scaling`)."""
    if job.asked or not job.changes:
        return None
    # Replaces what would have been the rescale: a forced one is still counted and told as forced.
    return replace(job.held(Reason.WAITING_FOR_SLOTS, _standing_text(job)), forced=job.forced)


def _refused_backoff(job: JobView) -> Decision | None:
    """A rescale is not asked for while a refused one's backoff runs (``RescaleRejected``)."""
    retry = job.refused_retry_ms
    if retry is None or job.now_ms >= retry:
        return None
    text = refused_hold_text(job.state.refused_rescales, retry, job.now_ms)
    return replace(job.held(Reason.RESCALE_REJECTED, text, job.asked), forced=job.forced)


# Every gate that can hold a job back, in the order they run: the first that answers decides. The
# changes are worked out between memory pressure and the scale-down delay (JobView.proposed). After this
# table a job still passes its executor plugins (tick/plugins.py), the free slots of its cluster
# (tick/slots.py, claim_slots: they need the cluster's view) and the lease, checked at the PUT
# (tick/realize.py).
GATES: tuple[tuple[str, Gate], ...] = (
    ("rescale in flight", _in_flight),
    ("stuck-rescale backoff", _stuck_backoff),
    ("metrics ready", _not_ready),  # stabilization, window not full, load change
    ("metrics known", _unknown),
    ("memory pressure", _memory),
    ("scale-down delay", _scale_down_delay),  # vertex.exclude.ids: such a vertex proposes nothing
    ("utilization band", _band),  # and scaling.min-parallelism-change; forced by scaling-interval.max
    ("worth a restart", _worth_it),  # cost.enabled: changing now costs less than waiting
    ("advisor mode", _advisor),
    ("excluded periods", _excluded_period),
    ("resource quota", _quota),
    ("cooldown", _cooldown),  # scaling-interval.min, Flink's adaptive-scheduler cooldown
    ("standing request", _standing_request),
    ("refused rescale", _refused_backoff),  # the refused-PUT backoff
)


def decide(
    evaluation: JobEvaluation,
    state: JobState,
    options: AutoscalerOptions,
    now_ms: int,
    *,
    flink_cooldown_ms: int = 0,
    stuck_retry_ms: int | None = None,
    refused_retry_ms: int | None = None,
    below: Mapping[VertexId, tuple[int, int]] | None = None,
    forecast: Forecast | NoForecast | None = None,
) -> Decision:
    """Run the gates (:data:`GATES`) in order; the TaskManager resources for the quota come with the
    evaluation's sample. The decision carries ``forecast`` (the job's load forecast, for ``explain``).

    ``flink_cooldown_ms`` is the cluster's ``jobmanager.adaptive-scheduler.executing.cooldown-after-
    rescaling``: Flink holds back any rescale inside it, so the daemon never issues one there.
    ``stuck_retry_ms``: the job's last rescales never ran; none is issued before then.
    ``refused_retry_ms``: Flink refused the last PUTs; none is asked for before then. ``below``: the
    vertices Flink runs below a standing request, vertex -> (runs, asked) (``slot_fit.below_request``).
    ``forecast``: the load the job's history foresees; ``cost.enabled`` prices waiting at its peak.
    """
    job = JobView(
        evaluation,
        state,
        options,
        now_ms,
        flink_cooldown_ms=flink_cooldown_ms,
        stuck_retry_ms=stuck_retry_ms,
        refused_retry_ms=refused_retry_ms,
        below=below or {},
        forecast=forecast,
    )
    decision = _gates(job)
    return decision if forecast is None else replace(decision, forecast=forecast)


def _gates(job: JobView) -> Decision:
    """The first gate that holds the job back decides; if none does, it is rescaled."""
    for _name, gate in GATES:
        held = gate(job)
        if held is not None:
            return held
    return _scaling(job)


def _scaling(job: JobView) -> Decision:
    """Every gate passed: the changes to ask of Flink, and why each is what it is."""
    evaluation = job.evaluation
    detail = _describe(job.changes, evaluation)
    kept = job.proposed[3]
    if kept:
        names = {v.id: v.name for v in evaluation.sample.topology}
        detail = (
            f"{detail} ({', '.join(names.get(vid, vid) for vid in kept)}: no lower, the load of the last "
            "scale-up stays within the utilization band there; scale-down.keep-last-peak.enabled)"
        )
    if job.forced:
        detail = f"{detail} (forced: last rescale more than scaling-interval.max ago)"
    elif job.weighing is not None:
        detail = f"{detail}; it pays for itself {job.weighing.text()}"
    if job.foreseen and isinstance(job.forecast, Forecast):
        names = {v.id: v.name for v in evaluation.sample.topology}
        ahead = ", ".join(names.get(vid, vid) for vid in sorted(job.foreseen))
        f = job.forecast
        peak = f"{f.peak_rate:.6g} rec/s ({f.basis}, confidence {f.confidence:.2f})"
        detail = f"{detail} ({ahead}: sized ahead for the forecast peak of {peak})"
    if len(job.asked) != len(job.changes):
        detail = f"{detail}; {_standing_text(job)}"
    return Decision(
        evaluation.job,
        Reason.SCALING,
        detail,
        job.asked,
        job.new_state,
        evaluation,
        forced=job.forced,
        weighing=None if job.forced else job.weighing,
    )


def _standing_text(job: JobView) -> str:
    names = {v.id: v.name for v in job.evaluation.sample.topology}
    return f"Flink runs {below_text(job.below, names)} (too few free slots): the request stands"


def _weigh(job: JobView) -> Weighing | None:
    """The job's changes priced against waiting: over ``cost.horizon``, and at least until the next
    rescale could be made after this one (``scaling-interval.min``, Flink's cooldown); the restart
    pauses the job for the restart time its evaluation used; the load is the forecast's peak where the
    job's history foresees a rise.

    A scale-down's horizon is ``cost.horizon`` plus how long it has been asked for (since the lower
    load was first seen, :func:`_lower_for_ms`): a load that has stayed low for an hour is expected to
    stay low longer than one that fell a minute ago. So a scale-down that does not pay while the drop
    may be a dip (a cycle's trough, a lull) pays once the lower load has lasted, and a small one (a
    slot saved) is not held forever by a horizon too short to repay its restart."""
    queue = queue_of(job.evaluation, {vid: c.target for vid, c in job.changes.items()})
    if queue is None:
        return None
    options = job.options
    interval_min_ms = to_ms(options.scaling_interval_min) if options.scaling_interval_min else 0
    horizon_ms = max(to_ms(options.cost_horizon) + _lower_for_ms(job), interval_min_ms, job.flink_cooldown_ms)
    pause_s = job.evaluation.restart_time_s
    if not math.isfinite(pause_s):
        pause_s = options.restart_time.total_seconds()
    # A forecast rise: both futures face its peak (the job's offered rate at it, never below the rate
    # now), so a scale-up pays ahead of it and a scale-down that would not carry it does not pay.
    forecast = job.forecast
    rate, rise_in_s = None, 0.0
    if isinstance(forecast, Forecast):
        rate, rise_in_s = max(queue.rate, forecast.peak_rate), max(0, forecast.peak_at_ms - job.now_ms) / 1000
    return weigh(queue, CostModel.of(options), horizon_ms / 1000, pause_s, rate=rate, rise_in_s=rise_in_s)


def _lower_for_ms(job: JobView) -> int:
    """How long the job's scale-down has been asked for: since its vertices' pending scale-downs were
    first recommended (the newest of them; the delay of ``scale-down.interval`` included). 0 when a
    change is a scale-up, none is pending, or the job's history foresees a rise."""
    changes = job.changes.values()
    if not changes or any(c.is_scale_up for c in changes) or isinstance(job.forecast, Forecast):
        return 0  # a foreseen rise says the lower load will not last, however long it has
    pending = job.new_state.delayed_scale_down
    firsts = [pending[c.vertex].first_trigger_ms for c in changes if c.vertex in pending]
    return max(0, job.now_ms - max(firsts)) if firsts else 0


def queue_of(evaluation: JobEvaluation, targets: Mapping[VertexId, int]) -> JobQueue | None:
    """The job as one queue (:class:`~autoscaler.foresight.worth.JobQueue`), now and at ``targets``
    (vertex -> parallelism; the others keep theirs).

    The sources' offered rate is their target data rate (what arrives, the lag's growth included) and
    the backlog their lag. The capacity is the job's bottleneck: each vertex processes ``true processing
    rate / target data rate`` times the load it is offered, the job as much as its least such vertex; at
    another parallelism a vertex processes what the reference expects, linear in its subtasks. None when
    it cannot be priced: a source's offered rate unknown, or no vertex with both known."""
    rate = offered_rate(evaluation)  # NaN when a source's is unknown
    if not rate > 0:
        return None
    topology = evaluation.sample.topology
    lags = (e.lag for vid, e in evaluation.vertices.items() if topology.is_source(vid))
    backlog = math.fsum(lag for lag in lags if math.isfinite(lag) and lag > 0)
    now = then = math.inf
    for vid, e in evaluation.vertices.items():
        tpr, tdr = e.true_processing_rate, e.target_data_rate
        if not (0 < tpr < math.inf and 0 < tdr < math.inf and e.parallelism > 0):
            continue  # unknown (NaN compares false) or idle: no bottleneck to price
        now = min(now, tpr / tdr)
        then = min(then, expected_processing_rate(tpr, e.parallelism, targets.get(vid, e.parallelism)) / tdr)
    if now == math.inf or then == math.inf:
        return None
    return JobQueue(
        rate=rate,
        backlog=backlog,
        capacity_now=rate * now,
        capacity_then=rate * then,
        slots_now=required_slots(topology),
        slots_then=required_slots(topology, targets),
    )


def _cooldown_start(state: JobState, evaluation: JobEvaluation) -> int:
    """When the cooldown started: the last rescale, or a later restart or failover of the job.

    The restart that our own rescale caused is part of that rescale (its time is known once the
    rescale was confirmed), so the cooldown ends exactly at last rescale + min; any restart after it
    (a failover) starts the cooldown over. A job we never rescaled counts from its start.
    """
    running_since = evaluation.sample.running_since_ms
    last = state.history[-1] if state.history else None
    if state.last_rescale_ms is None or last is None:
        return running_since
    own_restart = last.ts_ms + last.restart_duration_ms if last.restart_duration_ms is not None else None
    if own_restart is not None and running_since <= own_restart:
        return state.last_rescale_ms
    return max(state.last_rescale_ms, running_since)


def _max_interval_passed(options: AutoscalerOptions, since_ms: int, now_ms: int) -> bool:
    limit = options.scaling_interval_max
    return limit is not None and now_ms - since_ms > to_ms(limit)


def _vertex_changes(
    evaluation: JobEvaluation, state: JobState, options: AutoscalerOptions, now_ms: int
) -> tuple[dict[VertexId, VertexChange], dict[VertexId, DelayedScaleDown], set[VertexId], list[VertexId]]:
    """Apply the scale-down delay per vertex (reference: DelayedScaleDown / FLINK-36535).

    Returns the changes, the delayed scale-downs to remember (a vertex whose delay has elapsed is in
    both), the changed vertices whose applied recommendation was outside the utilization band, and the
    vertices whose scale-down stopped above it for their last peak (:func:`_keep_last_peak`).

    Only a vertex that would change can count as outside (reference ScalingExecutor): a vertex stuck at
    a limit (e.g. p=1 with far more capacity than needed) must not hold the band gate open, or every
    in-band recommendation of the other vertices would be applied on every tick. A delayed scale-down
    counts with the flag of the recommendation it applies (the window maximum), not this tick's, as the
    reference's ``RecommendedParallelism`` does; a recommendation stored before the flag was kept
    (older state) falls back to this tick's flag, which is what was used then.
    """
    interval_ms = to_ms(options.scale_down_interval)
    changes: dict[VertexId, VertexChange] = {}
    delayed: dict[VertexId, DelayedScaleDown] = {}
    outside: set[VertexId] = set()
    kept: list[VertexId] = []
    for v in evaluation.vertices.values():
        previous = state.delayed_scale_down.get(v.vertex)
        if _excluded(v, options):
            continue
        if v.unknown:
            # Unknown is no recommendation: it neither adds to a pending scale-down nor clears it.
            if previous is not None:
                delayed[v.vertex] = previous
            continue
        if v.target_parallelism == v.parallelism:
            continue
        if v.target_parallelism > v.parallelism or interval_ms <= 0:
            changes[v.vertex] = VertexChange(v.vertex, v.parallelism, v.target_parallelism)
            if v.outside_band:
                outside.add(v.vertex)
            continue
        pending = (previous or DelayedScaleDown(_delay_origin(evaluation, now_ms), ())).add(
            now_ms, v.target_parallelism, interval_ms, outside_band=v.outside_band
        )
        # Kept until a scaling executes (JobState.with_scaling clears it), as in the reference: a
        # scale-down blocked by a later gate (advisor mode, excluded period, quota, a plugin's veto)
        # must not start its delay over on the next tick.
        delayed[v.vertex] = pending
        if now_ms - interval_ms < pending.first_trigger_ms:
            continue
        peak = pending.peak()
        if peak.parallelism < v.parallelism:
            target = _keep_last_peak(v, peak.parallelism, state, options)
            if target != peak.parallelism:
                kept.append(v.vertex)
            changes[v.vertex] = VertexChange(v.vertex, v.parallelism, target)
            if v.outside_band if peak.outside_band is None else peak.outside_band:
                outside.add(v.vertex)
    return changes, delayed, outside, kept


def _keep_last_peak(v: VertexEvaluation, target: int, state: JobState, options: AutoscalerOptions) -> int:
    """The parallelism a due scale-down goes to (``scale-down.keep-last-peak.enabled``, ours).

    The smallest parallelism from ``target`` up whose capacity (this tick's per-subtask rate) covers
    what the load of the vertex's last scale-up needed to be within the band, if the current load is
    within the band there too (capacity at most this tick's scale-down threshold). Else ``target``: no
    size holds both (a real step down), or the vertex was never scaled up in the retained history.
    """
    if not options.scale_down_keep_last_peak:
        return target
    needed = next(
        (r.needed_capacity[v.vertex] for r in reversed(state.history) if v.vertex in r.needed_capacity),
        None,
    )
    per_subtask = v.true_processing_rate / v.parallelism
    if needed is None or not (math.isfinite(per_subtask) and per_subtask > 0):
        return target
    for p in range(target, v.parallelism):
        capacity = per_subtask * p
        if capacity >= needed:
            return p if capacity <= v.scale_down_threshold else target
    return target


def _delay_origin(evaluation: JobEvaluation, now_ms: int) -> int:
    """When a new scale-down delay starts: now (the reference), or, on the first decision after a load
    change, at the first sample of the new load (``metrics.load-change.threshold``, ours).

    The delay asks that the lower load last ``scale-down.interval`` before the job follows it. The
    reference can only count from the first recommendation, which comes a full window after the load
    fell; the window restarted at the change has shown nothing but the new load since its first sample
    of it, so the load has lasted since then. Counting from there saves a window of over-provisioning
    per step down and asks the load to last just as long. A recommendation that first comes on a later
    tick (a drift since, not the step) counts from now.
    """
    since = evaluation.level_since_ms
    return since if since is not None and since <= now_ms else now_ms


def _foreseen(
    evaluation: JobEvaluation, options: AutoscalerOptions, factor: float
) -> dict[VertexId, VertexChange]:
    """The scale-ups a foreseen rise asks for: each vertex sized, as the scaler sizes it (§1.6: clamps,
    limits, alignment), for its target data rate times the rise (the forecast's peak over the job's
    offered rate now) at ``utilization.target``; only the vertices that would need more than they run.
    Never a scale-down: a forecast alone never takes capacity away."""
    if not (math.isfinite(factor) and factor > 1):
        return {}
    topology = evaluation.sample.topology
    out: dict[VertexId, VertexChange] = {}
    for vid, v in evaluation.vertices.items():
        tpr, tdr = v.true_processing_rate, v.target_data_rate
        if _excluded(v, options) or not (0 < tpr < math.inf and 0 < tdr < math.inf):
            continue
        rec = scale_by_factor(
            parallelism=v.parallelism,
            max_parallelism=v.max_parallelism,
            factor=tdr * factor / (options.utilization_target * tpr),
            true_processing_rate=tpr,
            outside_band=True,
            options=options,
            num_source_partitions=evaluation.sample.num_source_partitions.get(vid, 0),
            input_ship_strategies=[e.ship_strategy for e in topology.inputs(vid)],
            scalability_coefficient=v.scalability_coefficient,
        )
        if rec.parallelism > v.parallelism:
            out[vid] = VertexChange(vid, v.parallelism, rec.parallelism)
    return out


def _excluded(v: VertexEvaluation, options: AutoscalerOptions) -> bool:
    return v.vertex in options.vertex_exclude_ids


def _memory_pressure(evaluation: JobEvaluation, options: AutoscalerOptions) -> str | None:
    """GC time or heap usage above threshold blocks scaling; NaN (unmeasured) never blocks, and a
    threshold of 1.0 (the default) turns its check off: documented as "never", it must not block on a
    reading above 1 (a GC rate over a second per second, a heap used briefly above its max)."""
    tm = evaluation.sample.taskmanagers
    gc = tm.gc_time_ms_per_s / 1000
    gc_limit, heap_limit = options.memory_gc_pressure_threshold, options.memory_heap_usage_threshold
    if gc_limit < 1 and not math.isnan(gc) and gc > gc_limit:
        return f"GC pressure {gc:.2f} above memory.gc-pressure.threshold {gc_limit}"
    if heap_limit >= 1:
        return None
    # The window average, as the reference compares; the current sample where nothing was windowed.
    heap, over = evaluation.custom_metric(HEAP_USAGE_RATIO)[1], "average heap usage"
    if math.isnan(heap):
        heap, over = tm.heap_usage_ratio, "heap usage"
    if not math.isnan(heap) and heap > options.memory_heap_usage_threshold:
        return f"{over} {heap:.2f} above memory.heap-usage.threshold {options.memory_heap_usage_threshold}"
    return None


def _not_ready_text(evaluation: JobEvaluation) -> str:
    if evaluation.not_ready_detail:
        return evaluation.not_ready_detail
    if evaluation.load_change_ms is not None:
        return (
            f"the offered load changed at {utc_text(evaluation.load_change_ms)}: the metric window restarts "
            "there (metrics.load-change.threshold) and must fill again"
        )
    if evaluation.not_ready is Reason.STABILIZING:
        return "job recently (re)started: waiting for stabilization.interval"
    if evaluation.not_ready is Reason.LOAD_CHANGING:
        return (
            "the newest interval's offered load differs from the window's by more than "
            "metrics.load-change.threshold: waiting one interval to tell a load change from a blip"
        )
    return f"metric window not full yet ({evaluation.window_samples} samples)"


def _describe(changes: Mapping[VertexId, VertexChange], evaluation: JobEvaluation) -> str:
    return describe_changes(changes, {v.id: v.name for v in evaluation.sample.topology})


def describe_changes(changes: Mapping[VertexId, VertexChange], names: Mapping[VertexId, str]) -> str:
    """``Work 1->5, Sink 2->3``: the changes as a decision's detail names them."""
    return ", ".join(f"{names.get(c.vertex, c.vertex)} {c.current}->{c.target}" for c in changes.values())


_EXCLUDED_KEY = "job.autoscaler.excluded.periods"


# ---------------------------------------------------------------------------------- the stage, per job
async def decide_jobs(
    samples: Sequence[JobSample],
    loaded: Loaded,
    evaluated: Evaluated,
    now_ms: int,
    *,
    flink_cooldown_ms: Mapping[str, int],
    confirm_timeout: timedelta,
    interval: timedelta = timedelta(seconds=10),
    forecasts: Mapping[str, Forecast | NoForecast] | None = None,
) -> list[JobStep]:
    """Settle each job's pending rescale, then run the gates on its evaluation.

    ``flink_cooldown_ms`` is each cluster's adaptive-scheduler cooldown (cluster name -> ms);
    ``interval`` the control loop's, the first step of a refused PUT's backoff. A job the gates hold
    back ends here, with its next state; one to rescale goes on to the plugins. ``forecasts``: the
    forecasting jobs' load forecasts (``tick/foresee.py``), carried on their decisions for ``explain``
    and, with ``cost.enabled``, read by the gate "worth a restart".
    """
    forecasts = forecasts or {}

    async def one(step: JobStep) -> JobStep:
        job, options = step.job, step.sample.target.options
        state, told = _follow_job_id(step.sample, loaded.states[job.key])
        state, confirmed = _confirm_pending(step.sample, state, now_ms, confirm_timeout)
        below = below_request(step.sample.topology, _standing(state))
        short = SlotsShort(slots_short_of_request(step.sample.topology, below))
        step = step.noting(*told, *confirmed, short)
        evaluation = evaluated.evaluations.get(job.key)
        if evaluation is None:
            detail = evaluated.error or "no evaluation for this job"
            return step.ended(
                JobOutcome(job, now_ms, Reason.AUTOSCALER_ERROR, detail), NotEvaluated(detail), state=state
            )
        step = step.noting(JobEvaluated(evaluation))
        decision = decide(
            evaluation,
            state,
            options,
            now_ms,
            flink_cooldown_ms=flink_cooldown_ms[job.cluster],
            stuck_retry_ms=stuck_retry_ms(state, confirm_timeout),
            refused_retry_ms=refused_retry_ms(state, interval),
            below=below,
            forecast=forecasts.get(job.key),
        )
        decision, verified = _verify_last_scaling(decision, now_ms)
        step = replace(step.noting(*verified, Decided(decision)), decision=decision)
        if not decision.applies:
            ended = JobOutcome(job, now_ms, decision.outcome, decision.detail, decision)
            return step.ended(ended, state=decision.state)
        return step

    return await each_job([JobStep(s) for s in samples], now_ms, one)


def _follow_job_id(sample: JobSample, state: JobState) -> tuple[JobState, tuple[Notice, ...]]:
    """The job's state for the JobID running now. The state is keyed by job name, so a resubmitted job
    (a new JobID: a JobManager restarted without HA, a user's resubmission) finds its predecessor's:
    told once (the saved state then holds the new JobID), it keeps the name's history and drops what
    belonged to the old JobID (``JobState.for_resubmission``)."""
    job, known = sample.job, state.known_job_id
    if known is not None and known != job.job_id:
        return state.for_resubmission(job.job_id), (Resubmitted(known, state),)
    # The same JobID, or nothing to compare with (a new job, state stored before the JobID was kept).
    return (state if state.job_id == job.job_id else replace(state, job_id=job.job_id)), ()


def _confirm_pending(
    sample: JobSample, state: JobState, now_ms: int, timeout: timedelta
) -> tuple[JobState, tuple[Notice, ...]]:
    """Close a pending rescale once /jobs/:id shows it, or report it stuck after ``timeout``."""
    pending = state.pending
    if pending is None:
        return state, ()
    result = confirm(pending, sample)
    if result.done:
        history = state.history
        if history and history[-1].ts_ms == pending.issued_ms:
            last = replace(history[-1], confirmed_ms=now_ms, restart_duration_ms=result.restart_duration_ms)
            history = (*history[:-1], last)
        confirmed = replace(state, pending=None, history=history, stuck_rescales=0, stuck_ms=None)
        return confirmed, (Confirmed(result, {v.id: v.name for v in sample.topology}),)
    if now_ms - pending.issued_ms > to_ms(timeout):
        stuck = replace(state, pending=None, stuck_rescales=state.stuck_rescales + 1, stuck_ms=now_ms)
        retry = stuck_retry_ms(stuck, timeout)
        return stuck, (Stuck(pending, timeout, stuck.stuck_rescales, retry),)
    return state, ()


STUCK_BACKOFF_CAP = timedelta(hours=1)


def _doubling_backoff_ms(in_a_row: int, last_ms: int | None, first: timedelta) -> int | None:
    """``last_ms`` plus ``first``, doubled for each failure in a row after the first (at most
    :data:`STUCK_BACKOFF_CAP`); None without a failure."""
    if not in_a_row or last_ms is None:
        return None
    return last_ms + to_ms(min(first * 2 ** (in_a_row - 1), STUCK_BACKOFF_CAP))


def stuck_retry_ms(state: JobState, timeout: timedelta) -> int | None:
    """When a job whose last rescales never ran may be rescaled again: ``confirm_timeout`` after the
    first one was given up, doubling with each one more (at most an hour); None when none is stuck.

    Flink accepted those PUTs (its requirements are set) but did not run them: most often too few
    free slots, which a new PUT does not create. A PUT every ``confirm_timeout`` would only add
    restarts' worth of records to the history and a target drifting with the backlog.
    """
    return _doubling_backoff_ms(state.stuck_rescales, state.stuck_ms, timeout)


def _standing(state: JobState) -> dict[str, int]:
    """The targets of the job's last rescale once Flink restarted the job for it (confirmed): Flink
    holds them as its requirements. Nothing while a rescale is pending, when the last one never ran
    (stuck: it is asked again after a backoff, since nothing shows that Flink kept it), or when it was
    asked of another JobID (a resubmitted job runs what it was submitted with, and Flink holds no
    request of the old JobID for it)."""
    last = state.last_scaling_of_job_id
    if state.pending is not None or last is None or last.confirmed_ms is None:
        return {}
    return {vid: new for vid, (_, new) in last.changes.items()}


def refused_retry_ms(state: JobState, interval: timedelta) -> int | None:
    """When a job whose last PUTs Flink refused (4xx) may ask again: one control interval after the
    first, doubling with each one more (at most an hour), half an interval early so that a tick a few
    milliseconds early still counts; None when none was refused."""
    retry = _doubling_backoff_ms(state.refused_rescales, state.refused_ms, interval)
    return None if retry is None else retry - to_ms(interval) // 2


# Outcomes that end before the metrics were judged: their evaluation cannot verify a rescale.
_NOT_JUDGED = frozenset({Reason.RESCALE_IN_FLIGHT, Reason.METRICS_UNKNOWN})


def _verify_last_scaling(decision: Decision, now_ms: int) -> tuple[Decision, tuple[Notice, ...]]:
    """The first tick after a confirmed rescale whose window is full (and its metrics known) measures
    what the rescale delivered, once; the verdict joins the rescale's record in the next state. Only
    the JobID the rescale was asked of measures it: a resubmitted job's metrics say nothing of it."""
    evaluation, state = decision.evaluation, decision.state
    if evaluation is None or evaluation.not_ready is not None or decision.outcome in _NOT_JUDGED:
        return decision, ()
    if state.last_scaling_of_job_id is None:
        return decision, ()
    verified = verify_last_scaling(state.history, evaluation, now_ms)
    if verified is None:
        return decision, ()
    decision = replace(decision, state=replace(state, history=(*state.history[:-1], verified)))
    return decision, (Verified(evaluation, verified),)


def confirm(pending: PendingRescale, sample: JobSample) -> Confirmation:
    """A rescale is applied once the job restarted after the PUT and runs with every task up.

    Flink silently caps an upper bound by the free slots, so a restart with a lower parallelism still
    completes the rescale; ``capped`` says so instead of waiting forever.
    """
    actual = {
        vid: sample.topology.vertices[vid].parallelism
        for vid in pending.target
        if vid in sample.topology.vertices
    }
    restarted = sample.running_since_ms >= pending.issued_ms
    matches = all(actual.get(vid) == p for vid, p in pending.target.items())
    if matches or restarted:
        duration = sample.running_since_ms - pending.issued_ms if restarted else None
        return Confirmation(True, actual, not matches, duration, pending.target)
    return Confirmation(False, actual, asked=pending.target)
