"""The record stage: the one place a tick writes. The other stages return values; this one turns them
into what the operator sees, in this order (``Daemon._record``):

1. the jobs' next states (:func:`next_states`), written by the state layer in one transaction;
2. the metrics and log lines (:func:`report`) and the events (:func:`tick_events`) the tick's notices,
   samples and outcomes stand for, produced by plain functions from those values;
3. the events (:func:`publish`) once the state behind them is stored, so whoever sees an event (a
   ``Scaling``, say) can count on its pending rescale and history being there; then each job's outcome
   to whoever follows the decisions (``autoscaler.tick.delivery``).

A crash in between loses the tick's events, not its state. Each notice's event text is written in
:mod:`autoscaler.tick.texts`; what is said of a notice, and when, is here: a stage reads as its
decision, and a new notice is a new type in :mod:`autoscaler.tick.steps` and a case in each function
below.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from autoscaler.cluster import Collected
from autoscaler.collect.sanity import describe_invalid
from autoscaler.durations import to_ms
from autoscaler.evaluate.javamath import java_double_text
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobEvaluation, JobSample, JobTarget, Unavailable
from autoscaler.offload import offload
from autoscaler.reasons import Reason
from autoscaler.resources import required_slots
from autoscaler.state import JobState
from autoscaler.state.events import Event, EventSink, EventType
from autoscaler.tick.delivery import OutcomeDelivery
from autoscaler.tick.steps import (
    Confirmed,
    Decided,
    Decision,
    Failed,
    JobEvaluated,
    JobOutcome,
    JobStep,
    LeaseExpired,
    MemoryAdvised,
    NotEvaluated,
    Notice,
    PluginsRan,
    Rejected,
    Rescaling,
    Resubmitted,
    SlotsLimited,
    SlotsShort,
    Stuck,
    Verified,
    Vetoed,
    WaitsForIdleSlots,
)
from autoscaler.tick.texts import (
    changes_key,
    confirmed_text,
    idle_wait_text,
    ineffective_text,
    limited_text,
    plugin_text,
    rejected_text,
    report_text,
    requirements_text,
    resubmission_text,
    slots_text,
    stuck_text,
    verification_text,
    vetoed_text,
)

__all__ = [
    "TickEvent",
    "TickTimer",
    "next_states",
    "outcomes",
    "publish",
    "report",
    "tick_events",
]

log = structlog.get_logger(__name__)

_PLUGIN_OK = (Reason.SCALING_APPROVED, Reason.SCALING_MODIFIED)

TickEvent = tuple[Event, int]  # an event and its deduplication interval (ms; 0: never deduplicated)


@dataclass
class TickTimer:
    """How long each stage of a tick took: the one thing a tick keeps as it goes."""

    started: float = field(default_factory=time.perf_counter)
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds, in the order they ran

    def lap(self, stage: str) -> None:
        """``stage`` just ended: it took the time since the previous one ended (or the tick began)."""
        now = time.perf_counter()
        self.stages[stage] = now - self.started - sum(self.stages.values())

    @property
    def total_s(self) -> float:
        return time.perf_counter() - self.started


# ---------------------------------------------------------------------------------- states and outcomes
def next_states(steps: Iterable[JobStep]) -> dict[str, JobState]:
    """The state each job's step leaves to write (a failed job's, or one whose lease lapsed, none)."""
    return {step.job.key: step.state for step in steps if step.state is not None}


def outcomes(steps: Iterable[JobStep], unavailable: Iterable[Unavailable], now_ms: int) -> list[JobOutcome]:
    """Every job's outcome of the tick: the stepped jobs', then the ones not sampled (and why)."""
    ended = [step.outcome for step in steps if step.outcome is not None]
    return ended + [JobOutcome(u.job, now_ms, u.reason, u.detail) for u in unavailable]


# ---------------------------------------------------------------------------------- events
def tick_events(collected: Collected, steps: Iterable[JobStep], now_ms: int) -> list[TickEvent]:
    """The tick's events, each job's in the order its stages told them: options that could not be read,
    what collection noticed of a sample, every notice of every step, the jobs not sampled."""
    told: list[TickEvent] = []
    for i in collected.invalid:
        told.append(_job_event(i.target, now_ms, Reason.OPTIONS_VALIDATION, EventType.WARNING, i.message))
    for sample in collected.read_now:
        if sample.stale_ticks:
            age_s = (now_ms - sample.ts_ms) / 1000
            text = f"Flink answered with the metrics it had fetched {age_s:g} s before: no new window point"
            told.append(
                _job_event(sample.target, now_ms, Reason.STALE_METRICS, EventType.NORMAL, text, "stale")
            )
    for step in steps:
        told.extend(e for notice in step.notices for e in _events(step, notice, now_ms))
        realized = step.outcome.realized if step.outcome is not None else None
        if realized is not None and realized.issued:  # the PUT went out: the reference's Scaling event
            text = requirements_text(realized)
            told.append(_event(step.job.key, now_ms, Reason.SCALING, EventType.NORMAL, text))
    for u in collected.unavailable:
        if u.reason is Reason.STALE_METRICS:  # lasts until the fetcher delivers: say so
            told.append(
                _job_event(u.target, now_ms, Reason.STALE_METRICS, EventType.WARNING, u.detail, "expired")
            )
    return told


def _event(job_key: str, now_ms: int, reason: Reason, kind: EventType, text: str, key: str = "") -> TickEvent:
    """An event told every time (a rescale's, a verification's: each happens once)."""
    return Event(job_key, reason, kind, text, now_ms, key=key), 0


def _job_event(
    target: JobTarget, now_ms: int, reason: Reason, kind: EventType, text: str, key: str = ""
) -> TickEvent:
    """An event told at most once per the job's ``scaling.event.interval`` (counted in between)."""
    interval_ms = to_ms(target.options.scaling_event_interval)
    return Event(target.job.key, reason, kind, text, now_ms, key=key), interval_ms


def _events(step: JobStep, notice: Notice, now_ms: int) -> Iterator[TickEvent]:
    """The events one notice stands for."""
    target, key = step.sample.target, step.job.key
    match notice:
        case Resubmitted(old_job_id, before):
            text = resubmission_text(old_job_id, step.job.job_id, before)
            kind = EventType.WARNING if before.pending or before.stuck_rescales else EventType.NORMAL
            yield _job_event(
                target, now_ms, Reason.JOB_RESUBMITTED, kind, text, f"resubmitted:{step.job.job_id}"
            )
        case Confirmed(confirmation):
            text = confirmed_text(notice)
            if confirmation.capped:
                yield _event(key, now_ms, Reason.SCALING_LIMITED, EventType.WARNING, text, "below-request")
            else:
                yield _event(key, now_ms, Reason.SCALING_CONFIRMED, EventType.NORMAL, text)
        case Stuck(pending, timeout, n, retry):
            text = stuck_text(pending.target, timeout, n, retry, now_ms)
            yield _event(
                key, now_ms, Reason.RESCALE_STUCK, EventType.WARNING, text, f"stuck:{pending.issued_ms}"
            )
        case NotEvaluated(detail):
            yield _job_event(target, now_ms, Reason.AUTOSCALER_ERROR, EventType.WARNING, detail)
        case JobEvaluated(evaluation):
            yield from _evaluation_events(evaluation, now_ms)
        case Verified(evaluation, record):
            assert record.verification is not None
            names = {v.id: v.name for v in evaluation.sample.topology}
            kind = EventType.NORMAL if record.verification.as_expected else EventType.WARNING
            text = verification_text(record, names, evaluation.window_samples)
            yield _event(key, now_ms, Reason.SCALING_VERIFIED, kind, text, f"verified:{record.ts_ms}")
        case Decided(decision):
            yield from _decision_events(target, decision, now_ms)
        case PluginsRan(chain):
            for o in chain.outcomes:
                kind = EventType.NORMAL if o.outcome in _PLUGIN_OK else EventType.WARNING
                yield _job_event(target, now_ms, o.outcome, kind, plugin_text(o), f"{o.outcome}:{o.plugin}")
        case Vetoed(chain):
            # Unless the vetoing plugin's own ScalingVetoed already said it.
            vetoed = chain.vetoed_by
            if vetoed is None or vetoed.outcome is not Reason.SCALING_VETOED:
                plugin = vetoed.plugin if vetoed else "?"
                text = vetoed_text(chain)
                yield _job_event(
                    target, now_ms, Reason.SCALING_VETOED, EventType.WARNING, text, f"ScalingVetoed:{plugin}"
                )
        case SlotsLimited():
            yield _job_event(
                target, now_ms, Reason.SCALING_LIMITED, EventType.WARNING, slots_text(notice), "slots"
            )
        case WaitsForIdleSlots():
            yield _job_event(
                target, now_ms, Reason.SCALING_LIMITED, EventType.NORMAL, idle_wait_text(notice), "slots"
            )
        case Rescaling(decision):
            yield _event(
                key, now_ms, Reason.SCALING_REPORT, EventType.NORMAL, report_text(decision, enabled=True)
            )
        case Rejected(_, status, messages):
            why = "; ".join(messages) or "no message"
            text = rejected_text(notice, now_ms)
            yield _job_event(
                target, now_ms, Reason.RESCALE_REJECTED, EventType.WARNING, text, f"rejected:{status}:{why}"
            )
        case MemoryAdvised(advice):
            kind = Reason.CONFIGURATION_RECOMMENDATION
            yield _job_event(target, now_ms, kind, EventType.NORMAL, advice.text(), "MemoryTuning")
        case Failed(reason, error):
            yield _job_event(target, now_ms, reason, EventType.WARNING, _truncate(error))
        case SlotsShort() | LeaseExpired():
            pass  # told by metrics and log lines only


def _evaluation_events(evaluation: JobEvaluation, now_ms: int) -> Iterator[TickEvent]:
    """An evaluation's warnings: ineffective scale-ups, limited alignment, an alignment mode that fell
    back to BALANCED, custom evaluators that failed, slow subtasks."""
    target = evaluation.sample.target
    options = target.options
    # The reference always reports an ineffective scale-up (blocking it is a separate option). Its key
    # holds the expected increase, so a later scale-up that promised something else is told again.
    blocking = options.scaling_effectiveness_detection_enabled
    for vid in evaluation.ineffective_scale_ups:
        gain = evaluation.vertices[vid].scale_up_gain or (math.nan, math.nan)
        text, key = (
            ineffective_text(vid, gain, blocking=blocking),
            f"ineffective{vid}{java_double_text(gain[0])}",
        )
        yield _job_event(target, now_ms, Reason.INEFFECTIVE_SCALING, EventType.NORMAL, text, key)
    # The deprecated legacy alignment moved or blocked a vertex's target: warned, as the reference does.
    for vid, v in evaluation.vertices.items():
        if v.limited_from is not None:
            text = limited_text(vid, v)
            yield _job_event(
                target, now_ms, Reason.SCALING_LIMITED, EventType.WARNING, text, f"ScalingLimited{vid}"
            )
    if options.alignment_mode_fallback is not None:
        key = options.canonical_key("parallelism_alignment_mode")
        text = options.alignment_mode_fallback
        yield _job_event(target, now_ms, Reason.OPTIONS_VALIDATION, EventType.WARNING, text, key)
    for problem in _evaluator_problems(evaluation):
        text = f"custom evaluator: {problem}"
        yield _job_event(
            target, now_ms, Reason.PLUGIN_FAILED, EventType.WARNING, text, f"evaluator:{problem}"
        )
    sample = evaluation.sample
    for vid, skew in sample.skew.items():
        if skew.slow:
            text = skew.text(sample.topology.vertices[vid].name)
            key = f"SlowSubtasks:{vid}:{skew.slow_indices}:{skew.hot_key}"
            yield _job_event(target, now_ms, Reason.SLOW_SUBTASKS, EventType.WARNING, text, key)


def _evaluator_problems(evaluation: JobEvaluation) -> list[str]:
    """A custom evaluator that raised (built-in values kept) or is missing (job not scaled)."""
    problems = [str(f) for f in evaluation.evaluator_failures]
    if evaluation.not_ready is Reason.PLUGIN_FAILED:
        problems.append(evaluation.not_ready_detail or "a configured custom evaluator is unavailable")
    return problems


def _decision_events(target: JobTarget, decision: Decision, now_ms: int) -> Iterator[TickEvent]:
    """What the gates said, for the gates whose verdict the operator is told of."""
    detail, outcome = decision.detail, decision.outcome
    if outcome is Reason.COOLDOWN_DEFERRED and decision.retry_at_ms is not None:
        key = f"retry:{decision.retry_at_ms}"
        yield _job_event(target, now_ms, Reason.COOLDOWN_DEFERRED, EventType.NORMAL, detail, key)
    if decision.forced:
        yield _event(target.job.key, now_ms, Reason.SCALING_FORCED, EventType.NORMAL, detail)
    if outcome is Reason.METRICS_UNKNOWN:  # a warning: it lasts until Flink reports again
        yield _job_event(target, now_ms, Reason.METRICS_UNKNOWN, EventType.WARNING, detail)
    if outcome in (Reason.MEMORY_PRESSURE, Reason.RESOURCE_QUOTA_REACHED):
        kind = EventType.NORMAL if outcome is Reason.MEMORY_PRESSURE else EventType.WARNING
        yield _job_event(target, now_ms, outcome, kind, detail)
    if outcome in (Reason.ADVISOR_MODE, Reason.EXCLUDED_PERIOD):
        report = report_text(decision, enabled=False)
        yield _job_event(
            target, now_ms, Reason.SCALING_REPORT, EventType.NORMAL, report, changes_key(decision)
        )


# ---------------------------------------------------------------------------------- metrics and log lines
def report(
    metrics: MetricsReporter,
    collected: Collected,
    steps: Iterable[JobStep],
    slots: Mapping[str, tuple[int, int]],
    now_ms: int,
) -> None:
    """The metrics and log lines the tick's values stand for: per notice, per sample (slots, stale and
    impossible readings), per cluster (a failed listing, its metric fetcher, its slots as the slot
    stage claimed from them), and one ``decision`` line per job with its outcome counted."""
    for i in collected.invalid:
        metrics.report_error(i.job.cluster, Reason.OPTIONS_VALIDATION)
    for sample in collected.read_now:
        if sample.stale_ticks:
            metrics.stale_samples.labels(sample.job.cluster, sample.job.name).inc()
        if sample.invalid_values:
            _invalid_values(metrics, sample)
    for sample in collected.samples:
        metrics.job_slots.labels(sample.job.cluster, sample.job.name).set(required_slots(sample.topology))
    for cluster, why in collected.failed.items():
        metrics.report_error(cluster, why)
    for cluster, fetch in collected.fetches.items():
        metrics.metric_fetch_interval.labels(cluster).set(fetch.interval_s)
        metrics.metric_fetch_warning.labels(cluster).set(1 if fetch.too_slow else 0)
        if fetch.waited_s is not None:
            metrics.report_fetch_wait(cluster, fetch.waited_s, fetch.landed)
    for cluster, (total, free) in slots.items():
        known = total > 0  # unknown (no TaskManager listing): NaN, not the last figure
        metrics.cluster_slots.labels(cluster, "total").set(total if known else math.nan)
        metrics.cluster_slots.labels(cluster, "free").set(free if known else math.nan)
    for step in steps:
        for notice in step.notices:
            _count(metrics, step, notice, now_ms)
        if step.outcome is not None:
            if not any(isinstance(n, (Failed, NotEvaluated)) for n in step.notices):
                realized = step.outcome.realized
                metrics.report_outcome(
                    step.job, step.outcome.outcome, realized is not None and realized.issued
                )
            _decision_line(step.outcome)
    for u in collected.unavailable:
        job = u.job
        if u.reason is not Reason.NOT_RUNNING:
            metrics.report_error(job.cluster, u.reason)
            metrics.decisions.labels(job.cluster, job.name, str(u.reason)).inc()
        log.info("job_unavailable", cluster=job.cluster, job=job.name, reason=str(u.reason), detail=u.detail)
        _decision_line(JobOutcome(job, now_ms, u.reason, u.detail))


def _decision_line(outcome: JobOutcome) -> None:
    """One ``decision`` line per job and tick: its final outcome."""
    job = outcome.job
    log.info(
        "decision", cluster=job.cluster, job=job.name, outcome=str(outcome.outcome), detail=outcome.detail
    )


def _invalid_values(metrics: MetricsReporter, sample: JobSample) -> None:
    """Values that cannot be (negative, infinite, too large) were read as unknown (collect/sanity.py):
    which and why, counted by kind."""
    job, values = sample.job, sample.invalid_values
    for kind, count in Counter(v.kind for v in values).items():
        metrics.invalid_metric_values.labels(job.cluster, job.name, kind).inc(count)
    log.warning(
        "metric_values_invalid",
        cluster=job.cluster,
        job=job.name,
        values=[str(v) for v in values],
        kinds=sorted({v.kind for v in values}),
        detail=describe_invalid(values),
    )


def _count(metrics: MetricsReporter, step: JobStep, notice: Notice, now_ms: int) -> None:
    """The counters, gauges and log lines one notice stands for."""
    job = step.job
    cluster, name = job.cluster, job.name
    match notice:
        case Resubmitted(old_job_id, before):
            text = resubmission_text(old_job_id, job.job_id, before)
            log.warning(
                "job_resubmitted",
                cluster=cluster,
                job=name,
                old_job_id=old_job_id,
                job_id=job.job_id,
                detail=text,
            )
            metrics.resubmissions.labels(cluster, name).inc()
        case Stuck(pending, timeout, n, retry):
            metrics.rescales_stuck.labels(cluster, name).inc()
            text = stuck_text(pending.target, timeout, n, retry, now_ms)
            log.warning("rescale_stuck", cluster=cluster, job=name, in_a_row=n, detail=text)
        case SlotsShort(short):
            metrics.job_slots_short.labels(cluster, name).set(short)
        case JobEvaluated(evaluation):
            metrics.report_evaluation(evaluation)
            if evaluation.counters_fell:  # logged by the window (metric_counters_fell), counted here
                metrics.counter_resets.labels(cluster, name).inc()
            options = evaluation.sample.target.options
            if options.alignment_mode_fallback is not None:
                key = options.canonical_key("parallelism_alignment_mode")
                log.warning(
                    "alignment_mode_fallback",
                    cluster=cluster,
                    job=name,
                    detail=options.alignment_mode_fallback,
                )
                metrics.option_fallbacks.labels(cluster, name, key).inc()
            for _ in _evaluator_problems(evaluation):
                metrics.report_error(cluster, Reason.PLUGIN_FAILED)
            skew = evaluation.sample.skew.values()
            metrics.job_slow_subtasks.labels(cluster, name).set(sum(len(s.slow) for s in skew))
        case Verified(evaluation, record):
            assert record.verification is not None
            names = {v.id: v.name for v in evaluation.sample.topology}
            metrics.report_verification(job, names, record.verification)
            text = verification_text(record, names, evaluation.window_samples)
            (log.info if record.verification.as_expected else log.warning)("scaling_verified", detail=text)
        case Decided(decision):
            if decision.outcome is Reason.COOLDOWN_DEFERRED and decision.retry_at_ms is not None:
                metrics.deferred.labels(cluster, name).inc()
            if decision.forced:
                metrics.forced.labels(cluster, name).inc()
            if decision.outcome is Reason.METRICS_UNKNOWN:
                # Not in band: nothing could be judged. A warning, since it lasts until Flink reports again.
                log.warning("metrics_unknown", cluster=cluster, job=name, detail=decision.detail)
                metrics.metrics_unknown.labels(cluster, name).inc()
        case PluginsRan(chain):
            for o in chain.outcomes:
                metrics.plugin_outcomes.labels(cluster, name, o.plugin, str(o.outcome)).inc()
        case SlotsLimited(action, why):
            metrics.slot_limited.labels(cluster, name, action, why).inc()
        case WaitsForIdleSlots():
            metrics.slot_limited.labels(cluster, name, "waited", "idle").inc()
        case LeaseExpired(decision):
            log.warning(
                "lease_expired_before_rescale", cluster=cluster, job=name, changes=changes_key(decision)
            )
            metrics.report_error(cluster, Reason.LEASE_EXPIRED)
        case Rejected(_, _, _, n):
            metrics.rescales_rejected.labels(cluster, name).inc()
            text = rejected_text(notice, now_ms)
            log.warning("rescale_rejected", cluster=cluster, job=name, in_a_row=n, detail=text)
        case Failed(reason):
            metrics.report_error(cluster, reason)
        case _:
            pass  # told by events only


# ---------------------------------------------------------------------------------- publishing
async def publish(
    events: Sequence[TickEvent], sink: EventSink, delivery: OutcomeDelivery, done: Sequence[JobOutcome]
) -> None:
    """Emit the tick's events off the event loop (a slow or hanging database must not stall the ticks),
    then hand its outcomes to ``delivery``, which writes them behind the tick."""
    if events:
        await offload(_emit, sink, events)
    await delivery.hand_over(list(done))


def _emit(sink: EventSink, events: Sequence[TickEvent]) -> None:
    for event, interval_ms in events:
        try:
            sink.emit(event, interval_ms)
        except Exception as exc:  # recording must never fail a tick
            log.error("event_failed", reason=str(event.reason), job=event.job_key, error=str(exc))


def _truncate(text: str, limit: int = 2048) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
