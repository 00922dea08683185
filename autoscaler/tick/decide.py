"""The decision stage: evaluation + remembered state + options + now -> Decision (and the next state).

At some 560 lines it stays one module, because it is the one place that says why a job is or is not
rescaled: :func:`decide_jobs` follows a resubmitted JobID, confirms the pending rescale and computes the
backoffs, then :func:`decide` runs the gates.

Pure: no I/O, no clock. The gates run in one fixed order (the policy), and every "no" carries a
``Reason``. Per vertex the evaluator's recommendation passes the scale-down delay first; then the
job-level gates decide whether anything is applied. The order follows the reference's
``ScalingExecutor`` (§1.8), after two of ours that come first:

1. a rescale still in flight (ours), 2. an evaluation that is not ready (ours), 3. metrics unknown
for the vertices that matter (ours, ``_metrics_unknown``), 4. memory pressure, 5. vertex.exclude.ids and
the scale-down delay, 6. the utilization band and the minimum change (``scaling.min-parallelism-change``),
unless ``scaling-interval.max`` forces it (ours), 7. advisor mode (``scaling.enabled=false``),
8. ``excluded.periods``, 9. ``quota.cpu`` / ``quota.memory``, 10. the cooldown: ``scaling-interval.min``
and Flink's own adaptive-scheduler cooldown (ours).

Advisor mode, excluded periods, quotas and cooldowns keep the changes in the decision, so they can be
reported; a cooldown also says when to decide again (``retry_at_ms``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from autoscaler.calendar import excluded_period_at
from autoscaler.durations import to_ms, utc_text
from autoscaler.evaluate.history import verify_last_scaling
from autoscaler.evaluate.stage import Evaluated
from autoscaler.model import (
    HEAP_USAGE_RATIO,
    JobEvaluation,
    JobSample,
    VertexChange,
    VertexEvaluation,
    VertexId,
)
from autoscaler.reasons import Reason
from autoscaler.resources import quota_exceeded
from autoscaler.settings import AutoscalerOptions
from autoscaler.slot_fit import below_request, below_text, slots_short_of_request
from autoscaler.state import DelayedScaleDown, JobState, PendingRescale
from autoscaler.state.tick import Loaded
from autoscaler.tick.each import each_job
from autoscaler.tick.record import TickRecord
from autoscaler.tick.steps import Confirmation, Decision, JobOutcome, JobStep
from autoscaler.unknown_metrics import metrics_unknown, partly_unknown

__all__ = ["confirm", "decide", "decide_jobs", "describe_changes"]


def decide(
    evaluation: JobEvaluation,
    state: JobState,
    options: AutoscalerOptions,
    now_ms: int,
    *,
    flink_cooldown_ms: int = 0,
    stuck_retry_ms: int | None = None,
) -> Decision:
    """Run the gates in order; the TaskManager resources for the quota come with the evaluation's sample.

    ``flink_cooldown_ms`` is the cluster's ``jobmanager.adaptive-scheduler.executing.cooldown-after-
    rescaling``: Flink holds back any rescale inside it, so the daemon never issues one there.
    ``stuck_retry_ms``: the job's last rescales never ran; none is issued before then (decide_jobs).
    """
    job = evaluation.job

    def no(reason: Reason, detail: str, new_state: JobState = state) -> Decision:
        return Decision(job, reason, detail, {}, new_state, evaluation)

    if state.pending is not None:
        return no(Reason.RESCALE_IN_FLIGHT, "waiting for the last rescale to show in /jobs/:id")
    if stuck_retry_ms is not None and now_ms < stuck_retry_ms:
        return no(
            Reason.RESCALE_STUCK,
            f"the last {state.stuck_rescales} rescale(s) were accepted by Flink but never ran (too few "
            f"free slots?): no new one before {utc_text(stuck_retry_ms)} "
            f"({(stuck_retry_ms - now_ms) / 1000:.0f} s)",
        )
    if evaluation.not_ready is not None:
        if evaluation.load_change_ms is not None:
            # The delayed scale-downs were recommended for the old load, the last of them on a window
            # that already straddled the change: none of them may size the job for the new one.
            return no(
                evaluation.not_ready, _not_ready_text(evaluation), replace(state, delayed_scale_down={})
            )
        return no(evaluation.not_ready, _not_ready_text(evaluation))
    unknown = metrics_unknown(evaluation, options)
    if unknown:
        # Unknown is not "in band": nothing was judged, so nothing is scaled and the delayed
        # scale-downs stay as they were (an unknown tick neither adds to nor clears them).
        return no(Reason.METRICS_UNKNOWN, unknown)

    pressure = _memory_pressure(evaluation, options)
    if pressure:
        return no(Reason.MEMORY_PRESSURE, pressure)

    changes, delayed, outside, kept = _vertex_changes(evaluation, state, options, now_ms)
    new_state = replace(state, delayed_scale_down=delayed)
    since_ms = _cooldown_start(state, evaluation)
    total_change = sum(abs(c.target - c.current) for c in changes.values())
    meets_minimum = bool(outside) and total_change >= options.scaling_min_parallelism_change
    forced = not meets_minimum and bool(changes) and _max_interval_passed(options, since_ms, now_ms)
    if not meets_minimum and not forced:
        held = [vid for vid in delayed if vid not in changes and evaluation.vertices[vid].outside_band]
        if held and not outside:
            first = min(delayed[vid].first_trigger_ms for vid in held)
            wait_s = max(0, first + to_ms(options.scale_down_interval) - now_ms) / 1000
            return no(
                Reason.SCALE_DOWN_DELAYED,
                f"scale-down held for scale-down.interval ({wait_s:.0f} s left)",
                new_state,
            )
        if outside:
            return no(
                Reason.IN_BAND,
                f"total parallelism change {total_change} is below scaling.min-parallelism-change "
                f"{options.scaling_min_parallelism_change}",
                new_state,
            )
        return no(
            Reason.IN_BAND,
            "all vertices that could change are within their utilization band"
            + partly_unknown(evaluation, options),
            new_state,
        )
    if not options.scaling_enabled:
        return Decision(
            job,
            Reason.ADVISOR_MODE,
            "scaling execution disabled by config (advisor mode)",
            changes,
            new_state,
            evaluation,
        )
    period = excluded_period_at(options.excluded_periods, now_ms)
    if period is not None:
        return Decision(
            job,
            Reason.EXCLUDED_PERIOD,
            f"Scaling execution disabled by config {_EXCLUDED_KEY}: now ({utc_text(now_ms)}) is in the "
            f"excluded period {period.text!r}",
            changes,
            new_state,
            evaluation,
        )
    quota = quota_exceeded(
        evaluation.sample.topology,
        {vid: c.target for vid, c in changes.items()},
        evaluation.sample.taskmanagers,
        options.quota_cpu,
        options.quota_memory,
    )
    if quota:
        return Decision(job, Reason.RESOURCE_QUOTA_REACHED, quota, changes, new_state, evaluation)
    cooldown_ms = max(
        to_ms(options.scaling_interval_min) if options.scaling_interval_min else 0, flink_cooldown_ms
    )
    if now_ms < since_ms + cooldown_ms:
        retry = since_ms + cooldown_ms
        which = (
            "Flink's adaptive-scheduler cooldown"
            if flink_cooldown_ms == cooldown_ms
            else "scaling-interval.min"
        )
        return Decision(
            job,
            Reason.COOLDOWN_DEFERRED,
            f"{_describe(changes, evaluation)} deferred by {which} until {utc_text(retry)} "
            f"({(retry - now_ms) / 1000:.0f} s)",
            changes,
            new_state,
            evaluation,
            retry_at_ms=retry,
        )
    detail = _describe(changes, evaluation)
    if kept:
        names = {v.id: v.name for v in evaluation.sample.topology}
        detail = (
            f"{detail} ({', '.join(names.get(vid, vid) for vid in kept)}: no lower, the load of the last "
            "scale-up stays within the utilization band there; scale-down.keep-last-peak.enabled)"
        )
    if forced:
        detail = f"{detail} (forced: last rescale more than scaling-interval.max ago)"
    return Decision(job, Reason.SCALING, detail, changes, new_state, evaluation, forced=forced)


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
    rec: TickRecord,
    *,
    flink_cooldown_ms: Mapping[str, int],
    confirm_timeout: timedelta,
    interval: timedelta = timedelta(seconds=10),
) -> list[JobStep]:
    """Settle each job's pending rescale, then run the gates on its evaluation.

    ``flink_cooldown_ms`` is each cluster's adaptive-scheduler cooldown (cluster name -> ms);
    ``interval`` the control loop's, the first step of a refused PUT's backoff.
    """

    async def one(step: JobStep) -> JobStep:
        job, options = step.job, step.sample.target.options
        state = _follow_job_id(step.sample, loaded.states[job.key], rec)
        state = _confirm_pending(step.sample, state, rec, confirm_timeout)
        below = below_request(step.sample.topology, _standing(state))
        short = slots_short_of_request(step.sample.topology, below)
        rec.metrics.job_slots_short.labels(job.cluster, job.name).set(short)
        evaluation = evaluated.evaluations.get(job.key)
        if evaluation is None:
            rec.save(job.key, state)
            detail = evaluated.error or "no evaluation for this job"
            return replace(step, outcome=rec.not_evaluated(job, options, detail))
        rec.evaluated(evaluation)
        cooldown_ms = flink_cooldown_ms[job.cluster]
        decision = decide(
            evaluation,
            state,
            options,
            rec.now_ms,
            flink_cooldown_ms=cooldown_ms,
            stuck_retry_ms=_stuck_retry_ms(state, confirm_timeout),
        )
        decision = _verify_last_scaling(decision, rec)
        decision = _standing_request(decision, below, step.sample)
        decision = _refused_backoff(decision, _refused_retry_ms(state, interval), rec.now_ms)
        rec.decided(decision, options)
        if not decision.applies:
            rec.save(job.key, decision.state)
            ended = JobOutcome(job, rec.now_ms, decision.outcome, decision.detail, decision)
            return replace(step, decision=decision, outcome=rec.outcome(ended))
        return replace(step, decision=decision)

    return await each_job([JobStep(s) for s in samples], rec, one)


def _follow_job_id(sample: JobSample, state: JobState, rec: TickRecord) -> JobState:
    """The job's state for the JobID running now. The state is keyed by job name, so a resubmitted job
    (a new JobID: a JobManager restarted without HA, a user's resubmission) finds its predecessor's:
    told once (the saved state then holds the new JobID), it keeps the name's history and drops what
    belonged to the old JobID (``JobState.for_resubmission``)."""
    job, known = sample.job, state.known_job_id
    if known is not None and known != job.job_id:
        rec.resubmitted(job, known, state, sample.target.options)
        return state.for_resubmission(job.job_id)
    # The same JobID, or nothing to compare with (a new job, state stored before the JobID was kept).
    return state if state.job_id == job.job_id else replace(state, job_id=job.job_id)


def _confirm_pending(sample: JobSample, state: JobState, rec: TickRecord, timeout: timedelta) -> JobState:
    """Close a pending rescale once /jobs/:id shows it, or report it stuck after ``timeout``."""
    pending = state.pending
    if pending is None:
        return state
    job = sample.job
    result = confirm(pending, sample)
    if result.done:
        rec.confirmed(job, result, {v.id: v.name for v in sample.topology})
        history = state.history
        if history and history[-1].ts_ms == pending.issued_ms:
            last = replace(
                history[-1], confirmed_ms=rec.now_ms, restart_duration_ms=result.restart_duration_ms
            )
            history = (*history[:-1], last)
        return replace(state, pending=None, history=history, stuck_rescales=0, stuck_ms=None)
    if rec.now_ms - pending.issued_ms > to_ms(timeout):
        stuck = replace(state, pending=None, stuck_rescales=state.stuck_rescales + 1, stuck_ms=rec.now_ms)
        rec.stuck(job, pending, timeout, stuck.stuck_rescales, _stuck_retry_ms(stuck, timeout))
        return stuck
    return state


STUCK_BACKOFF_CAP = timedelta(hours=1)


def _doubling_backoff_ms(in_a_row: int, last_ms: int | None, first: timedelta) -> int | None:
    """``last_ms`` plus ``first``, doubled for each failure in a row after the first (at most
    :data:`STUCK_BACKOFF_CAP`); None without a failure."""
    if not in_a_row or last_ms is None:
        return None
    return last_ms + to_ms(min(first * 2 ** (in_a_row - 1), STUCK_BACKOFF_CAP))


def _stuck_retry_ms(state: JobState, timeout: timedelta) -> int | None:
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


def _refused_retry_ms(state: JobState, interval: timedelta) -> int | None:
    """When a job whose last PUTs Flink refused (4xx) may ask again: one control interval after the
    first, doubling with each one more (at most an hour), half an interval early so that a tick a few
    milliseconds early still counts; None when none was refused."""
    retry = _doubling_backoff_ms(state.refused_rescales, state.refused_ms, interval)
    return None if retry is None else retry - to_ms(interval) // 2


def _refused_backoff(decision: Decision, retry_ms: int | None, now_ms: int) -> Decision:
    """A rescale is not asked for while a refused one's backoff runs (``RescaleRejected``)."""
    if not decision.applies or retry_ms is None or now_ms >= retry_ms:
        return decision
    n = decision.state.refused_rescales
    text = (
        f"Flink refused the last {n} rescale(s) in a row: no new one before "
        f"{(retry_ms - now_ms) / 1000:.0f} s from now"
    )
    return decision.with_changes(decision.changes, Reason.RESCALE_REJECTED, text)


def _standing_request(
    decision: Decision, below: Mapping[str, tuple[int, int]], sample: JobSample
) -> Decision:
    """A vertex Flink runs below what was asked for it (too few free slots) keeps that request: a change
    to the same parallelism is not asked for again, recorded as a rescale, or left to get stuck. A
    decision with nothing else to change waits for slots (``WaitingForSlots``), saying so."""
    if not decision.applies or not below:
        return decision
    kept = {vid: c for vid, c in decision.changes.items() if vid not in below or c.target != below[vid][1]}
    if len(kept) == len(decision.changes):
        return decision
    names = {v.id: v.name for v in sample.topology}
    text = f"Flink runs {below_text(below, names)} (too few free slots): the request stands"
    if kept:
        return decision.with_changes(kept, Reason.SCALING, f"{decision.detail}; {text}")
    return decision.with_changes(decision.changes, Reason.WAITING_FOR_SLOTS, text)


# Outcomes that end before the metrics were judged: their evaluation cannot verify a rescale.
_NOT_JUDGED = frozenset({Reason.RESCALE_IN_FLIGHT, Reason.METRICS_UNKNOWN})


def _verify_last_scaling(decision: Decision, rec: TickRecord) -> Decision:
    """The first tick after a confirmed rescale whose window is full (and its metrics known) measures
    what the rescale delivered, once; the verdict joins the rescale's record in the next state. Only
    the JobID the rescale was asked of measures it: a resubmitted job's metrics say nothing of it."""
    evaluation, state = decision.evaluation, decision.state
    if evaluation is None or evaluation.not_ready is not None or decision.outcome in _NOT_JUDGED:
        return decision
    if state.last_scaling_of_job_id is None:
        return decision
    verified = verify_last_scaling(state.history, evaluation, rec.now_ms)
    if verified is None:
        return decision
    rec.verified(evaluation, verified)
    return replace(decision, state=replace(state, history=(*state.history[:-1], verified)))


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
