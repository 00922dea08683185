"""The record stage: what a tick tells the operator — events, metrics, decision logs — and when.

Every stage reports what happened to a job through the tick's :class:`TickRecord`: the event texts,
their deduplication keys and the Prometheus counters live here, not in the stages, so the wording the
operator sees is in one place and a stage reads as its decision. A tick's events and its changed job
states are held until the end of the tick: :meth:`TickRecord.publish` runs after the state layer has
committed them, so whoever sees an event (a ``Scaling``, say) can count on the state behind it (the
pending rescale, the history) being stored. A crash in between loses the tick's events, not its state.
The texts built from plain values alone (the ScalingReport, ScalingVerified, ...) are in ``texts``;
the rest stay beside the counters they go with. At some 430 lines it stays one module, because it is
the one place that says what the operator is told, event by event.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import structlog

from autoscaler.collect.sanity import describe_invalid
from autoscaler.durations import to_ms
from autoscaler.evaluate.javamath import java_double_text
from autoscaler.flink.errors import FlinkError, FlinkHTTPError, FlinkUnreachable
from autoscaler.metrics import MetricsReporter
from autoscaler.model import JobEvaluation, JobRef, JobSample, Unavailable
from autoscaler.offload import offload
from autoscaler.plugins.chain import ChainResult
from autoscaler.reasons import Reason
from autoscaler.settings import AutoscalerOptions
from autoscaler.slot_fit import below_text
from autoscaler.state import JobState, PendingRescale, ScalingRecord
from autoscaler.state.events import Event, EventSink, EventType
from autoscaler.tick.delivery import OutcomeDelivery
from autoscaler.tick.steps import Confirmation, Decision, JobOutcome, RealizeResult
from autoscaler.tick.texts import (
    changes_key,
    ineffective_text,
    limited_text,
    rejected_text,
    report_text,
    resubmission_text,
    stuck_text,
    verification_text,
)

__all__ = ["TickRecord", "changes_key", "report_text"]

log = structlog.get_logger(__name__)

_PLUGIN_OK = (Reason.SCALING_APPROVED, Reason.SCALING_MODIFIED)


@dataclass
class TickRecord:
    """One tick's ledger: the events to emit, the job states to write and the outcomes to deliver.

    The stages fill it; the state layer writes :attr:`states`; :meth:`publish` emits the rest.
    """

    now_ms: int
    metrics: MetricsReporter
    events: list[tuple[Event, int]] = field(default_factory=list)  # (event, dedup interval ms)
    states: dict[str, JobState] = field(default_factory=dict)  # job key -> state changed this tick
    outcomes: list[JobOutcome] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)  # for the tick's duration
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds, in the order they ran

    # ------------------------------------------------------------------ the ledger
    def lap(self, stage: str) -> None:
        """``stage`` just ended: it took the time since the previous one ended (or the tick began)."""
        now = time.perf_counter()
        self.stages[stage] = now - self.started - sum(self.stages.values())

    def event(
        self,
        job_key: str,
        reason: Reason,
        type_: EventType,
        message: str,
        *,
        key: str = "",
        interval_ms: int = 0,
    ) -> None:
        self.events.append((Event(job_key, reason, type_, message, self.now_ms, key=key), interval_ms))

    def job_event(
        self,
        job_key: str,
        options: AutoscalerOptions,
        reason: Reason,
        type_: EventType,
        message: str,
        *,
        key: str = "",
    ) -> None:
        """An event repeated at most once per the job's ``scaling.event.interval`` (counted in between)."""
        interval_ms = to_ms(options.scaling_event_interval)
        self.event(job_key, reason, type_, message, key=key, interval_ms=interval_ms)

    def save(self, job_key: str, state: JobState) -> None:
        """Remember the job's new state; the state layer writes the whole tick in one transaction."""
        self.states[job_key] = state

    def done(self, outcome: JobOutcome) -> JobOutcome:
        """Log a job's final outcome of the tick (one ``decision`` line per job and tick)."""
        log.info(
            "decision",
            cluster=outcome.job.cluster,
            job=outcome.job.name,
            outcome=str(outcome.outcome),
            detail=outcome.detail,
        )
        self.outcomes.append(outcome)
        return outcome

    async def publish(self, sink: EventSink, delivery: OutcomeDelivery) -> None:
        """Emit the tick's events off the event loop (a slow or hanging database must not stall the
        ticks), then hand its outcomes to ``delivery``, which writes them behind the tick."""
        if self.events:
            await offload(_emit, sink, self.events)
        await delivery.hand_over(self.outcomes)

    # ------------------------------------------------------------------ collection
    def invalid_options(self, job: JobRef, message: str, options: AutoscalerOptions) -> None:
        """A job whose options are invalid (``Discovery.invalid``): an Options Validation event."""
        self.job_event(job.key, options, Reason.OPTIONS_VALIDATION, EventType.WARNING, message)
        self.metrics.report_error(job.cluster, Reason.OPTIONS_VALIDATION)

    def resubmitted(self, job: JobRef, old_job_id: str, before: JobState, options: AutoscalerOptions) -> None:
        """The job name runs under a new JobID: said once per change (the state then holds the new one);
        a Warning when something in flight for the old JobID was dropped, else Normal."""
        text = resubmission_text(old_job_id, job.job_id, before)
        log.warning(
            "job_resubmitted",
            cluster=job.cluster,
            job=job.name,
            old_job_id=old_job_id,
            job_id=job.job_id,
            detail=text,
        )
        self.metrics.resubmissions.labels(job.cluster, job.name).inc()
        kind = EventType.WARNING if before.pending or before.stuck_rescales else EventType.NORMAL
        key = f"resubmitted:{job.job_id}"
        self.job_event(job.key, options, Reason.JOB_RESUBMITTED, kind, text, key=key)

    def stale_sample(self, sample: JobSample) -> None:
        """Flink served the job's last metric fetch again (routine with a loop as fast as its fetcher):
        counted, and told at most once per ``scaling.event.interval``; the sample added no window point."""
        job, age_s, options = sample.job, (self.now_ms - sample.ts_ms) / 1000, sample.target.options
        self.metrics.stale_samples.labels(job.cluster, job.name).inc()
        text = f"Flink answered with the metrics it had fetched {age_s:g} s before: no new window point"
        self.job_event(job.key, options, Reason.STALE_METRICS, EventType.NORMAL, text, key="stale")

    def invalid_values(self, sample: JobSample) -> None:
        """Values that cannot be (negative, infinite, too large) were read as unknown (collect/sanity.py):
        say which and why, count them by kind."""
        job, values = sample.job, sample.invalid_values
        for kind, count in Counter(v.kind for v in values).items():
            self.metrics.invalid_metric_values.labels(job.cluster, job.name, kind).inc(count)
        log.warning(
            "metric_values_invalid",
            cluster=job.cluster,
            job=job.name,
            values=[str(v) for v in values],
            kinds=sorted({v.kind for v in values}),
            detail=describe_invalid(values),
        )

    def unavailable(self, unavailable: Unavailable) -> JobOutcome:
        """A job not evaluated this tick: counted among its decisions by why (a job whose metrics never
        come is on the dashboard too), but neither scaled nor balanced."""
        job = unavailable.job
        if unavailable.reason is not Reason.NOT_RUNNING:
            self.metrics.report_error(job.cluster, unavailable.reason)
            self.metrics.decisions.labels(job.cluster, job.name, str(unavailable.reason)).inc()
        if unavailable.reason is Reason.STALE_METRICS:  # lasts until the fetcher delivers: say so
            text, options = unavailable.detail, unavailable.target.options
            self.job_event(job.key, options, Reason.STALE_METRICS, EventType.WARNING, text, key="expired")
        log.info(
            "job_unavailable",
            cluster=job.cluster,
            job=job.name,
            reason=str(unavailable.reason),
            detail=unavailable.detail,
        )
        return self.done(JobOutcome(job, self.now_ms, unavailable.reason, unavailable.detail))

    # ------------------------------------------------------------------ confirmation of a rescale
    def confirmed(self, job: JobRef, result: Confirmation, names: dict[str, str]) -> None:
        got = ", ".join(f"{names.get(v, v)} {p}" for v, p in result.actual.items())
        if result.capped:
            asked = result.asked
            below = {v: (p, asked[v]) for v, p in result.actual.items() if v in asked and p < asked[v]}
            short = below_text(below, names)
            text = (
                f"Flink runs {short or got} (too few free slots): the request stands, and Flink scales "
                "the job to it as slots come"
            )
            self.event(job.key, Reason.SCALING_LIMITED, EventType.WARNING, text, key="below-request")
        else:
            self.event(job.key, Reason.SCALING_CONFIRMED, EventType.NORMAL, f"rescale running: {got}")

    def stuck(
        self, job: JobRef, pending: PendingRescale, timeout: timedelta, n: int, retry: int | None
    ) -> None:
        """A rescale Flink accepted but never ran: event, counter, log; the next waits a backoff."""
        text = stuck_text(pending.target, timeout, n, retry, self.now_ms)
        self.metrics.rescales_stuck.labels(job.cluster, job.name).inc()
        log.warning("rescale_stuck", cluster=job.cluster, job=job.name, in_a_row=n, detail=text)
        self.event(job.key, Reason.RESCALE_STUCK, EventType.WARNING, text, key=f"stuck:{pending.issued_ms}")

    def rejected(
        self,
        job: JobRef,
        desired: dict[str, int],
        err: FlinkHTTPError,
        n: int,
        retry: int | None,
        options: AutoscalerOptions,
    ) -> str:
        """A PUT Flink refused: event (with Flink's words), counter, log; the next waits a backoff."""
        why = "; ".join(err.messages) or "no message"
        text = rejected_text(desired, err.status, why, n, retry, self.now_ms)
        self.metrics.rescales_rejected.labels(job.cluster, job.name).inc()
        log.warning("rescale_rejected", cluster=job.cluster, job=job.name, in_a_row=n, detail=text)
        key = f"rejected:{err.status}:{why}"
        self.job_event(job.key, options, Reason.RESCALE_REJECTED, EventType.WARNING, text, key=key)
        return text

    def verified(self, evaluation: JobEvaluation, record: ScalingRecord) -> None:
        """A rescale's verification (made once, so never deduplicated): a Normal event when it delivered
        the expected capacity, a Warning with the numbers when not; the ratio gauges and a counter."""
        verification = record.verification
        assert verification is not None
        job, names = evaluation.job, {v.id: v.name for v in evaluation.sample.topology}
        self.metrics.report_verification(job, names, verification)
        kind = EventType.NORMAL if verification.as_expected else EventType.WARNING
        text = verification_text(record, names, evaluation.window_samples)
        self.event(job.key, Reason.SCALING_VERIFIED, kind, text, key=f"verified:{record.ts_ms}")
        (log.info if verification.as_expected else log.warning)("scaling_verified", detail=text)

    # ------------------------------------------------------------------ evaluation
    def not_evaluated(self, job: JobRef, options: AutoscalerOptions, detail: str) -> JobOutcome:
        self.job_event(job.key, options, Reason.AUTOSCALER_ERROR, EventType.WARNING, detail)
        return self.done(JobOutcome(job, self.now_ms, Reason.AUTOSCALER_ERROR, detail))

    def evaluated(self, evaluation: JobEvaluation) -> None:
        """The evaluation's metrics, and its warnings: ineffective scale-ups, limited alignment, an
        alignment mode that fell back to BALANCED and custom evaluators that failed."""
        self.metrics.report_evaluation(evaluation)
        if evaluation.counters_fell:  # logged by the window (metric_counters_fell), counted here
            self.metrics.counter_resets.labels(evaluation.job.cluster, evaluation.job.name).inc()
        self._ineffective(evaluation)
        self._limited(evaluation)
        self._alignment_fallback(evaluation)
        self._evaluator_failures(evaluation)
        self._slow_subtasks(evaluation)

    def _slow_subtasks(self, evaluation: JobEvaluation) -> None:
        """A vertex's slow subtasks: a warning when they appear (the key names them), and the gauge."""
        sample, options = evaluation.sample, evaluation.sample.target.options
        self.metrics.job_slow_subtasks.labels(sample.job.cluster, sample.job.name).set(
            sum(len(s.slow) for s in sample.skew.values())
        )
        for vid, skew in sample.skew.items():
            if skew.slow:
                text = skew.text(sample.topology.vertices[vid].name)
                key = f"SlowSubtasks:{vid}:{skew.slow_indices}:{skew.hot_key}"
                kind = EventType.WARNING
                self.job_event(sample.job.key, options, Reason.SLOW_SUBTASKS, kind, text, key=key)

    def _ineffective(self, evaluation: JobEvaluation) -> None:
        """The reference always reports an ineffective scale-up; blocking it is a separate option.

        Text (``texts.ineffective_text``) and deduplication key are the reference's: the key
        holds the expected increase, so a later scale-up that promised something else is reported again
        within the interval.
        """
        options = evaluation.sample.target.options
        blocking = options.scaling_effectiveness_detection_enabled
        for vid in evaluation.ineffective_scale_ups:
            gain = evaluation.vertices[vid].scale_up_gain or (math.nan, math.nan)
            text = ineffective_text(vid, gain, blocking=blocking)
            key = f"ineffective{vid}{java_double_text(gain[0])}"
            self.job_event(
                evaluation.job.key, options, Reason.INEFFECTIVE_SCALING, EventType.NORMAL, text, key=key
            )

    def _limited(self, evaluation: JobEvaluation) -> None:
        """The deprecated legacy alignment moved or blocked a vertex's target: warn, as the reference
        does, with its text (``texts.limited_text``)."""
        options = evaluation.sample.target.options
        for vid, v in evaluation.vertices.items():
            if v.limited_from is not None:
                text, key = limited_text(vid, v), f"ScalingLimited{vid}"
                self.job_event(
                    evaluation.job.key, options, Reason.SCALING_LIMITED, EventType.WARNING, text, key=key
                )

    def _alignment_fallback(self, evaluation: JobEvaluation) -> None:
        """``scaling.parallelism-alignment.mode`` names no built-in mode: the job is aligned BALANCED, as
        the reference does; the operator hears of it by a log line, a deduplicated warning event and a
        counter, instead of the job's configuration being rejected."""
        options = evaluation.sample.target.options
        text = options.alignment_mode_fallback
        if text is None:
            return
        job, key = evaluation.job, options.canonical_key("parallelism_alignment_mode")
        log.warning("alignment_mode_fallback", cluster=job.cluster, job=job.name, detail=text)
        self.metrics.option_fallbacks.labels(job.cluster, job.name, key).inc()
        self.job_event(job.key, options, Reason.OPTIONS_VALIDATION, EventType.WARNING, text, key=key)

    def _evaluator_failures(self, evaluation: JobEvaluation) -> None:
        """A custom evaluator that raised (built-in values kept) or is missing (job not scaled)."""
        options = evaluation.sample.target.options
        problems = [str(f) for f in evaluation.evaluator_failures]
        if evaluation.not_ready is Reason.PLUGIN_FAILED:
            problems.append(evaluation.not_ready_detail or "a configured custom evaluator is unavailable")
        for problem in problems:
            self.metrics.report_error(evaluation.job.cluster, Reason.PLUGIN_FAILED)
            self.job_event(
                evaluation.job.key,
                options,
                Reason.PLUGIN_FAILED,
                EventType.WARNING,
                f"custom evaluator: {problem}",
                key=f"evaluator:{problem}",
            )

    # ------------------------------------------------------------------ decision
    def decided(self, decision: Decision, options: AutoscalerOptions) -> None:
        """What the gates said, for the gates whose verdict the operator is told of."""
        job, detail = decision.job, decision.detail
        if decision.outcome is Reason.COOLDOWN_DEFERRED and decision.retry_at_ms is not None:
            self.metrics.deferred.labels(job.cluster, job.name).inc()
            key = f"retry:{decision.retry_at_ms}"
            self.job_event(job.key, options, Reason.COOLDOWN_DEFERRED, EventType.NORMAL, detail, key=key)
        if decision.forced:
            self.metrics.forced.labels(job.cluster, job.name).inc()
            self.event(job.key, Reason.SCALING_FORCED, EventType.NORMAL, detail)
        if decision.outcome is Reason.METRICS_UNKNOWN:
            # Not in band: nothing could be judged. A warning, since it lasts until Flink reports again.
            log.warning("metrics_unknown", cluster=job.cluster, job=job.name, detail=detail)
            self.metrics.metrics_unknown.labels(job.cluster, job.name).inc()
            self.job_event(job.key, options, Reason.METRICS_UNKNOWN, EventType.WARNING, detail)
        if decision.outcome in (Reason.MEMORY_PRESSURE, Reason.RESOURCE_QUOTA_REACHED):
            kind = EventType.NORMAL if decision.outcome is Reason.MEMORY_PRESSURE else EventType.WARNING
            self.job_event(job.key, options, decision.outcome, kind, detail)
        if decision.outcome in (Reason.ADVISOR_MODE, Reason.EXCLUDED_PERIOD):
            report = report_text(decision, enabled=False)
            key = changes_key(decision)
            self.job_event(job.key, options, Reason.SCALING_REPORT, EventType.NORMAL, report, key=key)

    # ------------------------------------------------------------------ executor plugins
    def plugins(self, job: JobRef, chain: ChainResult, options: AutoscalerOptions) -> None:
        for o in chain.outcomes:
            self.metrics.plugin_outcomes.labels(job.cluster, job.name, o.plugin, str(o.outcome)).inc()
            kind = EventType.NORMAL if o.outcome in _PLUGIN_OK else EventType.WARNING
            text = f"executor plugin {o.plugin}: {o.outcome}" + (f" ({o.detail})" if o.detail else "")
            self.job_event(job.key, options, o.outcome, kind, text, key=f"{o.outcome}:{o.plugin}")

    def vetoed(self, job: JobRef, chain: ChainResult, options: AutoscalerOptions) -> str:
        """The veto's text; its event unless the vetoing plugin's own ``ScalingVetoed`` already said it."""
        vetoed = chain.vetoed_by
        plugin, why = (vetoed.plugin, vetoed.detail) if vetoed else ("?", "")
        text = f"scaling vetoed by plugin {plugin}" + (f": {why}" if why else "")
        if vetoed is None or vetoed.outcome is not Reason.SCALING_VETOED:
            self.job_event(
                job.key,
                options,
                Reason.SCALING_VETOED,
                EventType.WARNING,
                text,
                key=f"ScalingVetoed:{plugin}",
            )
        return text

    # ------------------------------------------------------------------ realizing
    def lease_expired(self, decision: Decision) -> str:
        text = (
            "the job's lease (its cluster's or shard's) expired during this tick (another daemon may act): "
            "not rescaling"
        )
        log.warning("lease_expired_before_rescale", changes=changes_key(decision))
        self.metrics.report_error(decision.job.cluster, Reason.LEASE_EXPIRED)
        return text

    def rescaling(self, decision: Decision) -> None:
        """The ScalingReport of a rescale about to be requested."""
        text = report_text(decision, enabled=True)
        self.event(decision.job.key, Reason.SCALING_REPORT, EventType.NORMAL, text)

    def realized(self, job: JobRef, realized: RealizeResult, desired: dict[str, int]) -> None:
        if realized.issued:
            body = ", ".join(f"{vid}: {b.lower}..{b.upper}" for vid, b in realized.requirements.items())
            self.event(
                job.key,
                Reason.SCALING,
                EventType.NORMAL,
                f"In-place scaling triggered, the new requirements is {{{body}}}",
            )
        else:
            log.info("requirements_already_match", desired=desired)

    def outcome(self, outcome: JobOutcome) -> JobOutcome:
        """A job's decided outcome (whatever it is): counted, then logged."""
        realized = outcome.realized
        self.metrics.report_outcome(outcome.job, outcome.outcome, realized is not None and realized.issued)
        return self.done(outcome)

    def failed(self, job: JobRef, options: AutoscalerOptions, exc: Exception) -> JobOutcome:
        """One job's failure stays with that job: logged, counted, an event, no rescale. A REST call
        that failed (a rejected PUT, a 5xx) is the cluster's error, anything else ours."""
        # A REST failure says all in its message; anything else is a bug and needs its traceback.
        log.error("job_tick_failed", error=str(exc), exc_info=not isinstance(exc, FlinkError))
        reason = (
            Reason.AUTOSCALER_ERROR
            if not isinstance(exc, FlinkError)
            else Reason.CLUSTER_UNREACHABLE
            if isinstance(exc, FlinkUnreachable)
            else Reason.CLUSTER_ERROR
        )
        self.metrics.report_error(job.cluster, reason)
        self.job_event(job.key, options, reason, EventType.WARNING, _truncate(str(exc)))
        return self.done(JobOutcome(job, self.now_ms, reason, str(exc)))


def _emit(sink: EventSink, events: Sequence[tuple[Event, int]]) -> None:
    for event, interval_ms in events:
        try:
            sink.emit(event, interval_ms)
        except Exception as exc:  # recording must never fail a tick
            log.error("event_failed", reason=str(event.reason), job=event.job_key, error=str(exc))


def _truncate(text: str, limit: int = 2048) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
